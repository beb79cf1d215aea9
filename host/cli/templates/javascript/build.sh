#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), from @SOURCE@ with refract's
# JavaScript builder (sdk/javascript/build.mjs: esbuild bundles the source with
# sdk/javascript/refract-plugin.js, componentize-js makes the component) from the refract
# checkout. Offline once `npm ci` ran in that checkout's sdk/javascript
# (`.ci/install-guest-toolchains` does it).
set -euo pipefail
cd "$(dirname "$0")"
sdk="${REFRACT_HOME:-@REFRACT_HOME@}/sdk/javascript"
if [[ ! -d $sdk/node_modules/@bytecodealliance/componentize-js ]]; then
  echo "$sdk/node_modules is missing: run 'npm ci' in $sdk first" >&2
  exit 1
fi
node "$sdk/build.mjs" --world @WORLD@ --source @SOURCE@ --out @NAME@.wasm
