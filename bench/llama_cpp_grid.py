#!/usr/bin/env python3
"""Synthetic GGUFs, the context grid and the table of llama.cpp's own buffers.

Run by bench/llama_cpp_grid.sh (which builds llama.cpp and the probe); by hand:

    PYTHONPATH=$SRC/gguf-py python3 bench/llama_cpp_grid.py --probe PROBE --work DIR --out DIR

Models: published architectures' dimensions (Llama-3.1-8B, Llama-2-7B, Qwen2.5-7B, Gemma-2-9B,
Gemma-3-12B, Phi-3-mini) with fewer layers (the compute buffer does not depend on depth: the
`-32l`/`-48l`/`-42l` models check it at the published depth), Q4_0 and Q8_0 weights, and three
held-out sets; written with the `gguf` package; the tensor data is a hole (a sparse file of
zeros), so a file costs a few KB of disk. Every configuration is created twice where memory
allows: with `no_alloc` (llama.cpp's own simulated allocation, which `--fit` uses) and for
real; the two must agree, or the row says so (`alloc`).

Output: grid.csv (one row per configuration: every input and every buffer), models.json
(each model's dimensions and printed weight buffers), run.json (version, build and grid
seconds, machine, date, counts). The README beside them is written by hand.
"""
from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import gguf

# Published dimensions (the models' config.json / their GGUF conversions).
MODELS: dict[str, dict] = {
    "llama31-8b": dict(arch="llama", name="Llama-3.1-8B", n_layer=4, layers_published=32,
                       n_embd=4096, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
                       n_vocab=128256, ctx_train=131072, rope_base=500000.0, tied=False),
    "llama2-7b": dict(arch="llama", name="Llama-2-7B (MHA)", n_layer=4, layers_published=32,
                      n_embd=4096, n_head=32, n_head_kv=32, head_dim=128, n_ff=11008,
                      n_vocab=32000, ctx_train=4096, rope_base=10000.0, tied=False),
    "qwen25-7b": dict(arch="qwen2", name="Qwen2.5-7B", n_layer=4, layers_published=28,
                      n_embd=3584, n_head=28, n_head_kv=4, head_dim=128, n_ff=18944,
                      n_vocab=152064, ctx_train=32768, rope_base=1000000.0, tied=False,
                      qkv_bias=True),
    "gemma2-9b": dict(arch="gemma2", name="Gemma-2-9B", n_layer=4, layers_published=42,
                      n_embd=3584, n_head=16, n_head_kv=8, head_dim=256, n_ff=14336,
                      n_vocab=256000, ctx_train=8192, rope_base=10000.0, tied=True,
                      n_swa=4096, swa_period=2, softcap=(50.0, 30.0), post_norms=True),
    "gemma3-12b": dict(arch="gemma3", name="Gemma-3-12B", n_layer=12, layers_published=48,
                       n_embd=3840, n_head=16, n_head_kv=8, head_dim=256, n_ff=15360,
                       n_vocab=262144, ctx_train=131072, rope_base=1000000.0, tied=True,
                       n_swa=1024, swa_period=6, post_norms=True, qk_norm=True),
    "phi3-mini": dict(arch="phi3", name="Phi-3-mini-4k", n_layer=4, layers_published=32,
                      n_embd=3072, n_head=32, n_head_kv=32, head_dim=96, n_ff=8192,
                      n_vocab=32064, ctx_train=4096, rope_base=10000.0, tied=False,
                      fused=True),
}
# Depth checks: the same shapes at more layers.
MODELS["llama31-8b-32l"] = dict(MODELS["llama31-8b"], n_layer=32)
MODELS["gemma3-12b-48l"] = dict(MODELS["gemma3-12b"], n_layer=48)
MODELS["gemma2-9b-42l"] = dict(MODELS["gemma2-9b"], n_layer=42)
# Held out: shapes the model was not derived on (run after it was written), a small grid each.
MODELS["llama32-3b"] = dict(arch="llama", name="Llama-3.2-3B (tied)", n_layer=4, layers_published=28,
                            n_embd=3072, n_head=24, n_head_kv=8, head_dim=128, n_ff=8192,
                            n_vocab=128256, ctx_train=131072, rope_base=500000.0, tied=True,
                            holdout=True)
MODELS["gemma2-2b"] = dict(arch="gemma2", name="Gemma-2-2B", n_layer=4, layers_published=26,
                           n_embd=2304, n_head=8, n_head_kv=4, head_dim=256, n_ff=9216,
                           n_vocab=256000, ctx_train=8192, rope_base=10000.0, tied=True,
                           n_swa=4096, swa_period=2, softcap=(50.0, 30.0), post_norms=True,
                           holdout=True)
MODELS["qwen25-0.5b"] = dict(arch="qwen2", name="Qwen2.5-0.5B", n_layer=4, layers_published=24,
                             n_embd=896, n_head=14, n_head_kv=2, head_dim=64, n_ff=4864,
                             n_vocab=151936, ctx_train=32768, rope_base=1000000.0, tied=True,
                             qkv_bias=True, holdout=True)
# A second held-out set, run once after the model's last change (none has Q == n_embd).
MODELS["mistral-nemo-12b"] = dict(arch="llama", name="Mistral-Nemo-12B", n_layer=4, layers_published=40,
                                  n_embd=5120, n_head=32, n_head_kv=8, head_dim=128, n_ff=14336,
                                  n_vocab=131072, ctx_train=131072, rope_base=1000000.0,
                                  tied=False, holdout=True)
MODELS["gemma3-4b"] = dict(arch="gemma3", name="Gemma-3-4B", n_layer=12, layers_published=34,
                           n_embd=2560, n_head=8, n_head_kv=4, head_dim=256, n_ff=10240,
                           n_vocab=262144, ctx_train=131072, rope_base=1000000.0, tied=True,
                           n_swa=1024, swa_period=6, post_norms=True, qk_norm=True, holdout=True)
MODELS["phi3-medium"] = dict(arch="phi3", name="Phi-3-medium-4k", n_layer=4, layers_published=40,
                             n_embd=5120, n_head=40, n_head_kv=10, head_dim=128, n_ff=17920,
                             n_vocab=32064, ctx_train=4096, rope_base=10000.0, tied=False,
                             fused=True, holdout=True)
# A third held-out set, run once after the rules read from set 2.
MODELS["qwen25-14b"] = dict(arch="qwen2", name="Qwen2.5-14B", n_layer=4, layers_published=48,
                            n_embd=5120, n_head=40, n_head_kv=8, head_dim=128, n_ff=13824,
                            n_vocab=152064, ctx_train=32768, rope_base=1000000.0, tied=False,
                            qkv_bias=True, holdout=True)
MODELS["llama31-70b"] = dict(arch="llama", name="Llama-3.1-70B", n_layer=4, layers_published=80,
                             n_embd=8192, n_head=64, n_head_kv=8, head_dim=128, n_ff=28672,
                             n_vocab=128256, ctx_train=131072, rope_base=500000.0, tied=False,
                             holdout=True)
MODELS["gemma2-27b"] = dict(arch="gemma2", name="Gemma-2-27B", n_layer=4, layers_published=46,
                            n_embd=4608, n_head=32, n_head_kv=16, head_dim=128, n_ff=36864,
                            n_vocab=256000, ctx_train=8192, rope_base=10000.0, tied=True,
                            n_swa=4096, swa_period=2, softcap=(50.0, 30.0), post_norms=True,
                            holdout=True)
MODELS["phi4-mini"] = dict(arch="phi3", name="Phi-4-mini", n_layer=4, layers_published=32,
                           n_embd=3072, n_head=24, n_head_kv=8, head_dim=128, n_ff=8192,
                           n_vocab=200064, ctx_train=131072, rope_base=10000.0, tied=True,
                           fused=True, holdout=True)
# Quantized weights (llama-quantize's Q4_0 / Q8_0 mixes: output.weight Q6_K / Q8_0).
MODELS["llama31-8b-q4_0"] = dict(MODELS["llama31-8b"], wtype="Q4_0", out_type="Q6_K")
MODELS["llama31-8b-q8_0"] = dict(MODELS["llama31-8b"], wtype="Q8_0", out_type="Q8_0")


def tensors(m: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """(name, ggml ne (fastest first), type) of every tensor, as llama.cpp's loader wants."""
    e, hd, ff, v = m["n_embd"], m["head_dim"], m["n_ff"], m["n_vocab"]
    q, kv = m["n_head"] * hd, m["n_head_kv"] * hd
    w = m.get("wtype", "F16")
    t = [("token_embd.weight", (e, v), w), ("output_norm.weight", (e,), "F32")]
    if not m["tied"]:
        t.append(("output.weight", (e, v), m.get("out_type", w)))
    for i in range(m["n_layer"]):
        b = f"blk.{i}."
        t.append((b + "attn_norm.weight", (e,), "F32"))
        if m.get("fused"):
            t.append((b + "attn_qkv.weight", (e, q + 2 * kv), w))
        else:
            t += [(b + "attn_q.weight", (e, q), w), (b + "attn_k.weight", (e, kv), w),
                  (b + "attn_v.weight", (e, kv), w)]
        if m.get("qkv_bias"):
            t += [(b + "attn_q.bias", (q,), "F32"), (b + "attn_k.bias", (kv,), "F32"),
                  (b + "attn_v.bias", (kv,), "F32")]
        if m.get("qk_norm"):
            t += [(b + "attn_q_norm.weight", (hd,), "F32"), (b + "attn_k_norm.weight", (hd,), "F32")]
        t.append((b + "attn_output.weight", (q, e), w))
        if m.get("post_norms"):
            t.append((b + "post_attention_norm.weight", (e,), "F32"))
        t.append((b + "ffn_norm.weight", (e,), "F32"))
        if m.get("fused"):
            t.append((b + "ffn_up.weight", (e, 2 * ff), w))
        else:
            t += [(b + "ffn_gate.weight", (e, ff), w), (b + "ffn_up.weight", (e, ff), w)]
        t.append((b + "ffn_down.weight", (ff, e), w))
        if m.get("post_norms"):
            t.append((b + "post_ffw_norm.weight", (e,), "F32"))
    return t


def write_gguf(m: dict, path: Path) -> None:
    """A GGUF with the metadata of `m` and zero weights (the data region is a hole)."""
    arch = m["arch"]
    w = gguf.GGUFWriter(path=None, arch=arch)
    w.add_name(m["name"] + " (synthetic, zero weights)")
    w.add_context_length(m["ctx_train"])
    w.add_embedding_length(m["n_embd"])
    w.add_block_count(m["n_layer"])
    w.add_feed_forward_length(m["n_ff"])
    w.add_head_count(m["n_head"])
    w.add_head_count_kv(m["n_head_kv"])
    w.add_key_length(m["head_dim"])
    w.add_value_length(m["head_dim"])
    w.add_rope_dimension_count(m["head_dim"])
    w.add_rope_freq_base(m["rope_base"])
    w.add_layer_norm_rms_eps(1e-6)
    w.add_vocab_size(m["n_vocab"])
    if "n_swa" in m:
        w.add_sliding_window(m["n_swa"])
    if "softcap" in m:
        w.add_attn_logit_softcapping(m["softcap"][0])
        w.add_final_logit_softcapping(m["softcap"][1])
    w.add_tokenizer_model("none")  # llama.cpp: `{arch}.vocab_size` dummy tokens
    for name, ne, typ in tensors(m):
        qt = gguf.GGMLQuantizationType[typ]
        block, size = gguf.GGML_QUANT_SIZES[qt]
        nbytes = (int(np.prod(ne)) // block) * size
        if typ in ("F16", "F32"):
            w.add_tensor_info(name, tuple(reversed(ne)), np.dtype(typ.lower().replace("f", "float")),
                              nbytes)
        else:
            byte_shape = tuple(reversed(ne[1:])) + (ne[0] // block * size,)
            w.add_tensor_info(name, byte_shape, np.dtype(np.uint8), nbytes, raw_dtype=qt)
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    f = w.fout[0]
    f.flush()
    align = w.data_alignment
    pos = f.tell()
    start = (pos + align - 1) // align * align
    data = sum((ti.nbytes + align - 1) // align * align for ti in w.tensors[0].values())
    f.truncate(start + data)  # zeros, as a hole
    f.close()


# ---------------------------------------------------------------------------------------------
# The grid.

CTX = (4096, 32768, 131072)
UBATCH = (512, 2048)
N_BATCH = 2048

# The two tool families (see README.md / notes): what each passes to llama_context_params.
#   server:  llama-server / llama-cli: common_params (n_outputs_max = n_parallel,
#            n_outputs_max_per_seq 1, swa_full false)
#   library: llama_context_default_params() as llama-cpp-python passes it (n_outputs_max 0 =
#            n_batch, swa_full true, kv_unified false)
#   bench:   llama-bench: the C API defaults but swa_full false
FAMILIES = ("server", "library", "bench")


def family_params(family: str, n_seq: int) -> dict:
    if family == "server":
        return dict(n_outputs_max=n_seq, n_outputs_max_per_seq=1, swa_full=0)
    if family == "library":
        return dict(n_outputs_max=0, n_outputs_max_per_seq=1, swa_full=1)
    if family == "bench":
        return dict(n_outputs_max=0, n_outputs_max_per_seq=1, swa_full=0)
    raise ValueError(family)


def grid_for(key: str, m: dict) -> list[dict]:
    rows: list[dict] = []

    def add(ctx, ub, fa, n_seq, unified, family, tk="f16", tv="f16", swa_full=None):
        fp = family_params(family, n_seq)
        if swa_full is not None:
            fp["swa_full"] = swa_full
        rows.append(dict(model=key, family=family, n_ctx_req=ctx, n_batch=N_BATCH, n_ubatch=ub,
                         n_seq=n_seq, kv_unified=int(unified), flash_attn=int(fa), type_k=tk,
                         type_v=tv, **fp))

    swa = "n_swa" in m
    if key.endswith(("-32l", "-48l", "-42l")):
        for ctx in (4096, 32768):
            for ub in UBATCH:
                for fa in (1, 0):
                    add(ctx, ub, fa, 1, True, "server")
        return rows
    if m.get("holdout"):
        for ctx in (4096, 32768):
            for fa in (1, 0):
                add(ctx, 512, fa, 1, True, "server")
                add(ctx, 512, fa, 4, True, "server")
                add(ctx, 512, fa, 1, True, "library")
        add(4096, 512, 1, 1, True, "server", "q8_0", "q8_0")
        add(4096, 512, 1, 1, True, "library", "q8_0", "q8_0")
        return rows
    if key.endswith(("-q4_0", "-q8_0")):
        for ctx in (4096, 32768):
            for fa in (1, 0):
                add(ctx, 512, fa, 1, True, "server")
        return rows
    for ctx in CTX:
        for ub in UBATCH:
            for fa in (1, 0):
                add(ctx, ub, fa, 1, True, "server")
                add(ctx, ub, fa, 4, False, "server")
                add(ctx, ub, fa, 4, True, "server")
                add(ctx, ub, fa, 1, True, "library")
                add(ctx, ub, fa, 4, False, "library")
                if swa:
                    add(ctx, ub, fa, 1, True, "bench")
    for ctx in (4096, 32768):
        add(ctx, 512, 1, 1, True, "server", "q8_0", "q8_0")
        add(ctx, 512, 1, 4, True, "server", "q8_0", "q8_0")
        add(ctx, 512, 1, 1, True, "library", "q8_0", "q8_0")
    if swa:  # llama-server --swa-full: the sliding layers' cache at full size
        for ctx in (4096, 32768):
            for fa in (1, 0):
                add(ctx, 512, fa, 1, True, "server", swa_full=1)
    return rows


# ---------------------------------------------------------------------------------------------
# Running the probe and reading what llama.cpp printed.

RE_MODEL_BUF = re.compile(r"load_tensors:\s+(\S+) model buffer size =\s+([\d.]+) MiB")
RE_KV_SIZE = re.compile(r"llama_kv_cache: size =\s+([\d.]+) MiB \(\s*(\d+) cells,\s+(\d+) layers,\s+(\d+)/(\d+) seqs\), "
                        r"K \((\w+)\):\s+([\d.]+) MiB, V \((\w+)\):\s+([\d.]+) MiB")
RE_ISWA = re.compile(r"llama_kv_cache_iswa: creating\s+(non-SWA|SWA) KV cache")
RE_COMPUTE = re.compile(r"sched_reserve:\s+(\S+) compute buffer size =\s+([\d.]+) MiB")
RE_OUTPUT = re.compile(r"llama_context:\s+(\S+)\s+output buffer size =\s+([\d.]+) MiB")
RE_CTX = re.compile(r"llama_context: (n_ctx|n_ctx_seq|n_batch|n_ubatch|n_outputs_max)\s+= (\d+)")


def run_probe(probe: Path, model: Path, rows: list[dict], no_alloc: bool, repack: bool,
              log: Path, lib: Path | None = None, extra: tuple[str, ...] = (),
              timeout: float | None = None) -> tuple[dict, dict]:
    """Creates each row's context; returns (model-load facts, {id: parsed}). `extra`: more
    probe arguments (`--ngl N` on a CUDA build); `timeout`: seconds before the probe is killed
    (the rows it finished are kept)."""
    lines = []
    for r in rows:
        lines.append(" ".join(str(x) for x in (
            r["id"], r["n_ctx_req"], r["n_batch"], r["n_ubatch"], r["n_seq"], r["flash_attn"],
            r["type_k"], r["type_v"], r["swa_full"], r["kv_unified"], r["n_outputs_max"],
            r["n_outputs_max_per_seq"])))
    args = [str(probe), str(model)] + (["--no-alloc"] if no_alloc else []) + ([] if repack else ["--no-repack"])
    args += list(extra)
    env = dict(os.environ)
    if lib:  # another libggml-cpu (the AVX2 build) ahead of the probe's RUNPATH
        env["LD_LIBRARY_PATH"] = f"{lib}:{env.get('LD_LIBRARY_PATH', '')}"
    try:
        p = subprocess.run(args, input="\n".join(lines) + "\n", capture_output=True, text=True,
                           env=env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        p = subprocess.CompletedProcess(args, -9, text(e.stdout), text(e.stderr) + "\n(timed out)")
    with open(log, "a") as f:
        f.write(f"### {' '.join(args)}\n{p.stdout}\n{p.stderr}\n")
    load: dict = {"model_mib": {}}
    out: dict = {}
    cur = None
    for line in p.stdout.splitlines():
        if line.startswith("BEGIN "):
            cur = {"kv": [], "compute_mib": {}, "mem": {}, "ctx": {}, "kind": "full"}
            out[line.split()[1]] = cur
            continue
        if line.startswith("END "):
            _, rid, status = line.split()
            out[rid]["status"] = status
            cur = None
            continue
        if cur is None:
            m = RE_MODEL_BUF.search(line)
            if m:
                load["model_mib"][m.group(1)] = float(m.group(2))
            continue
        if line.startswith("MEM "):
            _, buft, mo, co, cp = line.split()
            cur["mem"][buft] = (int(mo), int(co), int(cp))
            continue
        m = RE_ISWA.search(line)
        if m:
            cur["kind"] = "full" if m.group(1) == "non-SWA" else "swa"
        m = RE_KV_SIZE.search(line)
        if m:
            cur["kv"].append(dict(kind=cur["kind"], mib=float(m.group(1)), cells=int(m.group(2)),
                                  layers=int(m.group(3)), seqs=int(m.group(4)), streams=int(m.group(5)),
                                  k_mib=float(m.group(7)), v_mib=float(m.group(9))))
        m = RE_COMPUTE.search(line)
        if m:
            cur["compute_mib"][m.group(1)] = float(m.group(2))
        m = RE_OUTPUT.search(line)
        if m:
            cur["output_mib"] = float(m.group(2))
        m = RE_CTX.search(line)
        if m:
            cur["ctx"][m.group(1)] = int(m.group(2))
    if p.returncode != 0:
        print(f"probe exited {p.returncode} on {model.name} (see {log})", file=sys.stderr)
    return load, out


def weights_of(mem: dict) -> dict:
    """The weights per buffer type of a real load: the mmap'd range, repacked copies, the rest."""
    extra = [(k, v[0]) for k, v in mem.items() if k not in ("CPU", "CPU_Mapped") and v[0]]
    return dict(weights_mapped_bytes=mem.get("CPU_Mapped", (0, 0, 0))[0],
                weights_extra_buft="+".join(k for k, _ in extra),
                weights_extra_bytes=sum(b for _, b in extra),
                weights_cpu_bytes=mem.get("CPU", (0, 0, 0))[0])


COLUMNS = [
    "id", "model", "arch", "n_layer", "n_embd", "n_head", "n_head_kv", "head_dim", "n_ff",
    "n_vocab", "n_swa", "swa_period", "weights", "family", "n_ctx_req", "n_batch", "n_ubatch",
    "n_seq", "kv_unified", "flash_attn", "type_k", "type_v", "swa_full", "n_outputs_max",
    "n_outputs_max_per_seq", "repack",
    # what llama.cpp derived and printed
    "status", "n_ctx", "n_ctx_seq", "n_outputs_reserved",
    "kv_full_cells", "kv_full_layers", "kv_swa_cells", "kv_swa_layers", "kv_streams",
    "kv_full_k_mib", "kv_full_v_mib", "kv_swa_k_mib", "kv_swa_v_mib",
    "kv_bytes", "weights_mapped_bytes", "weights_extra_buft", "weights_extra_bytes",
    "weights_cpu_bytes",
    "compute_bytes", "compute_mib_printed", "output_mib_printed", "alloc",
]


def row_of(cfg: dict, m: dict, sim: dict | None, real: dict | None, weights: dict) -> dict:
    # The figures come from the simulated pass (every row) and are checked against the real
    # one where it ran; `alloc` says which: "both" (equal), "simulated", or "MISMATCH".
    src = sim if sim and sim.get("status") == "ok" else real
    r = dict(cfg)
    r.update(model_columns(m))
    if not src or src.get("status") != "ok":
        r["status"] = "fail"
        return r
    r["status"] = "ok"
    c = src["ctx"]
    r["n_ctx"], r["n_ctx_seq"] = c.get("n_ctx"), c.get("n_ctx_seq")
    r["n_outputs_reserved"] = min(c.get("n_ubatch", 0), c.get("n_outputs_max", 0))
    for kv in src["kv"]:
        k = kv["kind"]
        r[f"kv_{k}_cells"], r[f"kv_{k}_layers"] = kv["cells"], kv["layers"]
        r[f"kv_{k}_k_mib"], r[f"kv_{k}_v_mib"] = kv["k_mib"], kv["v_mib"]
        r["kv_streams"] = kv["streams"]
    mem = src["mem"]
    r["kv_bytes"] = sum(v[1] for v in mem.values())
    r.update(weights)  # the model's, from a real (mmap) load: the simulated pass maps nothing
    r["compute_bytes"] = sum(v[2] for v in mem.values())
    r["compute_mib_printed"] = src["compute_mib"].get("CPU")
    r["output_mib_printed"] = src.get("output_mib")
    r["alloc"] = alloc_of(cfg["id"], sim, real, lambda mem: (
        sum(v[1] for v in mem.values()), sum(v[2] for v in mem.values())))
    return r


def model_columns(m: dict) -> dict:
    """A model's columns in a table row."""
    return dict(arch=m["arch"], n_layer=m["n_layer"], n_embd=m["n_embd"], n_head=m["n_head"],
                n_head_kv=m["n_head_kv"], head_dim=m["head_dim"], n_ff=m["n_ff"],
                n_vocab=m["n_vocab"], n_swa=m.get("n_swa", 0), swa_period=m.get("swa_period", 0),
                weights=m.get("wtype", "F16") + ("/" + m["out_type"] if "out_type" in m else ""))


def alloc_of(rid: str, sim: dict | None, real: dict | None, kv_compute) -> str:
    """The `alloc` column: "both" when the simulated and real passes agree on
    `kv_compute(mem)`, "MISMATCH" (said on stderr) when they do not, else the pass that ran."""
    def ok(p):
        return bool(p) and p.get("status") == "ok"
    if ok(real) and ok(sim):
        if kv_compute(real["mem"]) == kv_compute(sim["mem"]):
            return "both"
        print(f"{rid}: simulated {sim['mem']} != real {real['mem']}", file=sys.stderr)
        return "MISMATCH"
    return "real" if ok(real) else "simulated"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--probe", required=True, type=Path)
    ap.add_argument("--work", required=True, type=Path)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--src", type=Path)
    ap.add_argument("--version", default="?")
    ap.add_argument("--sha256", default="?")
    ap.add_argument("--build-seconds", default="unknown")
    ap.add_argument("--only", action="append", help="model keys (default: all)")
    ap.add_argument("--avx2-lib", type=Path, help="a directory with an AVX2-only libggml-cpu.so")
    ap.add_argument("--real-limit-gib", type=float, default=3.0,
                    help="create a context for real only when its KV + compute are below this")
    a = ap.parse_args()
    models = {k: v for k, v in MODELS.items() if not a.only or k in a.only}
    gdir = a.work / "gguf"
    gdir.mkdir(parents=True, exist_ok=True)
    log = a.work / "grid.log"
    log.write_text("")
    t0 = time.time()
    table: list[dict] = []
    meta: dict = {}
    n = 0
    for key, m in models.items():
        path = gdir / f"{key}.gguf"
        write_gguf(m, path)
        rows = grid_for(key, m)
        for r in rows:
            n += 1
            r["id"] = f"{key}-{n:03d}"
        # repack: "native" (this build, extra buffer types on: AMX where the host has it, which
        # copies even F16 matmul weights into anonymous memory), "avx2" (the AVX2 build of the
        # CPU backend: CPU_REPACK), "off" (no extra buffer types: the weights stay mmap'd).
        # The main rows of F16 models run with "off" (the compute buffer does not depend on
        # it, and AMX copies of a deep F16 model would not fit in RAM); two rows of each other
        # variant record the weights buffers.
        quant = key.endswith(("-q4_0", "-q8_0"))
        variants = [("native" if quant else "off", quant, None)]
        if quant or key == "llama31-8b":
            variants += [("avx2", True, a.avx2_lib)] if a.avx2_lib else []
            variants += [("off", False, None)] if quant else [("native", True, None)]
        for variant, repack, lib in variants:
            cfgs = [dict(r, repack=variant) for r in rows]
            if (variant, repack, lib) != variants[0]:
                cfgs = [dict(c, id=c["id"] + "-" + variant) for c in cfgs[:2]]
            load, sim = run_probe(a.probe, path, cfgs, True, repack, log, lib)
            small = [c for c in cfgs if c["id"] in sim and sim[c["id"]].get("status") == "ok"
                     and sum(v[1] + v[2] for v in sim[c["id"]]["mem"].values()) < a.real_limit_gib * 2**30]
            load, real = run_probe(a.probe, path, small, False, repack, log, lib) if small else ({}, {})
            weights = weights_of(next((v["mem"] for v in real.values() if v.get("status") == "ok"), {}))
            for c in cfgs:
                table.append(row_of(c, m, sim.get(c["id"]), real.get(c["id"]), weights))
            meta.setdefault(key, dict(m, file_bytes=path.stat().st_size, n_tensors=len(tensors(m)),
                                      model_mib_printed={}))
            meta[key]["model_mib_printed"][variant] = load.get("model_mib", {})
        print(f"{key}: {len(rows)} configurations, {time.time() - t0:.0f} s", file=sys.stderr)
    grid_seconds = time.time() - t0
    a.out.mkdir(parents=True, exist_ok=True)
    with open(a.out / "grid.csv", "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in table:
            w.writerow({k: ("" if r.get(k) is None else r.get(k)) for k in COLUMNS})
    (a.out / "models.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    info = dict(
        llama_cpp_python=a.version, sdist_sha256=a.sha256, llama_cpp_commit="0c1e57098",
        build_seconds=a.build_seconds, grid_seconds=round(grid_seconds),
        date=datetime.date.today().isoformat(), machine=platform.machine(),
        cpu=cpu_model(), cpu_flags=cpu_flags(), cores=os.cpu_count(), rows=len(table),
        failed=sum(1 for r in table if r.get("status") != "ok"),
        real=sum(1 for r in table if r.get("alloc") in ("both", "real")),
        mismatches=sum(1 for r in table if r.get("alloc") == "MISMATCH"),
    )
    (a.out / "run.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info), file=sys.stderr)
    return 0


def cpu_model() -> str:
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor()


def cpu_flags() -> str:
    want = ("avx", "avx2", "avx512f", "avx512bw", "avx512vnni", "avx_vnni", "f16c", "fma", "amx_int8")
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("flags"):
                have = set(line.split(":", 1)[1].split())
                return " ".join(x for x in want if x in have)
    except OSError:
        pass
    return ""


if __name__ == "__main__":
    sys.exit(main())
