#!/usr/bin/env bash
# The feature combinations the docs promise (docs/src/embedding/features.md), each checked and
# linted on its own: a library built with only some of its features must still compile cleanly.
# Like kube, the libraries enable no Kubernetes version of k8s-openapi; one is picked here.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
export K8S_OPENAPI_ENABLED_VERSION=1.36

# check <package> <cargo feature arguments...>
check() {
  local package=$1
  shift
  echo "features: $package $*" >&2
  cargo clippy --locked --quiet -p "$package" --lib "$@" -- -D warnings
}

# member-client: the TLS stack is one of three; exec plugins and client certificates are optional.
check member-client
check member-client --no-default-features --features rustls-ring
check member-client --no-default-features --features rustls-aws-lc-rs,exec,client-cert
check member-client --no-default-features --features openssl-tls
check member-client --no-default-features --features openssl-tls,exec

# tether-cluster-registry: one feature per source of member definitions, and one for minting;
# none, each alone, and the default (all of them, what the collector needs). It forwards
# member-client's features, so each build names a TLS stack; openssl without the optional parts.
check tether-cluster-registry
check tether-cluster-registry --no-default-features --features openssl-tls
for feature in karmada argocd kubeconfig-secrets clusterprofile directory minting; do
  check tether-cluster-registry --no-default-features --features "rustls-ring,$feature"
done
