#!/usr/bin/env bash
# Build the book in docs/ with the pinned mdbook, check its internal links, and compile and run
# its Rust snippets with `mdbook test`.
#
# Usage:
#   hack/docs.sh            # build into target/book; fails on a warning or a broken link
#   hack/docs.sh --mdbook   # only build or reuse the pinned mdbook; print its path
#
# The pinned mdbook (mdbook_version below) is built from crates.io into .tools/mdbook
# (git-ignored) with `cargo install --locked` (mdbook's own Cargo.lock), and rebuilt only when
# its stamp, the version and features, changes; a cold build takes about three minutes, one
# whose build dir (~/.cache/tether/mdbook-target, or TETHER_MDBOOK_CACHE) is warm seconds. The
# snippets link against member-client, cluster-registry and their dependencies; a snippet names
# each crate it uses with a hidden `# extern crate member_client;` line, since `mdbook test`
# gives rustdoc library directories (-L), not --extern.
set -euo pipefail

log_prefix=docs
# shellcheck source-path=SCRIPTDIR source=lib/go.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go.sh"

mdbook_version=0.5.4
# `search` only: the serve and watch features bring a web server and file watching that
# `build` and `test` never use.
mdbook_features=search
mdbook_root="$repo_root/.tools/mdbook"
mdbook_cache="${TETHER_MDBOOK_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/tether/mdbook-target}"
mdbook="$mdbook_root/bin/mdbook"
book_dir="$repo_root/docs"
out_dir="$repo_root/target/book"    # book.toml's build-dir
deps_dir="$repo_root/target/book-deps"

mode=all
case "${1:-}" in
  -h|--help) sed -n '2,15p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
  --mdbook) mode=mdbook ;;
  "") ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

# Builds the pinned mdbook unless the one in .tools/mdbook has the same stamp.
ensure_mdbook() {
  local stamp="mdbook $mdbook_version features=$mdbook_features"
  go_up_to_date "$mdbook_root/bin" mdbook "$stamp" && return
  mkdir -p "$mdbook_root"
  if command -v flock >/dev/null 2>&1; then
    exec 8>"$mdbook_root/.lock"
    flock 8
    go_up_to_date "$mdbook_root/bin" mdbook "$stamp" && return   # built while we waited
  fi
  log "building mdbook $mdbook_version from crates.io; a cold build takes minutes"
  local start=$SECONDS
  rm -f "$mdbook_root/bin/.mdbook.stamp"
  # A target dir of its own, never the workspace's, kept outside the clone like Go's build
  # cache: a fresh clone on the same machine (CI's) then installs in seconds, not minutes.
  cargo install mdbook --version "=$mdbook_version" --locked --force --quiet \
    --root "$mdbook_root" --no-default-features --features "$mdbook_features" \
    --target-dir "$mdbook_cache" >&2 ||
    die "building mdbook $mdbook_version failed"
  printf '%s\n' "$stamp" >"$mdbook_root/bin/.mdbook.stamp"
  log "built mdbook in $((SECONDS - start))s"
}

# Runs mdbook with its log captured; any WARN or ERROR line fails, since mdbook reports e.g.
# an unknown config key or a missing font icon as a warning and carries on.
mdbook_strict() { # <what> <mdbook args...>
  local what=$1 out status=0
  shift
  out="$("$mdbook" "$@" 2>&1)" || status=$?
  printf '%s\n' "$out" >&2
  ((status == 0)) || die "mdbook $what failed"
  if grep -Eq '^[[:space:]]*(WARN|ERROR)' <<<"$out"; then
    die "mdbook $what printed warnings (above); a warning fails the docs build"
  fi
}

# A directory holding exactly the libraries of one build: target/debug/deps may hold several
# builds of a crate (other features, other versions), and rustdoc refuses a crate name with
# "multiple candidates". The build is the one hack/test.sh makes next anyway (the binaries the
# e2e tests run, which link member-client and cluster-registry), so that CI compiles the
# workspace's dependencies once, not once more with member-client's features alone.
snippet_libs() {
  local artifacts
  artifacts="$(cargo build --quiet -p collector --bin collector \
    -p tether-credential --bin tether-credential --message-format=json-render-diagnostics |
    python3 -c 'import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") == "compiler-artifact":
        for f in msg["filenames"]:
            if f.endswith((".rlib", ".so")):
                print(f)')" || die "building member-client for the snippets failed"
  rm -rf "$deps_dir"
  mkdir -p "$deps_dir"
  local rlib
  while IFS= read -r rlib; do
    ln -s "$rlib" "$deps_dir/"
  done <<<"$artifacts"
  [[ -n $(compgen -G "$deps_dir/libmember_client-*.rlib") ]] ||
    die "the build made no member-client library for the snippets"
}

ensure_mdbook
if [[ $mode == mdbook ]]; then
  printf '%s\n' "$mdbook"
  exit 0
fi

start=$SECONDS
# A snippet marked `ignore` is never compiled and rots unseen, as in the crates' doctests.
# shellcheck disable=SC2016 # the backticks are a code fence's, not a command substitution
if grep -rnE '^[[:space:]]*```+[^`]*\bignore\b' "$book_dir/src" >&2; then
  die "ignored Rust snippets are not allowed in the book (use no_run, or text for non-Rust)"
fi
mdbook_strict build build "$book_dir"
[[ -f $out_dir/index.html ]] || die "no $out_dir/index.html: is book.toml's build-dir ../target/book?"
# The link check's own test first: a check that finds nothing would pass any book.
PYTHONDONTWRITEBYTECODE=1 python3 "$script_dir/lib/check_links_test.py" 2>&1 | tail -n 1 >&2 ||
  die "the link check's own test failed: python3 hack/lib/check_links_test.py -v"
python3 "$script_dir/lib/check_links.py" --book "$out_dir" --src "$book_dir/src" "$repo_root/README.md"
snippet_libs
mdbook_strict test test "$book_dir" --library-path "$deps_dir"
log "book built, links checked and snippets tested in $((SECONDS - start))s; open $out_dir/index.html"
