#!/usr/bin/env bash
# Builds filter.wasm (from filter.py) and policy.wasm (from policy.py) with componentize-py (PyPI,
# pinned in .ci/install-guest-toolchains) and the guest helpers in sdk/python.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$here/../../.."
cd "$here"
build() { # <world> <module> <output>
  componentize-py -d "$repo/wit" -w "$1" componentize "$2" -p . -p "$repo/sdk/python" -o "$3"
}
build filter-plugin filter filter.wasm
build policy-plugin policy policy.wasm
