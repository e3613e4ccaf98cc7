#!/usr/bin/env bash
# Issue 26, run 6: what touches NVML and landed after the runs of run-all.sh (issue 24's
# leftovers and issue 28), each against nvidia-ml-py / nvidia-smi on the real driver:
#   views    compute mode (hmn --json, doctor, serve's state set) = NVML = nvidia-smi; the
#            unattributed remainder of ps --json = used - the processes NVML lists (exact)
#   xid      watch's device records and top's XID line count XID events (a number, not
#            "unknown") exactly where nvidia-ml-py can register an XID event set; the events
#            both see during the same seconds
#   pick     hmn pick --need 1GiB takes the GPU (compute mode default); --need 100000GiB refuses
#   top      hmn top in a pseudo-terminal (no tmux on the lent machines): CPU of one core over
#            10 s at --interval 1s with two GPU processes, RSS, threads; its detail pane's lines
#   startup  hmn ps --json with and without NVML (HMN_NVML_LIB pointing nowhere) and
#            nvidia-smi, wall and CPU by wait4; Nvml init+shutdown through nvml-wrapper vs the
#            whole fresh probe (probe_timing); each NVML call's cost incl. the new ones
#   mps      only where nvidia-cuda-mps-control exists: a private MPS daemon (pipe and log
#            directories under the run's temporary folder), one PyTorch client holding 1 GiB;
#            hmn ps's kinds (mps / mps-server) and sums against NVML's three lists and pmon;
#            the daemon is told to quit at the end (and on any exit)
# Never changes a GPU setting (no -am, -c, -pm, MIG or reset). Results: $OUT/ops-check.md
# (PASS/FAIL/INFO per figure), $OUT/ops.json, $OUT/ops-raw.tgz, $OUT/ops-check.log.
#
#   bash bench/device/ops_check.sh               # on the GPU machine, target/release/hmn carried
#   REHEARSAL=1 bash bench/device/ops_check.sh   # here: the fake NVML and the stand-ins
set -uo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
export OUT=${OUT:-$PWD/device-out}
mkdir -p "$OUT"
W=$(mktemp -d "${TMPDIR:-/tmp}/hmn-ops.XXXXXX")
R=$W/ops
mkdir -p "$R" "$W/bin"
exec > >(tee -a "$OUT/ops-check.log") 2>&1
T0=$(date +%s)
export PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1
MODE=real
if [ "${REHEARSAL:-0}" = 1 ]; then
  # shellcheck source=rehearsal/setup.sh
  . "$HERE/rehearsal/setup.sh"
  MODE=rehearsal
fi
for pair in "hmn=${HMN:-$ROOT/target/release/hmn}" \
  "probe_timing=${PROBE_TIMING:-$ROOT/target/release/examples/probe_timing}"; do
  [ -f "${pair#*=}" ] && cp "${pair#*=}" "$W/bin/${pair%%=*}" && chmod +x "$W/bin/${pair%%=*}"
done
HMN=$W/bin/hmn
echo "ops_check: mode=$MODE OUT=$OUT hmn: $("$HMN" --version 2>&1 | head -1)"
say() { echo "== [$(($(date +%s) - T0)) s] $*"; }

LOADS=() MPS_UP=0
cleanup() {
  # Only the loads are waited for: a bare `wait` would wait for the log's tee too, forever.
  [ ${#LOADS[@]} -gt 0 ] && { kill "${LOADS[@]}" 2>/dev/null; wait "${LOADS[@]}" 2>/dev/null; }
  if [ "$MPS_UP" = 1 ]; then
    echo quit | timeout 15 nvidia-cuda-mps-control > "$R/mps/quit.txt" 2>&1
    sleep 1; pgrep -a nvidia-cuda-mps >> "$R/mps/quit.txt" 2>&1
  fi
  (cd "$HERE" && timeout 30 python3 ops_compare.py "$R" "$MODE" "$OUT") || echo "ops_compare.py failed"
  tar czf "$OUT/ops-raw.tgz" -C "$W" ops 2>/dev/null
  [ "${REHEARSAL:-0}" = 1 ] && rehearsal_cleanup
  rm -rf "$W"
  echo "ops_check: done in $(($(date +%s) - T0)) s"
}
trap cleanup EXIT
trap 'exit 143' TERM INT

# shellcheck source=common.sh
. "$HERE/common.sh"
run() {  # NAME LIMIT CMD...: stdout to $R/NAME, stderr and exit status beside it
  local name=$1 limit=$2; shift 2
  timeout -k 3 "$limit" "$@" > "$R/$name" 2> "$R/$name.err"
  echo "$?" > "$R/$name.rc"
}

say "loads: PyTorch holds ${HOLD_GIB:-2} GiB; another runs matrix products"
python3 "$HERE/load.py" hold "${HOLD_GIB:-2}" "$R/holder.json" 120 > "$R/holder.log" 2>&1 & LOADS+=($!)
python3 "$HERE/load.py" busy "$R/busy.json" 120 > "$R/busy.log" 2>&1 & LOADS+=($!)
wait_for "$R/holder.json" 60 "${LOADS[0]}" && wait_for "$R/busy.json" 30 "${LOADS[1]}" \
  || echo "loads not ready: $(tail -n 3 "$R/holder.log" "$R/busy.log")"
sleep 1

say "views: compute mode, unattributed memory, doctor"
run nvml-a.json 20 python3 "$HERE/ops_nvml.py" snapshot /dev/stdout
run hmn-ps.json 20 "$HMN" ps --json
run hmn.json 20 "$HMN" --json
run nvml-b.json 20 python3 "$HERE/ops_nvml.py" snapshot /dev/stdout
run smi-gpu.csv 20 nvidia-smi --query-gpu=index,uuid,compute_mode,memory.used,memory.reserved --format=csv,noheader,nounits
run smi-apps.csv 20 nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits
run doctor.json 30 "$HMN" doctor --json
run hmn.txt 20 "$HMN"

say "xid: nvidia-ml-py's event set, hmn watch and hmn serve over the same 12 s"
port=$((20000 + RANDOM % 20000))
"$HMN" serve --listen "127.0.0.1:$port" --interval 1s > "$R/serve.log" 2>&1 & SERVE=$!
python3 "$HERE/ops_nvml.py" xid 12 "$R/nvml-xid.json" > "$R/nvml-xid.out" 2>&1 & XID=$!
timeout -k 3 25 "$HMN" watch --json --interval 1s --duration 10s > "$R/watch.jsonl" 2> "$R/watch.err"
echo "$?" > "$R/watch.jsonl.rc"
timeout 15 python3 "$HERE/scrape.py" "$port" "$R/metrics.txt"
kill "$SERVE" 2>/dev/null; wait "$SERVE" "$XID" 2>/dev/null
(timeout 5 dmesg 2>&1 | grep -i -E 'xid|NVRM' | tail -n 20) > "$R/dmesg-xid.txt"

say "pick"
run pick.json 20 "$HMN" pick --need 1GiB --json
run pick-huge.json 20 "$HMN" pick --need 100000GiB --json

say "top in a pseudo-terminal (12 s)"
timeout -k 3 40 python3 "$HERE/ops_top.py" "$HMN" "$R/top" 10 > "$R/top.out" 2>&1

say "startup: hmn with and without NVML, nvidia-smi; NVML init; each NVML call"
timeout -k 3 40 python3 "$HERE/timing.py" "$R/timing.json" "${TIMING_RUNS:-20}" 25 "$HMN" \
  hmn_ps_json,hmn_ps_json_no_nvml,smi_query_apps,hmn_version > "$R/timing.out" 2>&1
say "startup: probe_timing"
[ -x "$W/bin/probe_timing" ] && run probe_timing.json 40 "$W/bin/probe_timing" 300 20 8
say "startup: nvml_costs.py"
run nvml_costs.out 40 python3 "$HERE/nvml_costs.py" "$R/nvml_costs.json" 100

kill "${LOADS[@]}" 2>/dev/null; wait "${LOADS[@]}" 2>/dev/null; LOADS=()
mkdir -p "$R/mps"
if command -v nvidia-cuda-mps-control > /dev/null && [ "${MPS:-1}" = 1 ]; then
  say "mps: a private daemon and one client"
  export CUDA_MPS_PIPE_DIRECTORY=$W/mps-pipe CUDA_MPS_LOG_DIRECTORY=$W/mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  if timeout 15 nvidia-cuda-mps-control -d > "$R/mps/start.txt" 2>&1; then
    MPS_UP=1
    python3 "$HERE/load.py" hold 1 "$R/mps/client.json" 60 > "$R/mps/client.log" 2>&1 & LOADS+=($!)
    if wait_for "$R/mps/client.json" 45 "${LOADS[0]}"; then
      sleep 1
      run mps/nvml.json 20 python3 "$HERE/ops_nvml.py" snapshot /dev/stdout
      run mps/hmn-ps.json 20 "$HMN" ps --json
      run mps/smi-apps.csv 20 nvidia-smi --query-compute-apps=pid,process_name,used_memory --format=csv,noheader,nounits
      run mps/pmon.txt 20 nvidia-smi pmon -c 1 -s m
      run mps/hmn-ps.txt 20 "$HMN" ps
      ps -eo pid,comm > "$R/mps/ps.txt" 2>&1
    else
      echo "the MPS client did not get ready: $(tail -n 5 "$R/mps/client.log")" | tee "$R/mps/failed.txt"
    fi
    cp -r "$CUDA_MPS_LOG_DIRECTORY" "$R/mps/log" 2>/dev/null
  else
    echo "nvidia-cuda-mps-control -d failed: $(cat "$R/mps/start.txt")" | tee "$R/mps/failed.txt"
  fi
else
  echo "no nvidia-cuda-mps-control on this machine (or MPS=0)" > "$R/mps/absent.txt"
fi
say "compare"
