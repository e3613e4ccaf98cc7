#!/usr/bin/env bash
# The `cli` feature of the library crate: builds `hmn` the way the README documents it,
# `cargo install --path crates/hypomnesis --features cli` (debug profile here, and in its own
# target directory so the workspace's target/debug/hmn is left alone), then runs
# `hmn --version` and one command (`hmn spill --json -- sh -c 'exit 3'` with no GPU backend).
# That package has no build script asking git for the commit: `hmn --version` names the one
# `HMN_COMMIT` holds at build time (set here from git), `commit unknown` without it.
set -euo pipefail
cd "$(dirname "$0")/.."

root=target/cli-feature
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "commit unknown")
HMN_COMMIT="$commit" cargo install --locked --debug --force --quiet --path crates/hypomnesis --features cli \
    --root "$root" --target-dir "$root/build"
hmn="$root/bin/hmn"

expected="hmn $(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1) ($commit)"
version=$("$hmn" --version)
if [ "$version" != "$expected" ]; then
    echo "cli feature: \`hmn --version\` printed '$version', expected '$expected'" >&2
    exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
set +e
out=$(HMN_NVML_LIB="$tmp/no-nvml.so" HMN_NVIDIA_SMI="$tmp/no-smi" HMN_SYS_ROOT="$tmp" \
    "$hmn" spill --json -- sh -c 'exit 3' 2>"$tmp/stderr")
code=$?
set -e
if [ "$code" != 3 ] || [ "${out#\{\"measurable\":false,}" = "$out" ]; then
    echo "cli feature: \`hmn spill --json -- sh -c 'exit 3'\` exited $code, printed '$out'" >&2
    cat "$tmp/stderr" >&2
    exit 1
fi
echo "cli feature: $version from crates/hypomnesis runs \`hmn spill\` (exit $code, JSON report)"
