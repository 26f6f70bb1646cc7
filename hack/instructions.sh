#!/usr/bin/env bash
# Instructions per GET of Tether's member client (CredentialLayer) and of kube's static-token
# client, counted by callgrind over the per-request A/B's loopback server, one GET at a time.
# A count does not move with the machine's load as wall time does; it leaves out the kernel.
#   hack/instructions.sh [gets]    (default 2000; RUNS=5 runs of the layered client; needs valgrind)
set -euo pipefail
cd "$(dirname "$0")/.."
gets=${1:-2000}
command -v valgrind >/dev/null || { echo "instructions: valgrind is needed" >&2; exit 1; }
cargo build --release --quiet -p scale-bench --example request_instructions
bin=target/release/examples/request_instructions
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Instructions of a whole run of $2 GETs by client $1.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$out/$1.$2" "$bin" "$1" "$2" 2>&1 |
    awk '/Collected/ { print $NF }'
}

# The static client reads the same on every run; the layered one moves by up to ~2 % with where
# the allocator finds room for a request's state, so it is counted $runs times and the median kept.
runs=${RUNS:-5}
per_get() {
  short=$(count "$1" "$gets")
  long=$(count "$1" $((2 * gets)))
  echo $(((long - short) / gets))
}
static=$(per_get static)
mapfile -t layered < <(for _ in $(seq "$runs"); do per_get layered; done | sort -n)
median=${layered[$(((runs - 1) / 2))]}
awk -v s="$static" -v m="$median" -v lo="${layered[0]}" -v hi="${layered[$((runs - 1))]}" -v n="$runs" 'BEGIN {
  printf "static   %7d instructions per GET\n", s
  printf "layered  %7d instructions per GET (median of %d: %d to %d)\n", m, n, lo, hi
  printf "layered/static %.3f× (%.3f× to %.3f×)\n", m / s, lo / s, hi / s
}'
