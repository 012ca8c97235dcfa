#!/usr/bin/env bash
# make demo: start agentd on a socket in a temp dir and run a short scripted
# agent session against it with agentctl, the way a chat would drive it.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/bin
tmp=$(mktemp -d)
sock=$tmp/agentd.sock
ws=$tmp/workspace
mkdir -p "$ws"
export AGENTD_STATE_DIR=$tmp/state

"$bin/agentd" serve --listen "unix://$sock" --workspace "$ws" --log-level warn &
daemon=$!
cleanup() { kill "$daemon" 2>/dev/null || true; wait "$daemon" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
for _ in $(seq 100); do [[ -S $sock ]] && break; sleep 0.05; done

ctl() { "$bin/agentctl" --addr "unix://$sock" "$@"; }
bold=$(tput bold 2>/dev/null || true); dim=$(tput dim 2>/dev/null || true); off=$(tput sgr0 2>/dev/null || true)
say() { printf '\n%s● agent:%s %s\n' "$bold" "$off" "$*"; }
run() { printf '%s$ agentctl %s%s\n' "$dim" "$*" "$off"; ctl "$@"; }

say "Where am I?"
run info

say "Create a small Python project."
printf 'def greet(name):\n    return "Hello, " + name\n\nprint(greet("world"))\n' | run write -p hello/app.py
run ls -R hello

say "Fix the greeting with an exact edit (prints the diff)."
run edit hello/app.py --old '"Hello, " + name' --new 'f"Hello, {name}!"'

say "Search the workspace."
run grep greet . || true

say "Run it; output streams line by line as the command writes it."
run sh --cwd hello 'python3 app.py 2>/dev/null || echo "(no python3 here)"; for i in 1 2 3; do echo "step $i"; sleep 0.3; done'

say "A command that hangs is killed with its whole process group at the timeout (exit 124)."
set +e
run sh --timeout 1s --grace 200ms 'sleep 60 & sleep 60'
echo "${dim}exit code: $?${off}"
set -e

say "Stderr stays separate, and the exit code comes back."
set +e
run exec -- sh -c 'echo out; echo err >&2; exit 3'
echo "${dim}exit code: $?${off}"
set -e

say "Start something in the background, then look at it."
id=$(ctl exec -d --tag demo -- sh -c 'echo started; sleep 0.5; echo done')
echo "$id"
run ps
run attach "$id"

printf '\n%sDemo finished.%s The daemon is stopped and its temp dir removed.\n' "$bold" "$off"
printf 'Try it yourself:\n  bin/agentd serve --listen unix:///tmp/agentd.sock --workspace . &\n  bin/agentctl --addr unix:///tmp/agentd.sock sh "ls"\n'
