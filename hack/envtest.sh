#!/usr/bin/env bash
# Build upstream kube-apiserver and etcd from source (the binaries envtest expects)
# with the local Go toolchain and the Go module proxy.
#
# Usage:
#   export KUBEBUILDER_ASSETS="$(hack/envtest.sh)"   # build if needed, print the assets dir
#   hack/envtest.sh --regen                          # regenerate hack/envtest/*/go.mod + go.sum
#                                                    # from hack/versions.env (needs the proxy)
#
# stdout carries only the absolute assets directory; all progress goes to stderr.
# Versions are pinned in hack/versions.env. Binaries are cached in
# <repo>/.envtest/<kubernetes-version>/ and only rebuilt when the pinned
# versions or the wrapper modules (hack/envtest/*/go.mod, go.sum) change.
set -euo pipefail

log() { printf 'envtest: %s\n' "$*" >&2; }
die() { printf 'envtest: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd "$script_dir/.." && pwd -P)"
wrappers="$script_dir/envtest"

# shellcheck source-path=SCRIPTDIR source=versions.env
source "$script_dir/versions.env"
: "${KUBERNETES_VERSION:?must be set in hack/versions.env}"
: "${ETCD_VERSION:?must be set in hack/versions.env}"
: "${GO_MIN_VERSION:?must be set in hack/versions.env}"

k8s_minor="$(cut -d. -f2 <<<"$KUBERNETES_VERSION")"
staging_version="v0.${KUBERNETES_VERSION#*.}"        # 1.36.5 -> v0.36.5
kube_module="k8s.io/kubernetes"
kube_pkg="k8s.io/kubernetes/cmd/kube-apiserver"
etcd_module="go.etcd.io/etcd/server/v3"
etcd_pkg="go.etcd.io/etcd/server/v3"                  # its root package is the etcd main

mode=build
case "${1:-}" in
  "") ;;
  --regen) mode=regen ;;
  -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

# ---------------------------------------------------------------------------
# 1. Caller already has assets.
if [[ $mode == build && -n "${KUBEBUILDER_ASSETS:-}" ]]; then
  if [[ -x "$KUBEBUILDER_ASSETS/kube-apiserver" && -x "$KUBEBUILDER_ASSETS/etcd" ]]; then
    (cd "$KUBEBUILDER_ASSETS" && pwd -P)
    exit 0
  fi
  log "KUBEBUILDER_ASSETS=$KUBEBUILDER_ASSETS lacks kube-apiserver and/or etcd; using the repo cache"
fi

assets_dir="$repo_root/.envtest/$KUBERNETES_VERSION"

# A stamp ties each cached binary to the exact inputs it was built from.
stamp_for() { # <name> <version> <wrapper dir>
  printf '%s %s %s\n' "$1" "$2" \
    "$(cat "$3/go.mod" "$3/go.sum" 2>/dev/null | sha256sum | cut -c1-16)"
}
up_to_date() { # <name> <expected stamp>
  [[ -x "$assets_dir/$1" && -f "$assets_dir/.$1.stamp" && "$(<"$assets_dir/.$1.stamp")" == "$2" ]]
}
kube_stamp="$(stamp_for kube-apiserver "$KUBERNETES_VERSION" "$wrappers/kube-apiserver")"
etcd_stamp="$(stamp_for etcd "$ETCD_VERSION" "$wrappers/etcd")"

# ---------------------------------------------------------------------------
# 2. Fast path: nothing to build (needs no Go at all).
if [[ $mode == build ]] && up_to_date kube-apiserver "$kube_stamp" && up_to_date etcd "$etcd_stamp"; then
  printf '%s\n' "$assets_dir"
  exit 0
fi

# ---------------------------------------------------------------------------
# Go toolchain: local only, never switch or download one.
export GOTOOLCHAIN=local
export GOWORK=off
export CGO_ENABLED=0
export GOFLAGS="-mod=readonly -buildvcs=false"   # committed go.sum is the source of truth

GO="${GO:-}"
if [[ -z $GO ]]; then
  if command -v go >/dev/null 2>&1; then GO="$(command -v go)"
  elif [[ -x /usr/local/go/bin/go ]]; then GO=/usr/local/go/bin/go
  else die "go not found: install Go >= $GO_MIN_VERSION (https://go.dev/dl) and put it on PATH, or set GO=/path/to/go"
  fi
fi
go_version="$("$GO" env GOVERSION 2>/dev/null)" || die "'$GO env GOVERSION' failed; is $GO a working Go >= $GO_MIN_VERSION?"
# go1.26.8 -> 1 26 (anything unparsable, e.g. a devel build, is let through with a warning)
if [[ $go_version =~ ^go([0-9]+)\.([0-9]+) ]]; then
  go_major="${BASH_REMATCH[1]}" go_minor="${BASH_REMATCH[2]}"
  min_major="${GO_MIN_VERSION%%.*}" min_minor="$(cut -d. -f2 <<<"$GO_MIN_VERSION")"
  if (( go_major < min_major || (go_major == min_major && go_minor < min_minor) )); then
    die "$GO is $go_version; Go >= $GO_MIN_VERSION is required (GOTOOLCHAIN=local: no toolchain is downloaded)"
  fi
  if (( go_major > 1 || go_minor >= 27 )); then
    # Go 1.27 turns on the json/v2 experiment by default, with which kube-apiserver
    # serves malformed OpenAPI. Turn it off if this toolchain still knows the flag.
    if GOEXPERIMENT=nojsonv2 "$GO" env GOEXPERIMENT >/dev/null 2>&1; then
      export GOEXPERIMENT="${GOEXPERIMENT:+$GOEXPERIMENT,}nojsonv2"
      log "$go_version: building with GOEXPERIMENT=$GOEXPERIMENT"
    else
      log "warning: $go_version may build a kube-apiserver with broken OpenAPI (json/v2); Go 1.26 is known good"
    fi
  fi
else
  log "warning: cannot parse Go version '$go_version'; continuing"
fi

# ---------------------------------------------------------------------------
# --regen: write the wrapper modules from the upstream go.mod files.
gomod_of() { # <module@version> -> path of its go.mod in the module cache
  local json tmpd
  tmpd="$(mktemp -d)"   # outside any module, so no go.mod is touched
  json="$(cd "$tmpd" && GOFLAGS="" "$GO" mod download -json "$1")" || { rmdir "$tmpd"; die "go mod download $1 failed"; }
  rmdir "$tmpd"
  sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",\{0,1\}$/\1/p' <<<"$json"
}

go_directives() { # <go.mod>: its go line and godebug lines/blocks (not toolchain)
  awk '/^go / || /^godebug [^(]/ { print; next }
       /^godebug \(/ { b = 1 } b { print } b && /^\)/ { b = 0 }' "$1"
}

regen() {
  local d gomod m

  # kube-apiserver: k8s.io/kubernetes replaces its staging modules with ./staging/...,
  # which only works inside its own repo. Replace each with the published v0.X.Y.
  d="$wrappers/kube-apiserver"
  gomod="$(gomod_of "$kube_module@v$KUBERNETES_VERSION")"
  [[ -f $gomod ]] || die "no go.mod for $kube_module@v$KUBERNETES_VERSION"
  log "regenerating $d from $kube_module@v$KUBERNETES_VERSION"
  {
    echo "// Code generated by hack/envtest.sh --regen from $kube_module@v$KUBERNETES_VERSION; DO NOT EDIT."
    echo "// Builds $kube_pkg with its staging modules replaced by the published $staging_version."
    echo
    echo "module tether/hack/envtest/kube-apiserver"
    echo
    go_directives "$gomod"                   # same language version and GODEBUG defaults as upstream
    echo
    echo "tool $kube_pkg"
    echo
    echo "require $kube_module v$KUBERNETES_VERSION"
    echo
    echo "replace ("
    awk '/=>[[:space:]]*\.\/staging\// { print ($1 == "replace" ? $2 : $1) }' "$gomod" | sort -u |
      while read -r m; do printf '\t%s => %s %s\n' "$m" "$m" "$staging_version"; done
    echo ")"
  } >"$d/go.mod.tmp"
  grep -q '=> k8s.io/api ' "$d/go.mod.tmp" || die "found no ./staging replace lines in $gomod"
  mv "$d/go.mod.tmp" "$d/go.mod"
  rm -f "$d/go.sum"
  (cd "$d" && GOFLAGS=-mod=mod "$GO" mod tidy) || die "go mod tidy failed in $d"

  # etcd: go.etcd.io/etcd/server/v3 replaces its sibling modules with ../, so a plain
  # `go install ...@version` refuses it. A wrapper module uses the published siblings.
  d="$wrappers/etcd"
  gomod="$(gomod_of "$etcd_module@v$ETCD_VERSION")"
  [[ -f $gomod ]] || die "no go.mod for $etcd_module@v$ETCD_VERSION"
  log "regenerating $d from $etcd_module@v$ETCD_VERSION"
  {
    echo "// Code generated by hack/envtest.sh --regen from $etcd_module@v$ETCD_VERSION; DO NOT EDIT."
    echo "// Builds the etcd binary ($etcd_pkg)."
    echo
    echo "module tether/hack/envtest/etcd"
    echo
    go_directives "$gomod"
    echo
    echo "tool $etcd_pkg"
    echo
    echo "require $etcd_module v$ETCD_VERSION"
  } >"$d/go.mod.tmp"
  mv "$d/go.mod.tmp" "$d/go.mod"
  rm -f "$d/go.sum"
  (cd "$d" && GOFLAGS=-mod=mod "$GO" mod tidy) || die "go mod tidy failed in $d"

  check_wrappers
  log "done; commit hack/envtest/*/go.mod and go.sum"
}

# The selected versions must be the pinned ones (MVS could otherwise drift).
check_wrappers() {
  local bad
  bad="$(cd "$wrappers/kube-apiserver" && "$GO" list -m -f '{{.Path}} {{.Version}} {{with .Replace}}{{.Version}}{{end}}' all |
    awk -v k="v$KUBERNETES_VERSION" -v s="$staging_version" '
      $1 == "k8s.io/kubernetes" && $2 != k { print }
      $1 != "k8s.io/kubernetes" && $2 == "v0.0.0" && $3 != s { print }')" ||
    die "go list failed in $wrappers/kube-apiserver (stale go.mod? run hack/envtest.sh --regen)"
  [[ -z $bad ]] || die "kube-apiserver wrapper selects unexpected versions:"$'\n'"$bad"$'\n'"run hack/envtest.sh --regen"
  bad="$(cd "$wrappers/etcd" && "$GO" list -m -f '{{.Path}} {{.Version}}' all |
    awk -v e="v$ETCD_VERSION" '$1 ~ /^go\.etcd\.io\/etcd\// && $2 != e { print }')" ||
    die "go list failed in $wrappers/etcd (stale go.mod? run hack/envtest.sh --regen)"
  [[ -z $bad ]] || die "etcd wrapper selects unexpected versions:"$'\n'"$bad"$'\n'"run hack/envtest.sh --regen"
}

if [[ $mode == regen ]]; then
  regen
  exit 0
fi

# ---------------------------------------------------------------------------
# Build.
mkdir -p "$assets_dir"

# Serialise concurrent runs (e.g. several test binaries calling this at once).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$repo_root/.envtest/.lock"
  flock 9
fi

check_wrappers   # the wrapper go.mod files must select the versions pinned in versions.env

tmp_files=()
build_pid=
cleanup() {
  if [[ -n $build_pid ]]; then kill -TERM "$build_pid" 2>/dev/null && wait "$build_pid" 2>/dev/null; fi
  ((${#tmp_files[@]})) && rm -f "${tmp_files[@]}"
  return 0
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

build() { # <name> <wrapper dir> <package> <ldflags> <expected --version regex> <stamp>
  local name=$1 dir=$2 pkg=$3 ldflags=$4 want=$5 stamp=$6 tmp got start
  if up_to_date "$name" "$stamp"; then   # another run may have built it while we waited
    log "$name is up to date"
    return
  fi
  tmp="$assets_dir/.$name.tmp.$$"
  tmp_files+=("$tmp" "$tmp.stamp")
  start=$SECONDS
  log "building $name ($pkg) with $go_version; this can take several minutes on a cold cache"
  # In the background so that a TERM/INT to this script also stops the build (see cleanup).
  (cd "$dir" && exec "$GO" build -trimpath -ldflags "$ldflags" -o "$tmp" "$pkg") >&2 &
  build_pid=$!
  wait "$build_pid" || { build_pid=; die "building $name failed"; }
  build_pid=
  got="$("$tmp" --version 2>&1)" || die "$name --version failed: $got"
  grep -qxE "$want" <<<"$got" || die "$name --version printed '$got', expected a line /$want/"
  log "built $name in $((SECONDS - start))s: $(head -n1 <<<"$got")"
  printf '%s\n' "$stamp" >"$tmp.stamp"
  rm -f "$assets_dir/.$name.stamp"            # binary and stamp are never seen out of step
  mv -f "$tmp" "$assets_dir/$name"
  mv -f "$tmp.stamp" "$assets_dir/.$name.stamp"
}

build_date="$(cd "$wrappers/kube-apiserver" && "$GO" list -m -f '{{.Time.UTC.Format "2006-01-02T15:04:05Z"}}' "$kube_module")"
kube_ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags+=" -X $p.gitVersion=v$KUBERNETES_VERSION -X $p.gitMajor=1 -X $p.gitMinor=$k8s_minor"
  kube_ldflags+=" -X $p.gitTreeState=clean -X $p.buildDate=$build_date"
done
build kube-apiserver "$wrappers/kube-apiserver" "$kube_pkg" "$kube_ldflags" \
  "Kubernetes v${KUBERNETES_VERSION//./\\.}" "$kube_stamp"

build etcd "$wrappers/etcd" "$etcd_pkg" \
  "-s -w -X go.etcd.io/etcd/api/v3/version.GitSHA=module-v$ETCD_VERSION" \
  "etcd Version: ${ETCD_VERSION//./\\.}" "$etcd_stamp"

printf '%s\n' "$assets_dir"
