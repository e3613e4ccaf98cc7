#!/usr/bin/env bash
# CPU cost of `hmn run`'s sampler: the sampler thread's CPU time (getrusage RUSAGE_THREAD)
# over the run's wall time, at 100 ms and 10 ms, without a GPU and with the fake NVML
# (one H100 with one process; pid 1, outside the tree, so the fake does no extra work). Goals: < 0.5 % of a core at 100 ms,
# < 5 % at 10 ms.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${SECS:-10}
cargo build --release -q -p hmn
cargo build -q -p hmn-testbed
FAKE=$(ls -t target/debug/build/hmn-testbed-*/out/modern/libnvidia-ml.so.1 | head -1)
DIR=$(mktemp -d)
trap 'rm -rf "$DIR"' EXIT
mkdir -p "$DIR/nvml" "$DIR/sys"
cp "$FAKE" "$DIR/nvml/libnvidia-ml.so.1"
cat > "$DIR/nvml/fake-nvml.conf" <<'CONF'
driver_version = 550.54.15
[device]
name = NVIDIA H100 80GB HBM3
uuid = GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000
pci_bus_id = 00000000:1A:00.0
memory_total = 85520809984
memory_reserved = 566231040
memory_used = 1073741824
utilization_gpu = 37
temperature_c = 41
power_mw = 71234
[process]
device = 0
pid = 1
used = 1073741824
CONF
run() {
  local label=$1 interval=$2; shift 2
  env HMN_SYS_ROOT="$DIR/sys" HMN_NVIDIA_SMI=/nonexistent "$@" target/release/hmn run --json --no-cgroup --interval "$interval" -- sleep "$SECS" 2>/dev/null |
    python3 -c "import json,sys; d=json.load(sys.stdin); print(f'{\"$label\":22s} {\"$interval\":>6s}  {d[\"samples\"]:5d} samples  {d[\"sampler_cpu_ms\"]:7.1f} ms CPU / {d[\"wall_time_ms\"]} ms = {d[\"sampler_cpu_ms\"]/d[\"wall_time_ms\"]*100:.2f} % of a core')"
}
for iv in 100ms 10ms; do
  run "no GPU" "$iv" HMN_NVML_LIB=/nonexistent
  run "fake NVML, 1 GPU" "$iv" HMN_NVML_LIB="$DIR/nvml/libnvidia-ml.so.1"
done
