package activitylog

import (
	"strings"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
)

// procStream reads the frames of a ProcessService Start or Attach as the
// proxy forwards them, without decoding them whole: the process id, its
// exit, and its output, of which it keeps at most half bytes from the
// start and half from the end. Output frames are read from their first
// bytes and copied in part, without an allocation.
type procStream struct {
	on   bool
	half int
	head []byte
	tail []byte // the newest bytes after head filled up, at most half
	seen int64  // output bytes seen in all

	id       string
	exited   bool
	timedOut bool
	code     int32
	signal   string
	reason   string // why the system ended it (out of memory, a sandbox's stop)
}

func (p *procStream) init(outputBytes int) {
	p.on, p.half = true, max(outputBytes/2, 1)
	p.head = make([]byte, 0, p.half)
	p.tail = make([]byte, 0, p.half)
}

// Field numbers of agentd.v1 messages the record reads.
const (
	fEvent       = 1 // StartResponse.event, AttachResponse.event
	fStarted     = 1 // ProcessEvent.started
	fOutput      = 2 // ProcessEvent.output
	fExited      = 4 // ProcessEvent.exited
	fStartedID   = 1 // Started.id
	fOutputData  = 3 // Output.data
	fExitCode    = 1 // Exited.exit_code
	fExitSignal  = 2 // Exited.signal
	fExitTimeout = 4 // Exited.timed_out
	fExitReason  = 8 // Exited.reason
	fArgv        = 1 // StartRequest.argv
	fCommand     = 2 // StartRequest.command
	fCwd         = 3 // StartRequest.cwd
	fAttachID    = 1 // AttachRequest.id
)

// headerBytes is how much of a frame is read to find its event and, for
// output, where the data lies.
const headerBytes = 64

// event reads one StartResponse or AttachResponse frame.
func (p *procStream) event(data mem.BufferSlice) {
	var hb [headerBytes]byte
	h := hb[:copyAt(hb[:], data, 0)]
	// The event: field 1 of the response, and in it one field of the oneof.
	num, typ, n := protowire.ConsumeTag(h)
	if n < 0 || num != fEvent || typ != protowire.BytesType {
		return
	}
	_, m := protowire.ConsumeVarint(h[n:])
	if m < 0 {
		return
	}
	pos := n + m
	kind, typ, n := protowire.ConsumeTag(h[pos:])
	if n < 0 || typ != protowire.BytesType {
		return
	}
	size, m := protowire.ConsumeVarint(h[pos+n:])
	if m < 0 {
		return
	}
	pos += n + m
	switch kind {
	case fOutput:
		p.output1(data, h, pos, pos+int(size))
	case fStarted, fExited:
		b := data.Materialize() // twice a call
		if end := pos + int(size); end <= len(b) {
			p.small(kind, b[pos:end])
		}
	}
}

// output1 finds Output.data in the header (the fields before it are two
// varints) and keeps what it needs of it.
func (p *procStream) output1(data mem.BufferSlice, h []byte, pos, end int) {
	for pos < len(h) && pos < end {
		num, typ, n := protowire.ConsumeTag(h[pos:])
		if n < 0 {
			return
		}
		pos += n
		if num == fOutputData && typ == protowire.BytesType {
			size, m := protowire.ConsumeVarint(h[pos:])
			if m < 0 {
				return
			}
			p.keep(data, pos+m, int(size))
			return
		}
		m := protowire.ConsumeFieldValue(num, typ, h[pos:])
		if m < 0 {
			return
		}
		pos += m
	}
}

// keep takes the output bytes data[off:off+size] into head and tail.
func (p *procStream) keep(data mem.BufferSlice, off, size int) {
	p.seen += int64(size)
	if room := p.half - len(p.head); room > 0 {
		take := min(room, size)
		n := copyAt(p.head[len(p.head):len(p.head)+take], data, off)
		p.head = p.head[:len(p.head)+n]
		off, size = off+take, size-take
	}
	if size <= 0 {
		return
	}
	if size >= p.half {
		p.tail = p.tail[:p.half]
		copyAt(p.tail, data, off+size-p.half)
		return
	}
	if over := len(p.tail) + size - p.half; over > 0 {
		p.tail = p.tail[:copy(p.tail, p.tail[over:])]
	}
	n := copyAt(p.tail[len(p.tail):len(p.tail)+size], data, off)
	p.tail = p.tail[:len(p.tail)+n]
}

// small reads a Started or an Exited event.
func (p *procStream) small(kind protowire.Number, b []byte) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return
		}
		b = b[n:]
		switch {
		case kind == fStarted && num == fStartedID && typ == protowire.BytesType:
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return
			}
			p.id = v
		case kind == fExited && num == fExitCode && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return
			}
			p.code = int32(v)
		case kind == fExited && num == fExitSignal && typ == protowire.BytesType:
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return
			}
			p.signal = v
		case kind == fExited && num == fExitReason && typ == protowire.BytesType:
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return
			}
			p.reason = cut(v, 300)
		case kind == fExited && num == fExitTimeout && typ == protowire.VarintType:
			v, m := protowire.ConsumeVarint(b)
			if m < 0 {
				return
			}
			p.timedOut = v != 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return
		}
		b = b[m:]
	}
	if kind == fExited {
		p.exited = true
	}
}

// output is what was kept of the output: its start, how much was left
// out, its end.
func (p *procStream) output() []byte {
	if len(p.head) == 0 {
		return nil
	}
	return joinHeadTail(p.head, p.tail, p.seen-int64(len(p.head))-int64(len(p.tail)))
}

// copyAt copies data[off:] into dst, as much as fits; it returns how many
// bytes it copied.
func copyAt(dst []byte, data mem.BufferSlice, off int) int {
	n := 0
	for _, buf := range data {
		b := buf.ReadOnlyData()
		if off >= len(b) {
			off -= len(b)
			continue
		}
		n += copy(dst[n:], b[off:])
		off = 0
		if n == len(dst) {
			break
		}
	}
	return n
}

// parseStartRequest is a StartRequest's command line and directory.
func parseStartRequest(b []byte) (cmd, cwd string) {
	var argv []string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			break
		}
		b = b[n:]
		if typ == protowire.BytesType && (num == fArgv || num == fCommand || num == fCwd) {
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				break
			}
			switch num {
			case fArgv:
				argv = append(argv, v)
			case fCommand:
				cmd = v
			case fCwd:
				cwd = v
			}
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			break
		}
		b = b[m:]
	}
	if cmd == "" {
		cmd = strings.Join(argv, " ")
	}
	return cmd, cwd
}

// parseAttachRequest is an AttachRequest's process id.
func parseAttachRequest(b []byte) string {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		b = b[n:]
		if num == fAttachID && typ == protowire.BytesType {
			v, _ := protowire.ConsumeString(b)
			return v
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return ""
		}
		b = b[m:]
	}
	return ""
}
