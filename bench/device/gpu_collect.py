"""Step 1 of bench/device/run-all.sh: the same instant seen by hmn, nvidia-ml-py and nvidia-smi.

    gpu_collect.py DIR HMN

Writes raw views into DIR (compare.py reads them; nothing is judged here), in an order that
brackets each hmn call between two nvidia-ml-py snapshots, so "equal" can be checked even if a
figure moved: nvml-a.json, hmn.json, hmn-ps.json, nvml-b.json, smi-gpu.csv, smi-apps.csv,
nvml-c.json; then doctor.json (NVML/CUDA versions as hmn reads them), hmn.txt, smi-L.txt,
smi-banner.txt, smi-q.txt, smi-help-query-gpu.txt; then `hmn ps --util --json --interval 1s`
started together with `nvidia-smi pmon -c 1 -s um` (hmn-ps-util.json, pmon.txt); MIG listings
where a GPU is in MIG mode (read-only). Every command runs with a time limit; its exit status
and stderr are in calls.json.
"""

import json
import os
import subprocess
import sys
import time

GPU_FIELDS = ("index,name,uuid,pci.bus_id,driver_version,memory.total,memory.used,memory.free,"
              "memory.reserved,temperature.gpu,power.draw,clocks.gr,clocks.sm,clocks.mem,"
              "utilization.gpu,utilization.memory,accounting.mode,persistence_mode,"
              "mig.mode.current")
APP_FIELDS = "pid,process_name,used_memory,gpu_uuid"


def nvml_get(fn, *a, **k):
    """fn(*a, **k) (bytes decoded), or {"error": …} where it failed: never a number."""
    try:
        v = fn(*a, **k)
        return v.decode() if isinstance(v, bytes) else v
    except Exception as e:  # NVMLError, or a function this nvidia-ml-py lacks
        return {"error": f"{type(e).__name__}: {e}"}


def nvml_snapshot(n):
    """Every figure compare.py checks, from nvidia-ml-py, each call's failure recorded."""
    get = nvml_get
    t = time.time()
    snap = {"t": t, "driver": get(n.nvmlSystemGetDriverVersion),
            "nvml": get(n.nvmlSystemGetNVMLVersion),
            "cuda": get(n.nvmlSystemGetCudaDriverVersion_v2), "devices": []}
    for i in range(n.nvmlDeviceGetCount()):
        h = n.nvmlDeviceGetHandleByIndex(i)
        d = {"index": i, "name": get(n.nvmlDeviceGetName, h), "uuid": get(n.nvmlDeviceGetUUID, h)}
        pci = get(n.nvmlDeviceGetPciInfo, h)
        d["pci_bus_id"] = pci if isinstance(pci, dict) else (
            pci.busId.decode() if isinstance(pci.busId, bytes) else pci.busId)
        m = get(n.nvmlDeviceGetMemoryInfo, h, version=n.nvmlMemory_v2)
        d["memory"] = m if isinstance(m, dict) else {
            "total": m.total, "used": m.used, "free": m.free, "reserved": m.reserved}
        procs = []
        for kind, fn in (("compute", n.nvmlDeviceGetComputeRunningProcesses),
                         ("graphics", n.nvmlDeviceGetGraphicsRunningProcesses)):
            got = get(fn, h)
            if isinstance(got, dict):
                procs.append({"kind": kind, **got})
                continue
            procs += [{"kind": kind, "pid": p.pid, "used": p.usedGpuMemory} for p in got]
        d["processes"] = procs
        u = get(n.nvmlDeviceGetUtilizationRates, h)
        d["utilization"] = u if isinstance(u, dict) else {"gpu": u.gpu, "memory": u.memory}
        d["temperature_c"] = get(n.nvmlDeviceGetTemperature, h, n.NVML_TEMPERATURE_GPU)
        d["power_mw"] = get(n.nvmlDeviceGetPowerUsage, h)
        d["energy_mj"] = get(n.nvmlDeviceGetTotalEnergyConsumption, h)
        d["clocks_mhz"] = {k: get(n.nvmlDeviceGetClockInfo, h, c) for k, c in
                           (("graphics", n.NVML_CLOCK_GRAPHICS), ("sm", n.NVML_CLOCK_SM),
                            ("memory", n.NVML_CLOCK_MEM))}
        d["accounting_mode"] = get(n.nvmlDeviceGetAccountingMode, h)
        d["persistence_mode"] = get(n.nvmlDeviceGetPersistenceMode, h)
        d["mig_mode"] = get(n.nvmlDeviceGetMigMode, h)
        snap["devices"].append(d)
    snap["seconds"] = round(time.time() - t, 4)
    return snap


class Calls:
    def __init__(self, out):
        self.out, self.log = out, []

    def run(self, name, argv, timeout=15, save=True):
        t = time.time()
        try:
            p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
            rc, so, se = p.returncode, p.stdout, p.stderr
        except subprocess.TimeoutExpired as e:
            rc, so, se = "timeout", e.stdout or "", f"timed out after {timeout} s"
            so = so.decode() if isinstance(so, bytes) else so
        except OSError as e:
            rc, so, se = "not-run", "", str(e)
        self.log.append({"name": name, "argv": argv, "rc": rc, "seconds": round(time.time() - t, 3),
                         "stderr": (se or "")[-2000:]})
        if save and name:
            with open(os.path.join(self.out, name), "w") as f:
                f.write(so or "")
        return rc, so

    def dump(self, name, value):
        with open(os.path.join(self.out, name), "w") as f:
            json.dump(value, f, indent=1)


def main(out, hmn):
    import pynvml as n
    os.makedirs(out, exist_ok=True)
    c = Calls(out)
    n.nvmlInit()
    c.dump("pynvml-version.json", {"pynvml": getattr(n, "__version__", None)})
    c.dump("nvml-a.json", nvml_snapshot(n))
    c.run("hmn.json", [hmn, "--json"])
    c.run("hmn-ps.json", [hmn, "ps", "--json"])
    c.dump("nvml-b.json", nvml_snapshot(n))
    c.run("smi-gpu.csv", ["nvidia-smi", f"--query-gpu={GPU_FIELDS}", "--format=csv,noheader,nounits"])
    c.run("smi-apps.csv", ["nvidia-smi", f"--query-compute-apps={APP_FIELDS}",
                           "--format=csv,noheader,nounits"])
    c.dump("nvml-c.json", nvml_snapshot(n))
    c.run("doctor.json", [hmn, "doctor", "--json"])
    c.run("hmn.txt", [hmn])
    c.run("smi-L.txt", ["nvidia-smi", "-L"])
    c.run("smi-banner.txt", ["nvidia-smi"])
    c.run("smi-q.txt", ["nvidia-smi", "-q"], timeout=30)
    c.run("smi-help-query-gpu.txt", ["nvidia-smi", "--help-query-gpu"])
    # Per-process utilization: pmon samples over its own second, hmn over the second between
    # its two queries; both started together.
    t = time.time()
    pmon = subprocess.Popen(["nvidia-smi", "pmon", "-c", "1", "-s", "um"], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)
    c.run("hmn-ps-util.json", [hmn, "ps", "--json", "--util", "--interval", "1s"])
    try:
        pout = pmon.communicate(timeout=15)[0]
        prc = pmon.returncode
    except subprocess.TimeoutExpired:
        pmon.kill()
        pout, prc = pmon.communicate()[0], "timeout"
    c.log.append({"name": "pmon.txt", "argv": pmon.args, "rc": prc,
                  "seconds": round(time.time() - t, 3), "stderr": ""})
    with open(os.path.join(out, "pmon.txt"), "w") as f:
        f.write(pout or "")
    snap = json.load(open(os.path.join(out, "nvml-c.json")))
    if any(isinstance(d.get("mig_mode"), list) and d["mig_mode"][0] == 1 for d in snap["devices"]):
        c.run("smi-mig-lgi.txt", ["nvidia-smi", "mig", "-lgi"])
        c.run("smi-mig-lci.txt", ["nvidia-smi", "mig", "-lci"])
    n.nvmlShutdown()
    c.dump("calls.json", c.log)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
