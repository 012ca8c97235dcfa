package pyrun

import (
	_ "embed"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
)

// driverSource is the Python driver every interpreter runs.
//
//go:embed driver.py
var driverSource []byte

// bootstrap is the interpreter's -c program: it reads the driver, framed
// like every request, from fd 3 and runs it in a namespace of its own.
const bootstrap = `import os
def _read(n):
    b = b""
    while len(b) < n:
        c = os.read(3, n - len(b))
        if not c:
            raise SystemExit(70)
        b += c
    return b
exec(compile(_read(int.from_bytes(_read(4), "big")), "<agentd-driver>", "exec"), {"__name__": "agentd_driver", "__builtins__": __builtins__})
`

// maxReplyBytes bounds one frame from the driver. Its replies are small:
// reprs, values and tracebacks are cut by the driver at 64 KiB characters.
const maxReplyBytes = 16 << 20

// request is a frame from the daemon to the driver.
type request struct {
	Op   string            `json:"op"`             // "run" or "packages"
	Code string            `json:"code,omitempty"` // run: the source
	Cwd  string            `json:"cwd,omitempty"`  // run: chdir here first ("" keeps the current directory)
	Env  map[string]string `json:"env,omitempty"`  // run: os.environ.update(env) first
	Seq  int64             `json:"seq,omitempty"`  // run: numbers the code's file name, "<run-N>"
}

// reply is a frame from the driver to the daemon.
type reply struct {
	Ev        string      `json:"ev"` // ready, result, error, done, packages
	Pid       int         `json:"pid"`
	Version   string      `json:"version"`
	Repr      string      `json:"repr"`
	Name      string      `json:"name"`
	Value     string      `json:"value"`
	Traceback string      `json:"traceback"`
	Failed    bool        `json:"failed"`
	Packages  [][2]string `json:"packages"`
}

// appendFrame appends a frame of payload: a 4-byte big-endian length, then
// the bytes.
func appendFrame(dst, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(payload)))
	return append(dst, payload...)
}

// encodeRequest returns req as one frame.
func encodeRequest(req request) ([]byte, error) {
	b, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	return appendFrame(make([]byte, 0, len(b)+4), b), nil
}

// readReply reads one frame from r and decodes it.
func readReply(r io.Reader) (reply, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return reply{}, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > maxReplyBytes {
		return reply{}, fmt.Errorf("driver sent a frame of %d bytes (limit %d)", n, maxReplyBytes)
	}
	buf := make([]byte, n)
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return reply{}, err
	}
	var m reply
	if err := json.Unmarshal(buf, &m); err != nil {
		return reply{}, fmt.Errorf("driver sent a bad frame: %w", err)
	}
	return m, nil
}
