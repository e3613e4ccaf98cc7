#!/usr/bin/env bash
# Validates hmn against nvidia-smi and nvidia-ml-py on a real NVIDIA machine while a PyTorch
# process holds a known amount of device memory. Prints the three views side by side; paste
# the output into docs/validation.md. Needs: an NVIDIA GPU and driver, python3 with torch and
# nvidia-ml-py (pip install torch nvidia-ml-py), and a built hmn (cargo build --release -p hmn).
set -euo pipefail
cd "$(dirname "$0")/.."
HMN=${HMN:-target/release/hmn}
GIB=${GIB:-4}

python3 - "$GIB" <<'PY' &
import sys, time, torch
n = int(sys.argv[1]) << 30
x = torch.empty(n, dtype=torch.uint8, device="cuda")
x.fill_(1)
torch.cuda.synchronize()
print(f"holder: pid {__import__('os').getpid()} allocated {n} bytes, "
      f"reserved {torch.cuda.memory_reserved()}", flush=True)
time.sleep(60)
PY
HOLDER=$!
trap 'kill $HOLDER 2>/dev/null || true' EXIT
sleep 15

echo "== hmn"; "$HMN"
echo "== hmn --json"; "$HMN" --json
echo "== hmn ps --json"; "$HMN" ps --json
echo "== nvidia-smi"
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,memory.free,memory.reserved --format=csv,noheader,nounits
nvidia-smi --query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv,noheader,nounits
echo "== nvidia-ml-py"
python3 - <<'PY'
import pynvml as n
n.nvmlInit()
print("driver", n.nvmlSystemGetDriverVersion())
for i in range(n.nvmlDeviceGetCount()):
    h = n.nvmlDeviceGetHandleByIndex(i)
    m = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
    print(i, n.nvmlDeviceGetName(h), "total", m.total, "used", m.used, "free", m.free, "reserved", m.reserved)
    for p in n.nvmlDeviceGetComputeRunningProcesses(h) + n.nvmlDeviceGetGraphicsRunningProcesses(h):
        print("  pid", p.pid, "used", p.usedGpuMemory)
PY
