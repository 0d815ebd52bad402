#!/usr/bin/env bash
# Builds libtokenizers.a (github.com/daulet/tokenizers' Rust core, v1.22.1) from the module's own sources with
# cargo, for the optional `hftokenizers` build tag. Output: build/libtokenizers/libtokenizers.a
# Plain `go build` / `go test` never need it.
set -euo pipefail
cd "$(dirname "$0")/.."
out=build/libtokenizers
if [[ -f $out/libtokenizers.a && -z ${FORCE:-} ]]; then
	echo "libtokenizers: $out/libtokenizers.a exists (FORCE=1 rebuilds)"
	exit 0
fi
go mod download github.com/daulet/tokenizers
src=$(go list -m -f '{{.Dir}}' github.com/daulet/tokenizers)
work=build/libtokenizers-src
rm -rf "$work"
mkdir -p "$work" "$out"
cp -r "$src"/. "$work"/
chmod -R u+w "$work"
echo "libtokenizers: cargo build --release of the Rust tokenizers core (3-7 minutes cold on 2 cores) ..."
t0=$SECONDS
# cargo's target directory lives in the user's cache, not in the checkout: a fresh clone (CI's) reuses the compiled
# crates of an earlier build of the same sources and lock file instead of spending minutes again.
target=${CARGO_TARGET_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gload/libtokenizers-target}
mkdir -p "$target"
(cd "$work" && CARGO_TARGET_DIR=$target "$OLDPWD/scripts/progress.sh" "libtokenizers: cargo build" cargo build --release --locked --quiet)
cp "$target/release/libtokenizers.a" "$out/libtokenizers.a"
echo "libtokenizers: built $out/libtokenizers.a in $((SECONDS - t0)) s"
