//go:build unix

package mcpserver_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	agentdv1 "github.com/devdepot-ai/agentd/proto/gen/agentd/v1"
)

// rawSession speaks newline-delimited JSON-RPC to agentctl mcp's stdio.
type rawSession struct {
	t    *testing.T
	in   io.WriteCloser
	msgs chan map[string]any
}

func startRaw(t *testing.T, d *daemon) *rawSession {
	t.Helper()
	cmd := exec.Command(agentctl, "--addr", d.addr, "mcp")
	cmd.Stderr = &testWriter{t: t}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	r := &rawSession{t: t, in: in, msgs: make(chan map[string]any, 64)}
	done := make(chan struct{})
	go func() { // owned: ends at EOF, when the process exits (Cleanup)
		defer close(done)
		defer close(r.msgs)
		sc := bufio.NewScanner(out)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			var m map[string]any
			if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
				t.Errorf("not JSON on stdout: %q", sc.Text())
				continue
			}
			r.msgs <- m
		}
	}()
	t.Cleanup(func() {
		in.Close() // EOF on stdin ends the server
		if err := cmd.Wait(); err != nil {
			t.Errorf("agentctl mcp after stdin closed: %v", err)
		}
		<-done
	})
	return r
}

func (r *rawSession) send(m map[string]any) {
	r.t.Helper()
	m["jsonrpc"] = "2.0"
	b, _ := json.Marshal(m)
	if _, err := r.in.Write(append(b, '\n')); err != nil {
		r.t.Fatal(err)
	}
}

// next returns the next message from the server.
func (r *rawSession) next() map[string]any {
	r.t.Helper()
	select {
	case m, ok := <-r.msgs:
		if !ok {
			r.t.Fatal("the server closed stdout")
		}
		return m
	case <-time.After(30 * time.Second):
		r.t.Fatal("no message from the server in 30s")
	}
	return nil
}

// shape replaces every value by its JSON type, to compare shapes.
func shape(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := map[string]any{}
		for k, x := range v {
			out[k] = shape(x)
		}
		return out
	case []any:
		if len(v) == 0 {
			return []any{}
		}
		return []any{shape(v[0])}
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "boolean"
	case nil:
		return "null"
	}
	return "?"
}

// TestRawJSONRPC: a session written by hand, as any MCP client would
// write it, gets answers of the shapes MCP 2025-06-18 specifies:
// initialize, notifications/initialized, tools/list, tools/call (a
// result, an isError result), and a call cancelled by
// notifications/cancelled whose command dies.
func TestRawJSONRPC(t *testing.T) {
	t.Parallel()
	d := startDaemon(t)
	r := startRaw(t, d)

	r.send(map[string]any{"id": 1, "method": "initialize", "params": map[string]any{
		"protocolVersion": "2025-06-18", "capabilities": map[string]any{}, "clientInfo": map[string]any{"name": "raw-client", "version": "0.9"}}})
	init := r.next()
	want := map[string]any{"jsonrpc": "string", "id": "number", "result": map[string]any{
		"protocolVersion": "string",
		"capabilities":    map[string]any{"tools": map[string]any{}},
		"serverInfo":      map[string]any{"name": "string", "title": "string", "version": "string"},
		"instructions":    "string",
	}}
	if diff := cmp.Diff(shape(init), any(want)); diff != "" {
		t.Errorf("initialize response shape (-got +want):\n%s", diff)
	}
	res := init["result"].(map[string]any)
	if res["protocolVersion"] != "2025-06-18" || res["serverInfo"].(map[string]any)["name"] != "agentctl-mcp" {
		t.Errorf("initialize: %v", res)
	}
	r.send(map[string]any{"method": "notifications/initialized"})

	r.send(map[string]any{"id": 2, "method": "tools/list"})
	list := r.next()
	tools := list["result"].(map[string]any)["tools"].([]any)
	for _, x := range tools {
		tl := x.(map[string]any)
		schema, _ := tl["inputSchema"].(map[string]any)
		if tl["name"] == "" || len(tl["description"].(string)) < 40 || schema["type"] != "object" {
			t.Errorf("tool %v: want a name, a description a model can act on, an object inputSchema", tl)
		}
		if props, _ := schema["properties"].(map[string]any); tl["name"] == "sh" {
			if c, _ := props["command"].(map[string]any); c["type"] != "string" || c["description"] == nil {
				t.Errorf("sh's command property: %v", c)
			}
			if req, _ := schema["required"].([]any); !cmp.Equal(req, []any{"command"}) {
				t.Errorf("sh's required: %v, want [command]", req)
			}
		}
	}

	r.send(map[string]any{"id": "call-3", "method": "tools/call", "params": map[string]any{"name": "sh", "arguments": map[string]any{"command": "echo raw"}}})
	call := r.next()
	wantCall := map[string]any{"jsonrpc": "string", "id": "string", "result": map[string]any{
		"content":           []any{map[string]any{"type": "string", "text": "string"}},
		"structuredContent": map[string]any{"id": "string", "pid": "number", "running": "boolean", "exit_code": "number", "output_bytes": "number"},
	}}
	if diff := cmp.Diff(shape(call), any(wantCall)); diff != "" {
		t.Errorf("tools/call response shape (-got +want):\n%s", diff)
	}
	if txt := call["result"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"].(string); !strings.HasPrefix(txt, "raw\n[exit code 0; id p-") {
		t.Errorf("tools/call text %q", txt)
	}

	r.send(map[string]any{"id": 4, "method": "tools/call", "params": map[string]any{"name": "read_file", "arguments": map[string]any{"path": "nope.txt"}}})
	failed := r.next()
	wantErr := map[string]any{"jsonrpc": "string", "id": "number", "result": map[string]any{
		"content": []any{map[string]any{"type": "string", "text": "string"}}, "isError": "boolean"}}
	if diff := cmp.Diff(shape(failed), any(wantErr)); diff != "" {
		t.Errorf("failed tools/call shape (-got +want):\n%s", diff)
	}
	if fr := failed["result"].(map[string]any); fr["isError"] != true || !strings.HasSuffix(fr["content"].([]any)[0].(map[string]any)["text"].(string), "nope.txt does not exist") {
		t.Errorf("failed tools/call: %v", fr)
	}

	// A long call with a progress token streams its output, then is
	// cancelled: no response for it, and its command is killed.
	r.send(map[string]any{"id": 5, "method": "tools/call", "params": map[string]any{"name": "sh",
		"arguments": map[string]any{"command": "echo going; exec sleep 301", "wait_seconds": 600},
		"_meta":     map[string]any{"progressToken": "p5"}}})
	prog := r.next()
	wantProg := map[string]any{"jsonrpc": "string", "method": "string", "params": map[string]any{"progressToken": "string", "progress": "number", "message": "string"}}
	if diff := cmp.Diff(shape(prog), any(wantProg)); diff != "" {
		t.Errorf("progress notification shape (-got +want):\n%s", diff)
	}
	if p := prog["params"].(map[string]any); prog["method"] != "notifications/progress" || p["progressToken"] != "p5" || p["message"] != "going\n" {
		t.Errorf("progress notification: %v", prog)
	}
	proc := running(t, d, "exec sleep 301")
	r.send(map[string]any{"method": "notifications/cancelled", "params": map[string]any{"requestId": 5, "reason": "user pressed stop"}})
	wctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	w, err := agentdv1.NewProcessServiceClient(d.conn).Wait(wctx, &agentdv1.WaitRequest{Id: proc.GetId()})
	if err != nil {
		t.Fatal(err)
	}
	if w.GetProcess().GetExited().GetSignal() != "KILL" {
		t.Errorf("cancelled command ended %v, want KILL", w.GetProcess().GetExited())
	}
	if err := syscall.Kill(int(proc.GetPid()), 0); !errors.Is(err, syscall.ESRCH) {
		t.Errorf("pid %d after the cancel: %v, want ESRCH", proc.GetPid(), err)
	}
	// The session goes on. The spec says a receiver SHOULD NOT answer a
	// cancelled request and the sender ignores an answer; the go-sdk
	// (v1.8.0) answers anyway, so what may come for id 5 is an isError
	// result, never a success.
	r.send(map[string]any{"id": 6, "method": "ping"})
	for {
		m := r.next()
		if m["id"] == 6.0 {
			break
		}
		if res, _ := m["result"].(map[string]any); m["id"] != 5.0 || res["isError"] != true {
			t.Errorf("after the cancel: %v, want the ping's response (id 6), at most an isError for id 5", m)
		}
	}
}
