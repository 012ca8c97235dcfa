package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestDemo runs `agenthub demo --exit` in-process: the README's first
// command must keep working.
func TestDemo(t *testing.T) {
	var out, errb bytes.Buffer
	if err := runDemo(t.Context(), "127.0.0.1:0", true, &out, &errb); err != nil {
		t.Fatalf("demo: %v\n%s%s", err, out.String(), errb.String())
	}
	for _, want := range []string{"tunnel up", "Hello, world!", "3.875", "exit 124", "activity:"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("demo output lacks %q:\n%s", want, out.String())
		}
	}
}
