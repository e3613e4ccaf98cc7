"""Judges what bench/device/ops_check.sh collected (issue 26, run 6) and writes the report.

    ops_compare.py RAW_DIR MODE OUT_DIR    # MODE: real | rehearsal

Writes OUT_DIR/ops-check.md (counts, every FAIL first, then each check: verdict, figure, each
source's value, the rule) and OUT_DIR/ops.json (the same as data). Rerun offline on an unpacked
ops-raw.tgz: `python3 bench/device/ops_compare.py ops real .`. A missing file is a SKIP with its
reason, never a PASS.
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from compare import load, text  # noqa: E402  (JSON or None; text or "")

MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
CHECKS = []


def check(area, figure, verdict, values, rule, note=""):
    CHECKS.append({"area": area, "figure": figure, "verdict": verdict, "values": values,
                   "rule": rule, "note": note})


def rc(raw, name):
    t = text(raw, name + ".rc")
    return int(t) if t and t.strip().lstrip("-").isdigit() else None


def nvml_unattributed(dev):
    """used less every listed process (one figure per pid: the largest of its lists, as hmn
    merges a compute+graphics row), None when used or a listed figure is unknown."""
    used = (dev.get("memory") or {}).get("used")
    if not isinstance(used, int):
        return None
    per_pid = {}
    for kind in ("compute", "graphics"):
        rows = dev["processes"].get(kind)
        if isinstance(rows, dict):
            return None
        for p in rows:
            if p["used"] is None:
                return None
            per_pid[p["pid"]] = max(per_pid.get(p["pid"], 0), p["used"])
    return used - sum(per_pid.values())


def views(raw):
    snaps = [s for s in (load(raw, "nvml-a.json"), load(raw, "nvml-b.json")) if s]
    hmn = load(raw, "hmn.json")
    ps = load(raw, "hmn-ps.json")
    smi = {}
    for line in text(raw, "smi-gpu.csv").splitlines():
        p = [x.strip() for x in line.split(",")]
        if len(p) >= 3 and p[0].isdigit():
            smi[int(p[0])] = p
    if not snaps or not hmn:
        check("views", "compute mode", "SKIP", {}, "", "no NVML snapshot or no hmn --json")
        return
    for d in hmn.get("devices", []):
        i = d.get("index")
        nv = {MODES.get(s["devices"][i].get("compute_mode"), str(s["devices"][i].get("compute_mode")))
              for s in snaps if i < len(s["devices"])}
        sm = smi.get(i, [None] * 3)[2]
        mine = d.get("compute_mode")
        unknown = [u for u in d.get("unknown", []) if u.get("field") == "compute_mode"]
        ok = mine in nv and sm is not None and sm.lower() == (mine or "").lower()
        check("views", f"GPU {i} compute mode", "PASS" if ok else "FAIL",
              {"hmn": mine, "hmn_unknown": unknown or None, "nvidia-ml-py": sorted(nv), "nvidia-smi": sm},
              "hmn = nvidia-ml-py's nvmlDeviceGetComputeMode = nvidia-smi's compute_mode (case aside)")
    for u in (ps or {}).get("unattributed", []):
        i = u.get("device_index")
        nv = [nvml_unattributed(s["devices"][i]) for s in snaps if i is not None and i < len(s["devices"])]
        ok = u.get("bytes") is not None and u.get("bytes") in nv
        check("views", f"GPU {i} unattributed memory", "PASS" if ok else "FAIL",
              {"hmn": u.get("bytes"), "bound": u.get("bound"), "causes": u.get("causes"),
               "processes_bytes": u.get("processes_bytes"), "nvidia-ml-py (before, after)": nv},
              "hmn ps --json = NVML used (v2) - the processes NVML lists, equal to one snapshot around it",
              f"{(u.get('bytes') or 0) / 2**20:.1f} MiB held by no listed process")
    if ps is not None and not ps.get("unattributed"):
        check("views", "unattributed memory", "FAIL", {"ps keys": sorted(ps)}, "ps --json has unattributed[]")
    doc = load(raw, "doctor.json")
    if doc:
        for c in doc.get("checks", []):
            if c.get("id") in ("compute-mode", "unattributed", "memory-health", "memory-pool"):
                check("views", f"doctor {c.get('id')}", "INFO",
                      {"status": c.get("status"), "saw": c.get("saw"), "remedy": c.get("remedy")},
                      "recorded: what doctor says on a real driver")
    met = text(raw, "metrics.txt")
    for d in hmn.get("devices", []):
        i = d.get("index")
        ones = re.findall(r'^hmn_device_compute_mode\{[^}]*gpu="%d"[^}]*mode="([a-z_]+)"[^}]*\} 1(?:\.0)?$' % i,
                          met, re.M)
        if met:
            ok = ones == [d.get("compute_mode")] if d.get("compute_mode") else ones == []
            check("serve", f"GPU {i} hmn_device_compute_mode", "PASS" if ok else "FAIL",
                  {"state set to 1": ones, "hmn --json": d.get("compute_mode")},
                  "serve's state set says the mode hmn --json says (one series at 1)")
            un = re.findall(r'^hmn_device_memory_unattributed_bytes\{[^}]*gpu="%d"[^}]*\} (\S+)$' % i, met, re.M)
            check("serve", f"GPU {i} hmn_device_memory_unattributed_bytes", "PASS" if un else "FAIL",
                  {"gauge": un}, "present where ps --json has a figure (its value moves with the loads)")
    if not met:
        check("serve", "metrics", "SKIP", {}, "", "no scrape came back (serve.log in the raw files)")


def xid(raw):
    nv = load(raw, "nvml-xid.json")
    recs = [json.loads(x) for x in text(raw, "watch.jsonl").splitlines() if x.startswith("{")]
    devrecs = [r for r in recs if r.get("kind") == "device"]
    if nv is None:
        check("xid", "event set", "SKIP", {}, "", "nvidia-ml-py's XID view did not finish")
        return
    for i, d in sorted(nv.get("devices", {}).items()):
        seen = sum(1 for e in nv.get("events", []) if str(e.get("index")) == i)
        mine = [r for r in devrecs if str(r.get("index")) == i]
        last = mine[-1] if mine else {}
        count = last.get("xid_events")
        why = last.get("xid_unknown_reason")
        if d.get("registered"):
            ok = isinstance(count, int) and count == seen
        else:
            ok = count is None and bool(why)
        check("xid", f"GPU {i} XID events counted by watch", "PASS" if ok else "FAIL",
              {"watch (last device record)": count, "reason": why,
               "nvidia-ml-py registered": d.get("registered"), "register_error": d.get("register_error"),
               "nvidia-ml-py events": seen, "device records": len(mine)},
              "a count (equal to the events nvidia-ml-py saw) where an XID event set registers; "
              "null with a reason where it does not")
    screen = text(raw, "top/screen-detail.txt")
    line = next((x.strip() for x in screen.splitlines() if "XID events" in x), None)
    reg = any(d.get("registered") for d in nv.get("devices", {}).values())
    if screen:
        ok = line is not None and (("since" in line) == reg)
        check("xid", "top's detail XID line", "PASS" if ok else "FAIL", {"line": line, "registered": reg},
              "'XID events since …: N' where events register, 'unavailable: why' where not")
    dm = text(raw, "dmesg-xid.txt").strip()
    check("xid", "kernel log", "INFO", {"dmesg NVRM/Xid lines": dm.splitlines()[-3:] if dm else []},
          "recorded (dmesg may need privileges the machine does not give)")


def pick(raw):
    p, code = load(raw, "pick.json"), rc(raw, "pick.json")
    hmn = load(raw, "hmn.json") or {}
    uuids = {d.get("uuid") for d in hmn.get("devices", [])}
    body = json.dumps(p) if p else ""
    ok = code == 0 and any(u and u in body for u in uuids)
    check("pick", "pick --need 1GiB", "PASS" if ok else "FAIL", {"exit": code, "json": body[:300]},
          "exit 0 and a GPU of hmn --json named")
    h, hcode = load(raw, "pick-huge.json"), rc(raw, "pick-huge.json")
    err = text(raw, "pick-huge.json.err").strip()
    check("pick", "pick --need 100000GiB", "PASS" if hcode == 1 else "FAIL",
          {"exit": hcode, "json": json.dumps(h)[:300] if h else None, "stderr": err[:200]},
          "exit 1: no device has room")


def top(raw):
    t = load(raw, "top/top.json")
    if not t:
        check("top", "hmn top in a pseudo-terminal", "SKIP", {}, "", text(raw, "top.out")[-300:])
        return
    check("top", "quits on q", "PASS" if t.get("exit") == 0 else "FAIL", {"exit": t.get("exit")},
          "exit 0 within 5 s of q")
    check("top", "CPU of one core, --interval 1s, two GPU processes", "INFO",
          {"percent": t.get("cpu_percent_of_core"), "window_s": t.get("window_s"),
           "status": t.get("status"), "bytes_written": t.get("bytes_written")},
          "recorded (issue 28 measured it only on the fake NVML)")
    main = text(raw, "top/screen-main.txt")
    detail = text(raw, "top/screen-detail.txt")
    holder = (load(raw, "holder.json") or {}).get("pid")
    shown = holder is not None and re.search(r"\b%d\b" % holder, main) is not None
    check("top", "the PyTorch holder's row", "PASS" if shown else "FAIL", {"pid": holder},
          "its pid on the main screen")
    un = next((x.strip() for x in detail.splitlines() if "unattributed:" in x), None)
    check("top", "detail: unattributed line", "PASS" if un else "FAIL", {"line": un},
          "the detail pane of a GPU process says its device's unattributed memory")


def startup(raw):
    t = load(raw, "timing.json")
    if t:
        cmds = t.get("commands", {})
        vals = {k: {"median_ms": round(v["median_s"] * 1000, 2) if v.get("median_s") else None,
                    "cpu_ms": round(v["median_cpu_s"] * 1000, 2) if v.get("median_cpu_s") else None,
                    "runs": v.get("runs"), "exit": v.get("rcs")} for k, v in cmds.items()}
        check("startup", "whole process, wall and CPU (wait4)", "INFO", vals,
              "recorded; hmn_ps_json_no_nvml is hmn's own share")
        check("startup", "ratios of medians", "INFO", t.get("ratios", {}), "recorded")
    p = load(raw, "probe_timing.json")
    if p:
        keep = {k: p.get(k) for k in ("long_lived_probe", "init_per_call", "nvml_init_cold",
                                       "nvml_init_warm", "ratio_init_per_call_over_long_lived")}
        check("startup", "probe and NVML init (ns)", "INFO", keep, "recorded")
    c = load(raw, "nvml_costs.json")
    if c:
        calls = c.get("calls", {})
        new = {k: calls.get(k) for k in ("nvmlDeviceGetComputeMode", "nvmlDeviceGetSupportedEventTypes",
                                          "nvmlEventSetWait_v2(0 ms)", "nvmlDeviceGetMemoryInfo_v2",
                                          "nvmlDeviceGetProcessUtilization")}
        check("startup", "NVML call costs (µs)", "INFO",
              {"new calls": new, "dearest": c.get("dearest"), "init_shutdown_us": c.get("init_shutdown_us"),
               "event_set_error": c.get("event_set_error")}, "recorded")


def mps(raw):
    if text(raw, "mps/absent.txt"):
        check("mps", "MPS", "SKIP", {}, "", text(raw, "mps/absent.txt").strip())
        return
    failed = text(raw, "mps/failed.txt")
    if failed:
        check("mps", "MPS daemon and client", "INFO", {"failed": failed.strip()[-400:]},
              "recorded: MPS could not be started here", "")
        return
    snap, ps = load(raw, "mps/nvml.json"), load(raw, "mps/hmn-ps.json")
    if not snap or not ps:
        check("mps", "MPS views", "SKIP", {}, "", "no NVML snapshot or hmn ps --json under MPS")
        return
    client = (load(raw, "mps/client.json") or {}).get("pid")
    rows = {(p.get("pid"), p.get("device_index")): p for p in ps.get("processes", [])}
    for d in snap["devices"]:
        i = d["index"]
        lists = d["processes"]
        nv = {}
        for kind in ("compute", "graphics", "mps"):
            if isinstance(lists.get(kind), list):
                for p in lists[kind]:
                    nv.setdefault(p["pid"], {})[kind] = p["used"]
        for pid, by in sorted(nv.items()):
            row = rows.get((pid, i), {})
            figures = {v for v in by.values() if v is not None}
            ok = bool(row) and (row.get("used_bytes") in figures or (not figures and row.get("used_bytes") is None))
            if pid == client:
                ok = ok and row.get("kind") == "mps"
            check("mps", f"GPU {i} pid {pid}{' (client)' if pid == client else ''}",
                  "PASS" if ok else "FAIL",
                  {"hmn kind": row.get("kind"), "hmn used": row.get("used_bytes"), "NVML lists": by},
                  "each pid NVML lists is one hmn row with a figure NVML gave; the client's kind is mps")
        un = next((u for u in ps.get("unattributed", []) if u.get("device_index") == i), None)
        check("mps", f"GPU {i} unattributed under MPS", "INFO",
              {"hmn": un, "NVML used - compute/graphics rows": nvml_unattributed(d)},
              "recorded: the server's memory is left out of the process sums")
    check("mps", "nvidia-smi's view", "INFO",
          {"compute-apps": text(raw, "mps/smi-apps.csv").strip().splitlines(),
           "pmon": text(raw, "mps/pmon.txt").strip().splitlines()[-4:]}, "recorded")


def main(raw, mode, out):
    for f in (views, xid, pick, top, startup, mps):
        try:
            f(raw)
        except Exception as e:  # a comparer bug must not lose the other checks
            check(f.__name__, "comparer", "FAIL", {"error": f"{type(e).__name__}: {e}"}, "ops_compare.py ran")
    counts = {}
    for c in CHECKS:
        counts[c["verdict"]] = counts.get(c["verdict"], 0) + 1
    json.dump({"mode": mode, "counts": counts, "checks": CHECKS}, open(os.path.join(out, "ops.json"), "w"),
              indent=1)
    lines = [f"# ops check ({mode}): " + ", ".join(f"{v} {k}" for k, v in sorted(counts.items())), ""]
    fails = [c for c in CHECKS if c["verdict"] == "FAIL"]
    if fails:
        lines += ["## FAIL", ""] + [f"- {c['area']}: {c['figure']}: {json.dumps(c['values'])[:600]}" for c in fails] + [""]
    area = None
    for c in CHECKS:
        if c["area"] != area:
            area = c["area"]
            lines += ["", f"## {area}", "", "| verdict | figure | values | rule |", "|---|---|---|---|"]
        vals = json.dumps(c["values"]).replace("|", "/")[:900]
        lines.append(f"| {c['verdict']} | {c['figure']} | {vals} | {c['rule']}{' — ' + c['note'] if c['note'] else ''} |")
    open(os.path.join(out, "ops-check.md"), "w").write("\n".join(lines) + "\n")
    print(lines[0])
    for c in fails:
        print(f"FAIL {c['area']}: {c['figure']}: {json.dumps(c['values'])[:300]}")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], sys.argv[3])
