package files

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
)

const (
	// syncHashLimit is how much of a file is hashed inline, as it is
	// written; past it, a goroutine of its own hashes the rest.
	syncHashLimit = 1 << 20
	// hashPiece is the size of the copies handed to that goroutine.
	hashPiece = 256 << 10
)

// hasher computes the sha256 of what is written to a temporary file.
// Hashing a large file (a large share of the daemon's CPU in a big write)
// then runs beside the writes, on another core where there is one, instead of
// between them. Writes are copied in pieces, so the caller may reuse its
// buffer as soon as Write returns.
type hasher struct {
	h     hash.Hash
	n     int64
	piece []byte      // being filled; nil before the goroutine starts
	work  chan chunk  // to the goroutine
	free  chan []byte // pieces it is done with
	done  chan struct{}
}

// chunk is content for the hashing goroutine: one of its pieces, which it
// gives back, or a slice handed over for good.
type chunk struct {
	b     []byte
	piece bool
}

func newHasher() *hasher { return &hasher{h: sha256.New()} }

// Write hashes p (in order with everything written before).
func (s *hasher) Write(p []byte) { s.write(p, false) }

// write hashes p; with keep, p is the hasher's from now on and is hashed
// where it is, without a copy.
func (s *hasher) write(p []byte, keep bool) {
	s.n += int64(len(p))
	if s.work == nil {
		if s.n <= syncHashLimit {
			s.h.Write(p)
			return
		}
		s.start()
	}
	if keep {
		s.flush()
		s.work <- chunk{b: p}
		return
	}
	for len(p) > 0 {
		if s.piece == nil {
			s.piece = <-s.free
		}
		k := copy(s.piece[len(s.piece):cap(s.piece)], p)
		s.piece = s.piece[:len(s.piece)+k]
		p = p[k:]
		if len(s.piece) == cap(s.piece) {
			s.flush()
		}
	}
}

// flush hands the piece being filled to the goroutine.
func (s *hasher) flush() {
	if len(s.piece) > 0 {
		s.work <- chunk{b: s.piece, piece: true}
	}
	s.piece = nil
}

func (s *hasher) start() {
	const pieces = 3
	s.work = make(chan chunk, pieces)
	s.free = make(chan []byte, pieces)
	for range pieces {
		s.free <- make([]byte, 0, hashPiece)
	}
	s.done = make(chan struct{})
	go func() {
		defer close(s.done)
		for c := range s.work {
			s.h.Write(c.b)
			if c.piece {
				s.free <- c.b[:0]
			}
		}
	}()
}

// stop waits until everything written is hashed and ends the goroutine,
// if there is one. Safe to call more than once.
func (s *hasher) stop() {
	if s.work == nil {
		return
	}
	s.flush()
	close(s.work)
	<-s.done
	s.work = nil
}

// Sum returns the hex sha256 of everything written.
func (s *hasher) Sum() string {
	s.stop()
	return hex.EncodeToString(s.h.Sum(nil))
}
