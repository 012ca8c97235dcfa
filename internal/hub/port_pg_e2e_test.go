package hub_test

import (
	"archive/tar"
	"bytes"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/devdepot-ai/agentd/internal/ctl"
	"github.com/devdepot-ai/agentd/internal/hub/store/pgtest"
)

// A real PostgreSQL server runs inside a builtin sandbox (network none,
// uid 1000, read-only root): this host's Debian server, copied into the
// workspace with agentctl write (binaries, the share dir in the same
// relative layout, and the shared libraries the image lacks), made with
// initdb and started with agentctl exec --detach on 127.0.0.1:5432. A pgx
// client on this side reaches it through agentctl port forward → hub →
// sandbox: it creates a table, inserts, reads back, SHOW data_directory
// names the sandbox's path and the table's file is there.
func TestPortForwardPostgresSandbox(t *testing.T) {
	found, err := pgtest.FindBinaries()
	if err != nil {
		t.Skipf("no PostgreSQL: %v", err)
	}
	initdb, err := filepath.EvalSymlinks(filepath.Join(found, "initdb")) // /usr/local/bin links there
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Dir(initdb)
	verDir := filepath.Dir(bin) // /usr/lib/postgresql/N
	share := filepath.Join("/usr/share/postgresql", filepath.Base(verDir))
	if filepath.Base(bin) != "bin" || filepath.Dir(verDir) != "/usr/lib/postgresql" {
		t.Skipf("PostgreSQL in %s is not Debian's layout (/usr/lib/postgresql/N/bin): its share dir cannot be found relative to it", bin)
	}
	if _, err := os.Stat(filepath.Join(share, "postgres.bki")); err != nil {
		t.Skipf("no PostgreSQL share dir beside %s: %v", bin, err)
	}
	h := startSandboxHub(t, nil)
	cli := h.agentctl()
	target := []string{"--env", "builtin", "--conversation", "pgfwd"}
	run := func(args ...string) string {
		t.Helper()
		code, out, errs := cli(append(target, args...)...)
		if code != 0 {
			t.Fatalf("agentctl %s: exit %d: %s%s", strings.Join(args, " "), code, out, errs)
		}
		return out
	}

	// The libraries postgres and initdb link that the image lacks (it is
	// Debian bookworm too, so glibc and the rest match).
	progs := []string{filepath.Join(bin, "postgres"), filepath.Join(bin, "initdb")}
	libs := sharedLibs(t, progs...)
	var names []string
	for name := range libs {
		names = append(names, name)
	}
	missing := strings.Fields(run("sh", `for f in `+strings.Join(names, " ")+`; do `+
		`[ -e /lib/x86_64-linux-gnu/$f ] || [ -e /usr/lib/x86_64-linux-gnu/$f ] || [ -e /usr/lib/$f ] || echo $f; done`))
	t.Logf("libraries the image lacks: %v", missing)

	// One tar: usr/lib/postgresql/N/{bin,lib}, usr/share/postgresql/N (as on
	// the host, so postgres finds share/ and lib/ relative to bin/), and
	// syslib/ for the missing libraries.
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	add := func(src, name string) {
		t.Helper()
		b, err := os.ReadFile(src) // follows symlinks: libraries by soname
		if err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := tw.WriteHeader(&tar.Header{Name: name, Mode: int64(fi.Mode().Perm()), Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range progs {
		add(p, strings.TrimPrefix(p, "/"))
	}
	sos, _ := filepath.Glob(filepath.Join(verDir, "lib", "*.so"))
	for _, so := range sos { // dict_snowball and plpgsql are loaded by initdb
		add(so, strings.TrimPrefix(so, "/"))
	}
	err = filepath.WalkDir(share, func(p string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && d.Name() == "man":
			return filepath.SkipDir
		case d.Type().IsRegular():
			add(p, strings.TrimPrefix(p, "/"))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range missing {
		add(libs[name], "syslib/"+name)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	t.Logf("copying %d MiB of PostgreSQL into the sandbox", tb.Len()>>20)

	tf := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tf, []byte(h.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	hubArgs := append([]string{"--hub", h.URL, "--token-file", tf}, target...)
	var out, errb bytes.Buffer
	if code := ctl.Main(t.Context(), append(hubArgs, "write", "/workspace/pg.tar"), ctl.IO{In: &tb, Out: &out, Err: &errb}); code != 0 {
		t.Fatalf("agentctl write pg.tar: exit %d: %s%s", code, out.String(), errb.String())
	}
	pgBin := "/workspace/pg" + bin
	env := "LD_LIBRARY_PATH=/workspace/pg/syslib LC_ALL=C"
	run("sh", "mkdir -p /workspace/pg && tar -xf /workspace/pg.tar -C /workspace/pg && rm /workspace/pg.tar")
	run("sh", env+" "+pgBin+"/initdb -D /workspace/pgdata -U postgres -A trust -E UTF8 --locale=C --no-sync")
	run("exec", "--detach", "--", "sh", "-c", "exec env "+env+" "+pgBin+"/postgres -D /workspace/pgdata "+
		"-c listen_addresses=127.0.0.1 -p 5432 -k /tmp -c fsync=off 2>/workspace/pg.log")

	if p := waitListening(t, run, 60*time.Second, 5432)[5432]; p.Address != "127.0.0.1" || !strings.Contains(p.Command, "postgres") {
		t.Errorf("5432: %+v; want 127.0.0.1, postgres", p)
	}

	addrs, stop := forward(t, append(hubArgs, "port", "forward", "0:5432")...)
	pg, err := pgx.Connect(t.Context(), "postgres://postgres@"+addrs[0]+"/postgres?sslmode=disable")
	if err != nil {
		_, log, _ := cli(append(target, "sh", "cat /workspace/pg.log")...)
		t.Fatalf("postgres in the sandbox through %s: %v\nits log:\n%s", addrs[0], err, log)
	}
	ctx := t.Context()
	var dataDir string
	if err := pg.QueryRow(ctx, "SHOW data_directory").Scan(&dataDir); err != nil || dataDir != "/workspace/pgdata" {
		t.Errorf("SHOW data_directory: %q, %v; want /workspace/pgdata (the sandbox's server)", dataDir, err)
	}
	if _, err := pg.Exec(ctx, "CREATE TABLE notes (id int PRIMARY KEY, body text)"); err != nil {
		t.Fatal(err)
	}
	if _, err := pg.Exec(ctx, "INSERT INTO notes SELECT x, 'note ' || x FROM generate_series(1, 1000) AS x"); err != nil {
		t.Fatal(err)
	}
	var n, sum int
	var body string
	if err := pg.QueryRow(ctx, "SELECT count(*)::int, sum(id)::int, (SELECT body FROM notes WHERE id = 42) FROM notes").Scan(&n, &sum, &body); err != nil ||
		n != 1000 || sum != 500500 || body != "note 42" {
		t.Errorf("SELECT through the forward: %d rows, sum %d, %q, %v; want 1000, 500500, \"note 42\"", n, sum, body, err)
	}
	var rel string
	if err := pg.QueryRow(ctx, "SELECT pg_relation_filepath('notes')").Scan(&rel); err != nil {
		t.Fatal(err)
	}
	_ = pg.Close(ctx)
	// The table's file is in the sandbox's workspace, where its server
	// keeps its data.
	if code, out, errs := cli(append(target, "stat", "/workspace/pgdata/"+rel)...); code != 0 {
		t.Errorf("the table's file %s is not in the sandbox: exit %d %s%s", rel, code, out, errs)
	}

	if code, stderr := stop(); code != 0 || stderr != "" {
		t.Errorf("after interrupt: exit %d, stderr %q", code, stderr)
	}
}

// sharedLibs returns the libraries ldd names for progs, by soname, with
// the host path each resolves to.
func sharedLibs(t *testing.T, progs ...string) map[string]string {
	t.Helper()
	libs := map[string]string{}
	for _, p := range progs {
		out, err := exec.Command("ldd", p).Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) || errors.Is(err, exec.ErrNotFound) {
			t.Skipf("ldd %s: %v", p, err)
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(out), "\n") {
			f := strings.Fields(line) // libx.so.1 => /lib/.../libx.so.1 (0x...)
			if len(f) >= 3 && f[1] == "=>" && strings.HasPrefix(f[2], "/") {
				libs[f[0]] = f[2]
			}
		}
	}
	return libs
}
