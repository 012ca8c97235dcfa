// agenthub console: the terminal page. xterm.js draws; a WebSocket to the
// hub carries the PTY's output (binary: 8-byte offset, then the bytes),
// keystrokes (binary) and control messages (JSON text: resize, end from
// the page; started, gap, exit, error from the hub). The shell outlives
// the page: the process id goes into the address (?p=ID), and a reload or
// a dropped connection attaches again from the last offset the page has.
"use strict";
(function () {
  function start(el) {
    var status = document.getElementById("term-status");
    var endButton = document.getElementById("term-end");
    var term = new window.Terminal({ screenReaderMode: true, cursorBlink: true, scrollback: 5000 });
    term.open(el);
    term.fit();
    var proc = el.getAttribute("data-process") || "";
    var offset = 0;       // the next PTY byte the page wants
    var finished = false; // exited or ended: no reconnecting
    var ws = null, decoder = null, delay = 1000, everStarted = false;

    function say(text) { status.textContent = text; }

    function wsURL() {
      var u = new URL(el.getAttribute("data-ws"), window.location.href);
      u.protocol = u.protocol === "https:" ? "wss:" : "ws:";
      if (proc) { u.searchParams.set("p", proc); u.searchParams.set("from", String(offset)); }
      u.searchParams.set("rows", String(term.rows));
      u.searchParams.set("cols", String(term.cols));
      return u.toString();
    }

    function send(data) {
      if (!ws || ws.readyState !== WebSocket.OPEN) { return; }
      if (typeof data === "string") { ws.send(data); return; }
      // A paste can be large: the hub takes messages of up to 64 KiB.
      for (var i = 0; i < data.length; i += 16384) { ws.send(data.subarray(i, i + 16384)); }
    }

    function onControl(m) {
      if (m.t === "started") {
        proc = m.id;
        everStarted = true;
        delay = 1000;
        var u = new URL(window.location.href);
        u.searchParams.set("p", proc);
        window.history.replaceState(null, "", u.toString());
        el.setAttribute("data-process", proc);
        say("Connected to process " + proc + ".");
      } else if (m.t === "gap") {
        term.write("\r\n[… " + m.bytes + " bytes not kept …]\r\n");
        offset = Math.max(offset, m.offset + m.bytes);
      } else if (m.t === "exit") {
        finished = true;
        endButton.disabled = true;
        say("The shell " + m.text + ". Open a new terminal to start another.");
      } else if (m.t === "error") {
        say("Error: " + m.text);
        if (!everStarted || m.final) { finished = true; }
      }
    }

    function onOutput(buf) {
      var view = new DataView(buf);
      var at = view.getUint32(0) * 4294967296 + view.getUint32(4);
      var data = new Uint8Array(buf, 8);
      if (at + data.length <= offset) { return; } // seen already
      if (at < offset) { data = data.subarray(offset - at); at = offset; }
      offset = at + data.length;
      term.write(decoder.decode(data, { stream: true }));
    }

    function connect() {
      decoder = new TextDecoder("utf-8");
      ws = new WebSocket(wsURL());
      ws.binaryType = "arraybuffer";
      ws.onmessage = function (e) {
        if (typeof e.data === "string") { onControl(JSON.parse(e.data)); } else { onOutput(e.data); }
      };
      ws.onclose = function () {
        ws = null;
        if (finished) { return; }
        say("Connection lost; reconnecting in " + Math.round(delay / 1000) + " s (the shell keeps running)…");
        window.setTimeout(connect, delay);
        delay = Math.min(delay * 1.6, 10000);
      };
    }

    var enc = new TextEncoder();
    term.on("data", function (d) { send(enc.encode(d)); });
    term.on("resize", function (size) { send(JSON.stringify({ t: "resize", rows: size.rows, cols: size.cols })); });
    // Tab completes in the shell; Shift+Tab leaves the terminal, so
    // keyboard users are never trapped in it.
    term.attachCustomKeyEventHandler(function (e) {
      if (e.type === "keydown" && e.key === "Tab" && e.shiftKey) {
        endButton.focus();
        e.preventDefault();
        return false;
      }
      return true;
    });
    window.addEventListener("resize", function () { term.fit(); });
    endButton.addEventListener("click", function () {
      if (!proc) { return; }
      send(JSON.stringify({ t: "end" }));
      say("Ending the session…");
    });
    connect();
  }
  document.addEventListener("DOMContentLoaded", function () {
    var el = document.getElementById("terminal");
    if (el && window.Terminal) { start(el); }
  });
})();
