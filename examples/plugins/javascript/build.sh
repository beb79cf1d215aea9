#!/usr/bin/env bash
# Builds filter.wasm from filter.js. Needs Node.js and `npm ci` run here first
# (.ci/install-guest-toolchains does both).
set -euo pipefail
cd "$(dirname "$0")"
if [[ ! -d node_modules/@bytecodealliance/componentize-js ]]; then
  echo "node_modules is missing: run 'npm ci' in $(pwd) first" >&2
  exit 1
fi
node build.mjs
