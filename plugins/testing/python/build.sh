#!/usr/bin/env bash
# Builds the hostile Python test filter (hostile.py) with componentize-py (installed by
# .ci/install-guest-toolchains) into plugins/target/testing/hostile-python.wasm, where the
# integration tests look for it. It builds from a copy in a temp folder and writes outside
# plugins/testing: a change there (even a __pycache__) would make host/plugin's build script run
# again. examples/plugins/build-all.sh calls this script.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../../.." && pwd)"
out="$repo/plugins/target/testing"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$out"
cp "$here/hostile.py" "$work/"
cd "$work"
componentize-py -d "$repo/wit" -w filter-plugin componentize hostile \
  -p . -p "$repo/sdk/python" -o "$out/hostile-python.wasm"
