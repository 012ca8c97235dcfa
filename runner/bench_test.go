//go:build unix

package runner

import (
	"io"
	"testing"

	"go.uber.org/zap"
)

func BenchmarkStartTrue(b *testing.B) {
	m := newTestManager(b, Options{Logger: zap.NewNop()})
	for b.Loop() {
		p, err := m.Start(b.Context(), Spec{Argv: []string{"true"}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := p.Wait(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkStdoutThroughput(b *testing.B) {
	m := newTestManager(b, Options{Logger: zap.NewNop()})
	const n = 256 << 20
	b.SetBytes(n)
	for b.Loop() {
		_, sub, err := m.StartAttached(b.Context(), Spec{Argv: []string{"head", "-c", "256M", "/dev/zero"}})
		if err != nil {
			b.Fatal(err)
		}
		var got int64
		for {
			ev, err := sub.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			if o, ok := ev.(Output); ok {
				got += int64(len(o.Data))
			}
		}
		sub.Close()
		if got != n {
			b.Fatalf("got %d bytes, want %d", got, n)
		}
	}
}
