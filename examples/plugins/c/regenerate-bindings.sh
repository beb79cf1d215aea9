#!/usr/bin/env bash
# Regenerates bindings/ (filter_plugin.{c,h} and filter_plugin_component_type.o) from wit/ with
# `wit-bindgen c`. The bindings are committed so that building needs no wit-bindgen; run this after
# changing wit/plugin.wit. `--check` regenerates into a temporary folder and fails if the committed
# bindings differ.
#
# Needs wit-bindgen-cli: cargo install wit-bindgen-cli --version 0.63.0 --locked
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../../wit"
want=0.63.0
have=$(wit-bindgen --version | awk '{print $2}')
if [[ $have != "$want" ]]; then
  echo "wit-bindgen $have found; the committed bindings come from $want" >&2
fi
if [[ ${1:-} == --check ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  wit-bindgen c "$wit" --world filter-plugin --out-dir "$tmp" >/dev/null
  diff -r "$here/bindings" "$tmp" && echo "bindings are up to date"
else
  rm -rf "$here/bindings"
  wit-bindgen c "$wit" --world filter-plugin --out-dir "$here/bindings"
fi
