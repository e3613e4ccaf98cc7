"""Step 5 of bench/device/run-all.sh: whole-process wall time of hmn against nvidia-smi and an
nvidia-ml-py one-shot, run round-robin (so drift hits every command alike) RUNS times each, or
until the whole loop has used BUDGET_S seconds. hyperfine is not assumed on the device.

    timing.py RESULT RUNS BUDGET_S HMN [NAME,NAME,...]   # only those commands

RESULT (JSON): per command the runs, median/min/mean seconds and exit statuses, and the ratios
of the medians named in RATIOS (each command against its baselines, in the same run).
"""

import json
import statistics
import subprocess
import sys
import time

ONESHOT = ("import pynvml as n\nn.nvmlInit()\nfor i in range(n.nvmlDeviceGetCount()):\n"
           "    h = n.nvmlDeviceGetHandleByIndex(i)\n    n.nvmlDeviceGetMemoryInfo(h)\n"
           "    n.nvmlDeviceGetComputeRunningProcesses(h)\nn.nvmlShutdown()\n")


def commands(hmn):
    """The commands timed: hmn's two views, their nvidia-smi and nvidia-ml-py counterparts, and
    the floors (hmn --version: process start; python3 -c pass: the interpreter's start)."""
    return {
        "hmn_json": [hmn, "--json"],
        "hmn_ps_json": [hmn, "ps", "--json"],
        # hmn's own share: the same command with NVML and nvidia-smi pointed at nothing (the
        # /proc scan, DRM, JSON), so what NVML's load and init cost is the difference.
        "hmn_ps_json_no_nvml": ["env", "HMN_NVML_LIB=/nonexistent/libnvidia-ml.so.1",
                                "HMN_NVIDIA_SMI=/nonexistent/nvidia-smi", hmn, "ps", "--json"],
        "smi_query_gpu": ["nvidia-smi", "--query-gpu=index,memory.total,memory.used,memory.free,"
                          "memory.reserved", "--format=csv,noheader,nounits"],
        "smi_query_apps": ["nvidia-smi", "--query-compute-apps=pid,used_memory",
                           "--format=csv,noheader,nounits"],
        "pynvml_oneshot": ["python3", "-c", ONESHOT],
        "hmn_version": [hmn, "--version"],
        "python_empty": ["python3", "-c", "pass"],
    }


RATIOS = [("hmn_json", "smi_query_gpu"), ("hmn_json", "pynvml_oneshot"),
          ("hmn_ps_json", "smi_query_apps"), ("hmn_ps_json", "pynvml_oneshot"),
          ("pynvml_oneshot", "python_empty"), ("hmn_ps_json_no_nvml", "hmn_ps_json")]


def run_once(argv, limit=30):
    """(exit status, wall seconds, user+sys CPU seconds) of one run, timed to the microsecond.

    Not `subprocess.run(timeout=...)`: its wait polls with sleeps doubling to 50 ms, so every
    wall time came out as 31.5 or 63.5 ms (device runs 1-3: hmn "2.0 x" nvidia-smi was that
    quantization). A blocking `os.wait4` returns when the child ends; a timer kills a hung one.
    """
    import os
    import threading
    t = time.perf_counter()
    try:
        p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    except OSError as e:
        return f"not-run: {e}", time.perf_counter() - t, None
    killer = threading.Timer(limit, p.kill)
    killer.start()
    _, status, ru = os.wait4(p.pid, 0)
    seconds = time.perf_counter() - t
    killer.cancel()
    p.returncode = os.waitstatus_to_exitcode(status)  # reaped: Popen must not wait again
    return p.returncode, seconds, ru.ru_utime + ru.ru_stime


def round_robin(argvs, runs, budget=float("inf")):
    """Runs each of `argvs` ({name: argv}) once per round, RUNS rounds or until BUDGET seconds
    have passed (so drift hits every command alike): per name its argv, wall seconds, CPU
    seconds (None where not measured) and exit statuses."""
    cmds = {name: {"argv": argv, "seconds": [], "cpu_s": [], "rcs": []} for name, argv in argvs.items()}
    start = time.time()
    for _ in range(runs):
        if time.time() - start > budget:
            break
        for c in cmds.values():
            rc, seconds, cpu = run_once(c["argv"])
            c["seconds"].append(seconds)
            c["cpu_s"].append(cpu)
            c["rcs"].append(rc)
    return cmds


def main(result, runs, budget, hmn, names=None):
    start = time.time()
    cmds = round_robin({name: argv for name, argv in commands(hmn).items()
                        if names is None or name in names}, runs, budget)
    out = {"runs_asked": runs, "budget_s": budget, "loop_s": round(time.time() - start, 2),
           "commands": {}, "ratios": {}}
    for name, c in cmds.items():
        s = c["seconds"]
        out["commands"][name] = {
            "argv": c["argv"], "runs": len(s), "rcs": sorted(set(map(str, c["rcs"]))),
            "median_s": statistics.median(s) if s else None, "min_s": min(s) if s else None,
            "mean_s": statistics.fmean(s) if s else None,
            "median_cpu_s": statistics.median([x for x in c["cpu_s"] if x is not None] or [0]) if s else None}
    for a, b in RATIOS:
        ma = out["commands"].get(a, {}).get("median_s")
        mb = out["commands"].get(b, {}).get("median_s")
        if ma and mb:
            out["ratios"][f"{a}/{b}"] = round(ma / mb, 3)
    with open(result, "w") as f:
        json.dump(out, f, indent=1)
    print(json.dumps(out["ratios"]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4],
         sys.argv[5].split(",") if len(sys.argv) > 5 else None)
