"""GPU loads for step 1 of bench/device/run-all.sh (PyTorch on device 0).

    load.py hold GIB READY SECONDS   # holds GIB GiB (torch.empty + fill), then sleeps
    load.py busy READY SECONDS       # 4096² bf16 matrix products in a loop: SMs busy

Each writes READY (JSON: pid, torch's allocated/reserved bytes, versions) once its load is in
place, then runs for SECONDS at most (run-all.sh ends it earlier by its pid).
"""

import json
import os
import sys
import time

import torch


def ready(path, **extra):
    info = {"pid": os.getpid(), "allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(), "torch": torch.__version__,
            "torch_cuda": torch.version.cuda, **extra}
    with open(path + ".tmp", "w") as f:
        json.dump(info, f)
    os.replace(path + ".tmp", path)


def hold(gib, path, seconds):
    n = int(gib * (1 << 30))
    x = torch.empty(n, dtype=torch.uint8, device="cuda")
    x.fill_(1)
    torch.cuda.synchronize()
    ready(path, requested=n)
    time.sleep(seconds)
    del x


def busy(path, seconds):
    a = torch.randn(4096, 4096, device="cuda", dtype=torch.bfloat16)
    b = a @ a
    torch.cuda.synchronize()
    ready(path)
    end = time.time() + seconds
    while time.time() < end:
        b = a @ a
        torch.cuda.synchronize()
    del b


if __name__ == "__main__":
    if sys.argv[1] == "hold":
        hold(float(sys.argv[2]), sys.argv[3], float(sys.argv[4]))
    elif sys.argv[1] == "busy":
        busy(sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(f"unknown load {sys.argv[1]}")
