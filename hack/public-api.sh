#!/usr/bin/env bash
# Check each library's public API against its snapshot, crates/<crate>/public-api.txt: one item
# a line (modules, types with their public fields and variants, functions and methods with their
# signatures, constants, the traits each type implements), read from rustdoc's JSON output by
# hack/lib/public_api.py. A change to what an embedder can name or call must show as a diff of
# the snapshot in the same commit.
#
# Usage:
#   hack/public-api.sh           # fails, printing the diff, when an API differs from its snapshot
#   BLESS=1 hack/public-api.sh   # rewrites the snapshots
#
# rustdoc's JSON output is unstable on a stable toolchain; RUSTC_BOOTSTRAP=1 lets the stable
# rustdoc write it (the format is read by key, not by a pinned schema crate).
set -euo pipefail

log_prefix=public-api
# shellcheck source-path=SCRIPTDIR source=lib/go.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib/go.sh"

case "${1:-}" in
  -h|--help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2; exit 0 ;;
  "") ;;
  *) die "unknown argument: $1 (try --help)" ;;
esac

failed=0
# package, library, crate directory
for crate in "member-client member_client crates/member-client" \
  "tether-cluster-registry cluster_registry crates/cluster-registry"; do
  read -r package lib dir <<<"$crate"
  RUSTC_BOOTSTRAP=1 K8S_OPENAPI_ENABLED_VERSION=1.36 cargo rustdoc --quiet -p "$package" --lib \
    -- -Z unstable-options --output-format json ||
    die "rustdoc could not write $package's JSON"
  api="$(python3 "$script_dir/lib/public_api.py" "$repo_root/target/doc/$lib.json")" ||
    die "could not read $package's public API"
  snapshot="$repo_root/$dir/public-api.txt"
  if [[ ${BLESS:-} == 1 ]]; then
    printf '%s\n' "$api" >"$snapshot"
    log "$package: wrote $(wc -l <"$snapshot") lines to ${snapshot#"$repo_root"/}"
  elif ! diff -u --label "${snapshot#"$repo_root"/}" --label "$package now" "$snapshot" - <<<"$api" >&2; then
    log "$package's public API is not its snapshot (diff above): if the change is meant, run BLESS=1 hack/public-api.sh and commit the snapshot"
    failed=1
  fi
done
exit "$failed"
