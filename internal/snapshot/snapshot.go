package snapshot

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"regexp"
	"time"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Snapshot describes a stored snapshot.
type Snapshot struct {
	// ID names the snapshot, e.g. "s-20260817-153012-9f3a1c2e".
	ID string `json:"id"`
	// Label is free text given at creation.
	Label string `json:"label,omitempty"`
	// Root is the absolute path of the tree that was copied; Restore writes
	// there by default.
	Root string `json:"root"`
	// Created is when the snapshot was started.
	Created time.Time `json:"created"`
	// Files, Dirs and Symlinks count the entries by type.
	Files    int64 `json:"files"`
	Dirs     int64 `json:"dirs"`
	Symlinks int64 `json:"symlinks"`
	// TotalBytes is the content size of all files.
	TotalBytes int64 `json:"total_bytes"`
	// StoredBytes is the compressed size of the blobs this snapshot added
	// to the store (0 when everything was there already).
	StoredBytes int64 `json:"stored_bytes"`
	// Excludes are the patterns the tree was taken with.
	Excludes []string `json:"excludes,omitempty"`
	// Skipped lists what was left out and why (sockets, devices,
	// unreadable files), at most MaxSkipped of them.
	Skipped []Skip `json:"skipped,omitempty"`
	// SkippedMore counts skipped paths beyond those listed.
	SkippedMore int64 `json:"skipped_more,omitempty"`
}

// Skip is a path left out of a snapshot.
type Skip struct {
	// Path is relative to the root, "/"-separated.
	Path string `json:"path"`
	// Reason says why: "socket", "device", "named pipe", "permission
	// denied", …
	Reason string `json:"reason"`
}

// MaxSkipped bounds Snapshot.Skipped; SkippedMore counts the rest.
const MaxSkipped = 1000

// Type is the type of an entry.
type Type uint8

// Entry types.
const (
	TypeFile    Type = 'f'
	TypeDir     Type = 'd'
	TypeSymlink Type = 'l'
)

// String names the type.
func (t Type) String() string {
	switch t {
	case TypeFile:
		return "file"
	case TypeDir:
		return "directory"
	case TypeSymlink:
		return "symlink"
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Entry is one path in a snapshot.
type Entry struct {
	// Path is relative to the root, "/"-separated, never "." or empty.
	Path string
	// Type is file, directory or symlink.
	Type Type
	// Mode holds the permission bits in Unix form (0o7777: with setuid,
	// setgid and sticky).
	Mode uint32
	// Size is a file's content size.
	Size int64
	// SHA256 is a file's content hash, lowercase hex.
	SHA256 string
	// Target is a symlink's target, as stored in the link.
	Target string
	// ModTime is the modification time.
	ModTime time.Time

	stamp stamp // what the file looked like when it was read
}

// FileMode returns the entry's permission bits as an fs.FileMode.
func (e *Entry) FileMode() fs.FileMode { return fileMode(e.Mode) }

// stamp identifies a file's state cheaply, for the unchanged-file index.
type stamp struct {
	ctime int64 // change time, ns
	ino   uint64
	dev   uint64
	racy  bool // changed too recently (or while read) to be trusted
}

// Progress tells how far Create or Restore has come.
type Progress struct {
	FilesDone, FilesTotal int64
	BytesDone, BytesTotal int64
}

// ChangeKind says how a path differs between two trees.
type ChangeKind int

// Kinds of change.
const (
	Added       ChangeKind = iota + 1 // only in the newer tree
	Removed                           // only in the older tree
	Modified                          // content, mode or link target differ
	TypeChanged                       // a file became a directory, or similar
)

// String names the kind.
func (k ChangeKind) String() string {
	switch k {
	case Added:
		return "added"
	case Removed:
		return "removed"
	case Modified:
		return "modified"
	case TypeChanged:
		return "type changed"
	}
	return fmt.Sprintf("ChangeKind(%d)", int(k))
}

// Change is one path that differs.
type Change struct {
	Path string
	Kind ChangeKind
	// From is the older side (nil when added), To the newer (nil when removed).
	From, To *Entry
}

// RestoreSummary tells what Restore did.
type RestoreSummary struct {
	// FilesWritten counts files and symlinks written.
	FilesWritten int64
	// FilesUnchanged counts files and symlinks that were already identical
	// and left alone (their mode is corrected if it differed).
	FilesUnchanged int64
	// PathsRemoved counts the paths delete-extra removed, everything below
	// a removed directory included.
	PathsRemoved int64
	// Target is the absolute directory restored into.
	Target string
}

// fileMode converts Unix permission bits to an fs.FileMode.
func fileMode(m uint32) fs.FileMode {
	fm := fs.FileMode(m & 0o777)
	if m&0o4000 != 0 {
		fm |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		fm |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		fm |= fs.ModeSticky
	}
	return fm
}

// unixMode converts an fs.FileMode's permission bits to Unix form.
func unixMode(fm fs.FileMode) uint32 {
	m := uint32(fm.Perm())
	if fm&fs.ModeSetuid != 0 {
		m |= 0o4000
	}
	if fm&fs.ModeSetgid != 0 {
		m |= 0o2000
	}
	if fm&fs.ModeSticky != 0 {
		m |= 0o1000
	}
	return m
}

var idPattern = regexp.MustCompile(`^s-[0-9]{8}-[0-9]{6}-[0-9a-f]{8}$`)

// newID returns a fresh snapshot id: time of creation (sortable) plus 32
// random bits.
func newID(now time.Time) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return "s-" + now.UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b[:])
}

// checkID rejects anything that is not a well-formed id, so an id can
// never name a path outside the store.
func checkID(id string) error {
	if id == "" {
		return errs.New(errs.Invalid, "no snapshot id given")
	}
	if !idPattern.MatchString(id) {
		show := id
		if len(show) > 80 {
			show = show[:80] + "…"
		}
		return errs.New(errs.Invalid, "%q is not a snapshot id: ids look like s-20260817-153012-9f3a1c2e (list the snapshots to see them)", show)
	}
	return nil
}
