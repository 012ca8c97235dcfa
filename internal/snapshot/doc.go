// Package snapshot keeps point-in-time copies of directory trees in a
// content-addressed store on the local disk.
//
// # Layout
//
// A Store lives in one directory:
//
//	packs/NAME       the contents of small files (up to 1 MiB): zstd frames,
//	                 concatenated, with an index of their sha256 at the end
//	blobs/ab/ab12…   the contents of larger files, one zstd frame each,
//	                 named by the sha256 of the uncompressed content
//	manifests/ID     one file per snapshot: a JSON header line (the
//	                 Snapshot), then one JSON line per entry, sorted by path
//	tmp/             files being written; emptied when the store is opened
//
// Contents are shared by every snapshot (deduplicated by hash). Packing
// small files matters: creating one file per blob was most of the cost
// of a first snapshot of a tree of small files.
//
// # What a snapshot keeps
//
// Regular files (content and permission bits, including setuid, setgid and
// sticky), directories (so empty ones come back), symlinks as links (never
// followed: a loop of links is stored as it is and harms nothing) and
// modification times. Owners are not kept: the daemon runs as one user.
// Sockets, devices and named pipes are skipped and reported in
// Snapshot.Skipped with the reason, and so are files and directories that
// cannot be read: one unreadable file does not sink a snapshot. A file that
// grows or shrinks while it is read is stored as it was read, with the size
// actually read.
//
// # Unchanged files are not read
//
// Every manifest entry records what the file looked like when it was read
// (size, modification and change time, inode, device). Create uses the
// newest snapshot of the same root as an index: a file that still looks the
// same is taken from it without being opened. Entries whose file changed
// within RacyWindow of the snapshot's start, or while it was read, are
// marked racy and always read again next time (the same precaution as git's
// "racily clean" index entries).
//
// # Safety
//
// Blobs and packs are written to tmp/, synced, and renamed into place
// complete (their directory synced after), so a half-written one never
// has a name the store reads, and a named one is on disk; packs never
// change once named. Packing keeps the syncs few: a first snapshot of
// 10,000 small files syncs a handful of packs, not 10,000 files (and a
// pack's data is handed to writeback as it is written, so its sync has
// little left to do). The manifest is written last, to tmp/, synced and
// renamed: a manifest never names a blob that is not complete on disk,
// and a Create or Import that fails (disk full, cancelled, a refused
// archive) leaves no manifest, and the blobs and packs it wrote are
// removed again.
//
// Delete removes a manifest and then collects what no manifest and no
// operation in progress refers to: loose blobs are removed, packs are
// rewritten without their dead blobs (or removed). Operations in progress
// pin the blobs they are about to refer to, so collection never takes a
// blob from under them. One process owns a store directory at a time.
//
// Every error is classified with package errs.
package snapshot
