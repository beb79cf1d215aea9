#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), from app.py with componentize-py
# and refract's Python helpers (sdk/python/refract_plugin.py) from the refract checkout. Offline;
# needs componentize-py (`.ci/install-guest-toolchains` in the checkout installs the pinned one).
set -euo pipefail
if ! command -v componentize-py >/dev/null; then
  echo "componentize-py is not installed; install the pinned version with:" >&2
  echo "  python3 -m pip install componentize-py==0.25.1" >&2
  exit 1
fi
cd "$(dirname "$0")"
home="${REFRACT_HOME:-@REFRACT_HOME@}"
componentize-py -d "$home/wit" -w @WORLD@ componentize app -p . -p "$home/sdk/python" -o @NAME@.wasm
echo "wrote @NAME@.wasm ($(stat -c %s @NAME@.wasm) bytes)"
