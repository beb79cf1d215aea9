#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), with cargo for wasm32-wasip2.
# Offline once the refract checkout's guest plugins have been built (Cargo.lock pins the same
# crate versions); needs `rustup target add wasm32-wasip2`.
set -euo pipefail
cd "$(dirname "$0")"
cargo build --release --target wasm32-wasip2
cp "${CARGO_TARGET_DIR:-target}/wasm32-wasip2/release/@CRATE_FILE@.wasm" @NAME@.wasm
echo "wrote @NAME@.wasm ($(stat -c %s @NAME@.wasm) bytes)"
