# shellcheck shell=bash
# Sourced by the hack scripts that build Go programs and cache the binaries with a stamp of
# their inputs. The caller sets log_prefix. Sets script_dir (hack/) and repo_root, defines log
# and die, and sources versions.env.

script_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)"
repo_root="$(cd "$script_dir/.." && pwd -P)"
log() { printf '%s: %s\n' "$log_prefix" "$*" >&2; }
die() { printf '%s: error: %s\n' "$log_prefix" "$*" >&2; exit 1; }

# shellcheck source=../versions.env
source "$script_dir/versions.env"

# Whether <dir>/<name> exists and was built from the inputs whose stamp is <stamp>.
go_up_to_date() { # <dir> <name> <stamp>
  [[ -x "$1/$2" && -f "$1/.$2.stamp" && "$(<"$1/.$2.stamp")" == "$3" ]]
}

# Pins the Go environment and finds a Go toolchain >= GO_MIN_VERSION. Sets GO (the go binary),
# go_version (e.g. go1.26.8), go_major and go_minor. Only the slow path needs Go at all.
go_toolchain() {
  # Local toolchain only: never switch to or download another one.
  export GOTOOLCHAIN=local
  export GOWORK=off
  export CGO_ENABLED=0
  export GOFLAGS="-mod=readonly -buildvcs=false"   # the committed go.sum is the source of truth

  : "${GO_MIN_VERSION:?must be set in hack/versions.env}"
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
    local min_major="${GO_MIN_VERSION%%.*}" min_minor
    min_minor="$(cut -d. -f2 <<<"$GO_MIN_VERSION")"
    if (( go_major < min_major || (go_major == min_major && go_minor < min_minor) )); then
      die "$GO is $go_version; Go >= $GO_MIN_VERSION is required (GOTOOLCHAIN=local: no toolchain is downloaded)"
    fi
  else
    go_major=0 go_minor=0
    log "warning: cannot parse Go version '$go_version'; continuing"
  fi
}

# Creates <dir> and takes <lock>, so that concurrent runs (several test binaries calling the
# script at once) build each binary once; on exit, or when the script is stopped, a build in
# flight is stopped and its half-written files are removed.
go_build_begin() { # <dir> <lock file>
  mkdir -p "$1"
  if command -v flock >/dev/null 2>&1; then
    exec 9>"$2"
    flock 9
  fi
  go_tmp_files=()
  go_build_pid=
  trap go_build_cleanup EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
}

go_build_cleanup() {
  if [[ -n $go_build_pid ]]; then kill -TERM "$go_build_pid" 2>/dev/null && wait "$go_build_pid" 2>/dev/null; fi
  ((${#go_tmp_files[@]})) && rm -f "${go_tmp_files[@]}"
  return 0
}

# Runs `go build -trimpath -o <binary> <args...>` in <module dir> and installs the binary as
# <dir>/<name> with <stamp>, unless another run built it while this one waited for the lock.
# If GO_BUILD_CHECK names a function, it is called with <name> and the new binary first.
go_build_install() { # <dir> <name> <stamp> <module dir> <go build args...>
  local dir=$1 name=$2 stamp=$3 module_dir=$4 tmp start
  shift 4
  if go_up_to_date "$dir" "$name" "$stamp"; then
    log "$name is up to date"
    return
  fi
  tmp="$dir/.$name.tmp.$$"
  go_tmp_files+=("$tmp" "$tmp.stamp")
  start=$SECONDS
  # In the background so that a TERM/INT to the script also stops the build (see cleanup).
  (cd "$module_dir" && exec "$GO" build -trimpath -o "$tmp" "$@") >&2 &
  go_build_pid=$!
  wait "$go_build_pid" || { go_build_pid=; die "building $name failed"; }
  go_build_pid=
  if [[ -n ${GO_BUILD_CHECK:-} ]]; then "$GO_BUILD_CHECK" "$name" "$tmp"; fi
  log "built $name in $((SECONDS - start))s"
  # The inputs may have changed during the build: stamp what was read before it.
  printf '%s\n' "$stamp" >"$tmp.stamp"
  rm -f "$dir/.$name.stamp"            # binary and stamp are never seen out of step
  mv -f "$tmp" "$dir/$name"
  mv -f "$tmp.stamp" "$dir/.$name.stamp"
}
