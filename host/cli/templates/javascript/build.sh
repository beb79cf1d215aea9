#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), from @SOURCE@ with refract's
# JavaScript builder (sdk/javascript/build.mjs: esbuild bundles the source with
# sdk/javascript/refract-plugin.js, componentize-js makes the component) from the refract
# checkout. Offline once `npm ci` ran in that checkout's sdk/javascript
# (`.ci/install-guest-toolchains` does it).
set -euo pipefail
if ! command -v node >/dev/null; then
  echo "node is not installed; install Node.js and npm with:" >&2
  echo "  sudo apt-get install -y nodejs npm" >&2
  exit 1
fi
cd "$(dirname "$0")"
sdk="${REFRACT_HOME:-@REFRACT_HOME@}/sdk/javascript"
if [[ ! -d $sdk/node_modules/@bytecodealliance/componentize-js ]]; then
  echo "$sdk/node_modules is missing; install the pinned packages (package-lock.json) with:" >&2
  echo "  npm ci --prefix $sdk" >&2
  exit 1
fi
node "$sdk/build.mjs" --world @WORLD@ --source @SOURCE@ --out @NAME@.wasm
