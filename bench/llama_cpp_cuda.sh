#!/usr/bin/env bash
# The CUDA side of bench/llama_cpp_grid.sh, for a machine with an NVIDIA GPU, nvcc, CMake and
# python3 with numpy (no network needed): builds the same pinned llama.cpp with GGML_CUDA for
# one architecture, writes a few synthetic GGUFs, and prints llama.cpp's buffers per buffer
# type (CUDA0 / CUDA_Host / CPU) for full and partial offload. Prepare its input here:
#
#   bench/llama_cpp_cuda.sh --stage DIR     # (on the CPU machine, after llama_cpp_grid.sh)
#
# copies the llama.cpp source (without models/docs/tools), the probe, the GGUF writer and this
# script into DIR; then on the GPU machine:
#
#   bash DIR/llama_cpp_cuda.sh DIR OUTDIR [CUDA_ARCH]   # default CUDA_ARCH 90
#
# OUTDIR gets cuda.log (every probe line) and build.log. Times: ~6-9 min build on 16 cores.
set -euo pipefail
if [ "${1:-}" = --stage ]; then
  DIR=$2
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  WORK=${LLAMA_GRID_WORK:-$ROOT/target/llama-cpp-grid}
  SRC=$(ls -d "$WORK"/llama_cpp_python-*/vendor/llama.cpp | head -1)
  mkdir -p "$DIR"
  tar czf "$DIR/llama-src.tgz" -C "$SRC" --exclude=./models --exclude=./docs --exclude=./tools \
    --exclude=./examples --exclude=./tests --exclude=./media --exclude=./app --exclude=./skills \
    --exclude=./ci --exclude=./benches --exclude=./scripts --exclude=./conversion --exclude=./pocs .
  cp "$ROOT/bench/llama-cpp/probe.cpp" "$ROOT/bench/llama_cpp_grid.py" "$0" "$DIR/"
  du -sh "$DIR"
  exit 0
fi
DIR=$(cd "$1" && pwd)
OUT=$2
ARCH=${3:-90}
mkdir -p "$OUT"
B=/tmp/llama-cuda
mkdir -p $B/src
tar xzf "$DIR/llama-src.tgz" -C $B/src
nvidia-smi -L | tee "$OUT/cuda.log"
t0=$(date +%s)
cmake -S $B/src -B $B/build -G Ninja -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=ON \
  -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_NATIVE=ON -DLLAMA_BUILD_COMMON=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF > "$OUT/build.log" 2>&1
cmake --build $B/build --target llama -j "$(nproc)" >> "$OUT/build.log" 2>&1
echo "build: $(($(date +%s) - t0)) s" | tee -a "$OUT/cuda.log"
g++ -O1 -std=c++17 -o $B/probe "$DIR/probe.cpp" -I $B/src/include -I $B/src/ggml/include \
  -I $B/src/src -L $B/build/bin -lllama -lggml -lggml-base -Wl,-rpath,$B/build/bin
mkdir -p $B/gguf
PYTHONPATH=$B/src/gguf-py:$DIR python3 - <<'PY'
import sys
from pathlib import Path
import llama_cpp_grid as g
for k in ("llama31-8b", "llama31-8b-q4_0", "gemma3-12b"):
    g.write_gguf(g.MODELS[k], Path("/tmp/llama-cuda/gguf") / f"{k}.gguf")
PY
# id n_ctx n_batch n_ubatch n_seq fa type_k type_v swa_full kv_unified n_outputs_max per_seq
FULL="s-4k-fa 4096 2048 512 1 1 f16 f16 0 1 1 1
s-4k-nofa 4096 2048 512 1 0 f16 f16 0 1 1 1
s-32k-fa 32768 2048 512 1 1 f16 f16 0 1 1 1
s-32k-nofa 32768 2048 512 1 0 f16 f16 0 1 1 1
s-4k-fa-ub2048 4096 2048 2048 1 1 f16 f16 0 1 1 1
s4u-32k-fa 32768 2048 512 4 1 f16 f16 0 1 4 1
s4s-32k-nofa 32768 2048 512 4 0 f16 f16 0 0 4 1
l-4k-fa 4096 2048 512 1 1 f16 f16 1 1 0 1
l-4k-nofa 4096 2048 512 1 0 f16 f16 1 1 0 1
s-32k-fa-q8 32768 2048 512 1 1 q8_0 q8_0 0 1 1 1
s-4k-fa-q8 4096 2048 512 1 1 q8_0 q8_0 0 1 1 1"
PART="s-4k-fa 4096 2048 512 1 1 f16 f16 0 1 1 1
s-4k-nofa 4096 2048 512 1 0 f16 f16 0 1 1 1"
run() {  # model ngl configs
  echo "### $1 --ngl $2" >> "$OUT/cuda.log"
  echo "$3" | $B/probe "$B/gguf/$1.gguf" --ngl "$2" 2>&1 \
    | grep -E "^(MEM|BEGIN|END|MODEL)|model buffer size|compute buffer size|output buffer size|KV buffer size|llama_kv_cache: size|n_ctx_seq  |flash_attn |graph: nodes" \
    >> "$OUT/cuda.log" || true
}
run llama31-8b 99 "$FULL"
run gemma3-12b 99 "$(echo "$FULL" | head -4)"
for ngl in 4 3 1 0; do
  run llama31-8b-q4_0 $ngl "$PART"
  run llama31-8b $ngl "$PART"
done
echo "done: $(($(date +%s) - t0)) s" | tee -a "$OUT/cuda.log"
