// Package pgtest runs a private PostgreSQL server for tests: one cluster per
// test binary, made with initdb in a temporary directory and started with
// pg_ctl on a free loopback port (its unix socket in that directory too),
// and one database per test.
//
// A test binary starts it in TestMain:
//
//	func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
//
// and a test asks for a database with pgtest.Database(t), which skips the
// test when no PostgreSQL binaries were found.
package pgtest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// ErrNoBinaries: neither initdb nor pg_ctl were found.
var ErrNoBinaries = errors.New("no PostgreSQL server binaries (initdb, pg_ctl): install the postgresql package")

// binDirs are where initdb and pg_ctl are looked for, before PATH: where a
// source build installs them, then Debian's postgresql package (newest
// major version first).
func binDirs() []string {
	dirs := []string{"/usr/local/bin", "/usr/local/pgsql/bin"}
	deb, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(deb, func(i, j int) bool { return majorOf(deb[i]) > majorOf(deb[j]) })
	dirs = append(dirs, deb...)
	for _, d := range filepath.SplitList(os.Getenv("PATH")) {
		if d != "" {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

func majorOf(dir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
	return n
}

// FindBinaries returns the directory that holds both initdb and pg_ctl.
func FindBinaries() (string, error) {
	for _, d := range binDirs() {
		if isExec(filepath.Join(d, "initdb")) && isExec(filepath.Join(d, "pg_ctl")) {
			return d, nil
		}
	}
	return "", ErrNoBinaries
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// Cluster is a running PostgreSQL server of the test binary's own.
type Cluster struct {
	bin   string // directory of initdb and pg_ctl
	dir   string // temporary directory: data/, the socket, the log
	port  int
	admin *sql.DB
	n     atomic.Int64
}

// Start makes and starts a cluster in a new temporary directory. Stop
// removes it. As root it runs the server as nobody (initdb refuses root).
func Start() (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "pgtest")
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, dir: dir}
	if err := c.start(); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

func (c *Cluster) start() error {
	if err := prepareDir(c.dir); err != nil {
		return fmt.Errorf("pgtest: %w", err)
	}
	data := filepath.Join(c.dir, "data")
	if out, err := c.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "--no-sync").CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: initdb: %w\n%s", err, out)
	}
	var last error
	for range 3 { // the free port may be taken between the check and the start
		port, err := freePort()
		if err != nil {
			return fmt.Errorf("pgtest: %w", err)
		}
		opts := strings.Join([]string{
			"-c listen_addresses=127.0.0.1",
			"-p " + strconv.Itoa(port),
			"-k " + c.dir, // unix socket here, not in /var/run/postgresql
			"-c fsync=off -c synchronous_commit=off -c full_page_writes=off",
			"-c max_connections=300",
		}, " ")
		out, err := c.run("pg_ctl", "-D", data, "-l", filepath.Join(c.dir, "server.log"), "-o", opts, "-w", "-t", "60", "start").CombinedOutput()
		if err == nil {
			c.port = port
			last = nil
			break
		}
		log, _ := os.ReadFile(filepath.Join(c.dir, "server.log"))
		last = fmt.Errorf("pgtest: pg_ctl start: %w\n%s\n%s", err, out, log)
	}
	if last != nil {
		return last
	}
	cfg, err := pgx.ParseConfig(c.url("postgres"))
	if err != nil {
		return err
	}
	c.admin = stdlib.OpenDB(*cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.admin.PingContext(ctx); err != nil {
		return fmt.Errorf("pgtest: connect: %w", err)
	}
	return nil
}

// run makes a command for one of the cluster's binaries, run as the
// cluster's owner.
func (c *Cluster) run(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Env = append(os.Environ(), "LC_ALL=C", "PGTZ=UTC")
	cmd.Dir = c.dir
	asOwner(cmd)
	return cmd
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (c *Cluster) url(db string) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", c.port, db)
}

// NewDatabase creates an empty database and returns its URL.
func (c *Cluster) NewDatabase(ctx context.Context) (string, error) {
	name := fmt.Sprintf("test_%d", c.n.Add(1))
	if _, err := c.admin.ExecContext(ctx, `CREATE DATABASE `+name); err != nil {
		return "", fmt.Errorf("pgtest: create database: %w", err)
	}
	return c.url(name), nil
}

// DropDatabase drops a database NewDatabase made, closing its connections.
func (c *Cluster) DropDatabase(ctx context.Context, url string) error {
	i := strings.LastIndex(url, "/")
	name, _, _ := strings.Cut(url[i+1:], "?")
	_, err := c.admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+pgx.Identifier{name}.Sanitize()+` WITH (FORCE)`)
	return err
}

// Stop stops the server and removes its directory.
func (c *Cluster) Stop() {
	if c.admin != nil {
		c.admin.Close()
	}
	data := filepath.Join(c.dir, "data")
	if _, err := os.Stat(filepath.Join(data, "postmaster.pid")); err == nil {
		c.run("pg_ctl", "-D", data, "-m", "immediate", "-w", "stop").Run()
	}
	os.RemoveAll(c.dir)
}

// shared is the test binary's cluster (see Main); startErr why there is none.
var (
	shared   *Cluster
	startErr error
)

// Main starts the test binary's cluster, runs the tests and stops it. With
// no binaries the tests that need it skip; a cluster that fails to start
// fails them.
func Main(m *testing.M) int {
	shared, startErr = Start()
	if shared != nil {
		defer shared.Stop()
	}
	return m.Run()
}

// Database returns the URL of a new empty database on the test binary's
// cluster, dropped when the test ends. It skips the test when no PostgreSQL
// binaries exist, and fails it when the cluster did not start.
func Database(t testing.TB) string {
	t.Helper()
	switch {
	case errors.Is(startErr, ErrNoBinaries):
		t.Skipf("skipping: %v (looked in %s)", startErr, strings.Join(binDirs(), ", "))
	case startErr != nil:
		t.Fatal(startErr)
	case shared == nil:
		t.Fatal("pgtest: no cluster: call pgtest.Main from TestMain")
	}
	url, err := shared.NewDatabase(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := shared.DropDatabase(ctx, url); err != nil {
			t.Errorf("pgtest: drop database: %v", err)
		}
	})
	return url
}
