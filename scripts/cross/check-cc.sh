#!/bin/sh
# A stand-in C compiler for `cargo clippy --target aarch64-apple-darwin` from Linux: dependency
# build scripts (signal-hook's siginfo helper) compile C for the target, which needs Apple's SDK.
# A check never links, so each object is written empty. Never used to build a binary.
out=
for a in "$@"; do
    # The cc crate's compiler-family probe preprocesses a file: answer as clang.
    [ "$a" = -E ] && { echo '"clang"'; exit 0; }
    [ "$a" = '-?' ] && exit 1
done
while [ $# -gt 0 ]; do
    case "$1" in
        -o) out="$2"; shift ;;
        -o*) out="${1#-o}" ;;
    esac
    shift
done
[ -n "$out" ] && : > "$out"
exit 0
