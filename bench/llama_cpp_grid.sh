#!/usr/bin/env bash
# The real llama.cpp, reproducibly: builds llama.cpp (CPU) from the source that the
# llama-cpp-python sdist vendors (pinned by version and sha256), writes synthetic GGUF files
# with published architectures' dimensions and zero weights, creates contexts over a grid and
# records every buffer llama.cpp prints into
# crates/hypomnesis/tests/fixtures/llama_cpp/grid.csv (see the README beside it).
#
# Steps (each skipped when its output is already there; FRESH=1 redoes them all):
#   1. pip download the sdist, check its sha256, unpack it
#   2. a venv with cmake, ninja, numpy, pyyaml, tqdm (the vendored gguf-py is used as is)
#   3. CMake/Ninja build of libllama + libggml (shared, CPU only, GGML_NATIVE) — timed
#   4. the probe (bench/llama-cpp/probe.cpp): one model, one context per stdin line
#   5. bench/llama_cpp_grid.py: the GGUFs, the grid, the table
#
# Needs: python3 (with venv), a C/C++ compiler, network access to PyPI for step 1-2.
# CI never runs this (the table is checked in). ~15 min build + ~15 min grid on 2 cores.
# Env: LLAMA_GRID_WORK (default target/llama-cpp-grid), JOBS (default nproc), FRESH=1,
#      GRID_ARGS (extra arguments for llama_cpp_grid.py, e.g. "--only gemma3-12b"),
#      GRID_OUT (default crates/hypomnesis/tests/fixtures/llama_cpp).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${LLAMA_GRID_WORK:-$ROOT/target/llama-cpp-grid}
JOBS=${JOBS:-$(nproc)}
VERSION=0.3.36 # vendors ggml-org/llama.cpp 0c1e57098 (its CHANGELOG)
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
SRC=$WORK/llama_cpp_python-$VERSION/vendor/llama.cpp
BUILD=$WORK/build
VENV=$WORK/venv

[ "${FRESH:-0}" = 1 ] && rm -rf "$WORK"
mkdir -p "$WORK"
log() { printf '[llama_cpp_grid] %s\n' "$*" >&2; }

# 1. The pinned source.
SDIST=$WORK/dl/llama_cpp_python-$VERSION.tar.gz
if [ ! -f "$SDIST" ]; then
  log "downloading llama-cpp-python $VERSION (sdist)"
  python3 -m pip download --quiet --no-binary llama-cpp-python --no-deps \
    "llama-cpp-python==$VERSION" -d "$WORK/dl"
fi
echo "$SHA256  $SDIST" | sha256sum -c --quiet - || { log "sha256 mismatch: $SDIST"; exit 2; }
[ -d "$SRC" ] || tar xzf "$SDIST" -C "$WORK"

# 2. Tools.
if [ ! -x "$VENV/bin/python" ]; then
  log "venv: cmake ninja numpy pyyaml tqdm"
  python3 -m venv "$VENV"
  "$VENV/bin/pip" install --quiet cmake ninja 'numpy>=2.2.6' pyyaml tqdm
fi
export PATH=$VENV/bin:$PATH

# 3. libllama (CPU). GGML_NATIVE: the build host's own ISA (the repack kernels depend on it).
if [ ! -f "$BUILD/bin/libllama.so" ]; then
  log "building llama.cpp (CPU, $JOBS jobs)"
  t0=$(date +%s)
  cmake -S "$SRC" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=ON -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF > "$WORK/cmake-configure.log"
  cmake --build "$BUILD" --target llama -j "$JOBS" > "$WORK/cmake-build.log"
  t1=$(date +%s)
  echo "$((t1 - t0))" > "$WORK/build-seconds"
  log "build: $((t1 - t0)) s"
fi

# 3b. The CPU backend again for a plain AVX2 machine (no AVX-512, no AMX): which extra weight
# buffer a quantized model gets (CPU_REPACK) depends on the CPU llama.cpp was built for; the
# native build above takes AMX where the build host has it. Only libggml-cpu is rebuilt.
BUILD2=$WORK/build-avx2
if [ ! -f "$BUILD2/bin/libggml-cpu.so" ]; then
  log "building ggml-cpu for AVX2 (no AMX)"
  t0=$(date +%s)
  cmake -S "$SRC" -B "$BUILD2" -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
    -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF > "$WORK/cmake-configure-avx2.log"
  cmake --build "$BUILD2" --target ggml-cpu -j "$JOBS" > "$WORK/cmake-build-avx2.log"
  echo "$(($(date +%s) - t0))" > "$WORK/build-avx2-seconds"
  log "build (ggml-cpu, AVX2): $(cat "$WORK/build-avx2-seconds") s"
fi

# 4. The probe.
PROBE=$WORK/probe
if [ ! -x "$PROBE" ] || [ "$ROOT/bench/llama-cpp/probe.cpp" -nt "$PROBE" ]; then
  g++ -O1 -std=c++17 -o "$PROBE" "$ROOT/bench/llama-cpp/probe.cpp" \
    -I "$SRC/include" -I "$SRC/ggml/include" -I "$SRC/src" \
    -L "$BUILD/bin" -lllama -lggml -lggml-base -Wl,-rpath,"$BUILD/bin"
fi

# 5. The grid.
log "grid"
t0=$(date +%s)
# shellcheck disable=SC2086
PYTHONPATH=$SRC/gguf-py "$VENV/bin/python" "$ROOT/bench/llama_cpp_grid.py" \
  --probe "$PROBE" --work "$WORK" --src "$SRC" --version "$VERSION" --sha256 "$SHA256" \
  --build-seconds "$(cat "$WORK/build-seconds" 2>/dev/null || echo unknown)" \
  --avx2-lib "$BUILD2/bin" \
  --out "${GRID_OUT:-$ROOT/crates/hypomnesis/tests/fixtures/llama_cpp}" ${GRID_ARGS:-}
log "grid: $(($(date +%s) - t0)) s"
