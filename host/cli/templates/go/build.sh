#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), from @SOURCE@ and abi.go with
# standard Go: `go build` makes a wasip1 reactor module (-buildmode=c-shared, //go:wasmexport),
# `wasm-tools component embed` attaches the world from the refract checkout's WIT and
# `wasm-tools component new` makes the component, linking in the WASI preview1 reactor adapter
# for the Go runtime's own WASI calls. Offline: the Go modules go.sum pins and the adapter come
# from ~/.cache/refract/go (or $REFRACT_GO_CACHE), which the checkout's
# `.ci/install-go-toolchain` fills; needs Go >= 1.24 and wasm-tools.
set -euo pipefail
home="${REFRACT_HOME:-@REFRACT_HOME@}"
install="bash $home/.ci/install-go-toolchain"
if ! command -v go >/dev/null; then
  echo "go is not installed; install Go 1.24 or later (https://go.dev/dl/), then the rest with:" >&2
  echo "  $install" >&2
  exit 1
fi
version=$(GOTOOLCHAIN=local go env GOVERSION)
if [[ ! $version =~ ^go1\.([0-9]+) ]] || ((BASH_REMATCH[1] < 24)); then
  echo "$version is too old: //go:wasmexport needs Go 1.24 or later (https://go.dev/dl/)" >&2
  exit 1
fi
if ! command -v wasm-tools >/dev/null; then
  echo "wasm-tools is not installed; install it, the Go modules and the WASI adapter with:" >&2
  echo "  $install" >&2
  exit 1
fi
cache="${REFRACT_GO_CACHE:-${HOME:-}/.cache/refract/go}"
adapter="$cache/wasi-preview1-component-adapter-provider-48.0.8/wasi_snapshot_preview1.reactor.wasm"
if [[ ! -f $adapter ]]; then
  echo "$adapter is missing; fetch it and the Go modules with:" >&2
  echo "  $install" >&2
  exit 1
fi
cd "$(dirname "$0")"
export GOMODCACHE="$cache/mod" GOPROXY=off GOTOOLCHAIN=local GOWORK=off
if ! go mod download 2>/dev/null; then
  echo "the Go modules go.mod requires are not all in $GOMODCACHE; fetch them with:" >&2
  echo "  cd $(pwd) && GOMODCACHE=$GOMODCACHE go mod download -modcacherw" >&2
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
GOOS=wasip1 GOARCH=wasm go build -mod=readonly -modcacherw -buildmode=c-shared -trimpath \
  -o "$tmp/core.wasm" .
wasm-tools component embed "$home/wit" --world @WORLD@ "$tmp/core.wasm" -o "$tmp/embedded.wasm"
wasm-tools component new "$tmp/embedded.wasm" --adapt wasi_snapshot_preview1="$adapter" \
  -o @NAME@.wasm
echo "wrote @NAME@.wasm ($(stat -c %s @NAME@.wasm) bytes)"
