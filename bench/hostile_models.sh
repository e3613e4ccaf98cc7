#!/usr/bin/env bash
# Peak RSS and wall time of `hmn fits` on hostile model files (issue 22): GGUF headers with
# SIZE of junk metadata (arrays of every element type, nested arrays, huge strings, many keys,
# huge tensor counts; crates/testbed/src/hostile_models.rs), 32 safetensors shard names
# linking to one file with a large header, and a Hugging Face cache layout.
# Usage: bench/hostile_models.sh [SIZE ...]   (default: 64M 1G; M = MiB, G = GiB)
# HMN=path/to/hmn measures another build (default: target/release/hmn, built here).
# Needs GNU time (/usr/bin/time). The files are sparse: no disk beyond the headers' bytes.
set -euo pipefail
cd "$(dirname "$0")/.."
if [[ -z "${HMN:-}" ]]; then
    cargo build --release -q -p hmn
    HMN=target/release/hmn
fi
cargo build --release -q -p hmn-testbed --example hostile_models
SIZES=("$@")
[[ ${#SIZES[@]} -gt 0 ]] || SIZES=(64M 1G)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
printf '%-28s %5s %4s %10s %8s  %s\n' FILE SIZE EXIT PEAK_KIB SECONDS "FIRST LINE OF STDERR"
for size in "${SIZES[@]}"; do
    rm -rf "${DIR:?}"/*
    target/release/examples/hostile_models "$DIR" "$size" > "$DIR/list"
    while read -r f; do
        set +e
        /usr/bin/time -f '%M %e' -o "$DIR/time" timeout -s KILL 600 \
            "$HMN" fits "$f" --free 1TiB > /dev/null 2> "$DIR/err"
        rc=$?
        set -e
        read -r kib secs < <(tail -1 "$DIR/time")
        printf '%-28s %5s %4s %10s %8s  %s\n' "${f#"$DIR"/}" "$size" "$rc" "$kib" "$secs" \
            "$(grep -v '^hmn: [0-9.]* [KMGT]iB\|^Command' "$DIR/err" | head -1 | cut -c1-110)"
    done < "$DIR/list"
done
