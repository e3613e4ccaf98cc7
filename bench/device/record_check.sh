#!/usr/bin/env bash
# Issue 28 on a real GPU: a long-lived probe (`hmn record`, one sample a second) after its
# first sample lists processes in one call into room for last time's count, and asks a device's
# name, UUID, PCI address and maximum clocks once. While PyTorch holds HOLD_GIB GiB, each
# sample's rows and device identity are compared with nvidia-smi's. Writes $OUT/record-check.md.
# Needs target/release/hmn (carried), python3 with torch, nvidia-smi.
set -u
OUT=${OUT:-./device-out}
HOLD_GIB=${HOLD_GIB:-2}
mkdir -p "$OUT"
HMN=./target/release/hmn
[ -x "$HMN" ] || { cp target/release/hmn /tmp/hmn && chmod +x /tmp/hmn && HMN=/tmp/hmn; }
python3 - "$HOLD_GIB" > "$OUT/holder.log" 2>&1 <<'PY' &
import sys, time, torch
x = torch.empty(int(sys.argv[1]) << 30, dtype=torch.uint8, device="cuda")
torch.cuda.synchronize()
print("held", flush=True)
time.sleep(45)
PY
HOLDER=$!
for _ in $(seq 120); do grep -q held "$OUT/holder.log" 2>/dev/null && break; sleep 0.25; done
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$OUT/smi-before.csv" 2>&1
nvidia-smi --query-gpu=index,name,uuid,pci.bus_id,clocks.max.graphics,clocks.max.memory --format=csv,noheader,nounits > "$OUT/smi-gpus.csv" 2>&1
timeout 30 "$HMN" record --duration 6s --interval 1s "$OUT/rec.jsonl" 2> "$OUT/record.err"
echo "record exit: $?" >> "$OUT/record.err"
nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits > "$OUT/smi-after.csv" 2>&1
kill "$HOLDER" 2>/dev/null
python3 - "$OUT" > "$OUT/record-check.md" <<'PY'
import json, sys, os
out = sys.argv[1]
smi = {}
for f in ("smi-before.csv", "smi-after.csv"):
    for line in open(os.path.join(out, f)):
        p = [x.strip() for x in line.split(",")]
        if len(p) == 2 and p[0].isdigit():
            smi.setdefault(int(p[0]), set()).add(int(p[1]))
gpus = [[x.strip() for x in l.split(",")] for l in open(os.path.join(out, "smi-gpus.csv")) if "," in l]
lines = [json.loads(l) for l in open(os.path.join(out, "rec.jsonl"))]
print(f"# record check: {len(lines)} samples; nvidia-smi compute apps {sorted(smi)}\n")
ok = True
for i, s in enumerate(lines):
    rows = {(p["pid"], p.get("device_index")): p.get("used_bytes") for p in s.get("processes", [])}
    pids = {pid for (pid, _) in rows}
    missing = sorted(set(smi) - pids)
    mib = {pid: (u or 0) >> 20 for (pid, _), u in rows.items()}
    agree = all(mib.get(pid) in smi[pid] for pid in smi if pid in mib)
    devs = [(d.get("index"), d.get("name"), d.get("uuid"), d.get("pci_bus_id"),
             (d.get("telemetry") or {}).get("clock_graphics_max_mhz"),
             (d.get("telemetry") or {}).get("clock_memory_max_mhz")) for d in s.get("devices", [])]
    print(f"- sample {i+1}: {len(rows)} rows, nvidia-smi's pids missing: {missing}, MiB agree: {agree}, "
          f"collect_ms {s.get('collect_ms')}, devices {devs}")
    ok = ok and not missing and agree
for g in gpus:
    print(f"- nvidia-smi gpu: {g}")
print(f"\nRESULT: {'PASS' if ok and lines else 'FAIL'}")
PY
cat "$OUT/record-check.md"; cat "$OUT/record.err"
