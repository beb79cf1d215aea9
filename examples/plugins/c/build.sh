#!/usr/bin/env bash
# Builds filter.wasm from filter.c and the committed bindings/ in one step: clang-19 compiles for
# wasm32-wasi (Debian's wasi-libc) and Rust's wasm-component-ld links, adding the WASI preview1
# reactor adapter and turning the module into a component. Needs the Debian packages clang-19,
# lld-19, wasi-libc and libclang-rt-19-dev-wasm32, and a rustup toolchain.
set -euo pipefail
cd "$(dirname "$0")"
wcld="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/wasm-component-ld"
# wasm-component-ld runs wasm-ld, which Debian ships in /usr/lib/llvm-19/bin.
PATH="/usr/lib/llvm-19/bin:$PATH" clang-19 \
  --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor \
  -O2 -Wall -Wextra -Werror \
  -fuse-ld="$wcld" -Wl,--wasi-adapter=reactor -Wl,--strip-debug \
  -o filter.wasm \
  filter.c bindings/filter_plugin.c bindings/filter_plugin_component_type.o
