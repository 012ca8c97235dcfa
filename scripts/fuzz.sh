#!/usr/bin/env bash
# Runs every Go fuzz target of the module for FUZZTIME each.
#
# go test -fuzz can end a clean run with "context deadline exceeded" when the
# fuzz time runs out while a worker is busy (a toolchain race, not a finding:
# no failing input is written). Such a run is tried again, up to 3 times; a real
# finding ("Failing input written to …") fails at once.
set -euo pipefail
fuzztime=${FUZZTIME:-30s}
status=0
for pkg in $(go list ./...); do
  dir=$(go list -f '{{.Dir}}' "$pkg")
  for t in $(grep -ho '^func Fuzz[A-Za-z0-9_]*' "$dir"/*_test.go 2>/dev/null | sed 's/^func //'); do
    for try in 1 2 3; do
      echo "fuzz $pkg $t ($fuzztime, try $try)"
      log=$(mktemp)
      if go test -run '^$' -fuzz "^$t\$" -fuzztime "$fuzztime" "$pkg" 2>&1 | tee "$log"; then
        rm -f "$log"
        break
      fi
      if [[ $try -lt 3 ]] && grep -q 'context deadline exceeded' "$log" && ! grep -q 'Failing input written' "$log"; then
        rm -f "$log"
        continue
      fi
      rm -f "$log"
      status=1
      break
    done
  done
done
exit $status
