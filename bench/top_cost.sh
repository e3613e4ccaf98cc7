#!/usr/bin/env bash
# CPU and memory of `hmn top` at its default interval (1 s) with N processes holding F fds each
# (default 2000 x 64) and one DRM card (a fixture /sys with an amdgpu card, so hmn's DRM scan
# walks the real /proc), against nvtop (default 1 s) and nvitop (default 2 s) on the same
# machine and the same fake NVML (one H100 listing 8 of the load's processes).
#
# nvtop refuses an NVML without ten entry points the fake lacks (PCIe, fan, power limit,
# encoder/decoder...), so every tool loads bench/top-cost/nvml_stubs.c built as
# libnvidia-ml.so.1: those entry points answer NOT_SUPPORTED, everything else is the fake.
# The three run at once in tmux (each needs a terminal); CPU is user + system time of each
# process over WINDOW seconds after WARMUP, from each thread's /proc/<pid>/task/*/schedstat (ns);
# memory is VmRSS and VmHWM. hmn's threads (collector, UI) are also shown one by one.
# NO_DRM=1 is the like-for-like mode: no fixture card (hmn's /sys root is an empty folder), so
# no tool has a DRM GPU to walk fds for and all three show the same NVIDIA GPU.
# Needs: cc, tmux, nvtop (Debian, contrib), nvitop (pip), python3. SKIP_BUILD=1 reuses the
# release build; HMN_BIN=path runs another hmn binary. Run as root or raise
# `ulimit -u` / `ulimit -n` as needed.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
F=${F:-64}
WARMUP=${WARMUP:-15}
WINDOW=${WINDOW:-180}
for t in cc tmux nvtop nvitop python3; do
  command -v "$t" >/dev/null || { echo "bench/top_cost.sh: $t is missing" >&2; exit 2; }
done
mkdir -p target/bench
cc -O2 -o target/bench/holder bench/drm-scan/holder.c
# HMN_BIN=path runs that binary instead of this checkout's release build (a before/after pair).
if [ -z "${HMN_BIN:-}" ]; then
  [ -n "${SKIP_BUILD:-}" ] || cargo build --release -q -p hmn
  HMN_BIN=$PWD/target/release/hmn
fi
cargo build -q -p hmn-testbed
FAKE=$(ls -t target/debug/build/hmn-testbed-*/out/modern/libnvidia-ml.so.1 | head -1)
DIR=$(mktemp -d)
SOCK="hmn-bench-$$"
mkdir -p "$DIR/nvml" "$DIR/sys"
cp "$FAKE" "$DIR/nvml/libfakenvml.so"
cc -shared -fPIC -O2 -o "$DIR/nvml/libnvidia-ml.so.1" bench/top-cost/nvml_stubs.c \
  -Wl,--no-as-needed -L"$DIR/nvml" -l:libfakenvml.so -Wl,-rpath,'$ORIGIN'
ln -s libnvidia-ml.so.1 "$DIR/nvml/libnvidia-ml.so"

# One amdgpu card in a fixture /sys (as bench/drm_scan.sh), unless NO_DRM=1.
if [ -z "${NO_DRM:-}" ]; then
  mkdir -p "$DIR/sys/devices/0000:03:00.0/power" "$DIR/sys/class/drm/card1"
  printf 'DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n' > "$DIR/sys/devices/0000:03:00.0/uevent"
  echo 0x1002 > "$DIR/sys/devices/0000:03:00.0/vendor"
  echo active > "$DIR/sys/devices/0000:03:00.0/power/runtime_status"
  ln -s ../../../devices/0000:03:00.0 "$DIR/sys/class/drm/card1/device"
  MODE="with a DRM fixture card for hmn"
else
  MODE="like for like (NO_DRM=1: no DRM card for anyone)"
fi

target/bench/holder "$N" "$F" > "$DIR/holder.out" &
HOLDER=$!
cleanup() {
  tmux -L "$SOCK" kill-server 2>/dev/null || true
  pkill -P "$HOLDER" 2>/dev/null || true
  kill "$HOLDER" 2>/dev/null || true
  rm -rf "$DIR"
}
trap cleanup EXIT
for _ in $(seq 600); do grep -q ready "$DIR/holder.out" 2>/dev/null && break; sleep 0.1; done

# The fake lists 8 of the load's processes on its one GPU.
{
  printf 'driver_version = 550.54.15\n[device]\nname = NVIDIA H100 80GB HBM3\n'
  printf 'uuid = GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000\npci_bus_id = 00000000:1A:00.0\n'
  printf 'memory_total = 85520809984\nmemory_reserved = 566231040\nmemory_used = 17179869184\n'
  printf 'utilization_gpu = 37\nutilization_memory = 12\ntemperature_c = 41\npower_mw = 71234\n'
  for pid in $(pgrep -P "$HOLDER" | head -8); do
    printf '[process]\ndevice = 0\npid = %s\nused = 2147483648\n' "$pid"
  done
} > "$DIR/nvml/fake-nvml.conf"
echo "load: $N processes x $F fds ($(ls /proc | grep -c '^[0-9]') processes on the machine); $MODE"

PY=$(python3 -c 'import sys; print(sys.executable)')
ENV="env LD_LIBRARY_PATH=$DIR/nvml TERM=xterm-256color"
start() { # name command...
  local name=$1; shift
  if tmux -L "$SOCK" has-session 2>/dev/null; then
    tmux -L "$SOCK" new-session -d -s "$name" -x 160 -y 50 "exec $ENV $* 2>$DIR/$name.err"
  else
    tmux -L "$SOCK" -f /dev/null new-session -d -s "$name" -x 160 -y 50 "exec $ENV $* 2>$DIR/$name.err"
  fi
}
start hmn env HMN_SYS_ROOT="$DIR/sys" HMN_NVML_LIB="$DIR/nvml/libnvidia-ml.so.1" HMN_NVIDIA_SMI=/nonexistent "$HMN_BIN" top
start nvtop nvtop
start nvitop "$PY" -m nvitop
pane_pid() { tmux -L "$SOCK" display -p -t "$1" '#{pane_pid}'; }
# CPU time in ns of every live thread (schedstat: ns, where /proc/<pid>/stat counts 10 ms
# ticks — nvtop's 0.05 % over 60 s is 3 ticks). A thread that exits inside the window is not
# counted; every tool here keeps its threads.
cpu() { cat /proc/"$1"/task/*/schedstat | awk '{s += $1} END {printf "%d\n", s}'; }
sleep "$WARMUP"
declare -A P C0
for t in hmn nvtop nvitop; do
  P[$t]=$(pane_pid $t)
  [ -n "${P[$t]}" ] && [ -d "/proc/${P[$t]}" ] || { echo "$t is not running:"; cat "$DIR/$t.err"; exit 1; }
  C0[$t]=$(cpu "${P[$t]}")
done
# hmn's threads one by one (the collector and the UI), to say where its share goes.
threads() { for task in /proc/"${P[hmn]}"/task/*; do echo "$(cat "$task/comm") $(awk '{print $1}' "$task/schedstat")"; done; }
threads > "$DIR/threads0"
T0=$(date +%s.%N)
sleep "$WINDOW"
threads > "$DIR/threads1"
T1=$(date +%s.%N)
OUT="$DIR/result.txt"
for t in hmn nvtop nvitop; do
  pid=${P[$t]}
  [ -d "/proc/$pid" ] || { echo "$t exited early:"; cat "$DIR/$t.err"; exit 1; }
  c1=$(cpu "$pid")
  rss=$(awk '/^VmRSS/{print $2}' "/proc/$pid/status")
  hwm=$(awk '/^VmHWM/{print $2}' "/proc/$pid/status")
  echo "$t $(( c1 - C0[$t] )) $rss $hwm" >> "$OUT"
done
tmux -L "$SOCK" send-keys -t hmn '?'
sleep 1
RESCAN=$(tmux -L "$SOCK" capture-pane -p -t hmn | grep -o 'found every [^(]*' || echo 'rescan period not shown')
echo "--- hmn's threads, CPU of one core over the window"
join <(sort "$DIR/threads0") <(sort "$DIR/threads1") |
  awk -v w="$WINDOW" '$3 > $2 {printf "  %-12s %.3f%%\n", $1, ($3 - $2) / 1e9 / w * 100}'
for t in hmn nvtop nvitop; do
  echo "--- $t screen (first lines)"
  tmux -L "$SOCK" capture-pane -p -t "$t" | grep -v '^\s*$' | head -6 || true  # head closes the pipe
done
python3 - "$OUT" "$T0" "$T1" "$RESCAN" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
wall = float(sys.argv[3]) - float(sys.argv[2])
cpu = {}
print(f"window {wall:.0f} s; hmn: AMD/Intel clients {sys.argv[4]}")
print(f"{'tool':8s} {'CPU of one core':>16s} {'RSS':>10s} {'peak RSS':>10s}")
for name, ns, rss, hwm in rows:
    cpu[name] = int(ns) / 1e9 / wall * 100
    print(f"{name:8s} {cpu[name]:15.3f}% {int(rss)/1024:8.1f} MiB {int(hwm)/1024:8.1f} MiB")
for other in ("nvtop", "nvitop"):
    if cpu.get(other):
        print(f"hmn / {other}: {cpu['hmn'] / cpu[other]:.3f}x CPU (goal <= 1x nvtop, aim 0.5x)")
PY
