// Package console is agenthub's web console: server-rendered pages
// (html/template, assets embedded with go:embed, no build step, no
// JavaScript framework) on the hub's own port, under /console/.
//
// The console holds no authority of its own. Every read and every change
// is a call to the hub's gRPC service implementations, made in process
// through Backend with a context that carries the signed-in person as the
// caller: the services' role and org checks are the console's. A member
// sees; an admin changes.
//
// Sign-in takes an API token (or a one-time link `agenthub console-link`
// prints for the hub's owner) and starts a server-side session, stored as a
// hash (store.ConsoleSessions), so it survives a restart and works across
// hub replicas. The cookie is HttpOnly, SameSite=Strict and, under TLS (or
// behind a TLS proxy: an https PublicURL), Secure with the __Host- prefix.
// A session made with a token ends when the token is revoked.
//
// Defences: every POST passes net/http's CrossOriginProtection; each page
// is sent with a strict Content-Security-Policy (scripts and styles only
// from /console/static/, none inline); templates escape everything; no
// secret is ever put in a URL, and a new token's secret is shown once, in
// the response to the POST that made it.
//
// Live parts (activity, a pairing machine coming online, an environment's
// validation) are Server-Sent Events that the small console.js applies to
// the page; every page is complete without them.
package console
