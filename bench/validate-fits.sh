#!/usr/bin/env bash
# Compares `hmn fits` with what PyTorch really uses, on a real NVIDIA machine, for a model built
# locally (random weights, no download): a Llama-style config (16 layers, GQA 32/8, hidden 4096,
# vocabulary 128256; LAYERS to change the depth) created on the GPU in bf16 and saved with
# transformers' save_pretrained (safetensors), then loaded back in another process and run once
# per context in CONTEXTS (comma-separated) as hmn's generic runtime models it: batch 1, a bf16
# KV cache, SDPA attention, only the last token's logits (`logits_to_keep=1`, as generate()).
# The measured peak is torch.cuda.max_memory_reserved() + the CUDA context (the process's NVML
# figure minus memory_reserved() at a quiet point); `hmn fits DIR --runtime generic --batch 1
# --kv-dtype bf16 --context N --json` gives the band (goal: the peak within ±10 %).
# Needs: an NVIDIA GPU, python3 with torch, transformers and nvidia-ml-py, a built hmn, ~2× the
# model's size (LAYERS 16: 9.1 GB) free under TMPDIR. The helpers are in bench/device/
# (fits_model.py, compare.py); bench/device/run-all.sh runs this as its step 3.
#
#   OUTDIR=dir CONTEXTS=8192,32768 bench/validate-fits.sh
#
# OUTDIR (default: a temporary directory) gets build.json, measure.json, fits-N.json and
# checks.json (PASS/FAIL per context, as bench/device/compare.py judges it).
set -uo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
HMN=${HMN:-$HERE/../target/release/hmn}
CONTEXTS=${CONTEXTS:-${CONTEXT:-8192,32768}}
LAYERS=${LAYERS:-16}
OUTDIR=${OUTDIR:-$(mktemp -d)}
MODEL=${MODEL_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/hmn-fits-model.XXXXXX")}
mkdir -p "$OUTDIR"
trap '[ -z "${MODEL_DIR:-}" ] && rm -rf "$MODEL"' EXIT

echo "== build: $LAYERS layers into $MODEL"
if [ ! -f "$MODEL/config.json" ]; then
  timeout -k 5 "${BUILD_TIMEOUT:-120}" python3 "$HERE/device/fits_model.py" build "$MODEL" "$LAYERS" \
    > "$OUTDIR/build.json" 2> "$OUTDIR/build.err"
  echo "build exit $?: $(cat "$OUTDIR/build.json")"
fi
for ctx in ${CONTEXTS//,/ }; do
  "$HMN" fits "$MODEL" --runtime generic --batch 1 --kv-dtype bf16 --context "$ctx" --json \
    > "$OUTDIR/fits-$ctx.json" 2> "$OUTDIR/fits-$ctx.err"
  echo "hmn fits --context $ctx: exit $?"
done
echo "== measure: contexts $CONTEXTS"
timeout -k 5 "${MEASURE_TIMEOUT:-150}" python3 "$HERE/device/fits_model.py" measure "$MODEL" "$CONTEXTS" \
  "$OUTDIR/measure.json" > "$OUTDIR/measure.out" 2> "$OUTDIR/measure.err"
echo "measure exit $?"
python3 "$HERE/device/compare.py" fits "$OUTDIR"
python3 - "$OUTDIR/checks.json" <<'PY'
import json, sys
for c in json.load(open(sys.argv[1])):
    print(f"{c['verdict']:4} {c['figure']}: {c['note']} {json.dumps(c['values'])}")
PY
