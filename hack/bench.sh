#!/usr/bin/env bash
# The scale bench (crates/scale-bench): 1,000 logical members in one collector on real
# kube-apiservers, a mass rotation, other systems' member clients beside Tether's on a subset of
# the same members (client-go as Karmada and Argo CD wire it, from crates/scale-bench/anchors/,
# and kube-rs; each a process of its own), the CredentialLayer's per-request cost at 1, 16 and
# 64 requests in flight, and the collector's connections per member over HTTP/2 against a second
# collector on the same fleet with --member-http2=false (`--http1-collector false` skips that
# one), and collector starts with streaming lists and with paged lists, taking turns, with the
# member apiservers' CPU over each (`--initial-list-rounds 0` skips them), printed as one table
# on stdout (progress on stderr).
# About 4 minutes on 2 cores after the build; peak memory about 2 GiB for the 4 kube-apiservers,
# plus 20-50 MiB for each anchor process.
# Extra arguments go to the bench, e.g. `hack/bench.sh --members 200`; see `--help`.
# `hack/bench.sh --sharded [--members N --replicas R]`: the sharded mode (shard-bench) instead.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# kube-apiserver + etcd: reuse KUBEBUILDER_ASSETS if it has both, else build or reuse .envtest/.
KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
export KUBEBUILDER_ASSETS

# The Go anchors, built with this machine's Go and cached in .interop/bin like the e2e interop
# programs (the bench finds them through the same script).
hack/interop.sh client-go-anchor >/dev/null
hack/interop.sh karmada-anchor >/dev/null

# The collector and the Rust anchors run as child processes, so that their RSS and CPU are
# their own: release builds.
cargo build --release --quiet -p collector -p scale-bench
target_dir="${CARGO_TARGET_DIR:-target}"
export TETHER_COLLECTOR_BIN="$target_dir/release/collector"
# Each member holds a few connections; the apiservers hold the other ends.
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
# `--sharded`: several collector replicas with --shards auto instead (see shard-bench --help).
if [[ "${1:-}" == "--sharded" ]]; then
  shift
  exec "$target_dir/release/shard-bench" "$@"
fi
exec "$target_dir/release/scale-bench" "$@"
