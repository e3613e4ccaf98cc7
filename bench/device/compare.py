"""Judges the raw views of bench/device/run-all.sh, one step directory at a time:

    compare.py gpu|run|fits|timing|extras STEPDIR    # writes STEPDIR/checks.json

Each check is one figure: PASS or FAIL against a stated rule, or INFO (recorded, not judged),
or SKIP (not measurable here, with why), with every source's value beside it. Offline by
design: rerun it on the returned raw.tgz after fixing a rule, no GPU needed. Rules (issue 26,
docs/validation.md): hmn = nvidia-ml-py exactly (the same NVML calls; where a figure moved
between the two snapshots that bracket hmn's call, hmn must equal one of them); nvidia-smi
within 1 MiB (it prints MiB); telemetry within stated tolerances (different instants; a unit
error is off by 1000×, far outside them); `hmn run` peak within 2 % of PyTorch's reserved peak
plus the CUDA context; `hmn fits` band within ±10 % of the measured peak.
"""

import json
import os
import re
import sys

from gpu_collect import APP_FIELDS, GPU_FIELDS

MIB = 1 << 20


def load(d, name, default=None):
    try:
        with open(os.path.join(d, name)) as f:
            return json.load(f)
    except (OSError, ValueError):
        return default


def last_json_line(d, name):
    """hmn run shares stdout with its command: the report is the last JSON line."""
    try:
        lines = open(os.path.join(d, name)).read().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                return None
    return None


def text(d, name):
    try:
        return open(os.path.join(d, name)).read()
    except OSError:
        return ""


class Checks:
    def __init__(self, step):
        self.step, self.rows = step, []

    def add(self, figure, verdict, rule="", note="", **values):
        self.rows.append({"step": self.step, "figure": figure, "verdict": verdict, "rule": rule,
                          "values": values, "note": note})

    def equal(self, figure, hmn, nvml, smi=None, smi_mib=False, tol=None, note=""):
        """hmn vs nvidia-ml-py (a list: the bracketing snapshots) and nvidia-smi."""
        nv = [v for v in nvml if v is not None and not isinstance(v, dict)]
        errors = [v for v in nvml if isinstance(v, dict)]
        if hmn is None or not nv:
            self.add(figure, "FAIL" if nv or hmn is not None else "SKIP", "equal",
                     note or ("NVML: " + str(errors[0]) if errors else "a value is missing"),
                     hmn=hmn, nvml=nvml, smi=smi)
            return
        if tol is None:
            ok = hmn in nv
            rule = "hmn = nvidia-ml-py" + (" (moved between snapshots)" if len(set(map(str, nv))) > 1 else "")
        else:
            ok = any(abs(float(hmn) - float(v)) <= tol(float(v)) for v in nv)
            rule = f"hmn ≈ nvidia-ml-py ({tol.__doc__})"
        if smi is not None and tol is None and not smi_mib:
            ok = ok and str(smi).strip() == str(hmn)
            rule += "; nvidia-smi equal"
        elif smi is not None:
            s = num(smi)
            if s is None:
                ok, note = False, note or f"nvidia-smi printed {smi!r}"
            elif smi_mib:
                diff = s * MIB - float(hmn)
                ok = ok and (abs(diff) < MIB or any(abs(s * MIB - float(v)) < MIB for v in nv))
                rule += "; nvidia-smi within 1 MiB"
                note = note or f"nvidia-smi − hmn = {diff / MIB:+.3f} MiB"
            else:
                ok = ok and abs(s - float(hmn)) <= tol(float(hmn))
                rule += "; nvidia-smi too"
        self.add(figure, "PASS" if ok else "FAIL", rule, note, hmn=hmn, nvml=nvml, smi=smi)


def num(v):
    try:
        return float(str(v).strip().split()[0])
    except (ValueError, IndexError):
        return None


def norm_pci(s):
    """`00000000:1A:00.0` (NVML, nvidia-smi) and `0000:1a:00.0` (hmn) are the same address."""
    m = re.match(r"^([0-9a-fA-F]+):([0-9a-fA-F]{2}):([0-9a-fA-F]{2})\.([0-7])$", str(s or "").strip())
    return None if not m else f"{int(m[1], 16):04x}:{m[2].lower()}:{m[3].lower()}.{m[4]}"


def tol_abs(n, label):
    def f(_v):
        return n
    f.__doc__ = label
    return f


def tol_rel(rel, floor, label):
    def f(v):
        return max(floor, abs(v) * rel)
    f.__doc__ = label
    return f


def smi_rows(d):
    fields = GPU_FIELDS.split(",")
    return [dict(zip(fields, [c.strip() for c in line.split(",")]))
            for line in text(d, "smi-gpu.csv").splitlines() if line.strip()]


def gpu(d):
    c = Checks("1-gpu")
    snaps = [load(d, f"nvml-{x}.json") for x in "abc"]
    if not all(snaps):
        c.add("nvidia-ml-py snapshots", "FAIL", note="missing: " + ", ".join(
            f"nvml-{x}.json" for x, s in zip("abc", snaps) if not s) + " (see gpu_collect's stderr)")
        return c
    a, b, cc = snaps
    hmn = load(d, "hmn.json") or {}
    ps = load(d, "hmn-ps.json") or {}
    doctor = load(d, "doctor.json") or {}
    smi = smi_rows(d)
    if not hmn:
        c.add("hmn --json", "FAIL", note="no JSON (see calls.json)")
    nvml_backend = next((x for x in hmn.get("backends", []) if x.get("backend") == "NVML"), {})
    c.add("hmn's NVML backend", "PASS" if nvml_backend.get("state") == "active" else "FAIL",
          "NVML active (not the nvidia-smi fallback)", values_note(nvml_backend), hmn=nvml_backend)
    saw = " ".join(x.get("saw", "") for x in doctor.get("checks", []) if x.get("id") == "nvml")
    m_nvml, m_cuda = re.search(r"NVML ([\d.]+)", saw), re.search(r"CUDA (\d+\.\d+)", saw)
    cuda = a.get("cuda")
    cuda_s = f"{cuda // 1000}.{cuda % 1000 // 10}" if isinstance(cuda, int) else cuda
    banner = re.search(r"CUDA Version\s*:?\s*([\d.]+)", text(d, "smi-banner.txt") + text(d, "smi-q.txt"))
    c.equal("NVML version", m_nvml and m_nvml[1], [a.get("nvml")], note=f"hmn doctor: {saw!r}")
    c.equal("CUDA driver version", m_cuda and m_cuda[1], [cuda_s], banner and banner[1])
    hdevs = {x.get("uuid"): x for x in hmn.get("devices", []) if x.get("vendor") == "nvidia"}
    for i, na in enumerate(a["devices"]):
        nb, nc = b["devices"][i], cc["devices"][i]
        h = hdevs.get(na.get("uuid"), {})
        s = smi[i] if i < len(smi) else {}
        p = f"GPU {i} "
        if not h:
            c.add(p + "found by hmn", "FAIL", note=f"no hmn device with UUID {na.get('uuid')}")
            continue
        c.equal(p + "name", h.get("name"), [na.get("name")], s.get("name"))
        c.equal(p + "UUID", h.get("uuid"), [na.get("uuid")], s.get("uuid"))
        c.equal(p + "index", h.get("index"), [i], num(s.get("index")), tol=tol_abs(0, "same index"))
        c.equal(p + "PCI bus id (normalised)", norm_pci(h.get("pci_bus_id")),
                [norm_pci(na.get("pci_bus_id"))], norm_pci(s.get("pci.bus_id")),
                note=f"hmn {h.get('pci_bus_id')}, NVML {na.get('pci_bus_id')}, nvidia-smi {s.get('pci.bus_id')}")
        c.equal(p + "driver version", h.get("driver_version"), [a.get("driver")], s.get("driver_version"))
        hm = h.get("memory") or {}
        for k in ("total", "used", "free", "reserved"):
            c.equal(p + f"memory.{k} (bytes)", hm.get(f"{k}_bytes"),
                    [na["memory"].get(k) if isinstance(na["memory"], dict) else None,
                     nb["memory"].get(k) if isinstance(nb["memory"], dict) else None],
                    s.get(f"memory.{k}"), smi_mib=True)
        telemetry(c, p, h.get("telemetry") or {}, na, nb, s)
        c.add(p + "modes", "INFO", note="NVML accounting / persistence / MIG [current, pending]; "
              "nvidia-smi accounting.mode, persistence_mode, mig.mode.current",
              nvml=[na.get("accounting_mode"), na.get("persistence_mode"), na.get("mig_mode")],
              smi=[s.get("accounting.mode"), s.get("persistence_mode"), s.get("mig.mode.current")])
        processes(c, d, p, i, h, ps, na, nb, nc)
        mig(c, d, p, h, nc)
    return c


def values_note(backend):
    return backend.get("reason") or ""


def telemetry(c, p, t, na, nb, s):
    c.add(p + "units", "INFO", note="hmn JSON: bytes, temperature_celsius, power_watts, "
          "energy_joules, clock_*_mhz, *_percent; NVML: bytes, °C, mW, mJ, MHz, %; nvidia-smi "
          "(nounits): MiB, °C, W, MHz, %. The tolerances below catch any ×1000 slip.")
    both = [na, nb]
    c.equal(p + "temperature (°C)", t.get("temperature_celsius"),
            [x.get("temperature_c") for x in both], s.get("temperature.gpu"), tol=tol_abs(3, "±3 °C"))
    c.equal(p + "power (W)", t.get("power_watts"),
            [x["power_mw"] / 1000 if isinstance(x.get("power_mw"), int) else x.get("power_mw") for x in both],
            s.get("power.draw"), tol=tol_rel(0.25, 25, "±25 % or ±25 W"))
    ea, eb = na.get("energy_mj"), nb.get("energy_mj")
    e = t.get("energy_joules")
    if isinstance(ea, int) and isinstance(eb, int) and e is not None:
        ok = ea / 1000 - 0.001 <= e <= eb / 1000 + 0.001
        c.add(p + "energy (J)", "PASS" if ok else "FAIL",
              "NVML mJ/1000 before ≤ hmn ≤ after (a counter)", hmn=e, nvml=[ea / 1000, eb / 1000])
    else:
        c.add(p + "energy (J)", "SKIP" if e is None and not isinstance(ea, int) else "FAIL",
              note="unsupported here" if e is None else "", hmn=e, nvml=[ea, eb])
    for k, sk in (("graphics", "clocks.gr"), ("sm", "clocks.sm"), ("memory", "clocks.mem")):
        c.equal(p + f"clock {k} (MHz)", t.get(f"clock_{k}_mhz"),
                [x["clocks_mhz"].get(k) for x in both], s.get(sk), tol=tol_rel(0.10, 30, "±10 %"))
    c.equal(p + "utilization (%)", t.get("utilization_percent"),
            [x["utilization"].get("gpu") if isinstance(x.get("utilization"), dict) else None for x in both],
            s.get("utilization.gpu"), tol=tol_abs(30, "±30 points: different windows"))
    c.equal(p + "memory utilization (%)", t.get("memory_utilization_percent"),
            [x["utilization"].get("memory") if isinstance(x.get("utilization"), dict) else None for x in both],
            s.get("utilization.memory"), tol=tol_abs(30, "±30 points: different windows"))


def processes(c, d, p, i, h, ps, na, nb, nc):
    rows = {r["pid"]: r for r in ps.get("processes", []) if r.get("device_uuid") == h.get("uuid")}
    la = {x["pid"]: x for x in na["processes"] if "pid" in x}
    lb = {x["pid"]: x for x in nb["processes"] if "pid" in x}
    apps = {}
    for line in text(d, "smi-apps.csv").splitlines():
        f = dict(zip(APP_FIELDS.split(","), [x.strip() for x in line.split(",")]))
        if f.get("gpu_uuid") == h.get("uuid") and (f.get("pid") or "").isdigit():
            apps[int(f["pid"])] = f
    same = set(rows) in (set(la), set(lb))
    c.add(p + "process set", "PASS" if same else "FAIL", "hmn ps pids = NVML's (compute + graphics)",
          hmn=sorted(rows), nvml=[sorted(la), sorted(lb)], smi=sorted(apps))
    holder = load(d, "holder.json") or {}
    for pid in sorted(set(rows) | set(la)):
        r = rows.get(pid, {})
        c.equal(p + f"pid {pid} used (bytes)", r.get("used_bytes"),
                [la.get(pid, {}).get("used"), lb.get(pid, {}).get("used")],
                apps.get(pid, {}).get("used_memory"), smi_mib=pid in apps,
                note=f"name {r.get('name')!r}, kind {r.get('kind')}" + (" — the holder" if pid == holder.get("pid") else ""))
    if holder.get("pid") in la:
        used = la[holder["pid"]].get("used")
        c.add(p + "holder's CUDA context", "INFO",
              "NVML process used − torch.cuda.memory_reserved()", note=f"requested {holder.get('requested')}",
              torch_reserved=holder.get("reserved"), nvml_used=used,
              context=(used - holder["reserved"]) if isinstance(used, int) else None)
    util = {r["pid"]: r for r in (load(d, "hmn-ps-util.json") or {}).get("processes", [])}
    pmon = text(d, "pmon.txt").splitlines()
    header = next((ln.lstrip("#").split() for ln in pmon if ln.startswith("# gpu")), None)
    for ln in pmon:
        if not header or ln.startswith("#") or not ln.strip():
            continue
        r = dict(zip(header, ln.split()))
        if r.get("gpu") != str(i) or not r.get("pid", "").isdigit():
            continue
        pid, u = int(r["pid"]), (util.get(int(r["pid"])) or {}).get("utilization")
        figure = p + f"pid {pid} SM % (hmn ps --util vs pmon)"
        if u is None:
            why = [x for x in (util.get(pid) or {}).get("unknown", []) if x.get("field") == "utilization"]
            c.add(figure, "INFO", note="hmn: no figure" + (f" ({why[0].get('detail')})" if why else ""), smi=r)
        elif r.get("sm", "-") == "-":
            c.add(figure, "PASS" if not u.get("sampled") else "INFO",
                  "no sample on either side" if not u.get("sampled") else "", note="pmon: -",
                  hmn=u, smi=r.get("sm"))
        else:
            ok = abs(u["sm_percent"] - int(r["sm"])) <= 15
            c.add(p + f"pid {pid} SM % (hmn ps --util vs pmon)", "PASS" if ok else "FAIL",
                  "within 15 points (different sampling windows)", hmn=u["sm_percent"], smi=int(r["sm"]),
                  note=f"pmon type {r.get('type')}, hmn kind {(util.get(pid) or {}).get('kind')}")
    types = {ln.split()[2] for ln in pmon if header and not ln.startswith("#") and len(ln.split()) > 2}
    c.add(p + "MPS", "INFO", note="pmon types " + (", ".join(sorted(types)) or "none")
          + (" — MPS present" if any("M" in t for t in types) else " — no MPS client"))


def mig(c, d, p, h, nc):
    mode = nc.get("mig_mode")
    if not (isinstance(mode, list) and mode[0] == 1):
        c.add(p + "MIG", "SKIP", note=f"MIG mode {mode}: not compared (enabling it needs a GPU "
              "reset, which this run never does)")
        return
    listing, gpu, theirs = text(d, "smi-L.txt"), None, []
    for ln in listing.splitlines():
        m = re.match(r"GPU (\d+):.*\(UUID: ([^)]+)\)", ln)
        if m:
            gpu = m[2]
        m = re.match(r"\s+MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)]+)\)", ln)
        if m and gpu == h.get("uuid"):
            theirs.append([int(m[2]), m[1], m[3]])
    mine = [[x.get("index"), x.get("profile"), x.get("uuid")]
            for x in (h.get("mig") or {}).get("instances", [])]
    c.add(p + "MIG devices (hmn vs nvidia-smi -L)", "PASS" if sorted(mine) == sorted(theirs) else "FAIL",
          "index, profile, MIG- UUID equal", hmn=mine, smi=theirs)


def run(d):
    c = Checks("2-run")
    rep, res = last_json_line(d, "hmn-run.out"), load(d, "result.json")
    acc = load(d, "accounting.json") or {}
    c.add("accounting mode", "INFO", note=acc.get("note", "not recorded"), state=acc)
    if not rep or not res:
        c.add("hmn run report and the command's figures", "FAIL",
              note=("no hmn run JSON; " if not rep else "") + ("no result.json" if not res else ""))
        return c
    ctx, ctx2 = res.get("context_bytes"), res.get("context_bytes_at_plateau")
    expected = res["max_memory_reserved"] + ctx if isinstance(ctx, int) else None
    c.add("CUDA context", "INFO", "NVML used − memory_reserved(), quiet and at the plateau",
          quiet=ctx, plateau=ctx2, max_memory_reserved=res.get("max_memory_reserved"))
    devs = rep.get("devices") or []
    dev = max(devs, key=lambda x: x.get("peak_vram_bytes") or 0) if devs else {}
    for key in ("peak_vram_bytes", "sampled_peak_vram_bytes", "largest_process_peak_vram_bytes"):
        v = dev.get(key)
        if v is None or expected is None:
            c.add(f"hmn run {key}", "SKIP" if v is None else "FAIL",
                  note=f"null; vram_accounting {dev.get('vram_accounting')}: {dev.get('vram_accounting_detail')}"
                  if v is None else "no expected figure", hmn=v, expected=expected)
            continue
        rel = (v - expected) / expected
        c.add(f"hmn run {key}", "PASS" if abs(rel) <= 0.02 else "FAIL",
              "within 2 % of torch max_memory_reserved + CUDA context", f"{rel:+.2%}",
              hmn=v, expected=expected)
    c.add("hmn run vram_accounting", "INFO", note=str(dev.get("vram_accounting_detail") or ""),
          hmn=dev.get("vram_accounting"), peak_device_used=dev.get("peak_device_used_bytes"))
    rows = [line.split(",") for line in text(d, "accounted.csv").splitlines() if line.strip()]
    mine = [num(r[1]) for r in rows if len(r) > 1 and r[0].strip() == str(res["pid"])]
    if acc.get("enabled_during_run") and mine:
        v = dev.get("largest_process_peak_vram_bytes")
        ok = v is not None and abs(mine[-1] * MIB - v) < MIB
        c.add("accounting: hmn vs nvidia-smi --query-accounted-apps", "PASS" if ok else "FAIL",
              "within 1 MiB", hmn=v, smi=mine[-1])
    else:
        c.add("accounting: hmn vs nvidia-smi --query-accounted-apps", "SKIP",
              note="accounting mode was not on during the run" if not acc.get("enabled_during_run")
              else f"no accounted record for pid {res['pid']}", smi=rows[-5:])
    return c


def fits(d):
    c = Checks("3-fits")
    m = load(d, "measure.json")
    if not m:
        c.add("measurement", "FAIL", note="no measure.json (see the step's stderr)")
        return c
    c.add("setup", "INFO", note=f"transformers {m.get('transformers')}, torch {m.get('torch')}, "
          f"attention {m.get('attn_implementation')}, logits kept: {m.get('logits_kept')}, load {m.get('load_s')} s",
          context_after_warmup=m.get("context_bytes"))
    for run in m.get("runs", []):
        ctx = run["context"]
        est = (load(d, f"fits-{ctx}.json") or {}).get("estimate")
        p = f"context {ctx}"
        if "error" in run or not est:
            c.add(p, "FAIL", note=run.get("error") or f"no hmn fits JSON for {ctx}")
            continue
        comp = {x["name"]: x for x in est.get("components", [])}
        w = comp.get("weights", {}).get("low_bytes")
        if w is not None:
            rel = (m["weights_allocated"] - w) / w
            c.add(p + ": weights", "PASS" if abs(rel) <= 0.001 else "FAIL",
                  "hmn's exact weights vs torch.cuda.memory_allocated() after load (0.1 %)",
                  f"{rel:+.4%}", hmn=w, torch=m["weights_allocated"])
        kv = comp.get("kv_cache", {}).get("low_bytes")
        if run.get("kv_bytes") is not None and kv is not None:
            c.add(p + ": KV cache", "PASS" if kv == run["kv_bytes"] else "FAIL",
                  "hmn's KV = the cache tensors' bytes", hmn=kv, torch=run["kv_bytes"])
        ctxb = run.get("context_bytes_end") if run.get("context_bytes_end") is not None else m.get("context_bytes")
        if ctxb is None:
            c.add(p + ": peak", "FAIL", note="no CUDA context figure (NVML did not list the pid?)")
            continue
        peak = run["max_reserved"] + ctxb
        lo, hi = est["low_bytes"], est["high_bytes"]
        inside = lo <= peak <= hi
        ok = lo * 0.9 <= peak <= hi * 1.1
        where = "inside the band" if inside else (f"{(peak - hi) / hi:+.1%} above high" if peak > hi
                                                    else f"{(peak - lo) / lo:+.1%} below low")
        c.add(p + ": peak vs hmn fits band", "PASS" if ok else "FAIL",
              "measured within the band ±10 %", where, measured=peak, low=lo, high=hi,
              max_reserved=run["max_reserved"], max_allocated=run.get("max_allocated"), context=ctxb)
        act = comp.get("activations", {})
        if w is not None and kv is not None and run.get("max_allocated") is not None:
            measured_act = run["max_allocated"] - m["weights_allocated"] - (run.get("kv_bytes") or kv)
            c.add(p + ": activations", "INFO", "max_allocated − weights − KV vs hmn's band",
                  measured=measured_act, low=act.get("low_bytes"), high=act.get("high_bytes"))
        ov = comp.get("runtime_overhead", {})
        c.add(p + ": CUDA context vs runtime_overhead", "INFO", measured=ctxb,
              low=ov.get("low_bytes"), high=ov.get("high_bytes"))
    return c


def timing(d):
    c = Checks("5-timing")
    pt = load(d, "probe_timing.json")
    if pt and "long_lived_probe" in pt:
        c.add("Probe device query: init per call / long-lived", "INFO",
              note=f"median {pt['init_per_call'].get('median_ns')} ns vs {pt['long_lived_probe'].get('median_ns')} ns",
              ratio=pt.get("ratio_init_per_call_over_long_lived"),
              long_lived_over_bare=pt.get("ratio_long_lived_over_bare"), first_call_ns=pt.get("first_call_ns"))
    else:
        c.add("Probe device query timings", "FAIL" if pt else "SKIP", note=str(pt)[:300] if pt else "not run")
    nc = load(d, "nvml_costs.json")
    if nc:
        c.add("NVML init + shutdown", "INFO", note="nvidia-ml-py, 10 cycles", **nc.get("init_shutdown_us", {}))
        for name, x in nc.get("calls", {}).items():
            c.add(f"NVML {name}", "INFO", note=x.get("error") or f"{x.get('calls')} calls",
                  median_us=x.get("median_us"), min_us=x.get("min_us"), max_us=x.get("max_us"))
    t = load(d, "timing.json")
    if not t:
        c.add("whole-process timings", "SKIP", note="not run")
        return c
    for name, x in t["commands"].items():
        c.add(f"{name}: median wall", "INFO" if x.get("rcs") == ["0"] else "FAIL",
              note=f"{x['runs']} runs, exit statuses {x['rcs']}", median_s=x["median_s"], min_s=x["min_s"],
              median_cpu_s=x.get("median_cpu_s"))
    for k, v in t["ratios"].items():
        c.add(f"ratio {k}", "INFO", note="medians, same run", ratio=v)
    return c


def health(c, d):
    """hmn's memory health (issue 24) against nvidia-smi's counters: equal, N/A = unknown."""
    h = load(d, "hmn-health.json") or {}
    rows = [[x.strip() for x in ln.split(",")] for ln in text(d, "smi-health.csv").splitlines()
            if ln.strip() and ln[0].isdigit()]
    if not h or not rows:
        c.add("memory health", "SKIP", note="no hmn --json or nvidia-smi health query")
        return
    names = ["ecc_current", "ecc_pending", "cv", "uv", "ca", "ua", "rc", "ru", "rp", "rf", "sbe", "dbe", "pp"]

    def smi_val(v):
        if v in ("[N/A]", "N/A", "[Not Supported]", ""):
            return None
        if v in ("Enabled", "Yes"):
            return True
        if v in ("Disabled", "No"):
            return False
        try:
            return int(v)
        except ValueError:
            return v
    for r in rows:
        i = int(r[0])
        s = dict(zip(names, map(smi_val, r[1:])))
        dev = next((x for x in h.get("devices", []) if x.get("index") == i), {})
        mh = dev.get("health")
        if mh is None:
            c.add(f"GPU {i} health", "FAIL", note="hmn --json has no health object", smi=s)
            continue
        ecc = mh.get("ecc") or {}
        errs = mh.get("ecc_errors") or {}
        rr = mh.get("remapped_rows") or {}
        rp = mh.get("retired_pages") or {}
        pairs = [("ECC mode current", ecc.get("current"), s["ecc_current"]),
                 ("ECC mode pending", ecc.get("pending"), s["ecc_pending"]),
                 ("ECC corrected volatile", errs.get("corrected_volatile"), s["cv"]),
                 ("ECC uncorrected volatile", errs.get("uncorrected_volatile"), s["uv"]),
                 ("ECC corrected aggregate", errs.get("corrected_aggregate"), s["ca"]),
                 ("ECC uncorrected aggregate", errs.get("uncorrected_aggregate"), s["ua"]),
                 ("remapped rows correctable", rr.get("correctable"), s["rc"]),
                 ("remapped rows uncorrectable", rr.get("uncorrectable"), s["ru"]),
                 ("remapped rows pending", rr.get("pending"), s["rp"]),
                 ("remapped rows failure", rr.get("failure"), s["rf"]),
                 ("retired pages single bit", rp.get("single_bit"), s["sbe"]),
                 ("retired pages double bit", rp.get("double_bit"), s["dbe"])]
        for label, a, b in pairs:
            if b is None and a is None:
                c.add(f"GPU {i} {label}", "PASS", "both unknown (N/A)", hmn=a, smi=b)
            else:
                c.add(f"GPU {i} {label}", "PASS" if a == b else "FAIL",
                      "hmn --json health = nvidia-smi --query-gpu (unknown is null, never 0)", hmn=a, smi=b)


def extras(d):
    c = Checks("4-extras")
    status = load(d, "status.json") or {}
    for name, label, good in (("doctor.json", "hmn doctor --json", ("ok", "exit 1")),
                              ("pick.json", "hmn pick --need 1GiB --json", ("ok", "exit 1")),
                              ("metrics.txt", "hmn serve /metrics", ("ok",))):
        st = status.get(name, "not run")
        parsed = name.endswith(".txt") or load(d, name) is not None
        verdict = ("SKIP" if "absent" in st or st == "not run" else
                   "PASS" if st in good and parsed else "FAIL")
        c.add(label, verdict, "runs; exit 0 (or 1: a warning / nothing fits); its JSON parses",
              note=st)
    doc = load(d, "doctor.json") or {}
    for x in doc.get("checks", []):
        c.add(f"doctor {x.get('id')}", "INFO", note=f"{x.get('status')}: {x.get('saw')}")
    new = load(d, "new-fields.json") or {}
    for k, v in new.items():
        c.add(f"hmn --json new field {k}", "INFO", note=json.dumps(v)[:400])
    health(c, d)
    m = text(d, "metrics.txt")
    fams = sorted({ln.split()[2] for ln in m.splitlines() if ln.startswith("# TYPE")})
    if m:
        c.add("serve metric families", "INFO", note=", ".join(fams))
    return c


if __name__ == "__main__":
    kind, step_dir = sys.argv[1], sys.argv[2]
    fn = {"gpu": gpu, "run": run, "fits": fits, "timing": timing, "extras": extras}[kind]
    try:
        checks = fn(step_dir)
    except Exception:  # a comparer bug must not lose the step: the raw files are in raw.tgz
        import traceback
        checks = Checks(kind)
        checks.add("compare.py itself", "FAIL", note=traceback.format_exc()[-1500:])
    with open(os.path.join(step_dir, "checks.json"), "w") as f:
        json.dump(checks.rows, f, indent=1)
    bad = [r for r in checks.rows if r["verdict"] == "FAIL"]
    print(f"{kind}: {len(checks.rows)} checks, {len(bad)} FAIL")
