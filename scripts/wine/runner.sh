#!/bin/sh
# Cargo runner for x86_64-pc-windows-gnu under Wine (CARGO_TARGET_X86_64_PC_WINDOWS_GNU_RUNNER):
# puts our ProcessPrng shim (bcryptprimitives.c, built once with mingw) beside the .exe, then
# runs it with Wine in a prefix under target/. Usage: runner.sh PROGRAM.exe [ARGS...]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
exe=$1
shift
wine=${WINE:-}
if [ -z "$wine" ]; then
    for w in wine64 /usr/lib/wine/wine64 wine; do
        if command -v "$w" >/dev/null 2>&1; then wine=$w; break; fi
    done
fi
[ -n "$wine" ] || { echo "runner.sh: WINE NOT FOUND (apt-get install wine64)" >&2; exit 127; }
shim=$target/wine/bcryptprimitives.dll
if [ ! -f "$shim" ] || [ "$here/bcryptprimitives.c" -nt "$shim" ]; then
    mkdir -p "$target/wine"
    x86_64-w64-mingw32-gcc -shared -O2 -o "$shim.tmp" "$here/bcryptprimitives.c" \
        "$here/bcryptprimitives.def" -ladvapi32
    mv "$shim.tmp" "$shim"
fi
cp -f "$shim" "$(dirname "$exe")/bcryptprimitives.dll"
export WINEPREFIX=${WINEPREFIX:-$target/wine/prefix}
export WINEDEBUG=${WINEDEBUG:--all}
# No Mono/Gecko installers on the first start of a prefix.
export WINEDLLOVERRIDES=${WINEDLLOVERRIDES:-mscoree,mshtml=}
exec "$wine" "$exe" "$@"
