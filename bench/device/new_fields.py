"""Step 4 of bench/device/run-all.sh: what `hmn --json` and `hmn ps --json` carry beyond the
fields this script knew when it was written (issue 26, November 2026), so features that land
later (memory health, the memory pool of issue 23, unattributed memory of issue 24) are
recorded without editing the script.

    new_fields.py HMN RESULT      # RESULT: {"devices[i].KEY": value, "ps.KEY": value, ...}

Keys that look like health counters (ecc, remap, retired, xid, health) or a memory pool (pool,
unified, dedicated) are listed whatever the known set says.
"""

import json
import re
import subprocess
import sys

KNOWN_TOP = {"schema", "host", "devices", "warnings", "backends"}
KNOWN_DEVICE = {"index", "vendor", "name", "uuid", "pci_bus_id", "driver", "driver_version",
                "pci_id", "runtime_status", "integrated", "memory", "regions", "telemetry",
                "source", "unknown", "error", "mig"}
KNOWN_MEMORY = {"total_bytes", "used_bytes", "free_bytes", "reserved_bytes"}
KNOWN_PS = {"schema", "processes", "hidden_processes", "failed_devices", "warnings"}
INTERESTING = re.compile(r"ecc|remap|retired|xid|health|pool|unified|dedicated|unattributed", re.I)


def hmn_json(argv):
    p = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    return json.loads(p.stdout) if p.stdout.strip().startswith("{") else {}


def walk(prefix, value, out):
    if isinstance(value, dict):
        for k, v in value.items():
            if INTERESTING.search(k):
                out[f"{prefix}.{k}"] = v
            walk(f"{prefix}.{k}", v, out)
    elif isinstance(value, list):
        for i, v in enumerate(value[:4]):
            walk(f"{prefix}[{i}]", v, out)


def main(hmn, result):
    out = {}
    top = hmn_json([hmn, "--json"])
    for k in set(top) - KNOWN_TOP:
        out[k] = top[k]
    for d in top.get("devices", []):
        p = f"devices[{d.get('index')}]"
        for k in set(d) - KNOWN_DEVICE:
            out[f"{p}.{k}"] = d[k]
        for k in set(d.get("memory") or {}) - KNOWN_MEMORY:
            out[f"{p}.memory.{k}"] = d["memory"][k]
    walk("hmn", top, out)
    ps = hmn_json([hmn, "ps", "--json"])
    for k in set(ps) - KNOWN_PS:
        out[f"ps.{k}"] = ps[k]
    walk("ps", {k: v for k, v in ps.items() if k != "processes"}, out)
    with open(result, "w") as f:
        json.dump(out, f, indent=1)
    print(f"{len(out)} new or watched fields")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
