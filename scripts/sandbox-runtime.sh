#!/usr/bin/env bash
# make sandbox-runtime: installs Debian's gVisor (runsc) and registers it with
# the local Docker engine, which agentd's gvisor isolation runs sandboxes on.
#
# Idempotent: run it again and it changes nothing. It says what it changed.
# It never restarts the engine and never touches another setting of
# /etc/docker/daemon.json: the file is parsed and rewritten with python3
# (only entries of "runtimes" added or corrected; a backup beside it), and
# dockerd reloads its runtimes on SIGHUP.
#
# Two runtimes, the same runsc with different network arguments:
#   runsc      --network=none: gVisor's own, empty network stack. For
#              environments with network "none" (their agent runs reach their
#              allow list through the hub's egress proxy over the socket):
#              nothing of the host's network stack is reachable at all.
#   runsc-net  --network=host: the sandbox's sockets are the host kernel's,
#              in the container's own network namespace (the engine's bridge,
#              its nftables egress rules, the hub's DNS closing all hold). For
#              environments with network "public". Needed because Debian's
#              runsc (release 2022-12-19) refuses to run its own network
#              stack in a namespace the engine made ("cannot run with network
#              enabled in root network namespace").
# And for both:
#   --platform=ptrace  KVM hangs under nested virtualisation (most cloud VMs);
#                      ptrace runs everywhere. RUNSC_PLATFORM=kvm (or systrap,
#                      on a newer runsc) picks another where the host allows it.
#   --host-uds=open    agentd dials the hub's unix socket, a host file
#                      mounted into the sandbox; gVisor refuses that without it.
set -euo pipefail

DAEMON_JSON=${DAEMON_JSON:-/etc/docker/daemon.json}
RUNTIMES=(runsc runsc-net)
PLATFORM=${RUNSC_PLATFORM:-ptrace}
say() { echo "sandbox-runtime: $*"; }

[[ $(id -u) == 0 ]] || { echo "sandbox-runtime: run as root (it installs a package and edits $DAEMON_JSON)" >&2; exit 1; }

start=$(date +%s.%N)

# 1. The package.
if ! command -v runsc >/dev/null; then
  say "installing Debian's runsc"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq runsc >/dev/null
  say "installed $(dpkg-query -W -f '${Package} ${Version}' runsc)"
else
  say "runsc is installed ($(dpkg-query -W -f '${Version}' runsc 2>/dev/null || echo "not Debian's")): unchanged"
fi
RUNSC=$(command -v runsc)

# 2. The engine's configuration: add or correct runtimes.runsc and
# runtimes.runsc-net, nothing else.
mkdir -p "$(dirname "$DAEMON_JSON")"
changed=$(python3 - "$DAEMON_JSON" "$RUNSC" "$PLATFORM" <<'PY'
import json, os, shutil, sys, time
path, runsc, platform = sys.argv[1:4]
common = [f"--platform={platform}", "--host-uds=open"]
want = {
    "runsc": {"path": runsc, "runtimeArgs": common + ["--network=none"]},
    "runsc-net": {"path": runsc, "runtimeArgs": common + ["--network=host"]},
}
try:
    with open(path) as f:
        text = f.read()
except FileNotFoundError:
    text = ""
conf = json.loads(text) if text.strip() else {}
if not isinstance(conf, dict):
    sys.exit(f"{path}: not a JSON object")
runtimes = conf.setdefault("runtimes", {})
said = []
for name, w in want.items():
    was = runtimes.get(name)
    if was == w:
        continue
    runtimes[name] = w
    said.append(f"runtime {name} " + ("added" if was is None else f"changed (was {json.dumps(was)})") + f": {json.dumps(w)}")
if not said:
    sys.exit(0)
if text:
    backup = f"{path}.bak-{time.strftime('%Y%m%dT%H%M%S')}"
    shutil.copy2(path, backup)
    said.append(f"backup {backup}")
tmp = path + ".tmp"
with open(tmp, "w") as f:
    json.dump(conf, f, indent=2)
    f.write("\n")
os.replace(tmp, path)
print("; ".join(said))
PY
)

if [[ -n $changed ]]; then
  say "$DAEMON_JSON: $changed"
  pid=$(cat /var/run/docker.pid 2>/dev/null || pidof dockerd || true)
  [[ -n $pid ]] || { echo "sandbox-runtime: dockerd is not running: start it and run this again (the file is written)" >&2; exit 1; }
  say "reloading the engine's configuration (SIGHUP to dockerd $pid; no restart)"
  kill -HUP "$pid"
else
  say "$DAEMON_JSON: runtimes ${RUNTIMES[*]} already registered: unchanged"
fi

# 3. The engine lists them (a reload takes a moment).
listed() {
  docker info --format '{{json .Runtimes}}' |
    python3 -c 'import json,sys; r=json.load(sys.stdin); sys.exit(0 if all(n in r for n in sys.argv[1:]) else 1)' "${RUNTIMES[@]}"
}
for _ in $(seq 1 50); do
  if listed; then
    for n in "${RUNTIMES[@]}"; do
      say "the engine lists runtime $n: $(docker info --format "{{json (index .Runtimes \"$n\")}}")"
    done
    say "done in $(python3 -c "print(f'{$(date +%s.%N) - $start:.1f}')") s"
    exit 0
  fi
  sleep 0.2
done
echo "sandbox-runtime: the engine does not list runtimes ${RUNTIMES[*]} after the reload; see its log (journalctl -u docker)" >&2
exit 1
