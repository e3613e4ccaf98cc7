"""nvidia-ml-py's side of bench/device/ops_check.sh (issue 26, run 6): what hmn's newer NVML
readings are compared with.

    ops_nvml.py snapshot OUT.json     # per device: memory (v2), compute mode, the three
                                      # process lists (compute, graphics, MPS) with their bytes
    ops_nvml.py xid SECONDS OUT.json  # an XID event set over every device for SECONDS: whether
                                      # it could be made and registered (per device, with the
                                      # error), and every event that arrived

Every call's failure is recorded as text, never turned into a number.
"""

import json
import os
import sys
import time

import pynvml as n

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpu_collect import nvml_get as get  # noqa: E402


def snapshot(path):
    n.nvmlInit()
    t = time.time()
    snap = {"t": t, "devices": []}
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)
        d = {"index": i, "uuid": get(n.nvmlDeviceGetUUID, h)}
        m = get(n.nvmlDeviceGetMemoryInfo, h, version=n.nvmlMemory_v2)
        d["memory"] = m if isinstance(m, dict) else {
            "total": m.total, "used": m.used, "free": m.free, "reserved": m.reserved}
        d["compute_mode"] = get(n.nvmlDeviceGetComputeMode, h)
        lists = {}
        for kind, name in (("compute", "nvmlDeviceGetComputeRunningProcesses"),
                           ("graphics", "nvmlDeviceGetGraphicsRunningProcesses"),
                           ("mps", "nvmlDeviceGetMPSComputeRunningProcesses")):
            got = get(getattr(n, name), h) if hasattr(n, name) else {"error": "not in binding"}
            lists[kind] = got if isinstance(got, dict) else [
                {"pid": p.pid, "used": p.usedGpuMemory} for p in got]
        d["processes"] = lists
        snap["devices"].append(d)
    snap["seconds"] = round(time.time() - t, 4)
    n.nvmlShutdown()
    json.dump(snap, open(path, "w"), indent=1)


def xid(seconds, path):
    n.nvmlInit()
    res = {"devices": {}, "events": [], "errors": []}
    xid_type = getattr(n, "nvmlEventTypeXidCriticalError", 8)
    s = get(n.nvmlEventSetCreate)
    if isinstance(s, dict):
        res["set"] = s
    else:
        res["set"] = "created"
        for i in range(n.nvmlDeviceGetCount()):
            h = n.nvmlDeviceGetHandleByIndex(i)
            sup = get(n.nvmlDeviceGetSupportedEventTypes, h)
            reg = get(n.nvmlDeviceRegisterEvents, h, xid_type, s)
            res["devices"][str(i)] = {
                "supported_mask": sup,
                "xid_supported": (sup & xid_type != 0) if isinstance(sup, int) else None,
                "registered": not isinstance(reg, dict), "register_error": reg if isinstance(reg, dict) else None}
        end = time.time() + seconds
        wait = getattr(n, "nvmlEventSetWait_v2", None) or n.nvmlEventSetWait
        while time.time() < end:
            ms = max(1, int(min(1.0, end - time.time()) * 1000))
            try:
                e = wait(s, ms)
                res["events"].append({"t": time.time(), "type": e.eventType, "data": e.eventData,
                                      "index": get(lambda: n.nvmlDeviceGetIndex(e.device))})
            except n.NVMLError as e:
                if getattr(e, "value", None) != getattr(n, "NVML_ERROR_TIMEOUT", 10):
                    res["errors"].append(str(e))
                    time.sleep(0.2)
        get(n.nvmlEventSetFree, s)
    n.nvmlShutdown()
    json.dump(res, open(path, "w"), indent=1)
    print(json.dumps({k: res[k] for k in ("set", "devices")} | {"events": len(res["events"])}))


if __name__ == "__main__":
    if sys.argv[1] == "snapshot":
        snapshot(sys.argv[2])
    elif sys.argv[1] == "xid":
        xid(float(sys.argv[2]), sys.argv[3])
    else:
        sys.exit(f"unknown view {sys.argv[1]}")
