"""Step 2 of bench/device/run-all.sh, the command `hmn run --json` measures:

    run_peak.py X_BYTES Y_BYTES RESULT

Creates its CUDA context, measures it at a quiet point (the process's NVML figure minus
`torch.cuda.memory_reserved()`), allocates X (held 1.5 s), frees it and empties the cache (1 s),
allocates Y (held 1.5 s), reads its NVML figure again at that plateau, frees, sleeps 0.5 s, and
writes RESULT (JSON): torch's peaks, both context readings, its pid. The expected peak of the
tree is `max_memory_reserved() + context`; compare.py checks hmn's figure against it (2 %).
The figures are written to RESULT, never to stdout, which hmn run shares with its JSON report.
"""

import json
import os
import sys
import time

import torch

from nvml_pid import nvml_used


def main(x, y, result):
    pid = os.getpid()
    out = {"pid": pid, "x_bytes": x, "y_bytes": y, "torch": torch.__version__}
    t0 = time.time()
    warm = torch.ones(1, device="cuda")
    torch.cuda.synchronize()
    time.sleep(0.5)
    used = nvml_used(pid)
    out["quiet_nvml_used"], out["quiet_reserved"] = used, torch.cuda.memory_reserved()
    out["context_bytes"] = used - out["quiet_reserved"] if used is not None else None
    a = torch.empty(x, dtype=torch.uint8, device="cuda")
    a.fill_(1)
    torch.cuda.synchronize()
    out["x_at_s"] = round(time.time() - t0, 3)
    time.sleep(1.5)
    del a
    torch.cuda.empty_cache()
    time.sleep(1.0)
    b = torch.empty(y, dtype=torch.uint8, device="cuda")
    b.fill_(2)
    torch.cuda.synchronize()
    out["y_at_s"] = round(time.time() - t0, 3)
    time.sleep(0.7)
    used = nvml_used(pid)
    out["plateau_nvml_used"], out["plateau_reserved"] = used, torch.cuda.memory_reserved()
    out["context_bytes_at_plateau"] = used - out["plateau_reserved"] if used is not None else None
    time.sleep(0.8)
    del b, warm
    torch.cuda.empty_cache()
    out["max_memory_reserved"] = torch.cuda.max_memory_reserved()
    out["max_memory_allocated"] = torch.cuda.max_memory_allocated()
    time.sleep(0.5)
    with open(result + ".tmp", "w") as f:
        json.dump(out, f, indent=1)
    os.replace(result + ".tmp", result)


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3])
