# shellcheck shell=bash
# Sourced by the hack scripts that build Go programs: pins the Go environment and finds a Go
# toolchain >= GO_MIN_VERSION. The caller defines log and die and has sourced versions.env.
# Sets GO (the go binary) and go_version (e.g. go1.26.8).

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
if [[ $go_version =~ ^go([0-9]+)\.([0-9]+) ]]; then
  go_major="${BASH_REMATCH[1]}" go_minor="${BASH_REMATCH[2]}"
  min_major="${GO_MIN_VERSION%%.*}" min_minor="$(cut -d. -f2 <<<"$GO_MIN_VERSION")"
  if (( go_major < min_major || (go_major == min_major && go_minor < min_minor) )); then
    die "$GO is $go_version; Go >= $GO_MIN_VERSION is required (GOTOOLCHAIN=local: no toolchain is downloaded)"
  fi
else
  log "warning: cannot parse Go version '$go_version'; continuing"
fi
