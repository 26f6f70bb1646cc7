#!/usr/bin/env bash
# Build the pinned Go tools the tests run (helm, kustomize, promtool), each from its wrapper
# module hack/tools/<name>/ (go.mod with one `tool` line, go.sum; see hack/tools/README.md).
#
# Usage:
#   bin="$(hack/tools.sh)"              # build every tool that is missing or stale, print the bin dir
#   bin="$(hack/tools.sh NAME...)"      # only these; the binary is "$bin/NAME"
#
# stdout carries only the absolute bin directory, <repo>/.tools/bin; progress goes to stderr.
# Each binary has a stamp, the sha256 of its wrapper's go.mod, go.sum and optional ldflags and
# tags files, and is rebuilt only when those change. The build uses the machine's Go (>= GO_MIN_VERSION from
# hack/versions.env, GOTOOLCHAIN=local: no toolchain is downloaded) and the committed go.sum
# (-mod=readonly); a cold module cache fetches the modules from the Go module proxy.
set -euo pipefail

log_prefix=tools
# shellcheck source-path=SCRIPTDIR source=lib/go.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go.sh"
wrappers="$script_dir/tools"
bin_dir="$repo_root/.tools/bin"

case "${1:-}" in
  -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
esac

names=()
if (($#)); then
  for name in "$@"; do
    [[ $name =~ ^[A-Za-z0-9][A-Za-z0-9._-]*$ ]] || die "not a tool name: $name"
    [[ -f $wrappers/$name/go.mod ]] || die "no tool hack/tools/$name (no go.mod there)"
    names+=("$name")
  done
else
  for mod in "$wrappers"/*/go.mod; do
    [[ -f $mod ]] && names+=("$(basename "$(dirname "$mod")")")
  done
  ((${#names[@]})) || die "no tools under hack/tools/"
fi

# The inputs of a build, in a fixed order; a missing file counts as empty.
stamp_for() { # <wrapper dir>
  local f
  for f in go.mod go.sum ldflags tags; do
    printf '%s\n' "$f"
    cat "$1/$f" 2>/dev/null || true
  done | sha256sum | cut -d' ' -f1
}

# Fast path: nothing to build (needs no Go at all).
stale=()
for name in "${names[@]}"; do
  go_up_to_date "$bin_dir" "$name" "$(stamp_for "$wrappers/$name")" || stale+=("$name")
done
if ((${#stale[@]} == 0)); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

go_toolchain
go_build_begin "$bin_dir" "$repo_root/.tools/.lock"

# The package a wrapper builds: its go.mod's only `tool` directive (single line or block).
tool_package() { # <wrapper dir>
  local pkgs
  pkgs="$(awk '/^tool \(/ { b = 1; next } b && /^\)/ { b = 0 } b && NF { print $1 }
               /^tool [^(]/ { print $2 }' "$1/go.mod")"
  [[ -n $pkgs && $pkgs != *$'\n'* ]] || die "$1/go.mod must have exactly one tool directive"
  printf '%s\n' "$pkgs"
}

for name in "${stale[@]}"; do
  dir="$wrappers/$name"
  go_up_to_date "$bin_dir" "$name" "$(stamp_for "$dir")" && continue   # built while we waited
  pkg="$(tool_package "$dir")"
  # The module and version that provide the tool: what go.mod pins, for the log and @VERSION@.
  info="$(cd "$dir" && "$GO" list -f '{{.Module.Path}} {{.Module.Version}}' "$pkg")" ||
    die "go list $pkg failed in $dir (is go.sum complete? see hack/tools/README.md)"
  read -r module version <<<"$info"
  # Upstream's release builds stamp the version with -X flags; ldflags holds them, one or more
  # per line, # for comments, with @VERSION@ standing for the pinned version.
  ldflags="-s -w"
  if [[ -f $dir/ldflags ]]; then
    ldflags+=" $(sed -e 's/#.*//' "$dir/ldflags" | tr '\n' ' ')"
    ldflags="${ldflags//@VERSION@/$version}"
  fi
  # Build tags (same syntax), e.g. to leave out what the tests never use and would only slow
  # the build.
  tags=""
  if [[ -f $dir/tags ]]; then
    tags="$(sed -e 's/#.*//' "$dir/tags" | tr -s ' \n' ',' | sed -e 's/^,//' -e 's/,$//')"
  fi
  log "building $name ($module $version${tags:+, tags $tags}) with $go_version; a cold Go cache takes minutes"
  go_build_install "$bin_dir" "$name" "$(stamp_for "$dir")" "$dir" -tags "$tags" -ldflags "$ldflags" "$pkg"
done

printf '%s\n' "$bin_dir"
