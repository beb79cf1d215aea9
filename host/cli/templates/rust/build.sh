#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), with cargo for wasm32-wasip2.
# Offline once the refract checkout's guest plugins have been built (Cargo.lock pins the same
# crate versions); needs `rustup target add wasm32-wasip2`.
set -euo pipefail
if ! command -v cargo >/dev/null; then
  echo "cargo is not installed; install Rust with:" >&2
  echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
  exit 1
fi
if command -v rustup >/dev/null && ! rustup target list --installed | grep -qx wasm32-wasip2; then
  echo "the wasm32-wasip2 target is not installed; add it with:" >&2
  echo "  rustup target add wasm32-wasip2" >&2
  exit 1
fi
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/@CRATE_FILE@.wasm" @NAME@.wasm
echo "wrote @NAME@.wasm ($(stat -c %s @NAME@.wasm) bytes)"
