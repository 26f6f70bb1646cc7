#!/usr/bin/env bash
# Instructions per GET of Tether's member client (CredentialLayer) and of kube's static-token
# client, counted by callgrind over the per-request A/B's loopback server, one GET at a time.
# A count does not move with the machine's load as wall time does; it leaves out the kernel.
#   hack/instructions.sh [gets]    (default 2000; needs valgrind)
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

for client in static layered; do
  short=$(count "$client" "$gets")
  long=$(count "$client" $((2 * gets)))
  echo "$client $(((long - short) / gets))"
done | awk '
  { per[$1] = $2; printf "%-8s %7d instructions per GET\n", $1, $2 }
  END { printf "layered/static %.3f×\n", per["layered"] / per["static"] }'
