// Package preview is the hub's preview server: it serves the ports that
// agentctl port expose made public, private or org-wide, at
// <token>.DOMAIN on the hub's own port (agenthub serve --preview-domain:
// one origin per exposure; HostToken tells the hub which requests are
// the preview server's) or at /p/<token>/… on a listener of its own
// (agenthub serve --preview-listen), never on the console's or the API's
// origin, since a preview runs whatever JavaScript the target's server
// sends.
//
// Each request is checked against its exposure (live, and the access it
// allows), stripped of the hub's own credentials (the console's cookies,
// an Authorization it understands), and passed by a reverse proxy to
// 127.0.0.1:PORT on the exposure's machine or sandbox. The upstream
// connection is a PortService.Connect call through the machine's tunnel:
// agentd dials from inside, so nothing in a request (header, path or
// token) can name another host or port. HTTP/1.1 keep-alive, chunked and
// streamed bodies and WebSocket upgrades pass through; every client
// connection is recorded (client address, bytes each way, duration).
package preview
