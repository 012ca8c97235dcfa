package ports

import (
	"net"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// A real listener of this process shows up with its address, network and
// this process as its owner; a connected (not listening) socket does not.
func TestListeningFindsOwnListener(t *testing.T) {
	t.Parallel()
	l4, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l4.Close()
	l6, err := net.Listen("tcp6", "[::1]:0")
	if err != nil {
		t.Skipf("no IPv6 loopback: %v", err)
	}
	defer l6.Close()
	c, err := net.Dial("tcp", l4.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	client := uint16(c.LocalAddr().(*net.TCPAddr).Port)

	got, err := Listening(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	self, _ := os.Executable()
	want := map[uint16]Socket{
		uint16(l4.Addr().(*net.TCPAddr).Port): {Address: "127.0.0.1", Network: "tcp", PID: os.Getpid()},
		uint16(l6.Addr().(*net.TCPAddr).Port): {Address: "::1", Network: "tcp6", PID: os.Getpid()},
	}
	for _, s := range got {
		if s.Port == client {
			t.Errorf("the client socket's port %d is listed as listening: %+v", client, s)
		}
		w, ok := want[s.Port]
		if !ok {
			continue
		}
		delete(want, s.Port)
		if !strings.Contains(s.Command, self) && !strings.Contains(s.Command, "ports.test") {
			t.Errorf("port %d: command %q, want this test binary's", s.Port, s.Command)
		}
		w.Port, w.Command = s.Port, s.Command
		if diff := cmp.Diff(w, s); diff != "" {
			t.Errorf("port %d (-want +got):\n%s", s.Port, diff)
		}
	}
	if len(want) > 0 {
		t.Errorf("not listed: %v", want)
	}
}

// The table's addresses are words in the kernel's byte order; only LISTEN
// (0A) rows count; a malformed row is an error, not a skipped line.
func TestParseTable(t *testing.T) {
	t.Parallel()
	const tcp = `  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0
   1: 00000000:0016 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0
   2: 0100007F:1F90 0100007F:D431 01 00000000:00000000 00:00000000 00000000  1000        0 99 1 0000000000000000 20 4 30 10 -1
`
	got, err := parseTable(strings.NewReader(tcp), "tcp")
	if err != nil {
		t.Fatal(err)
	}
	want := []tableSocket{
		{Socket{Port: 8080, Address: "127.0.0.1", Network: "tcp"}, 4242},
		{Socket{Port: 22, Address: "0.0.0.0", Network: "tcp"}, 77},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(tableSocket{})); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}

	const tcp6 = `  sl  local_address                         remote_address                        st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode
   0: 00000000000000000000000001000000:0050 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 5 1 0000000000000000 100 0 0 10 0
   1: 0000000000000000FFFF00000100007F:1F91 00000000000000000000000000000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 6 1 0000000000000000 100 0 0 10 0
`
	got, err = parseTable(strings.NewReader(tcp6), "tcp6")
	if err != nil {
		t.Fatal(err)
	}
	want = []tableSocket{
		{Socket{Port: 80, Address: "::1", Network: "tcp6"}, 5},
		{Socket{Port: 8081, Address: "127.0.0.1", Network: "tcp6"}, 6},
	}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(tableSocket{})); diff != "" {
		t.Errorf("tcp6 (-want +got):\n%s", diff)
	}

	for _, bad := range []string{
		"header\n   0: 0100007F:1F90 00000000:0000 0A\n",
		"header\n   0: 0100007F 00000000:0000 0A 0 0 0 0 0 1\n",
		"header\n   0: 01007F:1F90 00000000:0000 0A 0 0 0 0 0 1\n",
		"header\n   0: 0100007F:1F90 00000000:0000 0A 0 0 0 0 0 x\n",
	} {
		if _, err := parseTable(strings.NewReader(bad), "tcp"); err == nil {
			t.Errorf("parseTable(%q): no error", bad)
		}
	}
}
