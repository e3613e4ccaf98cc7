"""One process's device memory as NVML reports it (nvidia-ml-py), for the measuring scripts of
bench/device (run_peak.py, fits_model.py): the CUDA context is this figure minus PyTorch's
`memory_reserved()`."""

import pynvml


def nvml_used(pid):
    """Bytes NVML lists for `pid` in any device's compute list; None when not listed."""
    pynvml.nvmlInit()
    try:
        for i in range(pynvml.nvmlDeviceGetCount()):
            h = pynvml.nvmlDeviceGetHandleByIndex(i)
            for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h):
                if p.pid == pid:
                    return p.usedGpuMemory
    finally:
        pynvml.nvmlShutdown()
    return None
