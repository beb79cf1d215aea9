#!/usr/bin/env bash
# Builds filter.wasm (from filter.js) and policy.wasm (from policy.js) with sdk/javascript/build.mjs
# (esbuild + componentize-js). Needs Node.js and `npm ci` run in sdk/javascript first
# (.ci/install-guest-toolchains does both).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
sdk="$here/../../../sdk/javascript"
if [[ ! -d $sdk/node_modules/@bytecodealliance/componentize-js ]]; then
  echo "$sdk/node_modules is missing: run 'npm ci' in $sdk first" >&2
  exit 1
fi
cd "$here"
node "$sdk/build.mjs" --world filter-plugin --source filter.js --out filter.wasm
node "$sdk/build.mjs" --world policy-plugin --source policy.js --out policy.wasm
