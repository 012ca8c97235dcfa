// Package archive keeps sandbox workspaces that are archived: packed as
// content-addressed snapshots in an object store, so that the sandbox's
// container and volume can go and the workspace can come back later, on
// any replica.
//
// # What goes in and out
//
// The store works on tar streams in the snapshot export format, the one
// agentd's SnapshotService Export writes and Import reads (package
// internal/snapshot): directories, regular files and symlinks with their
// modes and modification times, paths relative to the root. Put reads
// such a stream and returns a Manifest; Restore writes the same stream
// again. The hub is expected to archive a sandbox by having its agentd
// export a snapshot of /workspace into Put, and to restore one by
// feeding Restore's output to the new sandbox's agentd Import, then
// Restore.
//
// A stream must be read and hashed whole even when nothing changed.
// PutEntries is the incremental way in: it takes entries whose sha256
// the caller knows (an agentd snapshot's manifest) and asks for the
// content of the files the org does not have only, checking each.
// PutDir reads a directory the hub can see (a stopped sandbox's volume)
// itself, several files at a time, and with a Basis (what a restore
// wrote, and when) skips reading the files whose status says they are
// unchanged since.
//
// # Layout
//
// Everything is in one gocloud.dev/blob bucket (file:// or s3://), under
// a prefix per org:
//
//	orgs/ORG/blobs/ab/ab12…    one file's content, named by its sha256
//	orgs/ORG/manifests/ID.json the archive: every entry, with the sha256
//	                           of each file's content
//	orgs/ORG/pending/ID        a Put of ID is under way (or died)
//
// A file whose content the org has stored before is not uploaded again:
// an unchanged workspace archives again with almost no new bytes, and
// two forks of one workspace share their blobs. Contents are shared
// within an org only. Sharing across orgs would let one org learn
// whether another holds a given file (by timing an upload or watching
// its usage), would make a shared blob's bytes nobody's to account for
// or to delete, and would let one corrupt blob hurt several orgs.
//
// # Nothing lost
//
// Put uploads every blob, reads each new one back and checks its
// sha256, and only then writes the manifest: an archive exists (Get,
// List) only if it is complete. A Put that dies at any point leaves a
// pending marker and blobs no manifest names (and, on a file:// store,
// half-written temporary files), which GC removes once the marker is
// older than Options.PendingTimeout. So a caller that removes a
// sandbox's volume only after Put returned (and, for the cautious, after
// VerifyRest read back the blobs Put did not: the ones the org had) never
// loses a workspace: before that point the volume is there, after it the
// archive is.
//
// Restore checks every file's size and sha256 while it writes the
// stream and fails with a *CorruptError naming the file; it ends the tar
// only when every file passed.
//
// # Collection
//
// Delete removes a manifest; GC removes the blobs no manifest of the org
// names. GC does nothing while a Put of the org is under way (in this
// process: a lock; in another process: its pending marker), and never
// removes an object younger than Options.Grace, so that blobs uploaded
// by a Put it cannot see are safe. Run GC from one place (the replica
// that holds the hub's lease).
//
// Every error is classified with package errs.
package archive
