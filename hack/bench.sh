#!/usr/bin/env bash
# The scale bench (crates/scale-bench): 1,000 logical members in one collector on real
# kube-apiservers, a mass rotation, models of other systems on a subset of the same members,
# and the BearerLayer's per-request cost, printed as one table on stdout (progress on stderr).
# About 10 minutes on 2 cores after the build; peak memory about 2 GiB (4 kube-apiservers).
# Extra arguments go to the bench, e.g. `hack/bench.sh --members 200`; see `--help`.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# kube-apiserver + etcd: reuse KUBEBUILDER_ASSETS if it has both, else build or reuse .envtest/.
KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
export KUBEBUILDER_ASSETS

# The collector runs as a child process, so that its RSS and CPU are its own: release builds.
cargo build --release --quiet -p collector -p scale-bench
target_dir="${CARGO_TARGET_DIR:-target}"
export TETHER_COLLECTOR_BIN="$target_dir/release/collector"
# Each member holds a few connections; the apiservers hold the other ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
exec "$target_dir/release/scale-bench" "$@"
