#!/usr/bin/env bash
# Builds the example filter plugin in every language: <lang>/filter.wasm. Stops at the first
# failure with a non-zero exit. Install the toolchains first with .ci/install-guest-toolchains.
set -euo pipefail
cd "$(dirname "$0")"
for lang in python javascript c; do
  printf '\n== %s\n' "$lang"
  start=$(date +%s%N)
  if ! "./$lang/build.sh"; then
    echo "FAILED: examples/plugins/$lang/build.sh" >&2
    exit 1
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  printf '%s/filter.wasm: %s bytes, built in %d.%d s\n' "$lang" "$(stat -c %s "$lang/filter.wasm")" $((ms / 1000)) $((ms % 1000 / 100))
done
