package runner

// retention holds what is kept of one output stream: the first headCap bytes
// and the last tailCap bytes, addressed by absolute stream offsets. The bytes
// in between are dropped (and counted). It is not safe for concurrent use:
// the owning Process guards it with its mutex.
//
// Offsets [0, len(head)) live in head; offsets [tailStart, total) live in
// ring, a circular buffer that grows on demand up to tailCap, so that a
// process printing a few lines costs a few bytes, not 5 MiB.
type retention struct {
	headCap int64
	tailCap int64

	head      []byte
	ring      []byte
	ringBase  int64 // stream offset stored at ring[0] when ring was last laid out
	tailStart int64 // first offset held by ring (== total while head is not full)
	total     int64 // bytes written to the stream so far

	// marks remembers which append (by process-wide sequence number) wrote
	// the most recent stretches of the stream, so that a subscriber can
	// interleave stdout and stderr in the order they were produced.
	marks  [markCount]mark
	nmarks int // number of valid marks
	mnext  int // index of the slot the next mark goes to
}

const markCount = 64

type mark struct {
	start, end int64
	seq        uint64
}

func newRetention(headCap, tailCap int64) *retention {
	return &retention{headCap: headCap, tailCap: tailCap}
}

// write appends data to the stream, keeping the head and the tail, and
// records seq as the writer of the bytes.
func (r *retention) write(data []byte, seq uint64) {
	if len(data) == 0 {
		return
	}
	r.addMark(mark{start: r.total, end: r.total + int64(len(data)), seq: seq})
	if r.total < r.headCap {
		n := min(int64(len(data)), r.headCap-r.total)
		r.head = append(r.head, data[:n]...)
		r.total += n
		r.tailStart = r.total
		data = data[n:]
		if len(data) == 0 {
			return
		}
	}
	if held := r.total - r.tailStart; held+int64(len(data)) > int64(len(r.ring)) && int64(len(r.ring)) < r.tailCap {
		r.grow(held + int64(len(data)))
	}
	size := int64(len(r.ring))
	if size == 0 {
		r.total += int64(len(data))
		r.tailStart = r.total
		return
	}
	if int64(len(data)) > size {
		skip := int64(len(data)) - size
		r.total += skip
		data = data[skip:]
	}
	for len(data) > 0 {
		i := r.index(r.total)
		n := copy(r.ring[i:], data)
		data = data[n:]
		r.total += int64(n)
	}
	if r.total-r.tailStart > size {
		r.tailStart = r.total - size
	}
}

// grow re-lays the ring out in a bigger buffer that holds at least need bytes
// (at most tailCap).
func (r *retention) grow(need int64) {
	size := max(int64(len(r.ring))*2, need, 64<<10)
	size = min(size, r.tailCap)
	ring := make([]byte, size)
	n := int64(0)
	for off := r.tailStart; off < r.total; {
		chunk := r.tailAt(off, r.total-off)
		copy(ring[n:], chunk)
		n += int64(len(chunk))
		off += int64(len(chunk))
	}
	r.ring = ring
	r.ringBase = r.tailStart
}

func (r *retention) index(off int64) int64 {
	return (off - r.ringBase) % int64(len(r.ring))
}

// tailAt returns the longest contiguous slice of ring holding the bytes from
// off (tailStart <= off < total), at most max bytes. It aliases ring.
func (r *retention) tailAt(off, max int64) []byte {
	i := r.index(off)
	n := min(max, r.total-off, int64(len(r.ring))-i)
	return r.ring[i : i+n]
}

// gap reports whether off falls in the dropped middle of the stream, and if
// so, where retained data resumes.
func (r *retention) gap(off int64) (resume int64, ok bool) {
	if off >= int64(len(r.head)) && off < r.tailStart {
		return r.tailStart, true
	}
	return 0, false
}

// read copies up to max retained bytes from off (which must not be in a
// gap), stopping at limit, into a new slice. It returns nil when nothing is
// available.
func (r *retention) read(off, max, limit int64) []byte {
	return r.readInto(nil, off, max, limit)
}

// readInto is read copying into dst's storage (reused when big enough).
func (r *retention) readInto(dst []byte, off, max, limit int64) []byte {
	max = min(max, limit-off)
	if max <= 0 || off >= r.total {
		return nil
	}
	if off < int64(len(r.head)) {
		end := min(int64(len(r.head)), off+max)
		return append(dst[:0], r.head[off:end]...)
	}
	if off < r.tailStart {
		return nil
	}
	return append(dst[:0], r.tailAt(off, max)...)
}

// room reports how many bytes can be appended without dropping any byte at
// or after offset need (the position of the slowest live subscriber).
// Bytes in the head are never dropped, so they always fit.
func (r *retention) room(need int64) int64 {
	return max(need, r.headCap) + r.tailCap - r.total
}

// stats reports total, retained and omitted byte counts.
func (r *retention) stats() (total, retained, omitted int64) {
	retained = int64(len(r.head)) + r.total - r.tailStart
	return r.total, retained, r.total - retained
}

func (r *retention) addMark(m mark) {
	r.marks[r.mnext] = m
	r.mnext = (r.mnext + 1) % markCount
	r.nmarks = min(r.nmarks+1, markCount)
}

// markAt returns the index (0 oldest) of the mark covering off, or -1 when
// off is older than every mark.
func (r *retention) markAt(off int64) int {
	for i := range r.nmarks {
		m := r.mark(i)
		if off < m.start {
			return i - 1 // only reachable for i == 0: older than all marks
		}
		if off < m.end {
			return i
		}
	}
	return r.nmarks - 1
}

// mark returns the i-th mark, 0 being the oldest still remembered.
func (r *retention) mark(i int) mark {
	first := (r.mnext - r.nmarks + markCount) % markCount
	return r.marks[(first+i)%markCount]
}

// seqAt reports which append wrote the byte at off: 0 when it is older than
// the marks remember.
func (r *retention) seqAt(off int64) uint64 {
	i := r.markAt(off)
	if i < 0 {
		return 0
	}
	return r.mark(i).seq
}

// limitBefore returns the offset where, reading on from off, the stream
// reaches bytes written after append number seq: a reader that wants to keep
// the order in which two streams were written stops there.
func (r *retention) limitBefore(off int64, seq uint64) int64 {
	for i := max(r.markAt(off), 0); i < r.nmarks; i++ {
		if m := r.mark(i); m.seq > seq {
			return max(m.start, off)
		}
	}
	return r.total
}

// copyRange copies the retained bytes of [from, to), skipping any gap.
func (r *retention) copyRange(from, to int64) []byte {
	var out []byte
	for off := from; off < to; {
		if resume, gap := r.gap(off); gap {
			off = resume
			continue
		}
		chunk := r.read(off, to-off, to)
		if len(chunk) == 0 {
			break
		}
		out = append(out, chunk...)
		off += int64(len(chunk))
	}
	return out
}
