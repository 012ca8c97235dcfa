// Package egressproxy is the only way out of a sandbox with an allow list:
// an HTTP proxy inside the sandbox (Forwarder, run by the sandbox's agentd)
// whose every connection is carried over the hub's unix socket to the hub
// (Proxy), which checks the destination against that sandbox's allow list,
// resolves it, refuses private addresses, dials it and splices the bytes.
//
// Why a proxy, and a sandbox with Docker's network "none", rather than
// firewall rules per host: an allow list names hosts, while a packet filter
// sees addresses. Rules per host would need the names resolved by the hub
// and refreshed as DNS changes (CDNs rotate addresses within minutes, and
// one address serves many names, so allowing api.example.com's address
// allows whatever else that CDN serves), the sandbox would need DNS (a
// channel out of its own), and a rule that is missing or stale fails open.
// With network "none" the container has only its loopback: nothing leaves
// it except through the unix socket the hub mounts, so a process that
// ignores the proxy variables reaches nothing, and the decision is made on
// the name the client asked for, by the hub, per connection, and recorded.
// The hub resolves the name itself and dials the address it checked (no
// rebinding between check and dial).
//
// A sandbox that cannot mount the socket (a Pod on Kubernetes with the
// init container's agentd) sends the same CONNECTs over TLS to the hub's
// sandbox listener, which serves them as the socket does: the Forwarder's
// Dial is agentd's tunnel transport (transport.Tunnel.DialHub), trusting
// the hub's tunnel CA alone, and the Pod's NetworkPolicy lets it reach that
// listener and nothing else.
//
// The protocol on the hub's socket is HTTP CONNECT host:port with three
// headers: the sandbox id, the time, and an Ed25519 signature over
// "agentd-egress-v1|ID|HOST:PORT|UNIX-SECONDS" made with the sandbox's own
// key (the one its tunnel proves itself with). The hub accepts a time within
// a minute of its own; a replay inside that minute reopens the same
// destination for the same sandbox, which its allow list allows anyway.
//
// The Forwarder speaks the HTTP proxy protocol to the sandbox's processes:
// CONNECT for https (and anything else tunnelled), and absolute-form
// requests (GET http://host/path) for plain http, which it sends on as
// origin-form over a CONNECT to host:80, one request per connection. A
// refusal is the hub's 403 with a body naming the allow list, passed on to
// the client as is.
//
// One exception to "the hub only splices bytes": a host with an inject rule
// (a brokered credential, intercept.go). There the hub ends the sandbox's
// TLS with a leaf of the org's CA (package orgca), sets the rule's header on
// each HTTP/1.1 request and sends it over its own verified TLS connection
// to the real host, so that the credential never enters the sandbox. Every
// other host stays a plain tunnel. PrivateAllow (allowprivate.go) is what
// an admin lets sandboxes reach although it is private.
package egressproxy
