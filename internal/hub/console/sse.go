package console

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// keepalive is how often an idle event stream sends a comment, so proxies
// keep it open and a gone client is noticed.
const keepalive = 15 * time.Second

// stream serves Server-Sent Events: fn sends events until it returns or
// the client goes (the request's context ends). Events console.js knows:
// "replace" (the target's content), "prepend" (a row at the top), "done"
// (close the stream). An error ends the stream with an "error" event.
func (c *Console) stream(w http.ResponseWriter, r *http.Request, fn func(send func(event, data string) error) error) {
	rc := http.NewResponseController(w)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	if err := rc.Flush(); err != nil {
		return
	}
	var (
		mu   = make(chan struct{}, 1) // one writer at a time: fn and the keepalive
		done = make(chan struct{})
	)
	write := func(s string) error {
		mu <- struct{}{}
		defer func() { <-mu }()
		_ = rc.SetWriteDeadline(time.Now().Add(keepalive))
		if _, err := fmt.Fprint(w, s); err != nil {
			return err
		}
		return rc.Flush()
	}
	// The deadline each write sets outlives the stream on a kept-alive
	// connection unless cleared.
	defer func() { _ = rc.SetWriteDeadline(time.Time{}) }()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(done)
	wg.Go(func() {
		t := time.NewTicker(keepalive)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-r.Context().Done():
				return
			case <-t.C:
				if write(": keepalive\n\n") != nil {
					return
				}
			}
		}
	})
	send := func(event, data string) error {
		var b strings.Builder
		fmt.Fprintf(&b, "event: %s\n", event)
		for line := range strings.SplitSeq(data, "\n") {
			fmt.Fprintf(&b, "data: %s\n", strings.TrimSuffix(line, "\r"))
		}
		b.WriteString("\n")
		return write(b.String())
	}
	err := fn(send)
	if err != nil && r.Context().Err() == nil && !errors.Is(err, http.ErrAbortHandler) {
		_, msg := httpStatus(err)
		c.log.Debug("console event stream", zap.String("path", r.URL.Path), zap.Error(err))
		_ = send("failed", msg)
	}
}
