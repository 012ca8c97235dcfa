// Package replica lets several agenthub processes ("replicas") serve one
// control plane behind an ordinary load balancer, sharing one PostgreSQL
// database.
//
// What replicas must agree on lives in the database, never in a process:
// pairing codes and their lockout, the per-address pairing rate limit
// (store.RateLimits), and which replica holds which machine's tunnel. The
// tests here run two hub Servers in one test process on one Postgres
// database and check that a caller cannot tell, or exploit, which replica it
// reached.
package replica
