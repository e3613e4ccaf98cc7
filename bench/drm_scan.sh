#!/usr/bin/env bash
# DRM process-scan cost under load: N processes holding F fds each (default 2000 x 64).
# Compares the CPU time (user + system) of `hmn ps` walking /proc with a minimal C floor
# program doing only readdir + readlinkat, and with `fuser` and `lsof` over the same walk;
# then the CPU cost of a cached-index tick against a full scan, inside one process.
# Needs: cc, hyperfine (apt-get install hyperfine), psmisc (fuser), lsof. Run as root or raise
# `ulimit -u` / `ulimit -n` as needed.
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-2000}
F=${F:-64}
RUNS=${RUNS:-10}
mkdir -p target/bench
cc -O2 -o target/bench/holder bench/drm-scan/holder.c
cc -O2 -o target/bench/floor bench/drm-scan/floor.c
cargo build --release -q -p hmn
cargo build --release -q -p hypomnesis --example drm_scan

# A fixture /sys with one amdgpu card, so `hmn ps` runs its DRM scan over the real /proc.
SYS=$(mktemp -d)
mkdir -p "$SYS/devices/0000:03:00.0/power" "$SYS/class/drm/card1"
printf 'DRIVER=amdgpu\nPCI_SLOT_NAME=0000:03:00.0\n' > "$SYS/devices/0000:03:00.0/uevent"
echo 0x1002 > "$SYS/devices/0000:03:00.0/vendor"
echo active > "$SYS/devices/0000:03:00.0/power/runtime_status"
ln -s ../../../devices/0000:03:00.0 "$SYS/class/drm/card1/device"

target/bench/holder "$N" "$F" > "$SYS/holder.out" &
HOLDER=$!
trap 'kill -TERM -- -$HOLDER 2>/dev/null || kill $HOLDER 2>/dev/null; pkill -f target/bench/holder || true; rm -rf "$SYS"' EXIT
for _ in $(seq 600); do grep -q ready "$SYS/holder.out" 2>/dev/null && break; sleep 0.1; done
echo "load: $N processes x $F fds; floor sees $(target/bench/floor) fds"

HMN="env HMN_SYS_ROOT=$SYS HMN_NVML_LIB=/nonexistent HMN_NVIDIA_SMI=/nonexistent target/release/hmn ps --json"
hyperfine -N --warmup 2 --runs "$RUNS" -i --export-json "$SYS/scan.json" \
  "target/bench/floor /proc" "$HMN" "fuser /dev/null" "lsof -n /dev/null" > "$SYS/hyperfine.txt"
python3 - "$SYS/scan.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))["results"]
cpu = {x["command"]: x["user"] + x["system"] for x in r}  # mean CPU seconds per run
floor = next(v for k, v in cpu.items() if "floor" in k)
for k, v in cpu.items():
    name = "hmn ps" if "hmn" in k else k
    print(f"{name:28s} {v*1000:9.1f} ms CPU  {v/floor:5.2f}x floor")
PY
target/release/examples/drm_scan 5
