package archive

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.uber.org/zap"
	"gocloud.dev/blob"
	_ "gocloud.dev/blob/fileblob" // file:// archive URLs
	_ "gocloud.dev/blob/s3blob"   // s3:// archive URLs
	"gocloud.dev/gcerrors"

	"github.com/devdepot-ai/agentd/internal/errs"
)

// Options configures a Store. Zero fields get the defaults documented on
// each field.
type Options struct {
	// Logger gets warnings (a stale pending marker removed, a blob that
	// failed its read-back). Default: a no-op logger.
	Logger *zap.Logger
	// Now is the clock. Default time.Now.
	Now func() time.Time
	// Uploads is how many blobs are uploaded (and read back) at once, and
	// how many are fetched at once by Restore and Verify. Default 8: an
	// object store's latency, not the CPU, limits one upload.
	Uploads int
	// MemoryBytes bounds the file contents held in memory between the
	// tar reader and the uploads (and between fetches and the tar writer
	// of Restore). A file larger than a quarter of it goes through a
	// temporary file in TempDir instead. Default 64 MiB.
	MemoryBytes int64
	// TempDir holds the temporary copies of large files during Put.
	// Default os.TempDir().
	TempDir string
	// PendingTimeout: a pending marker older than this belongs to a Put
	// that died (a crash, kill -9); GC removes it and stops waiting for
	// it. Default 6 h, longer than any archive takes.
	PendingTimeout time.Duration
	// Grace: GC never removes a blob or a stray file younger than this,
	// so that the blobs a Put in another process has just uploaded (and
	// not yet named in a manifest) are safe. Default 1 h.
	Grace time.Duration

	// hook, when set (tests), is called at the named points of Put.
	hook func(point string)
}

// Store keeps archives in a gocloud.dev/blob bucket. It is safe for
// concurrent use; several processes (hub replicas) may share a bucket.
type Store struct {
	bucket *blob.Bucket
	opts   Options
	log    *zap.Logger
	// syncDir is the bucket's directory for file:// stores (synced
	// before and after a manifest is written); "" otherwise.
	syncDir string

	mu   sync.Mutex
	orgs map[string]*sync.RWMutex // Put holds RLock, GC holds Lock
}

const (
	manifestFormat = 1
	defaultMemory  = 64 << 20
)

// Open opens the store at rawURL: file:///DIR (the directory is created
// if missing) or s3://BUCKET?region=…&endpoint=… (credentials from the
// environment, as the AWS SDK reads them).
func Open(ctx context.Context, rawURL string, opts Options) (*Store, error) {
	u, syncDir, err := normalizeURL(rawURL)
	if err != nil {
		return nil, err
	}
	b, err := blob.OpenBucket(ctx, u)
	if err != nil {
		return nil, errs.Wrap(errs.Invalid, err, "open archive store %s", redact(rawURL))
	}
	s := New(b, opts)
	s.syncDir = syncDir
	return s, nil
}

// New returns a Store over a bucket the caller opened; Close closes it.
func New(b *blob.Bucket, opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = zap.NewNop()
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Uploads <= 0 {
		opts.Uploads = 8
	}
	if opts.MemoryBytes <= 0 {
		opts.MemoryBytes = defaultMemory
	}
	if opts.PendingTimeout <= 0 {
		opts.PendingTimeout = 6 * time.Hour
	}
	if opts.Grace < 0 {
		opts.Grace = 0
	} else if opts.Grace == 0 {
		opts.Grace = time.Hour
	}
	return &Store{bucket: b, opts: opts, log: opts.Logger, orgs: make(map[string]*sync.RWMutex)}
}

// Close closes the bucket.
func (s *Store) Close() error { return s.bucket.Close() }

// normalizeURL checks an archive URL and fills in what the store needs
// of a file:// bucket: the directory created, temporary files next to
// their final names (a rename across file systems would fail), no
// attribute sidecar files.
func normalizeURL(raw string) (string, string, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", errs.Wrap(errs.Invalid, err, "archive URL")
	}
	switch u.Scheme {
	case "file":
		dir := u.Path
		if u.Host != "" && u.Host != "localhost" || !filepath.IsAbs(dir) {
			return "", "", errs.New(errs.Invalid, "archive URL %q: a file URL needs an absolute directory, as in file:///var/lib/agenthub/archive", raw)
		}
		q := u.Query()
		for k, v := range map[string]string{"create_dir": "true", "no_tmp_dir": "true", "metadata": "skip", "dir_file_mode": "0700"} {
			if q.Get(k) == "" {
				q.Set(k, v)
			}
		}
		u.RawQuery = q.Encode()
		return u.String(), filepath.Clean(dir), nil
	case "s3":
		if u.Host == "" {
			return "", "", errs.New(errs.Invalid, "archive URL %q names no bucket: use s3://BUCKET?region=REGION", raw)
		}
		return raw, "", nil
	case "":
		return "", "", errs.New(errs.Invalid, "archive URL %q has no scheme: use file:///DIR or s3://BUCKET", raw)
	}
	return "", "", errs.New(errs.Invalid, "archive URL %q: scheme %q is not supported (use file:///DIR or s3://BUCKET)", redact(raw), u.Scheme)
}

// redact drops the query of a URL (it may carry secrets) for messages.
func redact(raw string) string {
	if i := strings.IndexByte(raw, '?'); i >= 0 {
		return raw[:i] + "?…"
	}
	return raw
}

var (
	orgRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
	idRE  = regexp.MustCompile(`^[0-9]{8}T[0-9]{6}Z-[0-9a-f]{16}$`)
	hexRE = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

func checkOrg(org string) error {
	if !orgRE.MatchString(org) {
		return errs.New(errs.Invalid, "org %q: an org key is 1 to 128 letters, digits, '.', '_' or '-', starting with a letter or digit", org)
	}
	return nil
}

func checkID(id string) error {
	if !idRE.MatchString(id) {
		return errs.New(errs.Invalid, "archive id %q is not an archive id (like 20261204T190102Z-0123456789abcdef)", id)
	}
	return nil
}

func checkLabel(label string) error {
	if len(label) > 256 || !utf8.ValidString(label) {
		return errs.New(errs.Invalid, "archive label: at most 256 bytes of UTF-8 (got %d bytes)", len(label))
	}
	return nil
}

func newID(now time.Time) string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return now.UTC().Format("20060102T150405Z") + "-" + hex.EncodeToString(b[:])
}

// Keys. Everything of an org lives under orgs/ORG/, so that an org's
// usage is one listing and removing an org is removing a prefix.
func orgPrefix(org string) string       { return "orgs/" + org + "/" }
func blobPrefix(org string) string      { return orgPrefix(org) + "blobs/" }
func manifestPrefix(org string) string  { return orgPrefix(org) + "manifests/" }
func pendingPrefix(org string) string   { return orgPrefix(org) + "pending/" }
func blobKey(org, sum string) string    { return blobPrefix(org) + sum[:2] + "/" + sum }
func manifestKey(org, id string) string { return manifestPrefix(org) + id + ".json" }
func pendingKey(org, id string) string  { return pendingPrefix(org) + id }

// orgLock returns the in-process lock that keeps GC from sweeping an org
// while a Put of that org runs.
func (s *Store) orgLock(org string) *sync.RWMutex {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.orgs[org]
	if l == nil {
		l = new(sync.RWMutex)
		s.orgs[org] = l
	}
	return l
}

// Get returns an archive's manifest.
func (s *Store) Get(ctx context.Context, org, id string) (*Manifest, error) {
	if err := checkOrg(org); err != nil {
		return nil, err
	}
	if err := checkID(id); err != nil {
		return nil, err
	}
	data, err := s.bucket.ReadAll(ctx, manifestKey(org, id))
	if err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, errs.New(errs.NotFound, "no archive %s in org %s", id, org)
		}
		return nil, storeError(err, "read manifest of archive %s", id)
	}
	m := new(Manifest)
	if err := json.Unmarshal(data, m); err != nil {
		return nil, &CorruptError{Archive: id, Reason: "manifest is not valid JSON: " + err.Error()}
	}
	if m.Format != manifestFormat || m.ID != id || m.Org != org {
		return nil, &CorruptError{Archive: id, Reason: fmt.Sprintf("manifest says format %d, id %q, org %q", m.Format, m.ID, m.Org)}
	}
	return m, nil
}

// List returns the ids of an org's archives, oldest first.
func (s *Store) List(ctx context.Context, org string) ([]string, error) {
	if err := checkOrg(org); err != nil {
		return nil, err
	}
	var ids []string
	err := s.each(ctx, manifestPrefix(org), func(o *blob.ListObject) error {
		name := strings.TrimPrefix(o.Key, manifestPrefix(org))
		if id, ok := strings.CutSuffix(name, ".json"); ok && idRE.MatchString(id) {
			ids = append(ids, id)
		}
		return nil
	})
	sort.Strings(ids)
	return ids, err
}

// each calls fn for every object under prefix.
func (s *Store) each(ctx context.Context, prefix string, fn func(*blob.ListObject) error) error {
	it := s.bucket.List(&blob.ListOptions{Prefix: prefix})
	for {
		o, err := it.Next(ctx)
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return storeError(err, "list %s", prefix)
		}
		if o.IsDir {
			continue
		}
		if err := fn(o); err != nil {
			return err
		}
	}
}

// storeError classifies an error of the bucket.
func storeError(err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	switch gcerrors.Code(err) {
	case gcerrors.NotFound:
		return errs.Wrap(errs.NotFound, err, "%s", msg)
	case gcerrors.PermissionDenied:
		return errs.Wrap(errs.Permission, err, "%s", msg)
	case gcerrors.ResourceExhausted:
		return errs.Wrap(errs.Exhausted, err, "%s", msg)
	case gcerrors.Canceled:
		return errs.Wrap(errs.Canceled, err, "%s", msg)
	case gcerrors.DeadlineExceeded:
		return errs.Wrap(errs.Timeout, err, "%s", msg)
	case gcerrors.InvalidArgument:
		return errs.Wrap(errs.Invalid, err, "%s", msg)
	}
	if k := errs.KindOf(err); k != errs.Unknown {
		return errs.Wrap(k, err, "%s", msg)
	}
	return errs.Wrap(errs.Unavailable, err, "%s", msg)
}
