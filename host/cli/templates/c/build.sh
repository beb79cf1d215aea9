#!/usr/bin/env bash
# Builds @NAME@.wasm, a refract @KIND@ plugin (world @WORLD@), from @SOURCE@: clang-19 compiles for
# wasm32-wasi against Debian's wasi-libc and Rust's wasm-component-ld links it into a component,
# with refract's C helpers (sdk/c/refract_plugin.h) and the committed bindings of the world
# (sdk/c/bindings/) from the refract checkout. Offline; needs the Debian packages clang-19,
# lld-19, wasi-libc and libclang-rt-19-dev-wasm32, and a rustup toolchain.
set -euo pipefail
if ! command -v clang-19 >/dev/null; then
  echo "clang-19 is not installed; install it and wasi-libc with:" >&2
  echo "  sudo apt-get install -y clang-19 lld-19 wasi-libc libclang-rt-19-dev-wasm32" >&2
  exit 1
fi
if ! command -v rustc >/dev/null; then
  echo "rustc is not installed (its wasm-component-ld links the component); install Rust with:" >&2
  echo "  curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh" >&2
  exit 1
fi
cd "$(dirname "$0")"
sdk="${REFRACT_HOME:-@REFRACT_HOME@}/sdk/c"
world=$(echo "@WORLD@" | tr - _)
bindings="$sdk/bindings/$world"
wcld="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/wasm-component-ld"
PATH="/usr/lib/llvm-19/bin:$PATH" clang-19 \
  --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor \
  -O2 -Wall -Wextra -Werror -I "$sdk" -I "$bindings" \
  -fuse-ld="$wcld" -Wl,--wasi-adapter=reactor -Wl,--strip-debug \
  -o @NAME@.wasm @SOURCE@ "$bindings/$world.c" "$bindings/${world}_component_type.o"
echo "wrote @NAME@.wasm ($(stat -c %s @NAME@.wasm) bytes)"
