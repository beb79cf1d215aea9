#!/usr/bin/env bash
# Builds filter.wasm (filter.c, world filter-plugin) and policy.wasm (policy.c, world policy-plugin)
# against sdk/c: the header refract_plugin.h and the committed bindings in sdk/c/bindings/<world>/.
# Each is one step: clang-19 compiles for wasm32-wasi (Debian's wasi-libc) and Rust's
# wasm-component-ld links, adding the WASI preview1 reactor adapter (dropped again, as nothing
# uses WASI) and turning the module into a component. Needs the Debian packages clang-19, lld-19,
# wasi-libc and libclang-rt-19-dev-wasm32, and a rustup toolchain.
set -euo pipefail
cd "$(dirname "$0")"
sdk=../../../sdk/c
wcld="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/wasm-component-ld"
build() {  # <output.wasm> <source.c> <world, with underscores>
  local bindings="$sdk/bindings/$3"
  # wasm-component-ld runs wasm-ld, which Debian ships in /usr/lib/llvm-19/bin.
  PATH="/usr/lib/llvm-19/bin:$PATH" clang-19 \
    --target=wasm32-wasi --sysroot=/usr -mexec-model=reactor \
    -O2 -Wall -Wextra -Werror -I "$sdk" -I "$bindings" \
    -fuse-ld="$wcld" -Wl,--wasi-adapter=reactor -Wl,--strip-debug \
    -o "$1" \
    "$2" "$bindings/$3.c" "$bindings/$3_component_type.o"
}
build filter.wasm filter.c filter_plugin
build policy.wasm policy.c policy_plugin
