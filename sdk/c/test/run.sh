#!/usr/bin/env bash
# Compiles and runs the native unit tests of sdk/c/refract_plugin.h with the host C compiler
# (`cc`, or $CC): once with -Wall -Wextra -Werror, and once more under AddressSanitizer and
# UndefinedBehaviorSanitizer when the compiler supports them.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
cc="${CC:-cc}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
flags=(-std=c11 -Wall -Wextra -Werror -pedantic -O1 -g)
"$cc" "${flags[@]}" -o "$out/test" "$here/test_refract_plugin.c"
"$out/test"
if "$cc" -fsanitize=address,undefined -x c -o "$out/probe" - <<<'int main(void){return 0;}' 2>/dev/null; then
  "$cc" "${flags[@]}" -fsanitize=address,undefined -fno-sanitize-recover=all \
    -o "$out/test-san" "$here/test_refract_plugin.c"
  "$out/test-san" | sed 's/$/ (address and undefined-behaviour sanitizers)/'
fi
