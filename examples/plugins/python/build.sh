#!/usr/bin/env bash
# Builds filter.wasm from app.py with componentize-py (PyPI, pinned in .ci/install-guest-toolchains).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../wit"
cd "$here"
componentize-py -d "$wit" -w filter-plugin componentize app -o filter.wasm
