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

log() { printf 'tools: %s\n' "$*" >&2; }
die() { printf 'tools: error: %s\n' "$*" >&2; exit 1; }

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd -P)"
repo_root="$(cd "$script_dir/.." && pwd -P)"
wrappers="$script_dir/tools"
bin_dir="$repo_root/.tools/bin"

# shellcheck source-path=SCRIPTDIR source=versions.env
source "$script_dir/versions.env"

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
up_to_date() { # <name> <stamp>
  [[ -x "$bin_dir/$1" && -f "$bin_dir/.$1.stamp" && "$(<"$bin_dir/.$1.stamp")" == "$2" ]]
}

# Fast path: nothing to build (needs no Go at all).
stale=()
for name in "${names[@]}"; do
  up_to_date "$name" "$(stamp_for "$wrappers/$name")" || stale+=("$name")
done
if ((${#stale[@]} == 0)); then
  printf '%s\n' "$bin_dir"
  exit 0
fi

# shellcheck source-path=SCRIPTDIR source=lib/go.sh
source "$script_dir/lib/go.sh"

mkdir -p "$bin_dir"

# Serialise concurrent runs (several test binaries may call this at once).
if command -v flock >/dev/null 2>&1; then
  exec 9>"$repo_root/.tools/.lock"
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
  stamp="$(stamp_for "$dir")"
  if up_to_date "$name" "$stamp"; then   # another run may have built it while we waited
    log "$name is up to date"
    continue
  fi
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
  tmp="$bin_dir/.$name.tmp.$$"
  tmp_files+=("$tmp" "$tmp.stamp")
  start=$SECONDS
  log "building $name ($module $version${tags:+, tags $tags}) with $go_version; a cold Go cache takes minutes"
  # In the background so that a TERM/INT to this script also stops the build (see cleanup).
  (cd "$dir" && exec "$GO" build -trimpath -tags "$tags" -ldflags "$ldflags" -o "$tmp" "$pkg") >&2 &
  build_pid=$!
  wait "$build_pid" || { build_pid=; die "building $name failed"; }
  build_pid=
  # The inputs may have changed during the build: stamp what was read before it.
  printf '%s\n' "$stamp" >"$tmp.stamp"
  rm -f "$bin_dir/.$name.stamp"            # binary and stamp are never seen out of step
  mv -f "$tmp" "$bin_dir/$name"
  mv -f "$tmp.stamp" "$bin_dir/.$name.stamp"
  log "built $name in $((SECONDS - start))s"
done

printf '%s\n' "$bin_dir"
