#!/usr/bin/env bash
# Build the Go programs that are not Tether, each its own Go module: the interop programs under
# e2e/interop/*/ (real client-go consumers that Tether's e2e tests run against what Tether and
# its fixtures publish) and the scale bench's anchors under crates/scale-bench/anchors/*/
# (client-go member clients as other systems wire them, measured beside Tether).
#
# Usage:
#   bin="$(hack/interop.sh)"          # build all that are missing or stale, print the bin dir
#   bin="$(hack/interop.sh NAME)"     # only the program NAME; the binary is "$bin/NAME"
#
# stdout carries only the absolute bin directory, <repo>/.interop/bin; progress goes to stderr.
# Each binary has a stamp, the sha256 of its module's go.mod, go.sum and *.go files, and is
# rebuilt only when those change. The build uses the machine's Go (>= GO_MIN_VERSION from
# hack/versions.env, GOTOOLCHAIN=local: no toolchain is downloaded) and the committed go.sum
# (-mod=readonly); a cold module cache fetches the modules from the Go module proxy.
set -euo pipefail

log() { printf 'interop: %s\n' "$*" >&2; }
die() { printf 'interop: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd "$script_dir/.." && pwd -P)"
program_dirs=("$repo_root/e2e/interop" "$repo_root/crates/scale-bench/anchors")
bin_dir="$repo_root/.interop/bin"

# shellcheck source-path=SCRIPTDIR source=versions.env
source "$script_dir/versions.env"
: "${GO_MIN_VERSION:?must be set in hack/versions.env}"

case "${1:-}" in
  -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
esac
(($# <= 1)) || die "at most one program name (try --help)"

# The module directory of program <name>, if there is one.
module_of() {
  local dir
  for dir in "${program_dirs[@]}"; do
    [[ -f $dir/$1/go.mod ]] && { printf '%s\n' "$dir/$1"; return 0; }
  done
  return 1
}

names=()
if [[ -n ${1:-} ]]; then
  [[ $1 =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "not a program name: $1"
  module_of "$1" >/dev/null || die "no program $1 (no go.mod in e2e/interop/$1 or crates/scale-bench/anchors/$1)"
  names=("$1")
else
  for dir in "${program_dirs[@]}"; do
    for mod in "$dir"/*/go.mod; do
      [[ -f $mod ]] && names+=("$(basename "$(dirname "$mod")")")
    done
  done
  ((${#names[@]})) || die "no programs under e2e/interop/ or crates/scale-bench/anchors/"
fi

# The inputs of a build, in a fixed order: go.mod, go.sum, then every *.go file by path.
stamp_for() { # <module dir>
  (cd "$1" && { printf '%s\n' go.mod go.sum; find . -name '*.go' -type f | LC_ALL=C sort; } |
    while read -r f; do printf '%s\n' "$f"; cat "$f" 2>/dev/null; done | sha256sum | cut -d' ' -f1)
}
up_to_date() { # <name> <stamp>
  [[ -x "$bin_dir/$1" && -f "$bin_dir/.$1.stamp" && "$(<"$bin_dir/.$1.stamp")" == "$2" ]]
}

# Fast path: nothing to build (needs no Go at all).
stale=()
for name in "${names[@]}"; do
  up_to_date "$name" "$(stamp_for "$(module_of "$name")")" || stale+=("$name")
done
if ((${#stale[@]} == 0)); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

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
if [[ $go_version =~ ^go([0-9]+)\.([0-9]+) ]]; then
  go_major="${BASH_REMATCH[1]}" go_minor="${BASH_REMATCH[2]}"
  min_major="${GO_MIN_VERSION%%.*}" min_minor="$(cut -d. -f2 <<<"$GO_MIN_VERSION")"
  if (( go_major < min_major || (go_major == min_major && go_minor < min_minor) )); then
    die "$GO is $go_version; Go >= $GO_MIN_VERSION is required (GOTOOLCHAIN=local: no toolchain is downloaded)"
  fi
else
  log "warning: cannot parse Go version '$go_version'; continuing"
fi

mkdir -p "$bin_dir"

# Serialise concurrent runs (several test binaries may call this at once).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$repo_root/.interop/.lock"
  flock 9
fi

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

for name in "${stale[@]}"; do
  dir="$(module_of "$name")"
  stamp="$(stamp_for "$dir")"
  if up_to_date "$name" "$stamp"; then   # another run may have built it while we waited
    log "$name is up to date"
    continue
  fi
  tmp="$bin_dir/.$name.tmp.$$"
  tmp_files+=("$tmp" "$tmp.stamp")
  start=$SECONDS
  log "building $name with $go_version"
  # In the background so that a TERM/INT to this script also stops the build (see cleanup).
  (cd "$dir" && exec "$GO" build -trimpath -ldflags "-s -w" -o "$tmp" .) >&2 &
  build_pid=$!
  wait "$build_pid" || { build_pid=; die "building $name failed"; }
  build_pid=
  # The sources may have changed during the build: stamp what was read before it.
  printf '%s\n' "$stamp" >"$tmp.stamp"
  rm -f "$bin_dir/.$name.stamp"            # binary and stamp are never seen out of step
  mv -f "$tmp" "$bin_dir/$name"
  mv -f "$tmp.stamp" "$bin_dir/.$name.stamp"
  log "built $name in $((SECONDS - start))s"
done

printf '%s\n' "$bin_dir"
