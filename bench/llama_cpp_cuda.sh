#!/usr/bin/env bash
# The CUDA side of bench/llama_cpp_grid.sh, for a machine with an NVIDIA GPU, nvcc, CMake,
# ninja and python3 with numpy and pyyaml (no network needed): builds the same pinned llama.cpp
# with GGML_CUDA for one architecture, creates contexts over bench/llama_cpp_cuda.py's grid
# (full and partial offload) and records llama.cpp's buffers per buffer type (CUDA0 /
# CUDA_Host / CPU) in cuda.csv; then one context held under `hmn run` beside `hmn fits` for
# the same file and settings (the whole process's VRAM as NVML counts it). Prepare here:
#
#   bench/llama_cpp_cuda.sh --stage DIR     # after llama_cpp_grid.sh (LLAMA_GRID_WORK)
#
# copies the llama.cpp source (without models/docs/tools/…), the probe, the two grid scripts
# and this script into DIR; then on the GPU machine:
#
#   bash DIR/llama_cpp_cuda.sh DIR OUTDIR [CUDA_ARCH]   # default CUDA_ARCH 90 (H100/H200)
#
# STUB_KERNELS=1 (the default) empties ggml-cuda's kernel template instances before the build
# (mmq, mmf, flash-attention tile/mma/vec: ~120 of ~190 CUDA files): creating a context runs no
# kernel — its buffers come from graph reservation (ggml_backend_sched_reserve), the CUDA
# backend's supports_op/offload_op and its buffer types' alignment and padding, all untouched —
# so the sizes are the full build's, at a fraction of the build time. The kernel launchers the
# emptied files defined are then defined by a generated libhmnstubs.so linked into the probe
# (every C++ symbol libggml-cuda.so needs and no library it loads defines; some are taken by
# address, so lazy binding alone does not do): each prints its name and aborts, so a stub ever
# called kills the probe and its rows say `fail`, never a wrong size (run 1 of this script,
# without the stubs: "symbol lookup error: ... ggml_cuda_flash_attn_ext_vec_case<128, f16, f16>").
# STUB_KERNELS=0 builds everything (~6-9 min on 16 cores); KEEP_INSTANCES (an extended regex
# of template-instance file names) keeps those real, for a decode that needs them. GRID=0 skips
# the grid. The totals step's model and context: TOTALS_MODEL (a llama_cpp_grid.py key, default
# llama31-8b), TOTALS_LAYERS (default 32: the published depth), TOTALS_CTX (default 8192),
# TOTALS_DECODE (N: a full batch and N single-token steps before the hold, as a server's prompt
# and first tokens — kernels loaded, the CUDA pool and cuBLAS workspace allocated; needs the
# kernels they run kept real). HMN (default: a `hmn` beside the
# repository copy, target/release/hmn) runs the totals step; DEADLINE (s, default 200) bounds the
# grid, and the grid also stops starting runs TOTAL_S (default 500) seconds after the start. REHEARSAL=1 with PREBUILT=DIR (a CPU build's bin/) skips the build: the flow on a CPU.
# OUTDIR: steps.log, build.log.gz, cuda.csv, cuda-run.json, cuda-grid.log.gz, totals.json.
set -uo pipefail
if [ "${1:-}" = --stage ]; then
  set -e
  DIR=$2
  ROOT=$(cd "$(dirname "$0")/.." && pwd)
  WORK=${LLAMA_GRID_WORK:-$ROOT/target/llama-cpp-grid}
  SRC=$(ls -d "$WORK"/llama_cpp_python-*/vendor/llama.cpp | head -1)
  mkdir -p "$DIR"
  tar czf "$DIR/llama-src.tgz" -C "$SRC" --exclude=./models --exclude=./docs --exclude=./tools \
    --exclude=./examples --exclude=./tests --exclude=./media --exclude=./app --exclude=./skills \
    --exclude=./ci --exclude=./benches --exclude=./scripts --exclude=./conversion --exclude=./pocs \
    --exclude=./.git .
  cp "$ROOT/bench/llama-cpp/probe.cpp" \
    "$ROOT/bench/llama_cpp_grid.py" "$ROOT/bench/llama_cpp_cuda.py" "$0" "$DIR/"
  du -sh "$DIR"
  exit 0
fi
DIR=$(cd "$1" && pwd)
OUT=$2
ARCH=${3:-90}
DEADLINE=${DEADLINE:-200}
TOTAL_S=${TOTAL_S:-500}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
HMN=${HMN:-$DIR/../release/hmn}
B=${LLAMA_CUDA_WORK:-/tmp/llama-cuda}
LOG=$OUT/steps.log
say() { echo "[$(date +%T)] $*" | tee -a "$LOG"; }
unset LD_BIND_NOW
rm -rf "$B" && mkdir -p "$B/src"
tar xzf "$DIR/llama-src.tgz" -C "$B/src"
say "gpu: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | head -1)"
say "nvcc: $(nvcc --version 2>&1 | tail -1); cmake: $(cmake --version 2>&1 | head -1); ninja: $(ninja --version 2>&1)"
say "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) x $(nproc); os: $(. /etc/os-release 2>/dev/null; echo "$PRETTY_NAME")"
t0=$(date +%s)
if [ -n "${PREBUILT:-}" ]; then
  BIN=$PREBUILT
  say "build: skipped (PREBUILT=$PREBUILT)"
  BUILD_S=prebuilt
else
  BIN=$B/build/bin
  if [ "${STUB_KERNELS:-1}" = 1 ]; then
    n=0
    for f in "$B"/src/ggml/src/ggml-cuda/template-instances/*.cu; do
      if [ -n "${KEEP_INSTANCES:-}" ] && basename "$f" | grep -Eq "$KEEP_INSTANCES"; then
        continue
      fi
      echo "// emptied by llama_cpp_cuda.sh (STUB_KERNELS=1): no kernel runs while contexts are created" > "$f"
      n=$((n + 1))
    done
    say "stubbed $n kernel template instances (kept: ${KEEP_INSTANCES:-none})"
  fi
  GEN=(-G Ninja); command -v ninja > /dev/null || GEN=()
  timeout 120 cmake -S "$B/src" -B "$B/build" "${GEN[@]}" -DCMAKE_BUILD_TYPE=Release \
    -DBUILD_SHARED_LIBS=ON -DGGML_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_COMMON=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_TOOLS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_SERVER=OFF -DLLAMA_BUILD_APP=OFF \
    -DLLAMA_OPENSSL=OFF > "$OUT/build.log" 2>&1
  say "configure: rc $? ($(($(date +%s) - t0)) s)"
  timeout "${BUILD_TIMEOUT:-330}" cmake --build "$B/build" --target llama -j "$(nproc)" >> "$OUT/build.log" 2>&1
  rc=$?
  BUILD_S=$(($(date +%s) - t0))
  say "build: rc $rc ($BUILD_S s)"
  gzip -f "$OUT/build.log"
fi
# The stubs: C++ symbols the CUDA (or, rehearsing, any) backend needs that nothing it loads has.
STUBS=$B/stubs
mkdir -p "$STUBS"
L=$(ls "$BIN"/libggml-cuda.so 2>/dev/null || ls "$BIN"/libggml.so)
nm -D --undefined-only "$L" | awk '{print $NF}' | sed 's/@.*//' | grep '^_Z' | sort -u > "$STUBS/und.txt"
for lib in $(ldd "$L" | awk '/=>/ && $3 ~ /^\// {print $3}'); do
  nm -D --defined-only "$lib" | awk '{print $NF}' | sed 's/@.*//'
done | sort -u > "$STUBS/def.txt"
comm -23 "$STUBS/und.txt" "$STUBS/def.txt" > "$STUBS/missing.txt"
{
  echo '#include <stdio.h>'
  echo '#include <stdlib.h>'
  while read -r sym; do
    echo "void $sym(void) { fputs(\"stub called: $sym\\n\", stderr); abort(); }"
  done < "$STUBS/missing.txt"
} > "$STUBS/stubs.c"
gcc -shared -fPIC -O0 -o "$STUBS/libhmnstubs.so" "$STUBS/stubs.c" 2>> "$LOG"
say "stubs: $(wc -l < "$STUBS/missing.txt") symbols of $(basename "$L") defined by libhmnstubs.so (rc $?)"
S=$B/src
g++ -O1 -std=c++17 -o "$B/probe" "$DIR/probe.cpp" -I "$S/include" -I "$S/ggml/include" -I "$S/src" \
  -L "$BIN" -L "$STUBS" -Wl,--no-as-needed -lhmnstubs -Wl,--as-needed -lllama -lggml -lggml-base \
  -Wl,-rpath,"$BIN:$STUBS" 2>> "$LOG"
say "probe: rc $?"
export PYTHONPATH=$S/gguf-py:$DIR
left=$((TOTAL_S - ($(date +%s) - t0) - 40))
[ "$left" -lt "$DEADLINE" ] && DEADLINE=$((left > 20 ? left : 20))
say "grid deadline: $DEADLINE s"
if [ "${GRID:-1}" = 1 ]; then
  python3 "$DIR/llama_cpp_cuda.py" --probe "$B/probe" --work "$B" --out "$OUT" --deadline "$DEADLINE" \
    --build-seconds "$BUILD_S" --build "CUDA sm_$ARCH, STUB_KERNELS=${STUB_KERNELS:-1}" \
    ${REAL_LIMIT_GIB:+--real-limit-gib "$REAL_LIMIT_GIB"} 2>> "$LOG"
  say "grid: rc $? ($(($(date +%s) - t0)) s)"
else
  say "grid: skipped (GRID=0)"
fi
gzip -c "$B/cuda-grid.log" > "$OUT/cuda-grid.log.gz" 2>/dev/null

# Totals: one context (default Llama-3.1-8B at its published 32 layers, 8192 cells, flash
# attention, ubatch 512, one slot) held 3 s under `hmn run`, beside `hmn fits` for the same file.
if [ -x "$HMN" ]; then
  TM=${TOTALS_MODEL:-llama31-8b}
  TL=${TOTALS_LAYERS:-32}
  TC=${TOTALS_CTX:-8192}
  M=$B/gguf/$TM-${TL}l.gguf
  mkdir -p "$B/gguf"
  [ -f "$M" ] || python3 -c "import llama_cpp_grid as g; from pathlib import Path; g.write_gguf(dict(g.MODELS['$TM'], n_layer=$TL), Path('$M'))"
  NGL=${TOTALS_NGL:-999}
  "$HMN" fits "$M" --runtime llama.cpp --context "$TC" --flash-attn on --ubatch 512 --json \
    > "$B/fits.json" 2> "$B/fits.err"
  say "fits: rc $? ($TM, $TL layers, -c $TC)"
  echo "t $TC 2048 512 1 1 f16 f16 0 1 1 1" > "$B/totals.cfg"
  DEC=""
  [ -n "${TOTALS_DECODE:-}" ] && DEC="--decode $TOTALS_DECODE"
  nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader -lms 500 > "$B/smi-apps.txt" 2>&1 &
  smi=$!
  "$HMN" run --json --interval 50ms -- sh -c "'$B/probe' '$M' --ngl $NGL $DEC --hold 3000 < '$B/totals.cfg' > '$B/totals.probe' 2>&1" \
    > "$B/run.json" 2> "$B/run.err"
  say "run: rc $?"
  kill "$smi" 2>/dev/null; wait "$smi" 2>/dev/null
  nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader > "$B/smi-after.txt" 2>&1
  python3 - "$B" "$OUT/totals.json" <<'PY'
import json, sys
from pathlib import Path
b, out = Path(sys.argv[1]), Path(sys.argv[2])
def load(p):
    try:
        return json.loads((b / p).read_text())
    except (OSError, ValueError) as e:
        return {"error": f"{p}: {e}", "text": (b / p).read_text()[-2000:] if (b / p).exists() else None}
mem = [l.split()[1:] for l in (b / "totals.probe").read_text().splitlines() if l.startswith("MEM ")] \
    if (b / "totals.probe").exists() else []
doc = {"fits": load("fits.json"), "run": load("run.json"),
       "probe_mem": mem, "probe_tail": (b / "totals.probe").read_text()[-3000:] if (b / "totals.probe").exists() else None,
       "smi_apps": (b / "smi-apps.txt").read_text()[-4000:] if (b / "smi-apps.txt").exists() else None,
       "errors": {p: (b / p).read_text()[-2000:] for p in ("fits.err", "run.err") if (b / p).exists()}}
out.write_text(json.dumps(doc, indent=1) + "\n")
PY
  say "totals: written"
else
  say "totals: skipped (no hmn at $HMN)"
fi
say "done: $(($(date +%s) - t0)) s"
