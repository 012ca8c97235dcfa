// Package activity records every operation the daemon performs: a bounded
// in-memory ring that watchers follow live (ActivityService.Watch), and an
// append-only, rotated JSON-lines audit log in the state directory that the
// machine's owner can read (agentd log).
package activity

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/devdepot-ai/agentd/internal/wire"
)

// Outcome says how an operation ended.
type Outcome string

// KindStop is the kind of the record a daemon adds when it starts to shut
// down; the hub takes it as "offline from now on". It is wire.KindStop,
// kept here for the package's users.
const KindStop = wire.KindStop

// Outcomes.
const (
	Started Outcome = "started" // a process start; its end is a later record
	OK      Outcome = "ok"
	Failed  Outcome = "error"
)

// Record is one operation.
type Record struct {
	Seq  uint64    `json:"seq"`
	Time time.Time `json:"time"`
	// Actor is who asked: the API token's name the hub vouches for, or on
	// a direct connection who the connection proves it is
	// ("uid:1000(alice)", "token:1a2b3c4d").
	Actor string `json:"actor,omitempty"`
	// ClaimedActor is, on a direct connection, who the caller said it was
	// (the agentd-actor metadata) when that differs from Actor: unchecked.
	ClaimedActor string `json:"claimed_actor,omitempty"`
	// Client is the client program behind the call, as the caller names
	// it (agentd-client metadata: "agentctl-mcp/1.2 (claude-code 2.0.1)"):
	// unchecked, cleaned like ClaimedActor.
	Client       string        `json:"client,omitempty"`
	Conversation string        `json:"conversation,omitempty"`
	Kind         string        `json:"kind"`
	Summary      string        `json:"summary"`
	Command      string        `json:"command,omitempty"`
	Cwd          string        `json:"cwd,omitempty"`
	Path         string        `json:"path,omitempty"`
	Bytes        int64         `json:"bytes,omitempty"`
	Output       []byte        `json:"output,omitempty"`
	Outcome      Outcome       `json:"outcome"`
	Error        string        `json:"error,omitempty"`
	ExitCode     int           `json:"exit_code,omitempty"`
	Duration     time.Duration `json:"duration,omitempty"`
	ObjectID     string        `json:"object_id,omitempty"`
}

// MaxOutput bounds Record.Output: longer output keeps its head and tail.
const MaxOutput = 8 << 10

// Options configures a Log. Zero fields get defaults.
type Options struct {
	// Dir holds the audit log files (audit.jsonl, audit.jsonl.1, …). Empty: no file, memory only.
	Dir string
	// RingSize is how many records Watch can replay (default 10,000).
	RingSize int
	// MaxFileBytes rotates the audit log past this size (default 16 MiB).
	MaxFileBytes int64
	// KeepFiles is how many rotated files to keep (default 5).
	KeepFiles int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// FileName is the current audit log's name inside Options.Dir.
const FileName = "audit.jsonl"

// Log is the activity log. It is safe for concurrent use.
type Log struct {
	opts Options

	mu      sync.Mutex
	ring    []Record // ring[i%len] holds seq start+i
	count   int      // records in ring
	nextSeq uint64
	changed chan struct{} // closed and replaced on every record
	file    *os.File
	size    int64
	werr    error // last write error, reported once
}

// Open opens (creating) the audit log in opts.Dir and continues its
// sequence numbers; a new log's first number is the current time in
// microseconds, so numbers grow across a lost state directory too.
func Open(opts Options) (*Log, error) {
	if opts.RingSize <= 0 {
		opts.RingSize = 10000
	}
	if opts.MaxFileBytes <= 0 {
		opts.MaxFileBytes = 16 << 20
	}
	if opts.KeepFiles <= 0 {
		opts.KeepFiles = 5
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	l := &Log{opts: opts, ring: make([]Record, opts.RingSize), nextSeq: 1, changed: make(chan struct{})}
	if opts.Dir == "" {
		return l, nil
	}
	if err := os.MkdirAll(opts.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	path := filepath.Join(opts.Dir, FileName)
	last, err := l.reload(path)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l.nextSeq = last + 1
	if last == 0 {
		// A new log (a first start, or a sandbox whose state did not
		// survive a restart) numbers on from the clock, not from 1: the
		// hub resumes a machine's activity after the last sequence number
		// it stored, and would skip a restarted log's records until they
		// passed it.
		l.nextSeq = max(1, uint64(opts.Now().UnixMicro()))
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("audit log: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("audit log: %w", err)
	}
	l.file, l.size = f, fi.Size()
	return l, nil
}

// reload puts the newest records of the audit log (the current file, then
// the rotated ones, newest first, while the ring has room) back into the ring and
// returns the last sequence number (0: no records). A daemon that stopped
// before its hub took its last records serves them again after a restart:
// the hub resumes after the last one it stored. Only a run of consecutive
// sequence numbers ending at the last record is kept, as the ring needs.
func (l *Log) reload(path string) (uint64, error) {
	var tail []Record // newest last; consecutive seqs
	for i := 0; i <= l.opts.KeepFiles; i++ {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		recs, err := readRecords(p)
		if err != nil {
			return 0, err
		}
		if len(tail) > 0 {
			recs = append(recs, tail...)
		}
		tail = consecutiveTail(recs, len(l.ring))
		if len(tail) > 0 && (len(tail) == len(l.ring) || len(tail) < len(recs)) {
			break // full, or a gap reached: older files cannot join on
		}
	}
	if len(tail) == 0 {
		return 0, nil
	}
	for _, r := range tail {
		l.ring[int(r.Seq%uint64(len(l.ring)))] = r
	}
	l.count = len(tail)
	return tail[len(tail)-1].Seq, nil
}

// readRecords reads the records of one audit file (none if it is missing).
func readRecords(path string) ([]Record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []Record
	err = ReadFile(f, func(r Record) error {
		if r.Seq > 0 {
			recs = append(recs, r)
		}
		return nil
	})
	return recs, err
}

// consecutiveTail is the longest run, at most n long, at the end of recs
// whose sequence numbers go up by one.
func consecutiveTail(recs []Record, n int) []Record {
	i := len(recs) - 1
	for i > 0 && len(recs)-i < n && recs[i-1].Seq+1 == recs[i].Seq {
		i--
	}
	if i < 0 {
		return nil
	}
	return recs[i:]
}

// Add assigns r its sequence number and time, keeps it for watchers and
// appends it to the audit log. A failing audit file does not fail the
// operation: the error is returned by the next Err call.
func (l *Log) Add(r Record) Record {
	r.Output = bound(r.Output)
	l.mu.Lock()
	defer l.mu.Unlock()
	r.Seq = l.nextSeq
	l.nextSeq++
	if r.Time.IsZero() {
		r.Time = l.opts.Now()
	}
	l.ring[int(r.Seq%uint64(len(l.ring)))] = r
	if l.count < len(l.ring) {
		l.count++
	}
	if l.file != nil {
		l.write(r)
	}
	close(l.changed)
	l.changed = make(chan struct{})
	return r
}

func (l *Log) write(r Record) {
	b, err := json.Marshal(r)
	if err != nil {
		l.werr = err
		return
	}
	b = append(b, '\n')
	if l.size+int64(len(b)) > l.opts.MaxFileBytes && l.size > 0 {
		if err := l.rotate(); err != nil {
			l.werr = err
			return
		}
	}
	n, err := l.file.Write(b)
	l.size += int64(n)
	if err != nil {
		l.werr = err
	}
}

func (l *Log) rotate() error {
	path := filepath.Join(l.opts.Dir, FileName)
	if err := l.file.Close(); err != nil {
		return err
	}
	for i := l.opts.KeepFiles - 1; i >= 1; i-- {
		_ = os.Rename(fmt.Sprintf("%s.%d", path, i), fmt.Sprintf("%s.%d", path, i+1))
	}
	_ = os.Remove(fmt.Sprintf("%s.%d", path, l.opts.KeepFiles+1))
	if err := os.Rename(path, path+".1"); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	l.file, l.size = f, 0
	return nil
}

// Err returns (and clears) the last audit-file write error.
func (l *Log) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	err := l.werr
	l.werr = nil
	return err
}

// Watch calls emit for every retained record with Seq > since, then, when
// follow is set, for every new record until ctx is done. Records that left
// the ring before they could be sent are skipped.
func (l *Log) Watch(ctx context.Context, since uint64, follow bool, emit func(Record) error) error {
	for {
		l.mu.Lock()
		first := l.nextSeq - uint64(l.count)
		if since+1 > first {
			first = since + 1
		}
		var batch []Record
		for seq := first; seq < l.nextSeq; seq++ {
			batch = append(batch, l.ring[int(seq%uint64(len(l.ring)))])
		}
		changed := l.changed
		l.mu.Unlock()
		for _, r := range batch {
			if err := emit(r); err != nil {
				return err
			}
			since = r.Seq
		}
		if !follow {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-changed:
		}
	}
}

// SeqBefore is the sequence number just before the newest n retained
// records: Watch from it replays those n (all retained ones if there are
// fewer).
func (l *Log) SeqBefore(n uint64) uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextSeq - 1 - min(n, uint64(l.count))
}

// LastSeq is the sequence number of the newest record (0: none yet).
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.nextSeq - 1
}

// Close closes the audit file.
func (l *Log) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.file == nil {
		return nil
	}
	err := l.file.Close()
	l.file = nil
	return err
}

// bound keeps the head and tail of output longer than MaxOutput.
func bound(out []byte) []byte {
	if len(out) <= MaxOutput {
		return out
	}
	const marker = "\n…[output cut]…\n"
	half := (MaxOutput - len(marker)) / 2
	b := make([]byte, 0, MaxOutput)
	b = append(b, out[:half]...)
	b = append(b, marker...)
	return append(b, out[len(out)-half:]...)
}

// ReadFile decodes the audit log records in r, one JSON object a line;
// lines that do not decode are skipped.
func ReadFile(r io.Reader, emit func(Record) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	for sc.Scan() {
		var rec Record
		if json.Unmarshal(sc.Bytes(), &rec) != nil {
			continue
		}
		if err := emit(rec); err != nil {
			return err
		}
	}
	return sc.Err()
}
