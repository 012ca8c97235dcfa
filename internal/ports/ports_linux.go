package ports

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// tcpListen is the state column of a listening socket in /proc/net/tcp.
const tcpListen = "0A"

// Listening lists the listening TCP sockets of this network namespace,
// sorted by port, then network, then address, with their owners where
// /proc shows them (all of them to root, a user's own otherwise).
func Listening(ctx context.Context) ([]Socket, error) {
	return listening(ctx, "/proc")
}

func listening(ctx context.Context, proc string) ([]Socket, error) {
	var socks []Socket
	inodes := map[uint64][]int{} // inode → indices in socks
	for _, network := range []string{"tcp", "tcp6"} {
		f, err := os.Open(filepath.Join(proc, "net", network))
		if os.IsNotExist(err) && network == "tcp6" {
			continue // IPv6 disabled
		}
		if err != nil {
			return nil, fmt.Errorf("read listening sockets: %w", err)
		}
		found, err := parseTable(f, network)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f.Name(), err)
		}
		for _, s := range found {
			inodes[s.inode] = append(inodes[s.inode], len(socks))
			socks = append(socks, s.Socket)
		}
	}
	if err := owners(ctx, proc, inodes, socks); err != nil {
		return nil, err
	}
	slices.SortFunc(socks, func(a, b Socket) int {
		if a.Port != b.Port {
			return int(a.Port) - int(b.Port)
		}
		if c := strings.Compare(a.Network, b.Network); c != 0 {
			return c
		}
		return strings.Compare(a.Address, b.Address)
	})
	return socks, nil
}

type tableSocket struct {
	Socket
	inode uint64
}

// parseTable reads the listening sockets of one /proc/net/tcp{,6} table.
// A line it cannot read is an error: the format has not changed since
// Linux 2.2, so a surprise means the file is not what it seems.
func parseTable(r io.Reader, network string) ([]tableSocket, error) {
	var out []tableSocket
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), 1<<20)
	first := true
	for sc.Scan() {
		if first { // the header
			first = false
			continue
		}
		f := strings.Fields(sc.Text())
		if len(f) < 10 {
			return nil, fmt.Errorf("short line %q", sc.Text())
		}
		if f[3] != tcpListen {
			continue
		}
		addr, port, err := parseAddr(f[1])
		if err != nil {
			return nil, err
		}
		inode, err := strconv.ParseUint(f[9], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("inode %q: %w", f[9], err)
		}
		out = append(out, tableSocket{Socket{Port: port, Address: addr.String(), Network: network}, inode})
	}
	return out, sc.Err()
}

// parseAddr reads "0100007F:1F90": the address as 32-bit words in the
// kernel's byte order, then the port in hex.
func parseAddr(s string) (netip.Addr, uint16, error) {
	host, portHex, ok := strings.Cut(s, ":")
	if !ok {
		return netip.Addr{}, 0, fmt.Errorf("address %q: no port", s)
	}
	port, err := strconv.ParseUint(portHex, 16, 16)
	if err != nil {
		return netip.Addr{}, 0, fmt.Errorf("address %q: port: %w", s, err)
	}
	raw, err := hex.DecodeString(host)
	if err != nil || (len(raw) != 4 && len(raw) != 16) {
		return netip.Addr{}, 0, fmt.Errorf("address %q: not an IPv4 or IPv6 address", s)
	}
	for i := 0; i < len(raw); i += 4 { // each word to network order
		binary.BigEndian.PutUint32(raw[i:], binary.NativeEndian.Uint32(raw[i:]))
	}
	addr, _ := netip.AddrFromSlice(raw)
	return addr.Unmap(), uint16(port), nil
}

// owners fills in the process of each socket whose inode one of /proc's
// processes holds open. Processes that vanish or hide their fds (another
// user's) are skipped: their sockets keep PID 0.
func owners(ctx context.Context, proc string, inodes map[uint64][]int, socks []Socket) error {
	if len(inodes) == 0 {
		return nil
	}
	ents, err := os.ReadDir(proc)
	if err != nil {
		return fmt.Errorf("list processes: %w", err)
	}
	left := len(inodes)
	for _, e := range ents {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 0 {
			continue
		}
		fdDir := filepath.Join(proc, e.Name(), "fd")
		fds, err := os.ReadDir(fdDir)
		if err != nil {
			continue
		}
		var cmd string
		for _, fd := range fds {
			link, err := os.Readlink(filepath.Join(fdDir, fd.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
			if err != nil {
				continue
			}
			idx, ok := inodes[inode]
			if !ok {
				continue
			}
			if cmd == "" {
				cmd = cmdline(filepath.Join(proc, e.Name()))
			}
			for _, i := range idx {
				socks[i].PID, socks[i].Command = pid, cmd
			}
			delete(inodes, inode)
			if left--; left == 0 {
				return nil
			}
		}
	}
	return nil
}

// cmdline is a process's arguments joined by spaces (a kernel thread's
// empty command line: its name in brackets, as ps shows it).
func cmdline(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err == nil && len(b) > 0 {
		b = bytes.TrimRight(b, "\x00")
		return strings.ToValidUTF8(string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})), "?")
	}
	if c, err := os.ReadFile(filepath.Join(dir, "comm")); err == nil {
		return "[" + strings.TrimSpace(string(c)) + "]"
	}
	return ""
}
