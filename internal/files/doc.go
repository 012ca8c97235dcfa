// Package files implements the file operations an AI agent performs on the
// machine agentd serves: describe, list, read, write, edit, move and remove
// files, search their content and match paths against glob patterns.
//
// Paths may be absolute or relative to the workspace the FS was built with;
// "~" and "~/…" stand for the home directory. There is no jail: like a
// shell, the FS runs with the permissions of the user running the daemon
// and reaches any path that user can. Every path in a result is absolute
// and clean. Empty paths, NUL bytes, invalid UTF-8 and over-long paths are
// refused before anything is touched.
//
// Every error is classified with package errs (NotFound, Invalid,
// Precondition, …) and carries a message written for the language model
// that made the request: what is wrong and, where possible, what to do.
//
// # Decisions
//
// Writes are atomic: content goes to a hidden temporary file
// (".NAME.agentd-RANDOM.tmp") in the target's directory, which is synced,
// given the old file's mode (and owner, where the OS allows) and renamed
// over the target; the directory is synced after. A failed write — the
// reader fails, the context ends, the disk fills — removes the temporary
// file and leaves the target as it was. An append copies the file and
// extends the copy, so it is atomic too, at the cost of rewriting the file.
// Hard links to a rewritten file are broken, and extended attributes and
// ACLs are not carried over. A file the user may not write is refused even
// where the directory would allow the rename, as a shell's > would.
//
// Optimistic concurrency: Write and Edit take an expected sha256 (from
// ReadLines or an earlier write) and fail with errs.Precondition when the
// file no longer has it; the value Absent means the file must not exist.
// Writes that checked or copied the old file also fail if it changed
// between the check and the rename (inode, size and mtime compared just
// before the rename; the last instants before the rename stay a race).
//
// .gitignore files are matched by code in this package (ignore.go), not by
// go-git's matcher: the format is small and fully specified in
// gitignore(5), go-git would pull in its whole module graph, and a test
// compares the result with git itself (git ls-files) when git is
// installed. The user's global excludes file is not read.
//
// Search reads files whole (up to 32 MiB; larger ones line by line), runs
// the pattern over the whole buffer rather than line by line, and skips a
// file at once when a literal every match must contain is missing from it.
// Files are read by a bounded pool of workers in batches of consecutive
// files; matches are emitted in walk order, so the output does not depend
// on timing. Walks never follow symlinks and always skip .git.
//
// Listings (List, Glob, Search) are in walk order: depth first, each
// directory's entries sorted by name.
package files
