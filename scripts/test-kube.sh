#!/usr/bin/env bash
# test-kube.sh: the Kubernetes driver's tests (drivertest on the cluster, the
# RBAC of docs/deploy.md) and the hub's sandbox e2e tests on the Kubernetes
# driver, against the cluster make k8s-up runs (AGENTD_KUBECONFIG, else
# KUBECONFIG, else this checkout's). Race detector on. Not part of make
# test: it needs the cluster (docs/kubernetes.md).
#   KUBE_E2E_RUN   the hub tests to run (a go test -run pattern)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache=${K8S_CACHE:-$root/.cache/k8s}
state=${K8S_STATE:-$cache/state}
cfg=${AGENTD_KUBECONFIG:-${KUBECONFIG:-$state/admin.kubeconfig}}
kubectl=$(command -v kubectl || echo "$cache/bin/kubectl")
if [ ! -f "$cfg" ] || ! "$kubectl" --kubeconfig "$cfg" get --raw /readyz >/dev/null 2>&1; then
	echo "test-kube: no cluster answers with kubeconfig $cfg." >&2
	echo "Start one with 'make k8s-up' (root; docs/kubernetes.md), then paste:" >&2
	echo "  export KUBECONFIG=$state/admin.kubeconfig PATH=$cache/bin:\$PATH AGENTD_KUBECONFIG=$state/admin.kubeconfig" >&2
	exit 1
fi
export AGENTD_KUBECONFIG=$cfg AGENTD_SANDBOX_DRIVER=kubernetes PATH=$cache/bin:$PATH
# The hub tests that run a hub's sandboxes on its driver (startSandboxHub);
# the fake-driver and Docker-only ones are left out.
run=${KUBE_E2E_RUN:-'^(TestSandbox|TestKubeSandbox|TestEnvRemoveArchivedSandboxes|TestAgentRunImagePathRefused)'}
skip='^(TestSandboxPathFake|TestSandboxPathDocker|TestSandboxQuotaSkipsArchived|TestSandboxCallDuringArchive|TestSandboxQuotaCountsRunningAndPaused|TestSandboxSocketServedByAnotherHub)$'
cd "$root"
go=${GO:-go}
t0=$(date +%s)
$go test -race -count=1 -timeout 30m ./internal/sandbox/kube/
t1=$(date +%s)
log=${KUBE_E2E_LOG:-$(mktemp -t test-kube.XXXXXX)}
set +e
$go test -race -count=1 -timeout 90m -v -run "$run" -skip "$skip" ./internal/hub/ >"$log" 2>&1
rc=$?
set -e
# Each test's result, and a skip's reason (the line after it).
awk '/^ *--- (PASS|FAIL|SKIP)/ {print; if ($2 == "SKIP:") {getline; print}} /^(ok|FAIL|panic)/' "$log"
echo "test-kube: the hub tests' whole output: $log"
echo "test-kube: kube package $((t1 - t0)) s, hub e2e $(($(date +%s) - t1)) s"
exit "$rc"
