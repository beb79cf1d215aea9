#!/usr/bin/env bash
# Regenerates bindings/<world>/ (<world>.{c,h} and <world>_component_type.o) for every world in
# wit/plugin.wit (policy-plugin, filter-plugin, transform-plugin) with `wit-bindgen c`. The
# bindings are committed so that building a C plugin needs no wit-bindgen; run this after changing
# wit/plugin.wit. `--check` regenerates into a temporary folder and fails if the committed
# bindings differ.
#
# Needs wit-bindgen-cli: cargo install wit-bindgen-cli --version 0.63.0 --locked
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
wit="$here/../../wit"
worlds=(policy-plugin filter-plugin transform-plugin)
want=0.63.0
have=$(wit-bindgen --version | awk '{print $2}')
if [[ $have != "$want" ]]; then
  echo "wit-bindgen $have found; the committed bindings come from $want" >&2
fi
generate() {  # <output folder>
  for world in "${worlds[@]}"; do
    if ! log=$(wit-bindgen c "$wit" --world "$world" --out-dir "$1/${world//-/_}" 2>&1); then
      echo "$log" >&2
      exit 1
    fi
  done
}
if [[ ${1:-} == --check ]]; then
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  generate "$tmp"
  diff -r "$here/bindings" "$tmp" && echo "bindings are up to date"
else
  rm -rf "$here/bindings"
  generate "$here/bindings"
  echo "wrote $(cd "$here" && find bindings -type f | sort | tr '\n' ' ')"
fi
