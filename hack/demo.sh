#!/usr/bin/env bash
# The two-minute tour: real kube-apiservers (a control plane and two members), the collector
# watching them, then live: member1's token rotated and the old one revoked, member2's Secret
# broken and fixed, with a table after each step. Everything runs on 127.0.0.1 and is stopped
# on exit, Ctrl-C included.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# kube-apiserver + etcd: built from source on first use (minutes), reused afterwards.
KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
export KUBEBUILDER_ASSETS

# A debug build: it shares the test build's artifacts, and the demo needs no speed.
cargo build --quiet -p e2e --example rotation_demo
exec target/debug/examples/rotation_demo
