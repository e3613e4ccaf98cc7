"""Where a short-lived `hmn ps --json` spends its time on a real driver (issue 26, run 7).

Run 6 found `hmn ps --json` at 40.6 ms (34.4 ms CPU) against 3.9 ms with NVML pointed at
nothing and 26.5 ms for `nvidia-smi --query-compute-apps`; nvml-wrapper's cold init 10.8 ms
and its drop (nvmlShutdown, unload) 10.1 ms. This separates the rest:

    startup.py OUT.json HMN PROBE_TIMING [RUNS]

- whole processes, round-robin, wall and CPU by wait4 (ab.medians): `probe_timing
  oneshot drop` (list devices and processes, drop the probe) against `oneshot forget` (the
  same, exiting with NVML initialised), `hmn ps --json`, nvidia-smi, and an nvidia-ml-py
  one-shot with and without nvmlShutdown;
- `probe_timing oneshot phases` five times: the probe's first and second device and process
  listings and its drop, from inside;
- nvidia-ml-py in this process: nvmlInit, then each call of hmn's device and process listing
  made twice (the first call on a fresh initialisation against the second), then nvmlShutdown.
"""

import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ab  # noqa: E402

ONESHOT = ("import pynvml as n\nn.nvmlInit()\nh = n.nvmlDeviceGetHandleByIndex(0)\n"
           "n.nvmlDeviceGetMemoryInfo(h)\nn.nvmlDeviceGetComputeRunningProcesses(h)\n")


def whole(hmn, pt, runs):
    return ab.medians({
        "probe_oneshot_drop": [pt, "oneshot", "drop"],
        "probe_oneshot_forget": [pt, "oneshot", "forget"],
        "hmn_ps_json": [hmn, "ps", "--json"],
        "smi_query_apps": ["nvidia-smi", "--query-compute-apps=pid,used_memory",
                           "--format=csv,noheader,nounits"],
        "pynvml_shutdown": ["python3", "-c", ONESHOT + "n.nvmlShutdown()\n"],
        "pynvml_no_shutdown": ["python3", "-c", ONESHOT],
    }, runs)


def phases(pt):
    runs = []
    for _ in range(5):
        p = subprocess.run([pt, "oneshot", "phases"], capture_output=True, text=True, timeout=30)
        try:
            runs.append(json.loads(p.stdout))
        except ValueError:
            runs.append({"error": (p.stdout + p.stderr)[-300:]})
    ok = [r for r in runs if "error" not in r]
    med = {k[:-3] + "_ms": round(statistics.median(r[k] for r in ok) / 1e6, 3)
           for k in (ok[0] if ok else {}) if k.endswith("_ns")}
    return {"median_ms": med, "runs": runs}


def first_calls():
    import pynvml as n
    res = {}

    def t(name, fn):
        """Times one call of `fn`: the first under NAME is its first_us, the next second_us."""
        a = time.perf_counter_ns()
        err = None
        try:
            fn()
        except Exception as e:
            err = f"{type(e).__name__}: {e}"[:120]
        entry = res.setdefault(name, {})
        entry["second_us" if "first_us" in entry else "first_us"] = round((time.perf_counter_ns() - a) / 1000, 1)
        if err:
            entry["error"] = err

    t("nvmlInit", n.nvmlInit)
    h = None
    for _ in range(2):
        t("nvmlSystemGetDriverVersion", n.nvmlSystemGetDriverVersion)
        t("nvmlDeviceGetCount", n.nvmlDeviceGetCount)
        t("nvmlDeviceGetHandleByIndex", lambda: n.nvmlDeviceGetHandleByIndex(0))
        h = n.nvmlDeviceGetHandleByIndex(0)
        for name, fn in (
            ("nvmlDeviceGetName", lambda: n.nvmlDeviceGetName(h)),
            ("nvmlDeviceGetUUID", lambda: n.nvmlDeviceGetUUID(h)),
            ("nvmlDeviceGetPciInfo", lambda: n.nvmlDeviceGetPciInfo(h)),
            ("nvmlDeviceGetMemoryInfo_v2", lambda: n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)),
            ("nvmlDeviceGetMigMode", lambda: n.nvmlDeviceGetMigMode(h)),
            ("nvmlDeviceGetComputeMode", lambda: n.nvmlDeviceGetComputeMode(h)),
            ("nvmlDeviceGetUtilizationRates", lambda: n.nvmlDeviceGetUtilizationRates(h)),
            ("nvmlDeviceGetTemperature", lambda: n.nvmlDeviceGetTemperature(h, 0)),
            ("nvmlDeviceGetPowerUsage", lambda: n.nvmlDeviceGetPowerUsage(h)),
            ("nvmlDeviceGetClockInfo", lambda: n.nvmlDeviceGetClockInfo(h, 0)),
            ("nvmlDeviceGetMaxClockInfo", lambda: n.nvmlDeviceGetMaxClockInfo(h, 0)),
            ("nvmlDeviceGetComputeRunningProcesses", lambda: n.nvmlDeviceGetComputeRunningProcesses(h)),
            ("nvmlDeviceGetGraphicsRunningProcesses", lambda: n.nvmlDeviceGetGraphicsRunningProcesses(h)),
            ("nvmlDeviceGetMPSComputeRunningProcesses", lambda: n.nvmlDeviceGetMPSComputeRunningProcesses(h)),
        ):
            t(name, fn)
    t("nvmlShutdown", n.nvmlShutdown)
    firsts = sorted(((k, v.get("first_us", 0)) for k, v in res.items()), key=lambda kv: -kv[1])
    return {"calls": res, "dearest_first": firsts[:6],
            "sum_first_us": round(sum(v.get("first_us", 0) for v in res.values()), 1),
            "sum_second_us": round(sum(v.get("second_us", 0) for v in res.values()), 1)}


def main(out, hmn, pt, runs):
    res = {"whole_process": whole(hmn, pt, runs), "probe_phases": phases(pt)}
    try:
        res["nvml_first_calls"] = first_calls()
    except Exception as e:
        res["nvml_first_calls"] = {"error": f"{type(e).__name__}: {e}"}
    json.dump(res, open(out, "w"), indent=1)
    w = res["whole_process"]
    print(json.dumps({k: (v["median_ms"], v["cpu_ms"]) for k, v in w.items()}))
    print(json.dumps(res["probe_phases"]["median_ms"]))
    f = res["nvml_first_calls"]
    print(json.dumps({k: f.get(k) for k in ("dearest_first", "sum_first_us", "sum_second_us", "error")}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]) if len(sys.argv) > 4 else 20)
