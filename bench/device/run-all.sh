#!/usr/bin/env bash
# The whole real-GPU validation of issue 26 in one run, sized for a short device lease (about
# 3–4 minutes; every step time-limited, the run as a whole stopped at DEADLINE_S). Run from a
# copy of the repository with the release binaries built elsewhere (no Rust toolchain needed):
#
#   bash bench/device/run-all.sh            # writes into $OUT (default ./device-out)
#   REHEARSAL=1 bash bench/device/run-all.sh   # the same flow on the fake NVML and stand-ins
#
# Needs target/release/hmn and target/release/examples/probe_timing (cargo build --release -p
# hmn; cargo build --release -p hypomnesis --example probe_timing), python3 with torch,
# transformers and nvidia-ml-py, nvidia-smi. Never aborts on a failed step: each step's exit
# status and time are recorded and the next one runs. Never changes a GPU mode that needs a
# reset: the only change is accounting mode (`nvidia-smi -am 1`, root only, no reset), turned on
# for step 2 when it was off and turned off again right after (and on any exit).
# Steps (README.md beside this file says what each writes):
#   0-facts   machine, driver, CUDA, Python packages, modes
#   1-gpu     hmn vs nvidia-ml-py vs nvidia-smi while PyTorch holds HOLD_GIB GiB (+ a busy one)
#   2-run     hmn run's peak VRAM around allocate RUN_X, free, allocate RUN_Y
#   5-timing  Probe query vs init per call; whole-process hmn vs nvidia-smi vs nvidia-ml-py
#   4-extras  hmn doctor, new JSON fields (health, pool), hmn pick, one hmn serve scrape
#   3-fits    bench/validate-fits.sh: hmn fits band vs a real forward pass (FITS_CONTEXTS)
#   6-llama   only with WITH_LLAMA_CUDA=1 and LLAMA_STAGE=DIR (bench/llama_cpp_cuda.sh --stage)
# STEPS=1,4,5 runs only those steps (by number; 0-facts always runs).
# $OUT gets four files: summary.md, compare.json, raw.tgz (every raw output), run-all.log.
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
WORK=$(mktemp -d "${TMPDIR:-/tmp}/hmn-device.XXXXXX")
export RAW=$WORK/raw WORK
mkdir -p "$RAW"
exec > >(tee -a "$OUT/run-all.log") 2>&1
T0=$(date +%s)
export DEADLINE_S=${DEADLINE_S:-330}
export HOLD_GIB=${HOLD_GIB:-4}
export RUN_X=${RUN_X_BYTES:-$((2 << 30))} RUN_Y=${RUN_Y_BYTES:-$((6 << 30))}
export FITS_CONTEXTS=${FITS_CONTEXTS:-8192,32768} FITS_LAYERS=${FITS_LAYERS:-16}
export TIMING_RUNS=${TIMING_RUNS:-20}
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 HERE ROOT
export HMN_DEVICE_MODE=real
if [ "${REHEARSAL:-0}" = 1 ]; then
  # shellcheck source=rehearsal/setup.sh
  . "$HERE/rehearsal/setup.sh"
  export HMN_DEVICE_MODE=rehearsal
fi
# The carried binaries, copied so a lost executable bit or a read-only tree cannot stop them.
mkdir -p "$WORK/bin"
for pair in "hmn=${HMN:-$ROOT/target/release/hmn}" \
  "probe_timing=${PROBE_TIMING:-$ROOT/target/release/examples/probe_timing}"; do
  if [ -f "${pair#*=}" ]; then
    cp "${pair#*=}" "$WORK/bin/${pair%%=*}" && chmod +x "$WORK/bin/${pair%%=*}"
  else
    echo "run-all: ${pair#*=} is missing (carry it): its steps will say so"
  fi
done
export HMN=$WORK/bin/hmn PROBE_TIMING=$WORK/bin/probe_timing
echo "run-all: OUT=$OUT WORK=$WORK mode=$HMN_DEVICE_MODE deadline ${DEADLINE_S}s"

ACC_CHANGED=0
finish() {
  [ "$ACC_CHANGED" = 1 ] && accounting_restore
  summarize
  grep -m1 -E '^[0-9]+ PASS' "$OUT/summary.md" 2>/dev/null
  sed -n '/^## FAIL/,/^## [0-9]/p' "$OUT/summary.md" 2>/dev/null | grep '^- ' | cut -c1-400 | head -30
  [ "${REHEARSAL:-0}" = 1 ] && rehearsal_cleanup
  rm -rf "$WORK"
  echo "run-all: done in $(($(date +%s) - T0)) s"
}
trap finish EXIT
trap 'exit 143' TERM INT

summarize() {
  (cd "$HERE" && timeout 30 python3 summary.py "$WORK" "$OUT") || echo "summary.py failed"
  tar czf "$OUT/raw.tgz.tmp" -C "$WORK" raw facts.txt steps.tsv 2>/dev/null
  mv -f "$OUT/raw.tgz.tmp" "$OUT/raw.tgz"
}

# step NAME LIMIT_S COMPARE_KIND FUNCTION: runs FUNCTION (exported) in its own bash under
# `timeout` (which signals the whole process group: the step's background loads too), records
# exit status and seconds in steps.tsv, then judges (compare.py COMPARE_KIND) and summarizes.
step() {
  local name=$1 limit=$2 kind=$3 fn=$4 now left t rc note=""
  now=$(($(date +%s) - T0)); left=$((DEADLINE_S - now))
  mkdir -p "$RAW/$name"
  if [ -n "${STEPS:-}" ] && [[ ",$STEPS," != *",${name%%-*},"* ]]; then
    printf '%s\tskipped\t0\tnot in STEPS=%s\n' "$name" "$STEPS" >> "$WORK/steps.tsv"
    echo "== [$now s] $name: skipped (STEPS=$STEPS)"; return
  fi
  if ((left < 15)); then
    printf '%s\tskipped\t0\tdeadline: %s s of %s s used\n' "$name" "$now" "$DEADLINE_S" >> "$WORK/steps.tsv"
    echo "== [$now s] $name: skipped (deadline)"; return
  fi
  ((limit > left)) && { limit=$left; note="limit cut to ${left}s by the deadline"; }
  echo "== [$now s] $name (limit ${limit}s)"
  t=$(date +%s)
  STEP_DIR=$RAW/$name timeout -k 5 "$limit" bash -c "$fn" > "$RAW/$name/step.log" 2>&1
  rc=$?
  ((rc == 124 || rc == 137)) && note="timed out at ${limit}s${note:+; $note}"
  printf '%s\t%s\t%s\t%s\n' "$name" "$rc" "$(($(date +%s) - t))" "$note" >> "$WORK/steps.tsv"
  tail -n 5 "$RAW/$name/step.log" | sed "s/^/   $name: /"
  [ -n "$kind" ] && (cd "$HERE" && timeout 30 python3 compare.py "$kind" "$RAW/$name") 2>&1 | sed 's/^/   /'
  summarize
}

# shellcheck source=common.sh
. "$HERE/common.sh"
export -f wait_for

s0_facts() {
  {
    echo "date: $(date -u +%FT%TZ)  host: $(hostname)  uid: $(id -u)  cores: $(nproc)"
    echo "kernel: $(uname -r) (4.4.0 = gVisor)  $(grep PRETTY /etc/os-release 2>/dev/null)"
    echo "hmn: $("$HMN" --version 2>&1 | head -1)  probe_timing: $([ -x "$PROBE_TIMING" ] && echo present || echo absent)"
    echo "glibc: $(ldd --version 2>&1 | head -1)"
    timeout 20 nvidia-smi --query-gpu=index,name,driver_version,pci.bus_id,memory.total,persistence_mode,accounting.mode,mig.mode.current --format=csv 2>&1
    echo "ECC mode: $(timeout 20 nvidia-smi --query-gpu=ecc.mode.current --format=csv,noheader 2>&1 | tr '\n' ' ')"
    timeout 20 nvidia-smi 2>&1 | head -4
    timeout 60 python3 -c '
import sys, importlib
print("python", sys.version.split()[0], sys.executable)
for m in ("torch", "transformers", "pynvml", "accelerate", "safetensors"):
    try:
        mod = importlib.import_module(m)
        extra = f"(CUDA {mod.version.cuda}, available {mod.cuda.is_available()})" if m == "torch" else ""
        print(m, getattr(mod, "__version__", "?"), extra)
    except Exception as e:
        print(m, "MISSING:", e)' 2>&1
    echo "nvcc: $(nvcc --version 2>/dev/null | tail -1)  cmake: $(cmake --version 2>/dev/null | head -1)"
    echo "MPS daemon: $(pgrep -a nvidia-cuda-mps 2>/dev/null || echo none)"
    echo "cgroup: $(head -3 /proc/self/cgroup | tr '\n' ' ')"
    echo "libnvidia-ml: $(ldconfig -p 2>/dev/null | grep -m1 libnvidia-ml.so.1 || echo 'not in ldconfig')"
    df -h "${TMPDIR:-/tmp}" | tail -1
  } > "$WORK/facts.txt" 2>&1
  cp "$WORK/facts.txt" "$STEP_DIR/"
  cat "$WORK/facts.txt"
}

s1_gpu() {
  trap 'kill $H $B 2>/dev/null; wait 2>/dev/null' EXIT; trap 'exit 143' TERM
  python3 "$HERE/load.py" hold "$HOLD_GIB" "$STEP_DIR/holder.json" 150 > "$STEP_DIR/holder.log" 2>&1 & H=$!
  python3 "$HERE/load.py" busy "$STEP_DIR/busy.json" 150 > "$STEP_DIR/busy.log" 2>&1 & B=$!
  wait_for "$STEP_DIR/holder.json" 60 "$H" && wait_for "$STEP_DIR/busy.json" 30 "$B" \
    || echo "loads not ready: $(tail -n 3 "$STEP_DIR/holder.log" "$STEP_DIR/busy.log")"
  sleep 2  # utilization settles (NVML's device figure covers the last 1/6 s to 1 s)
  python3 "$HERE/gpu_collect.py" "$STEP_DIR" "$HMN"
}

s2_run() {
  [ "${REHEARSAL:-0}" = 1 ] && bash "$HERE/rehearsal/hook.sh" before-run-peak "$RUN_X" "$RUN_Y"
  "$HMN" run --json -- python3 "$HERE/run_peak.py" "$RUN_X" "$RUN_Y" "$STEP_DIR/result.json" \
    > "$STEP_DIR/hmn-run.out" 2> "$STEP_DIR/hmn-run.err"
  echo "hmn run exit $?"
  [ "${REHEARSAL:-0}" = 1 ] && bash "$HERE/rehearsal/hook.sh" after-run-peak "$STEP_DIR/result.json"
  timeout 20 nvidia-smi --query-accounted-apps=pid,max_memory_usage --format=csv,noheader,nounits \
    > "$STEP_DIR/accounted.csv" 2>&1
  tail -c 600 "$STEP_DIR/hmn-run.err"
}

s5_timing() {
  if [ -x "$PROBE_TIMING" ]; then
    timeout 40 "$PROBE_TIMING" 2000 50 15 > "$STEP_DIR/probe_timing.json" 2> "$STEP_DIR/probe_timing.err"
    echo "probe_timing exit $?: $(head -c 400 "$STEP_DIR/probe_timing.json")"
  fi
  timeout 30 python3 "$HERE/nvml_costs.py" "$STEP_DIR/nvml_costs.json" 200
  # Where a whole `hmn --json` goes against nvidia-smi's: driver ioctls and opens (strace, if
  # the machine has it).
  if command -v strace >/dev/null; then
    for c in "$HMN --json" "$HMN ps --json" "nvidia-smi --query-gpu=index,memory.used --format=csv"; do
      echo "== $c"; timeout 20 strace -f -c -e trace=ioctl,openat,read,clock_nanosleep,futex $c 2>&1 >/dev/null | tail -n 12
    done > "$STEP_DIR/strace.txt" 2>&1
  else echo "no strace on this machine" > "$STEP_DIR/strace.txt"; fi
  python3 "$HERE/timing.py" "$STEP_DIR/timing.json" "$TIMING_RUNS" 35 "$HMN"
}

s4_extras() {
  local st=() port S
  timeout 20 "$HMN" doctor --json > "$STEP_DIR/doctor.json" 2> "$STEP_DIR/doctor.err"; st+=("doctor.json=$?")
  timeout 30 python3 "$HERE/new_fields.py" "$HMN" "$STEP_DIR/new-fields.json"
  # Memory health (issue 24): hmn's device JSON against nvidia-smi's own counters.
  timeout 20 "$HMN" --json > "$STEP_DIR/hmn-health.json" 2> "$STEP_DIR/hmn-health.err"
  timeout 20 nvidia-smi --query-gpu=index,ecc.mode.current,ecc.mode.pending,ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.volatile.total,ecc.errors.corrected.aggregate.total,ecc.errors.uncorrected.aggregate.total,remapped_rows.correctable,remapped_rows.uncorrectable,remapped_rows.pending,remapped_rows.failure,retired_pages.single_bit_ecc.count,retired_pages.double_bit.count,retired_pages.pending \
    --format=csv,noheader,nounits > "$STEP_DIR/smi-health.csv" 2>&1
  "$HMN" help > "$STEP_DIR/help.txt" 2>&1
  if grep -qE '^  pick ' "$STEP_DIR/help.txt"; then
    timeout 20 "$HMN" pick --need 1GiB --json > "$STEP_DIR/pick.json" 2> "$STEP_DIR/pick.err"; st+=("pick.json=$?")
  else st+=("pick.json=absent: no pick subcommand in this hmn"); fi
  if grep -qE '^  serve ' "$STEP_DIR/help.txt"; then
    port=$((20000 + RANDOM % 20000))
    "$HMN" serve --listen "127.0.0.1:$port" --interval 1s > "$STEP_DIR/serve.log" 2>&1 & S=$!
    timeout 15 python3 "$HERE/scrape.py" "$port" "$STEP_DIR/metrics.txt"
    st+=("metrics.txt=$?"); kill "$S" 2>/dev/null; wait "$S" 2>/dev/null
  else st+=("metrics.txt=absent: no serve subcommand in this hmn"); fi
  python3 - "$STEP_DIR/status.json" "${st[@]}" <<'PY'
import json, sys
st = dict(a.split("=", 1) for a in sys.argv[2:])
json.dump({k: "ok" if v == "0" else f"exit {v}" if v.isdigit() else v for k, v in st.items()},
          open(sys.argv[1], "w"), indent=1)
PY
  cat "$STEP_DIR/status.json"
}

s3_fits() {
  local free; free=$(df -Pk "${TMPDIR:-/tmp}" | awk 'NR==2 {print int($4 / 1048576)}')
  if [ "${free:-0}" -lt "${FITS_MIN_FREE_GIB:-25}" ]; then
    echo "only ${free} GiB free under ${TMPDIR:-/tmp}: fits skipped"; exit 3
  fi
  OUTDIR=$STEP_DIR CONTEXTS=$FITS_CONTEXTS LAYERS=$FITS_LAYERS BUILD_TIMEOUT=90 MEASURE_TIMEOUT=120 \
    MODEL_DIR=$WORK/model bash "$ROOT/bench/validate-fits.sh"
}

s6_llama() {
  bash "$LLAMA_STAGE/llama_cpp_cuda.sh" "$LLAMA_STAGE" "$STEP_DIR" 90
}

export -f s0_facts s1_gpu s2_run s5_timing s4_extras s3_fits s6_llama

# Accounting mode for step 2: on if it was off and can be turned on (root, no reset needed).
accounting_enable() {
  local before after rc out
  before=$(timeout 20 nvidia-smi --query-gpu=accounting.mode --format=csv,noheader 2>&1 | sort -u | tr '\n' ' ')
  rc=skipped; out=""
  if [ "${before% }" = Disabled ]; then
    out=$(timeout 20 nvidia-smi -am 1 2>&1); rc=$?
    [ "$rc" = 0 ] && ACC_CHANGED=1
  fi
  after=$(timeout 20 nvidia-smi --query-gpu=accounting.mode --format=csv,noheader 2>&1 | sort -u | tr '\n' ' ')
  mkdir -p "$RAW/2-run"
  python3 - "$before" "$rc" "$out" "$after" "$RAW/2-run/accounting.json" <<'PY'
import json, sys
before, rc, out, after, path = sys.argv[1:]
on = after.strip() == "Enabled"
note = ("was already on" if before.strip() == "Enabled" else
        f"turned on for step 2 (nvidia-smi -am 1 exit {rc})" if on else
        f"could not be turned on (nvidia-smi -am 1 exit {rc}: {out.strip()[:200]}): hmn run samples only")
json.dump({"before": before.strip(), "enable_rc": rc, "enable_output": out.strip()[:500],
           "during": after.strip(), "enabled_during_run": on, "note": note}, open(path, "w"), indent=1)
print("accounting:", note)
PY
}
accounting_restore() {
  local out rc
  out=$(timeout 20 nvidia-smi -am 0 2>&1); rc=$?
  [ "$rc" = 0 ] && ACC_CHANGED=0
  echo "accounting restored to Disabled: exit $rc ${out:0:200}" | tee -a "$RAW/2-run/accounting-restore.txt"
}

STEPS=${STEPS:+0,$STEPS}
step 0-facts 60 "" s0_facts
step 1-gpu 100 gpu s1_gpu
(($(date +%s) - T0 + 30 < DEADLINE_S)) && [[ -z "${STEPS:-}" || ",$STEPS," == *",2,"* ]] && accounting_enable
step 2-run 60 run s2_run
[ "$ACC_CHANGED" = 1 ] && accounting_restore
step 5-timing 80 timing s5_timing
step 4-extras 45 extras s4_extras
step 3-fits 170 fits s3_fits
if [ "${WITH_LLAMA_CUDA:-0}" = 1 ] && [ -d "${LLAMA_STAGE:-}" ]; then
  export LLAMA_STAGE
  step 6-llama 600 "" s6_llama
fi
