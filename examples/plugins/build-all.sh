#!/usr/bin/env bash
# Builds the example plugins in every language: <lang>/filter.wasm and <lang>/policy.wasm (Go: the
# policy only), then the hostile Python test plugin of the sandbox tests
# (plugins/testing/python). Stops at the first failure with a non-zero exit. Install the
# toolchains first with .ci/install-guest-toolchains (and .ci/install-go-toolchain for Go).
set -euo pipefail
cd "$(dirname "$0")"
for lang in python javascript c go; do
  printf '\n== %s\n' "$lang"
  start=$(date +%s%N)
  if ! "./$lang/build.sh"; then
    echo "FAILED: examples/plugins/$lang/build.sh" >&2
    exit 1
  fi
  ms=$((($(date +%s%N) - start) / 1000000))
  for f in "$lang"/*.wasm; do printf '%s: %s bytes\n' "$f" "$(stat -c %s "$f")"; done
  printf '%s built in %d.%d s\n' "$lang" $((ms / 1000)) $((ms % 1000 / 100))
done

printf '\n== hostile Python test plugin\n'
if ! ../../plugins/testing/python/build.sh; then
  echo "FAILED: plugins/testing/python/build.sh" >&2
  exit 1
fi
