// Package orgca is an org's certificate authority for brokered secrets:
// the hub's egress proxy terminates a sandbox's TLS to a host with an
// inject rule with a leaf certificate this CA signs, so that it can set the
// credential header outside the sandbox. The sandbox trusts the CA's
// certificate; the key never leaves the hub (it is kept in the hub's store
// and in its memory).
//
// One CA per org, not one per hub: a sandbox of one org trusting a
// certificate minted for another org's interception is then impossible,
// and an org's CA can be replaced without touching others. ECDSA P-256
// keeps minting a leaf cheap (well under a millisecond); leaves are cached
// per host and minted again before they expire.
package orgca
