package archive

import (
	"errors"
	"fmt"
	"time"
)

// Type is what an entry is.
type Type string

// The entry types, as the snapshot export format carries them.
const (
	TypeDir     Type = "dir"
	TypeFile    Type = "file"
	TypeSymlink Type = "symlink"
)

// Manifest describes one archive: what Put read, entry by entry. It is
// stored as JSON at orgs/ORG/manifests/ID.json, and written last.
type Manifest struct {
	// Format is the manifest format (1).
	Format int `json:"format"`
	// ID is the archive id: the creation time and 64 random bits.
	ID string `json:"id"`
	// Org is the org the archive belongs to (its key prefix).
	Org string `json:"org"`
	// Label is the caller's name for it (the sandbox, say).
	Label string `json:"label,omitempty"`
	// Created is when Put started.
	Created time.Time `json:"created"`
	// Files, Dirs and Symlinks count the entries.
	Files    int64 `json:"files"`
	Dirs     int64 `json:"dirs"`
	Symlinks int64 `json:"symlinks"`
	// TotalBytes is the file content of the archive.
	TotalBytes int64 `json:"total_bytes"`
	// NewBytes is what this archive uploaded: content no earlier archive
	// of the org had.
	NewBytes int64 `json:"new_bytes"`
	// Skipped lists entries of the stream that an archive cannot hold
	// (devices, named pipes), with the reason.
	Skipped []string `json:"skipped,omitempty"`
	// Entries are the paths, in the order of the stream (the snapshot
	// export's path order).
	Entries []Entry `json:"entries"`

	// checked holds the blobs the Put that made this manifest uploaded
	// and read back (not stored: VerifyRest skips them).
	checked map[string]bool
}

// Entry is one path of an archive.
type Entry struct {
	// Path is relative to the archive's root, "/"-separated.
	Path string `json:"path"`
	// Type is dir, file or symlink.
	Type Type `json:"type"`
	// Mode holds the permission bits (with setuid, setgid, sticky).
	Mode uint32 `json:"mode"`
	// Size of a file.
	Size int64 `json:"size,omitempty"`
	// SHA256 of a file's content, hex: the name of its blob.
	SHA256 string `json:"sha256,omitempty"`
	// Target of a symlink.
	Target string `json:"target,omitempty"`
	// ModTime is the modification time.
	ModTime time.Time `json:"mtime"`
}

// ErrCorrupt is matched (errors.Is) by every error that says stored data
// is not what its manifest says.
var ErrCorrupt = errors.New("archive corrupt")

// CorruptError says which archive, file and blob failed a check.
type CorruptError struct {
	Archive string // archive id
	Path    string // the file of the archive, if the fault is a file's
	Blob    string // the blob's key, if the fault is a blob's
	Reason  string
}

func (e *CorruptError) Error() string {
	switch {
	case e.Path != "":
		return fmt.Sprintf("archive %s is corrupt: file %q (blob %s): %s", e.Archive, e.Path, e.Blob, e.Reason)
	case e.Blob != "":
		return fmt.Sprintf("archive %s is corrupt: blob %s: %s", e.Archive, e.Blob, e.Reason)
	}
	return fmt.Sprintf("archive %s is corrupt: %s", e.Archive, e.Reason)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }
