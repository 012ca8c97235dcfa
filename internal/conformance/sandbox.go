package conformance

import (
	"context"
	"fmt"
	"strings"
)

// The container checks: the shape every sandbox container must have, as
// agentd's sandbox mode assumes it. They probe with POSIX sh and its
// builtins (plus chmod), and remove whatever they create.

// sandboxUID is the uid the sandbox user has in every sandbox image.
const sandboxUID = 1000

// sandboxWorkspace is where a sandbox's workspace volume is mounted.
const sandboxWorkspace = "/workspace"

func checkSandboxUID(ctx context.Context, s *suite) error {
	if uid := s.info.GetUid(); uid != sandboxUID {
		return fail("the agent's commands run with more privilege than the sandbox allows, and files they write have the wrong owner",
			"run the container as uid 1000 (USER 1000 in the Dockerfile)", fmt.Sprintf("agentd runs as uid %d (%s)", uid, s.info.GetUser()))
	}
	return nil
}

// rootProbe tries to create a file at the root, removing it if that
// worked; when it did not, it reads the root's mount options, since a
// non-root user is refused a writable root too.
const rootProbe = `f=/.agentd-rw-probe
if (: > "$f") 2>/dev/null; then rm -f "$f"; echo writable; exit 0; fi
o=
if [ -r /proc/mounts ]; then
  while read dev mnt typ opts rest; do [ "$mnt" = / ] && o=$opts; done < /proc/mounts
fi
case ",$o," in *,rw,*) echo rw-mount;; *) echo read-only;; esac`

func checkReadOnlyRoot(ctx context.Context, s *suite) error {
	const (
		breaks = "the agent (or anything it runs) can change the sandbox image itself"
		fix    = "start the container with a read-only root (docker run --read-only)"
	)
	r, err := s.sh(ctx, rootProbe)
	if err != nil {
		return fail("cannot check the root file system", "", err)
	}
	switch strings.TrimSpace(r.stdout) {
	case "read-only":
		return nil
	case "writable":
		return fail(breaks, fix, "creating /.agentd-rw-probe succeeded: / is writable")
	case "rw-mount":
		return fail(breaks, fix, "/ is mounted read-write (writing there failed only for lack of permission)")
	}
	return fail("cannot check the root file system", "", fmt.Sprintf("the probe wrote %q, stderr %q", r.stdout, r.stderr))
}

func checkWorkspacePath(ctx context.Context, s *suite) error {
	if ws := s.info.GetWorkspace(); ws != sandboxWorkspace {
		return fail("the agent's files are not where the hub mounts the sandbox's volume, so they are not kept",
			"leave agentd's workspace at /workspace (start it without --workspace)", "the workspace is "+ws)
	}
	return nil
}

func checkWritableWorkspace(ctx context.Context, s *suite) error {
	ws := s.info.GetWorkspace()
	return s.writable(ctx, ws, "mount a writable volume at "+ws+" owned by uid 1000")
}

func checkWritableHome(ctx context.Context, s *suite) error {
	home := s.info.GetHome()
	if home == "" {
		return fail("tools that keep settings or caches in $HOME fail", "give the sandbox user a home directory", "Info reports no home directory")
	}
	return s.writable(ctx, home, "make "+home+" writable by uid 1000 (a directory it owns, or a tmpfs)")
}

// writable checks that commands can create, read back and remove a file
// in dir.
func (s *suite) writable(ctx context.Context, dir, fix string) error {
	r, err := s.sh(ctx, fmt.Sprintf(`f=%s/.agentd-validate-$$
trap 'rm -f "$f"' EXIT
echo ok > "$f" || exit 1
read l < "$f" && echo "$l"`, shellQuote(dir)))
	if err != nil {
		return fail("cannot check "+dir, "", err)
	}
	if strings.TrimSpace(r.stdout) != "ok" {
		return fail("the agent cannot write to "+dir, fix, detail(r))
	}
	return nil
}

func checkWritableTmp(ctx context.Context, s *suite) error {
	r, err := s.sh(ctx, `f=/tmp/.agentd-validate-$$.sh
trap 'rm -f "$f"' EXIT
printf '#!/bin/sh\necho exec-ok\n' > "$f" || { echo write-failed; exit 0; }
chmod +x "$f" || { echo chmod-failed; exit 0; }
"$f" || echo exec-failed`)
	if err != nil {
		return fail("cannot check /tmp", "", err)
	}
	switch strings.TrimSpace(r.stdout) {
	case "exec-ok":
		return nil
	case "exec-failed", "chmod-failed":
		return fail("programs the agent builds or downloads into /tmp cannot run", "mount /tmp without noexec (docker run --tmpfs /tmp:exec)", detail(r))
	}
	return fail("the agent and the tools it runs cannot write temporary files", "mount a tmpfs at /tmp (docker run --tmpfs /tmp:exec)", detail(r))
}

// detail says what a failed probe wrote.
func detail(r proc) string {
	if e := strings.TrimSpace(r.stderr); e != "" {
		return e
	}
	return fmt.Sprintf("the probe wrote %q", strings.TrimSpace(r.stdout))
}
