#!/usr/bin/env bash
# Builds policy.wasm (a `policy-plugin` component) from the Go sources here, offline, in three
# steps: standard Go compiles a wasip1 reactor module (-buildmode=c-shared, //go:wasmexport),
# `wasm-tools component embed` attaches the WIT world, and `wasm-tools component new` turns it
# into a component, linking in the WASI preview1 reactor adapter for the Go runtime's own WASI
# calls. Run .ci/install-go-toolchain once first: it fetches the Go modules and the adapter into
# ~/.cache/refract/go (or $REFRACT_GO_CACHE). Needs Go >= 1.24 and wasm-tools.
set -euo pipefail
cd "$(dirname "$0")"

cache=${REFRACT_GO_CACHE:-$HOME/.cache/refract/go}
adapter="$cache/wasi-preview1-component-adapter-provider-48.0.8/wasi_snapshot_preview1.reactor.wasm"
if [[ ! -f $adapter ]]; then
  echo "missing $adapter: run .ci/install-go-toolchain first" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

GOMODCACHE="$cache/mod" GOPROXY=off GOTOOLCHAIN=local GOOS=wasip1 GOARCH=wasm \
  go build -mod=readonly -modcacherw -buildmode=c-shared -trimpath -o "$tmp/policy.core.wasm" .
wasm-tools component embed ../../../wit --world policy-plugin "$tmp/policy.core.wasm" \
  -o "$tmp/policy.embedded.wasm"
wasm-tools component new "$tmp/policy.embedded.wasm" \
  --adapt wasi_snapshot_preview1="$adapter" -o policy.wasm
