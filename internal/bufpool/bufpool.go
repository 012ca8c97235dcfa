// Package bufpool is the gRPC buffer pool of agentd's relay: gRPC's
// default pool clears every buffer it hands out, which on a stream of
// output or a port forward is a second pass over every byte (a fifth of
// the CPU of a relayed GiB, measured in docs/performance.md). gRPC fills
// each buffer it gets whole before reading it (a frame's payload read in
// full, a message marshalled to its size), so clearing protects nothing
// there; this pool hands buffers out as they were put back.
package bufpool

import (
	"math/bits"
	"sync"

	"google.golang.org/grpc/mem"
)

// Sizes of the tiers: powers of two from 2^minShift to 2^maxShift bytes;
// larger buffers are made and dropped.
const (
	minShift = 8  // 256 B
	maxShift = 22 // 4 MiB
)

// Pool is a tiered mem.BufferPool that does not clear what it hands out.
// Its zero value is not ready; use New. It is safe for concurrent use.
type Pool struct {
	tiers [maxShift - minShift + 1]sync.Pool
}

var _ mem.BufferPool = (*Pool)(nil)

// New returns an empty pool.
func New() *Pool { return &Pool{} }

// shared is the process's pool (Shared).
var shared = New()

// Shared is one pool for every gRPC server and client of the process, so
// that a buffer received on one side is reused on the other.
func Shared() *Pool { return shared }

// tier is the index of the smallest tier holding n bytes, or -1.
func tier(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	s := bits.Len(uint(n - 1)) // 2^s >= n
	if s > maxShift {
		return -1
	}
	return s - minShift
}

// Get returns a buffer of length n, its contents whatever they were.
func (p *Pool) Get(n int) *[]byte {
	t := tier(n)
	if t < 0 {
		b := make([]byte, n)
		return &b
	}
	if b, ok := p.tiers[t].Get().(*[]byte); ok {
		*b = (*b)[:n]
		return b
	}
	b := make([]byte, n, 1<<(t+minShift))
	return &b
}

// Put returns a buffer for reuse; one whose capacity is not a tier's
// size is dropped.
func (p *Pool) Put(b *[]byte) {
	c := cap(*b)
	t := tier(c)
	if t < 0 || c != 1<<(t+minShift) {
		return
	}
	p.tiers[t].Put(b)
}
