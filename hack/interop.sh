#!/usr/bin/env bash
# Build the Go programs that are not Tether, each its own Go module: the interop programs under
# e2e/interop/*/ (real client-go consumers that Tether's e2e tests run against what Tether and
# its fixtures publish) and the scale bench's anchors under crates/scale-bench/anchors/*/
# (client-go member clients as other systems wire them, and Karmada v1.18.2's own member config
# builder in karmada-anchor, measured beside Tether). Each module has its own go.mod and go.sum.
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

log_prefix=interop
# shellcheck source-path=SCRIPTDIR source=lib/go.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go.sh"
program_dirs=("$repo_root/e2e/interop" "$repo_root/crates/scale-bench/anchors")
bin_dir="$repo_root/.interop/bin"

case "${1:-}" in
  -h|--help) sed -n '2,16p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
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

# Fast path: nothing to build (needs no Go at all).
stale=()
for name in "${names[@]}"; do
  go_up_to_date "$bin_dir" "$name" "$(stamp_for "$(module_of "$name")")" || stale+=("$name")
done
if ((${#stale[@]} == 0)); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

go_toolchain
go_build_begin "$bin_dir" "$repo_root/.interop/.lock"
for name in "${stale[@]}"; do
  dir="$(module_of "$name")"
  log "building $name with $go_version"
  go_build_install "$bin_dir" "$name" "$(stamp_for "$dir")" "$dir" -ldflags "-s -w" .
done

printf '%s\n' "$bin_dir"
