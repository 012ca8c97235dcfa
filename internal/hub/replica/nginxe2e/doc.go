// Package nginxe2e tests agenthub's replicas the way they are deployed:
// three `agenthub serve` processes on one PostgreSQL database behind a real
// nginx, running the configuration docs/deploy.md shows
// (docs/nginx/agenthub.conf, with only addresses and certificate paths
// replaced), with a real `agentd run` paired through nginx and `agentctl`
// pointed at nginx.
//
// The package has only tests. They build the three binaries, start a
// private PostgreSQL cluster (pgtest), and skip, saying so, when nginx or
// the PostgreSQL server binaries are not installed.
package nginxe2e
