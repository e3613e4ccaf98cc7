"""Gathers bench/device/run-all.sh's results into $OUT/compare.json and $OUT/summary.md.

    summary.py WORK OUT

WORK holds steps.tsv (one line per step: name, exit status, seconds, note), facts.txt and
raw/<step>/checks.json (compare.py's). Run after every step, so whatever has finished is in
$OUT even if the run is cut short.
"""

import json
import os
import sys
import time

ORDER = ["PASS", "FAIL", "INFO", "SKIP"]


def fmt(v):
    if v is None:
        return "—"
    if isinstance(v, float):
        return f"{v:.6g}"
    if isinstance(v, (list, dict)):
        s = json.dumps(v, separators=(",", ":"))
        return s if len(s) <= 120 else s[:117] + "…"
    return str(v)


def cell(s):
    return str(s).replace("|", "\\|").replace("\n", " ")


def main(work, out):
    steps = []
    try:
        for line in open(os.path.join(work, "steps.tsv")):
            parts = line.rstrip("\n").split("\t")
            if len(parts) >= 3:
                steps.append({"step": parts[0], "rc": parts[1], "seconds": parts[2],
                              "note": parts[3] if len(parts) > 3 else ""})
    except OSError:
        pass
    checks = []
    raw = os.path.join(work, "raw")
    for name in sorted(os.listdir(raw)) if os.path.isdir(raw) else []:
        try:
            with open(os.path.join(raw, name, "checks.json")) as f:
                checks += json.load(f)
        except (OSError, ValueError):
            pass
    try:
        facts = open(os.path.join(work, "facts.txt")).read()
    except OSError:
        facts = "(no facts.txt)"
    mode = os.environ.get("HMN_DEVICE_MODE", "real")
    counts = {v: sum(1 for c in checks if c["verdict"] == v) for v in ORDER}
    doc = {"mode": mode, "written_unix": int(time.time()), "counts": counts, "steps": steps,
           "checks": checks}
    with open(os.path.join(out, "compare.json.tmp"), "w") as f:
        json.dump(doc, f, indent=1)
    os.replace(os.path.join(out, "compare.json.tmp"), os.path.join(out, "compare.json"))

    md = [f"# hmn on a real NVIDIA GPU — bench/device/run-all.sh ({mode})", ""]
    if mode != "real":
        md += ["**REHEARSAL**: fake NVML and stand-ins for torch, transformers, pynvml and "
               "nvidia-smi; the figures below test the script, not hmn.", ""]
    md += [" · ".join(f"{counts[v]} {v}" for v in ORDER), "",
           "## Steps", "", "| step | exit | seconds | note |", "|---|---|---|---|"]
    md += [f"| {s['step']} | {s['rc']} | {s['seconds']} | {cell(s['note'])} |" for s in steps]
    fails = [c for c in checks if c["verdict"] == "FAIL"]
    if fails:
        md += ["", "## FAIL", ""]
        md += [f"- **{c['step']}** {c['figure']}: {c['rule']} — {fmt(c['values'])} {c['note']}"
               for c in fails]
    for step in sorted({c["step"] for c in checks}):
        md += ["", f"## {step}", "", "| verdict | figure | values | rule | note |",
               "|---|---|---|---|---|"]
        for c in (c for c in checks if c["step"] == step):
            vals = "; ".join(f"{k} {fmt(v)}" for k, v in c["values"].items())
            md.append(f"| {c['verdict']} | {cell(c['figure'])} | {cell(vals)} | {cell(c['rule'])} "
                      f"| {cell(c['note'])} |")
    md += ["", "## Machine", "", "```", facts.strip()[:6000], "```", "",
           "Raw outputs of every step: raw.tgz (see bench/device/README.md); the log: run-all.log.",
           ""]
    with open(os.path.join(out, "summary.md.tmp"), "w") as f:
        f.write("\n".join(md))
    os.replace(os.path.join(out, "summary.md.tmp"), os.path.join(out, "summary.md"))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
