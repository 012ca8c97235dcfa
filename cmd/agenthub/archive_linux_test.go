package main

import (
	"errors"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"go.uber.org/zap/zaptest"

	"github.com/devdepot-ai/agentd/internal/hub/store"
)

// The archive flags: the defaults (file:// beside a SQLite --db, 7d, 50 GB),
// none by default on Postgres (archiving off), a file:// URL on Postgres
// only with --archive-shared, and usage errors for bad values.
func TestArchiveFlags(t *testing.T) {
	t.Parallel()
	parse := func(t *testing.T, args ...string) *sandboxFlags {
		var f sandboxFlags
		fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
		f.register(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return &f
	}
	log := zaptest.NewLogger(t)
	dir := t.TempDir()
	db := filepath.Join(dir, "hub.db")
	const pg = "postgres://agenthub@127.0.0.1:1/agenthub"

	a, closeA, err := parse(t).archive(t.Context(), db, log)
	if err != nil || a.store == nil || a.after != 7*24*time.Hour || a.orgMax != 50<<30 {
		t.Fatalf("defaults: %+v %v", a, err)
	}
	closeA()
	if fi, err := os.Stat(filepath.Join(dir, "archive")); err != nil || !fi.IsDir() {
		t.Errorf("the default store's directory beside the db: %v", err)
	}
	a, _, err = parse(t, "--sandbox-archive-after", "2d", "--org-max-archive", "200GiB").archive(t.Context(), db, log)
	if err != nil || a.after != 48*time.Hour || a.orgMax != 200<<30 {
		t.Errorf("--sandbox-archive-after 2d --org-max-archive 200GiB: %+v %v", a, err)
	}
	a, _, err = parse(t).archive(t.Context(), pg, log)
	if err != nil || a.store != nil || a.after != store.Never {
		t.Errorf("postgres without --archive-url: %+v %v; want archiving off", a, err)
	}
	fileURL := (&url.URL{Scheme: "file", Path: filepath.Join(dir, "shared")}).String()
	a, closeA, err = parse(t, "--archive-url", fileURL, "--archive-shared").archive(t.Context(), pg, log)
	if err != nil || a.store == nil {
		t.Errorf("postgres with a shared file:// store: %+v %v", a, err)
	} else {
		closeA()
	}
	for _, tc := range []struct {
		args []string
		db   string
		want string
	}{
		{[]string{"--archive-url", fileURL}, pg, "--archive-shared"},
		{[]string{"--sandbox-archive-after", "5s"}, db, "--sandbox-archive-after 5s: want at least 10s"},
		{[]string{"--org-max-archive", "lots"}, db, "--org-max-archive lots"},
		{[]string{"--archive-url", "ftp://x/y"}, db, "--archive-url"},
	} {
		_, _, err := parse(t, tc.args...).archive(t.Context(), tc.db, log)
		var usage usageError
		if !errors.As(err, &usage) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want a usage error with %q", tc.args, err, tc.want)
		}
	}
}

// AGENTD_TEST_ARCHIVE_CRASH makes agenthub kill itself (SIGKILL, as kill
// -9) at the archive step it names, and only there; unset, no hook.
func TestCrashHook(t *testing.T) {
	if os.Getenv(crashEnv) != "" {
		h := crashHook()
		h("another-step")
		h(os.Getenv(crashEnv))
		t.Fatal("not killed")
	}
	if crashHook() != nil {
		t.Fatalf("a hook with %s unset", crashEnv)
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestCrashHook$", "-test.count=1")
	cmd.Env = append(os.Environ(), crashEnv+"="+"uploaded")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("agenthub with %s=uploaded at that step: %v, want killed by SIGKILL:\n%s", crashEnv, err, out)
	}
	if !strings.Contains(string(out), "killing myself") {
		t.Errorf("it did not say why it died:\n%s", out)
	}
}

// A relative --db (agenthub serve --db hub.db) still gets its default
// archive store beside it: a file URL needs an absolute directory, and the
// demo's sandbox half failed on exactly that.
func TestArchiveBesideRelativeDB(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	var f sandboxFlags
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	f.register(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	a, closeA, err := f.archive(t.Context(), "hub.db", zaptest.NewLogger(t))
	if err != nil || a.store == nil {
		t.Fatalf("--db hub.db: %+v %v; want the default store beside it", a, err)
	}
	closeA()
	if fi, err := os.Stat(filepath.Join(dir, "archive")); err != nil || !fi.IsDir() {
		t.Errorf("the default store's directory beside a relative db: %v", err)
	}
}
