// Command wsecho is the app the preview browser tests run on a machine or
// in a sandbox: "/" is a page whose script opens a WebSocket back to its
// own origin ("ws" beside the page), sends two messages (a short random
// one and one of 300 KB), checks that each came back echoed and writes
// the outcome into #out ("result: echoed 2 messages, …"); "/ws" echoes each
// message prefixed with "echo: ". A static binary (CGO off), so that it
// runs in any sandbox image.
//
// Usage: wsecho -listen 127.0.0.1:PORT
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"

	"github.com/coder/websocket"
)

const page = `<!doctype html><html><head><meta charset="utf-8"><title>wsecho</title></head><body>
<p id="out">connecting</p>
<script>
const out = document.getElementById("out");
const u = new URL("ws", location.href);
u.protocol = location.protocol === "https:" ? "wss:" : "ws:";
const msgs = ["ping-" + Math.random().toString(36).slice(2), "x".repeat(300000)];
const got = [];
let done = false;
const ws = new WebSocket(u);
ws.onopen = () => msgs.forEach(m => ws.send(m));
ws.onmessage = e => {
  got.push(e.data);
  if (got.length < msgs.length) return;
  done = true;
  const ok = got.every((g, i) => g === "echo: " + msgs[i]);
  out.textContent = "result: " + (ok ? "echoed " : "wrong ") + got.length + " messages, the last " + got[1].length + " bytes, over " + u.protocol;
  ws.close();
};
ws.onerror = () => { if (!done) out.textContent = "result: error"; };
ws.onclose = e => { if (!done) out.textContent = "result: closed " + e.code + " " + e.reason; };
</script></body></html>
`

func main() {
	listen := flag.String("listen", "127.0.0.1:8001", "address to serve on")
	flag.Parse()
	mux := http.NewServeMux()
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, page)
	})
	mux.HandleFunc("/ws", func(w http.ResponseWriter, r *http.Request) {
		// The library's default: the Origin's host must be the Host the
		// request names (as gorilla/websocket's CheckOrigin does).
		c, err := websocket.Accept(w, r, nil)
		if err != nil {
			log.Printf("accept: %v (Origin %q, Host %q)", err, r.Header.Get("Origin"), r.Host)
			return
		}
		defer c.CloseNow()
		c.SetReadLimit(1 << 20)
		ctx := context.Background()
		for {
			typ, b, err := c.Read(ctx)
			if err != nil {
				return
			}
			if err := c.Write(ctx, typ, append([]byte("echo: "), b...)); err != nil {
				return
			}
		}
	})
	fmt.Fprintf(os.Stderr, "wsecho on %s\n", *listen)
	log.Fatal(http.ListenAndServe(*listen, mux))
}
