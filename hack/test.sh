#!/usr/bin/env bash
# The project's test command (CI runs exactly this): formatting, lints, and every test,
# including the e2e suites against real kube-apiservers built by hack/envtest.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# Each step's wall time on stderr, so that a slow run says where its time went.
step_started=$(date +%s)
took() {
  local now
  now=$(date +%s)
  echo "test: $1 took $((now - step_started)) s" >&2
  step_started=$now
}

# kube-apiserver + etcd: reuse KUBEBUILDER_ASSETS if it has both, else build or reuse .envtest/.
KUBEBUILDER_ASSETS="$(hack/envtest.sh)"
export KUBEBUILDER_ASSETS
echo "test: using kube-apiserver and etcd from $KUBEBUILDER_ASSETS" >&2

# The Go interop programs (e2e/interop/*/) the e2e tests run: build or reuse .interop/bin.
interop_bin="$(hack/interop.sh)"
echo "test: using the interop programs in $interop_bin" >&2

# The pinned Go tools the tests run (hack/tools/*/: helm, kustomize, promtool,
# karmada-controller-manager): build or reuse .tools/bin here, so that no test spends its time
# budget building one.
tools_bin="$(hack/tools.sh)"
echo "test: using helm, kustomize, promtool and karmada-controller-manager from $tools_bin" >&2
took "the Go programs (kube-apiserver, etcd, interop programs, tools)"

cargo fmt --all -- --check
cargo clippy --workspace --all-targets -- -D warnings
took "fmt and clippy"

# The book (docs/): built with the pinned mdbook (built on first use), no warnings, no broken
# internal link, and its Rust snippets compiled against the libraries of the binaries built
# below (it builds them first).
hack/docs.sh
took "the book"

# Doctests must compile; an `ignore`d one would rot unseen.
if grep -rn --include='*.rs' '```ignore' crates e2e tests 2>/dev/null; then
  echo "test: ignored doctests are not allowed (use no_run)" >&2
  exit 1
fi

# The scale smoke test runs the collector binary as a child process; the ClusterProfile interop
# test hands tether-credential to a client-go program.
cargo build -p collector --bin collector -p tether-credential --bin tether-credential
# The embedding examples' suite (e2e/tests/embedding_examples.rs) runs the example programs as
# child processes; `cargo test` builds examples only as test harnesses, not as programs.
cargo build --workspace --examples

# Every test target, built once, then run a few at a time (hack/lib/test_lanes.py): most of the
# e2e suites' time is spent waiting on apiservers, rotations and restarts, not on the CPU.
# TEST_LANES sets how many run at once.
test_messages="$(mktemp)"
cargo test --workspace --all-targets --no-run --message-format=json-render-diagnostics >"$test_messages"
took "the binaries, examples and test targets"

PYTHONDONTWRITEBYTECODE=1 python3 hack/lib/test_lanes_test.py 2>&1 | tail -n 1 >&2 ||
  { echo "test: the test runner's own test failed: python3 hack/lib/test_lanes_test.py -v" >&2; exit 1; }
python3 hack/lib/test_lanes.py --lanes "${TEST_LANES:-3}" --deadline 1200 <"$test_messages"
took "the tests and benches"
cargo test --workspace --doc
took "the doctests"

# The two libraries package as crates.io would take them, each then built from its package
# alone. Like kube, they enable no Kubernetes version of k8s-openapi: an embedder picks one.
# cargo verifies each package against the other's fresh tarball through a local registry, but
# unpacks a crate version under ~/.cargo/registry/src only once: a copy left by an earlier run of
# the same version would be built instead of this tree's.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/-*/{member-client,tether-cluster-registry}-[0-9]*
K8S_OPENAPI_ENABLED_VERSION=1.36 cargo package --locked -p member-client -p tether-cluster-registry
took "packaging"

# Every feature combination the docs promise (docs/src/embedding/features.md) builds, lint-clean.
hack/features.sh
took "the feature matrix"

# Their public APIs are their snapshots (crates/*/public-api.txt): a change to one is a diff.
hack/public-api.sh
took "the public API check"
