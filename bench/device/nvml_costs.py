"""What each NVML call that hmn's device query makes costs on this machine (issue 26).

The device run of 2026-11-26 found hmn's long-lived `Probe::device(0)` at 5.9 ms median on an
H200 against 6.7 µs for a bare nvmlDeviceGetMemoryInfo: this times every call of that query
(and of the process list, doctor and health readings) one by one, through nvidia-ml-py, so the
dear ones are named. Usage: nvml_costs.py OUT.json [CALLS]. A call the library or the device
does not have is recorded with its error, never a number.
"""
import json
import statistics
import sys
import time

import pynvml as N


def timed(fn, calls):
    ns, err = [], None
    for _ in range(calls):
        t = time.perf_counter_ns()
        try:
            fn()
        except Exception as e:  # NVMLError_NotSupported, AttributeError (old binding), …
            err = f"{type(e).__name__}: {e}"[:160]
        ns.append(time.perf_counter_ns() - t)
    return {"calls": calls, "median_us": round(statistics.median(ns) / 1000, 2),
            "min_us": round(min(ns) / 1000, 2), "max_us": round(max(ns) / 1000, 2), "error": err}


def main():
    out, calls = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 200
    res = {"binding": getattr(N, "__version__", None), "calls": {}}
    t = time.perf_counter_ns()
    N.nvmlInit()
    res["first_init_us"] = round((time.perf_counter_ns() - t) / 1000, 1)
    h = N.nvmlDeviceGetHandleByIndex(0)
    C = getattr(N, "NVML_CLOCK_GRAPHICS", 0), getattr(N, "NVML_CLOCK_SM", 1), getattr(N, "NVML_CLOCK_MEM", 2)
    v2 = getattr(N, "nvmlMemory_v2", None)
    table = {
        "nvmlDeviceGetCount": lambda: N.nvmlDeviceGetCount(),
        "nvmlDeviceGetHandleByIndex": lambda: N.nvmlDeviceGetHandleByIndex(0),
        "nvmlSystemGetDriverVersion": lambda: N.nvmlSystemGetDriverVersion(),
        "nvmlDeviceGetName": lambda: N.nvmlDeviceGetName(h),
        "nvmlDeviceGetUUID": lambda: N.nvmlDeviceGetUUID(h),
        "nvmlDeviceGetPciInfo": lambda: N.nvmlDeviceGetPciInfo(h),
        "nvmlDeviceGetMemoryInfo": lambda: N.nvmlDeviceGetMemoryInfo(h),
        "nvmlDeviceGetMemoryInfo_v2": (lambda: N.nvmlDeviceGetMemoryInfo(h, version=v2)) if v2 else None,
        "nvmlDeviceGetTemperature": lambda: N.nvmlDeviceGetTemperature(h, 0),
        "nvmlDeviceGetPowerUsage": lambda: N.nvmlDeviceGetPowerUsage(h),
        "nvmlDeviceGetTotalEnergyConsumption": lambda: N.nvmlDeviceGetTotalEnergyConsumption(h),
        "nvmlDeviceGetClockInfo(graphics)": lambda: N.nvmlDeviceGetClockInfo(h, C[0]),
        "nvmlDeviceGetClockInfo(sm)": lambda: N.nvmlDeviceGetClockInfo(h, C[1]),
        "nvmlDeviceGetClockInfo(mem)": lambda: N.nvmlDeviceGetClockInfo(h, C[2]),
        "nvmlDeviceGetUtilizationRates": lambda: N.nvmlDeviceGetUtilizationRates(h),
        "nvmlDeviceGetMigMode": lambda: N.nvmlDeviceGetMigMode(h),
        "nvmlDeviceGetComputeRunningProcesses": lambda: N.nvmlDeviceGetComputeRunningProcesses(h),
        "nvmlDeviceGetGraphicsRunningProcesses": lambda: N.nvmlDeviceGetGraphicsRunningProcesses(h),
        "nvmlDeviceGetMPSComputeRunningProcesses": lambda: N.nvmlDeviceGetMPSComputeRunningProcesses(h),
        "nvmlDeviceGetProcessUtilization": lambda: N.nvmlDeviceGetProcessUtilization(h, 0),
        "nvmlDeviceGetAccountingMode": lambda: N.nvmlDeviceGetAccountingMode(h),
        "nvmlDeviceGetPersistenceMode": lambda: N.nvmlDeviceGetPersistenceMode(h),
        "nvmlDeviceGetEccMode": lambda: N.nvmlDeviceGetEccMode(h),
        "nvmlDeviceGetTotalEccErrors(uncorrected, volatile)": lambda: N.nvmlDeviceGetTotalEccErrors(h, 1, 0),
        "nvmlDeviceGetRemappedRows": lambda: N.nvmlDeviceGetRemappedRows(h),
        "nvmlDeviceGetRetiredPages": lambda: N.nvmlDeviceGetRetiredPages(h, 0),
        # Issue 24's leftovers: read once per device per query (compute mode), or by the XID
        # counter's thread (the event set; a 0 ms wait is the call's own cost, a timeout).
        "nvmlDeviceGetComputeMode": lambda: N.nvmlDeviceGetComputeMode(h),
        "nvmlDeviceGetSupportedEventTypes": lambda: N.nvmlDeviceGetSupportedEventTypes(h),
    }
    event_set = None
    try:
        event_set = N.nvmlEventSetCreate()
        N.nvmlDeviceRegisterEvents(h, getattr(N, "nvmlEventTypeXidCriticalError", 8), event_set)
        wait = getattr(N, "nvmlEventSetWait_v2", None) or N.nvmlEventSetWait
        table["nvmlEventSetWait_v2(0 ms)"] = lambda: wait(event_set, 0)
    except Exception as e:
        res["event_set_error"] = f"{type(e).__name__}: {e}"[:160]
    for name, fn in table.items():
        res["calls"][name] = timed(fn, calls) if fn else {"error": "not in this binding"}
    if event_set is not None:
        try:
            N.nvmlEventSetFree(event_set)
        except Exception as e:
            res["event_set_free_error"] = f"{type(e).__name__}: {e}"[:160]
    N.nvmlShutdown()
    cycles = []
    for _ in range(10):
        t = time.perf_counter_ns()
        N.nvmlInit()
        N.nvmlShutdown()
        cycles.append(time.perf_counter_ns() - t)
    res["init_shutdown_us"] = {"median": round(statistics.median(cycles) / 1000, 1),
                               "min": round(min(cycles) / 1000, 1)}
    ok = {k: v["median_us"] for k, v in res["calls"].items() if v.get("median_us") is not None and not v.get("error")}
    res["dearest"] = sorted(ok.items(), key=lambda kv: -kv[1])[:6]
    json.dump(res, open(out, "w"), indent=1)
    print(json.dumps({"dearest": res["dearest"], "init_shutdown_us": res["init_shutdown_us"]}))


if __name__ == "__main__":
    main()
