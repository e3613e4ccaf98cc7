#!/usr/bin/env python3
"""llama.cpp's CUDA buffers over a grid: the device (`CUDA0`) / `CUDA_Host` / CPU split.

Run by bench/llama_cpp_cuda.sh on a machine with an NVIDIA GPU, against a CUDA build of the
same pinned llama.cpp as bench/llama_cpp_grid.sh; the GGUFs are that script's (its MODELS and
write_gguf), written here. By hand:

    PYTHONPATH=$SRC/gguf-py:bench python3 bench/llama_cpp_cuda.py --probe PROBE --work DIR --out DIR

Every configuration is created for real on the GPU, and the main models' full-offload ones also
with `no_alloc` (llama.cpp's simulated pass, the one `--fit` uses); `alloc` says whether the
two agreed (`both`) or which ran. Rows run in order of
importance (full offload of the main models, partial offload, quantized weights and depth, the
held-out models) until `--deadline` seconds have passed; what ran is written either way.

Output: cuda.csv (one row per configuration and `-ngl`: every input and, per buffer type, the
model, KV and compute bytes) and cuda-run.json (versions, GPU, seconds, counts).
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import llama_cpp_grid as g

MAIN = ("llama31-8b", "llama2-7b", "qwen25-7b", "gemma2-9b", "gemma3-12b", "phi3-mini")
PARTIAL = ("llama31-8b", "llama31-8b-q4_0", "qwen25-7b", "gemma3-12b")
QUANT_DEPTH = ("llama31-8b-q4_0", "llama31-8b-q8_0", "llama31-8b-32l")
HOLDOUT = ("llama32-3b", "gemma2-2b", "qwen25-0.5b", "mistral-nemo-12b", "gemma3-4b",
           "phi3-medium", "qwen25-14b", "llama31-70b", "gemma2-27b", "phi4-mini")
FULL = 999  # -ngl: every block and the output layer


def cfg(key: str, ngl: int, ctx: int, ub: int, fa: int, n_seq: int, unified: bool, family: str,
        tk: str = "f16") -> dict:
    return dict(model=key, ngl=ngl, repack=1, family=family, n_ctx_req=ctx, n_batch=g.N_BATCH, n_ubatch=ub,
                n_seq=n_seq, kv_unified=int(unified), flash_attn=fa, type_k=tk, type_v=tk,
                **g.family_params(family, n_seq))


def plan() -> list[tuple[str, int, bool, list[dict]]]:
    """(model, ngl, extra buffer types, configurations) in the order they run. Partial offload
    runs twice: with llama.cpp's extra CPU buffer types (its default: the CPU layers' weights
    may be repacked — AMX, CPU_REPACK — and then stay on the CPU) and without (every host
    weight can be copied to the GPU for an offloaded op)."""
    runs: list[tuple[str, int, bool, list[dict]]] = []
    for key in MAIN:
        rows = []
        for ctx in g.CTX:
            for ub in g.UBATCH:
                for fa in (1, 0):
                    rows.append(cfg(key, FULL, ctx, ub, fa, 1, True, "server"))
                    rows.append(cfg(key, FULL, ctx, ub, fa, 4, False, "server"))
                    rows.append(cfg(key, FULL, ctx, ub, fa, 1, True, "library"))
        for ctx in (4096, 32768):
            rows.append(cfg(key, FULL, ctx, 512, 1, 1, True, "server", "q8_0"))
            rows.append(cfg(key, FULL, ctx, 512, 1, 1, True, "library", "q8_0"))
        runs.append((key, FULL, True, rows))
    for key in PARTIAL:
        n_layer = g.MODELS[key]["n_layer"]
        for ngl in sorted({0, 1, n_layer // 2 + 1, n_layer}):
            rows = [cfg(key, ngl, 4096, 512, fa, 1, True, "server") for fa in (1, 0)]
            rows.append(cfg(key, ngl, 4096, 2048, 1, 1, True, "server"))
            rows.append(cfg(key, ngl, 4096, 512, 1, 1, True, "library"))
            for repack in (True, False):
                runs.append((key, ngl, repack, [dict(r, repack=int(repack)) for r in rows]))
    for key in QUANT_DEPTH + HOLDOUT:
        rows = [cfg(key, FULL, ctx, 512, fa, 1, True, "server") for ctx in (4096, 32768)
                for fa in (1, 0)]
        runs.append((key, FULL, True, rows))
    return runs


BUFTS = ("CUDA0", "CUDA_Host", "CPU", "CPU_Mapped")
COLUMNS = [
    "id", "model", "arch", "n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff",
    "n_vocab", "n_swa", "swa_period", "weights", "ngl", "repack", "family", "n_ctx_req", "n_batch",
    "n_ubatch", "n_seq", "kv_unified", "flash_attn", "type_k", "type_v", "swa_full",
    "n_outputs_max", "n_outputs_max_per_seq",
    "status", "n_ctx", "n_ctx_seq", "n_outputs_reserved", "output_mib_printed",
] + [f"{kind}_{b}" for b in BUFTS for kind in ("model", "kv", "compute")] + [
    "other_bufts", "model_other",
    "compute_mib_printed_CUDA0", "compute_mib_printed_CUDA_Host", "compute_mib_printed_CPU",
    "alloc",
]


def row_of(c: dict, m: dict, sim: dict | None, real: dict | None) -> dict:
    r = dict(c)
    r.update(g.model_columns(m))
    src = real if real and real.get("status") == "ok" else sim
    if not src or src.get("status") != "ok":
        r["status"] = "fail"
        return r
    r["status"] = "ok"
    x = src["ctx"]
    r["n_ctx"], r["n_ctx_seq"] = x.get("n_ctx"), x.get("n_ctx_seq")
    r["n_outputs_reserved"] = min(x.get("n_ubatch", 0), x.get("n_outputs_max", 0))
    r["output_mib_printed"] = src.get("output_mib")
    for b in BUFTS:
        mo, kv, cp = src["mem"].get(b, (0, 0, 0))
        r[f"model_{b}"], r[f"kv_{b}"], r[f"compute_{b}"] = mo, kv, cp
    for b in ("CUDA0", "CUDA_Host", "CPU"):
        r[f"compute_mib_printed_{b}"] = src["compute_mib"].get(b)
    other = sorted(set(src["mem"]) - set(BUFTS))  # extra CPU types (AMX, CPU_REPACK): weights
    r["other_bufts"] = "+".join(other)
    r["model_other"] = sum(src["mem"][b][0] for b in other)
    if any(src["mem"][b][1] or src["mem"][b][2] for b in other):
        print(f"{c['id']}: KV or compute in {other}", file=sys.stderr)
    # The simulated pass maps no weights: KV and compute per buffer type only.
    r["alloc"] = g.alloc_of(c["id"], sim, real, lambda mem: sorted(
        (k, v[1], v[2]) for k, v in mem.items() if v[1] or v[2]))
    return r


def gpu_facts() -> dict:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=30)
        return dict(gpu=out.stdout.strip())
    except (OSError, subprocess.SubprocessError) as e:
        return dict(gpu=f"unknown ({e})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--deadline", type=float, default=240, help="seconds; no run starts after")
    ap.add_argument("--build-seconds", default="unknown")
    ap.add_argument("--build", default="CUDA", help="how the library was built (for cuda-run.json)")
    ap.add_argument("--only", action="append", help="model keys (default: all)")
    ap.add_argument("--real-limit-gib", type=float,
                    help="create a context for real only below this KV + compute (a rehearsal "
                         "on a CPU build; default: every row)")
    a = ap.parse_args()
    gdir = a.work / "gguf"
    gdir.mkdir(parents=True, exist_ok=True)
    log = a.work / "cuda-grid.log"
    log.write_text("")
    t0 = time.time()
    table: list[dict] = []
    skipped = 0
    n = 0
    for key, ngl, repack, rows in plan():
        if a.only and key not in a.only:
            continue
        left = a.deadline - (time.time() - t0)
        if left <= 0:
            skipped += len(rows)
            continue
        m = g.MODELS[key]
        path = gdir / f"{key}.gguf"
        if not path.exists():
            g.write_gguf(m, path)
        for r in rows:
            n += 1
            r["id"] = f"{key}-cuda-{n:03d}"
        extra = ("--ngl", str(ngl))
        # The simulated pass for the main models' full offload only (a probe start each).
        sim = {}
        if key in MAIN and ngl == FULL:
            _, sim = g.run_probe(a.probe, path, rows, True, repack, log, extra=extra, timeout=left)
        small = [r for r in rows if a.real_limit_gib is None or (
            r["id"] in sim and sim[r["id"]].get("status") == "ok"
            and sum(v[1] + v[2] for v in sim[r["id"]]["mem"].values()) < a.real_limit_gib * 2**30)
            or (r["id"] not in sim and r["n_ctx_req"] <= 4096)]
        _, real = g.run_probe(a.probe, path, small, False, repack, log, extra=extra,
                              timeout=max(a.deadline - (time.time() - t0), 10)) if small else ({}, {})
        for r in rows:
            table.append(row_of(r, m, sim.get(r["id"]), real.get(r["id"])))
        print(f"{key} -ngl {ngl} repack {int(repack)}: {len(rows)} configurations, {time.time() - t0:.0f} s",
              file=sys.stderr)
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "cuda.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in table:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    info = dict(
        llama_cpp_commit="0c1e57098", build=a.build, build_seconds=a.build_seconds,
        grid_seconds=round(time.time() - t0), date=datetime.date.today().isoformat(),
        cpu=g.cpu_model(), cores=os.cpu_count(), rows=len(table), skipped=skipped,
        failed=sum(1 for r in table if r.get("status") != "ok"),
        real=sum(1 for r in table if r.get("alloc") in ("both", "real")),
        mismatches=sum(1 for r in table if r.get("alloc") == "MISMATCH"), **gpu_facts(),
    )
    (a.out / "cuda-run.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
