#!/usr/bin/env python3
"""llama.cpp's buffers as formulas, checked against the real thing (grid.csv).

The prototype of what `hypomnesis::estimate::llama_cpp` ports; the table it checks is
described in crates/hypomnesis/tests/fixtures/llama_cpp/README.md. Every size is in bytes;
every source line is ggml-org/llama.cpp 0c1e57098 (vendored by llama-cpp-python 0.3.36).
On the checked-in table: compute within ±5 % on 604/604 rows (worst +4.2 %), KV and the
output buffer exact.

    python3 bench/llama_cpp_model.py                 # error of every row, per architecture
    python3 bench/llama_cpp_model.py -v              # and each row outside ±5 %
    python3 bench/llama_cpp_model.py --hmn BIN --gguf DIR   # the same rows through `hmn fits`
    python3 bench/llama_cpp_model.py --explain ID --work DIR  # llama.cpp's live tensors at the
                                                    # peak (needs bench/llama_cpp_grid.sh's build)

The compute buffer (CPU backend; one ggml-alloc chunk) is the largest of three phases, each
the live tensors plus the holes ggml-alloc's best-fit leaves below them (see the note):

    FFN     I + 2E + [Q] + 3F        (gate, up and the GLU output are live together)
    ATTN    I + 2E + 2Q + KQ         (flash attention off: the F32 scores)
    OUT     a(4T) + E + E_out + L    (logits of n_out rows)

with a few layout-dependent variants (fused QKV, residual-first adds, rotated quantized
caches, the last layer when every token is an output) documented at each rule.
"""
from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

FIXTURE = Path(__file__).resolve().parent.parent / "crates/hypomnesis/tests/fixtures/llama_cpp/grid.csv"

ALIGN_CPU = 32     # ggml-impl.h TENSOR_ALIGNMENT (CPU and CUDA_Host buffers)
ALIGN_CUDA = 128   # ggml-cuda.cu ggml_backend_cuda_buffer_type_get_alignment
PAD_CELLS = 256    # llama-context.cpp: GGML_PAD(n_ctx, 256); llama-kv-cache-iswa.cpp: SWA size
QUANT_KV = {"q8_0": (34, 32), "q4_0": (18, 32), "q4_1": (20, 32), "q5_0": (22, 32),
            "q5_1": (24, 32), "iq4_nl": (18, 32)}
FLOAT_KV = {"f32": 4, "f16": 2, "bf16": 2}
# Architectures whose attention projection is one fused matmul (attn_qkv), and whose residual
# add keeps the residual as src[0] (`ggml_add(residual, cur)`: phi3.cpp), which moves where
# the last hidden state lands and so the output phase.
FUSED_QKV = {"phi3"}
RESIDUAL_FIRST = {"phi3"}


def pad(x: int, n: int) -> int:
    return (x + n - 1) // n * n


def row_bytes(kv_type: str, n: int) -> int:
    """ggml_row_size: n elements of a cache row."""
    if kv_type in FLOAT_KV:
        return FLOAT_KV[kv_type] * n
    size, block = QUANT_KV[kv_type]
    return n // block * size


@dataclass
class Shape:
    """What llama_context derives from the parameters (llama-context.cpp:235-300, 616-640)."""
    n_ctx: int
    n_ctx_seq: int
    n_batch: int
    n_ubatch: int
    T: int            # tokens of the reserved graph: min(n_ctx, n_ubatch), a multiple of n_seq
    n_out: int        # outputs of the reserved graph: min(T, n_outputs_max)
    caches: list      # cells per stream of each KV cache kind: [full] or [full, swa]
    n_stream: int     # KV streams: 1 unified, n_seq split


def shape(r: dict) -> Shape:
    g = lambda k: int(r[k])
    n_seq, unified = g("n_seq"), g("kv_unified") == 1
    n_ctx = pad(g("n_ctx_req"), PAD_CELLS)
    if unified:
        n_ctx_seq = n_ctx
    else:
        n_ctx_seq = pad(n_ctx // n_seq, PAD_CELLS)
        n_ctx = n_ctx_seq * n_seq
    n_batch = min(n_ctx, g("n_batch"))
    n_ubatch = min(n_batch, g("n_ubatch"))
    T = min(n_ctx, n_ubatch)
    T = pad(T, n_seq)                                   # graph_reserve: n_tokens % n_seqs
    n_outputs_max = g("n_outputs_max") or n_batch       # 0 = n_batch (llama-context.cpp:250)
    n_out = min(T, n_outputs_max)                       # sched_reserve: n_outputs_pp
    caches = [n_ctx_seq]
    if g("n_swa"):
        swa = n_ctx_seq if g("swa_full") else pad(
            min(n_ctx_seq, g("n_swa") * (n_seq if unified else 1) + n_ubatch), PAD_CELLS)
        caches.append(swa)
    return Shape(n_ctx, n_ctx_seq, n_batch, n_ubatch, T, n_out, caches, 1 if unified else n_seq)


def kv_bytes(r: dict) -> int:
    """K and V of every layer (llama-kv-cache.cpp): cells × streams × row, per layer kind."""
    s = shape(r)
    n_layer, period = int(r["n_layer"]), int(r["swa_period"])
    gqa = int(r["n_head_kv"]) * int(r["head_dim"])
    per_cell = row_bytes(r["type_k"], gqa) + row_bytes(r["type_v"], gqa)
    total = 0
    for il in range(n_layer):
        sliding = period and int(r["n_swa"]) and il % period < period - 1
        total += (s.caches[1] if sliding else s.caches[0]) * s.n_stream * per_cell
    return total


def output_buffer(r: dict) -> int:
    """llama_context::output_reserve(n_seq_max): logits n_vocab × n_seq × 4 (no embeddings)."""
    return int(r["n_vocab"]) * int(r["n_seq"]) * 4


def inputs(r: dict, align: int, host_only: bool = True) -> list[tuple[str, int]]:
    """The graph inputs (ggml_set_input), allocated first and in this order; each lives until
    its last consumer (the masks: the last layer of their kind)."""
    s, fa = shape(r), int(r["flash_attn"]) == 1
    T, e = s.T, int(r["n_embd"])
    hd, gqa = int(r["head_dim"]), int(r["n_head_kv"]) * int(r["head_dim"])
    a = lambda x: pad(x, align)
    out = []
    if host_only:
        out += [("inp_tokens", a(4 * T)), ("inp_embd", a(4 * e * T))]   # llama-graph.cpp:2384-2390
    out.append(("inp_pos", a(4 * T)))                                     # llama-graph.cpp:2470
    rot_k = r["type_k"] in QUANT_KV and hd % 64 == 0                      # llama-kv-cache.cpp:321
    rot_v = r["type_v"] in QUANT_KV and hd % 64 == 0                      # llama-kv-cache.cpp:334
    for i, cells in enumerate(s.caches):
        kind = "" if i == 0 else "_swa"
        out.append((f"k_idxs{kind}", a(8 * T)))                           # llama-kv-cache.cpp:1422
        # V transposed (no flash attention): one index per element (llama-kv-cache.cpp:1438)
        out.append((f"v_idxs{kind}", a(8 * T * (1 if fa else gqa))))
        out.append((f"kq_mask{kind}", a(cells * T * (2 if fa else 4))))    # llama-graph.cpp:39-41
        if rot_k:
            nrot = 64
            while True:
                nrot *= 2
                if hd % nrot:
                    break
            out.append((f"k_rot{kind}", a(4 * (nrot // 2) ** 2)))         # llama-kv-cache.cpp:1451
        if rot_v:
            out.append((f"v_rot{kind}", a(4 * 64 * 64)))                  # llama-kv-cache.cpp:1472
    out.append(("out_ids", a(4 * s.n_out)))                               # llama-graph.cpp:2513
    return out


def compute_cpu(r: dict, align: int = ALIGN_CPU) -> tuple[int, dict]:
    """The CPU backend's compute buffer: max over the phases (see the module doc)."""
    s, fa = shape(r), int(r["flash_attn"]) == 1
    T, n_out = s.T, s.n_out
    e, ff, vocab = int(r["n_embd"]), int(r["n_ff"]), int(r["n_vocab"])
    heads, hd = int(r["n_head"]), int(r["head_dim"])
    a = lambda x: pad(x, align)
    I = sum(b for _, b in inputs(r, align))
    E, Q, F = a(4 * e * T), a(4 * heads * hd * T), a(4 * ff * T)
    E_out, L = a(4 * e * n_out), a(4 * vocab * n_out)
    fused = r["arch"] in FUSED_QKV
    rot = r["type_k"] in QUANT_KV and hd % 64 == 0
    base = a(4 * T) + a(4 * e * T)          # the token-ids hole and inp_embd (never freed)
    I_rest = I - base                       # inputs freed after the last layer's attention
    q_slot = 0 if fused else Q
    # FFN: gate, up and the GLU output (3F; fused up: 2F + F) above the residual and two
    # E-sized slots; with flash attention a Q-sized slot below them too (the FA output).
    # The Hadamard rotation of a quantized cache (Q ≤ E) frees that slot again.
    if fa and rot:
        # The rotated Q, K, V and output (llama-graph.cpp:2884-2889, 2929) reshuffle the slots: the
        # residual lands in a Q-sized hole when Q == E, above two of them when Q < E.
        ffn = I + 2 * E + (Q if Q > E else 2 * Q if Q < E else 0) + 3 * F
    elif fa:
        ffn = I + 2 * E + q_slot + 3 * F
    else:
        ffn = I + 2 * E + 3 * F
    # The last layer with every token an output (n_out = T): its residual (a GET_ROWS of
    # out_ids, llama.cpp:174-177) sits above the freed inputs and two slots, which are too
    # small for an FFN tensor (rotated caches; residual-first graphs).
    # The FFN tensors go into that low block (I_rest + 2E) in order while they fit, the rest on
    # the tail above the residual: gate, up, GLU (F each); fused: up (2F), SWIGLU (F).
    resid_first = r["arch"] in RESIDUAL_FIRST
    if (rot or resid_first) and n_out == T:
        free, top = I_rest + 2 * E, 0
        for part in ((2 * F, F) if fused else (F, F, F)):
            if part <= free:
                free -= part
            else:
                top += part
        ffn = max(ffn, I + 3 * E + top)
    # Attention without flash attention: the F32 scores [n_kv, T, n_head] (soft_max in place).
    kq = max(4 * c * T * heads for c in s.caches)
    attn = 0 if fa else I + (E + Q if fused else 2 * E + 2 * Q) + a(kq)
    # Output: the last hidden state (E_out) and the logits (L) above inp_embd; for
    # residual-first graphs, above the layer's slots unless the freed inputs can hold it.
    # Every token an output, flash attention: the last layer's residual starts at R (above
    # the freed inputs: a rotated cache with Q == E, R = I + 2E; Q < E, no rotation: the
    # residual does not fit the Q-sized FA hole, R = I + 2E + Q). When the GLU output then
    # fits below R but the down projection no longer does, the last hidden state lands on the
    # residual and the logits above it.
    R = None
    if fa and n_out == T and not fused:
        if rot and Q == E:
            R = I + 2 * E
        elif not rot and Q < E:
            R = I + 2 * E + Q
    if resid_first and I_rest < E_out:
        out = I + 2 * E + E_out + L
    elif R is not None and F <= R - base < F + E_out:
        out = R + E + E_out + L
    else:
        out = base + E_out + L
    total = max(ffn, attn, out)
    return total, dict(inputs=I, ffn=ffn, attn=attn, out=out, kq=kq)


def compute_cuda_full_offload(r: dict) -> dict:
    """Derived from source, not measured here: every layer and the output on one CUDA device.

    device (CUDA0 compute buffer): the CPU formula with 128-byte alignment, without the
        token ids and inp_embd (they stay in host memory), with every input copied in
        (ggml-backend.cpp:1375-1392); with flash attention on a quantized cache and the
        MMA/tile kernel, each FA output also reserves F16 copies of K and V
        (fattn.cu:722-756, fattn-common.cuh:53-85).
    host (CUDA_Host compute buffer): every graph input (ggml-backend.cpp:945: inputs run on
        the last backend, the CPU, whose buffer type is the device's host type:
        llama-context.cpp:403-410) and the token-embedding rows (GET_ROWS is never offloaded:
        ggml-cuda.cu:5636-5654), all live at once at the start of the graph.
    """
    full, _ = compute_cpu(r, ALIGN_CUDA)
    s = shape(r)
    e = int(r["n_embd"])
    device = full - pad(4 * s.T, ALIGN_CUDA) - pad(4 * e * s.T, ALIGN_CUDA)
    if int(r["flash_attn"]) and r["type_k"] in QUANT_KV:
        gqa = int(r["n_head_kv"]) * int(r["head_dim"])
        device += 2 * pad(max(s.caches) * s.n_stream * gqa * 2, ALIGN_CUDA)
    host = sum(b for _, b in inputs(r, ALIGN_CPU)) + pad(4 * e * s.T, ALIGN_CPU)
    return dict(device=device, host=host)


def load(path: Path) -> list[dict]:
    return [r for r in csv.DictReader(open(path)) if r["status"] == "ok"]


def check(rows: list[dict], verbose: bool) -> int:
    worst: dict = {}
    bad = 0
    kv_exact = out_close = 0
    for r in rows:
        got = int(r["compute_bytes"])
        est, parts = compute_cpu(r)
        err = est / got - 1
        arch = r["model"]
        if abs(err) >= abs(worst.get(arch, (0.0, ""))[0]):
            worst[arch] = (err, r["id"])
        if abs(err) > 0.05:
            bad += 1
        if verbose and abs(err) > 0.05:
            print(f"{r['id']:26} {got / 2**20:10.2f} {est / 2**20:10.2f} {err:+.3f} "
                  + " ".join(f"{k}={v / 2**20:.1f}" for k, v in parts.items()))
        kv_exact += kv_bytes(r) == int(r["kv_bytes"])
        out_close += abs(output_buffer(r) / 2**20 - float(r["output_mib_printed"])) < 0.006
    print(f"compute buffer: {len(rows) - bad}/{len(rows)} rows within ±5 %")
    for arch, (err, rid) in sorted(worst.items()):
        print(f"  {arch:18} worst {err:+.4f} ({rid})")
    overall = max(worst.values(), key=lambda v: abs(v[0]))
    print(f"  overall worst {overall[0]:+.4f} ({overall[1]})")
    print(f"KV cache exact: {kv_exact}/{len(rows)}; output buffer as printed: {out_close}/{len(rows)}")
    return 0 if bad == 0 and kv_exact == len(rows) else 1


def hmn_compare(rows: list[dict], hmn: Path, gguf: Path) -> None:
    """`hmn fits --runtime llama.cpp --device cpu --json` on each row: its activations band
    (low: one output per slot; high: n_ubatch outputs) and KV against llama.cpp's figures."""
    worst: dict = {}
    within = 0
    kv_ok = 0
    fam: dict = {}
    for r in rows:
        args = [str(hmn), "fits", str(gguf / f"{r['model']}.gguf"), "--runtime", "llama.cpp",
                "--device", "cpu", "--context", r["n_ctx_req"], "--parallel", r["n_seq"],
                "--ubatch", r["n_ubatch"], "--flash-attn", "on" if r["flash_attn"] == "1" else "off",
                "--kv-dtype", r["type_k"], "--json"]
        if r["kv_unified"] == "1" and r["n_seq"] != "1":
            args.append("--kv-unified")
        if r["swa_full"] == "1":
            args.append("--swa-full")
        p = subprocess.run(args, capture_output=True, text=True)
        try:
            est = json.loads(p.stdout)["estimate"]
        except (json.JSONDecodeError, KeyError):
            print(f"{r['id']}: hmn failed: {p.stderr.strip()[:200]}", file=sys.stderr)
            continue
        comp = {c["name"]: c for c in est["components"]}
        act = comp.get("activations", {})
        # server rows: hmn's low end (outputs per slot); library/bench rows: its high end
        key = "low_bytes" if r["family"] == "server" else "high_bytes"
        v = act.get(key)
        got = int(r["compute_bytes"])
        if v is None:
            continue
        err = v / got - 1
        within += abs(err) <= 0.05
        f = fam.setdefault((r["family"], r["flash_attn"]), [0, 0, 9.0, 0.0])
        f[0] += 1
        f[1] += abs(err) <= 0.05
        f[2], f[3] = min(f[2], v / got), max(f[3], v / got)
        arch = r["model"]
        if abs(err) >= abs(worst.get(arch, (0.0, ""))[0]):
            worst[arch] = (err, r["id"])
        kv_ok += comp.get("kv_cache", {}).get("low_bytes") == int(r["kv_bytes"])
    print(f"hmn today: compute within ±5 % in {within}/{len(rows)}; KV exact in {kv_ok}/{len(rows)}")
    for (family, fa), (n, ok, lo, hi) in sorted(fam.items()):
        print(f"  {family:8} flash attention {'on ' if fa == '1' else 'off'}: {ok}/{n} within ±5 %, "
              f"hmn / llama.cpp {lo:.2f}–{hi:.2f}")
    for arch, (err, rid) in sorted(worst.items()):
        print(f"  {arch:18} worst {err:+.4f} ({rid})")


def explain(rows: list[dict], rid: str, work: Path) -> None:
    """Re-creates one row's context with ggml-alloc's debug build preloaded and prints the
    live tensors (and holes) when the compute buffer last grew."""
    import re
    r = next(x for x in rows if x["id"] == rid)
    lib = work / "allocdebug.so"
    src = next(work.glob("llama_cpp_python-*/vendor/llama.cpp"))
    if not lib.exists():
        subprocess.run(["gcc", "-O1", "-shared", "-fPIC", "-DGGML_ALLOCATOR_DEBUG",
                        "-I", str(src / "ggml/include"), "-I", str(src / "ggml/src"), "-o", str(lib),
                        str(src / "ggml/src/ggml-alloc.c"), "-L", str(work / "build/bin"),
                        "-lggml-base"], check=True)
    line = " ".join(r[k] for k in ("id", "n_ctx_req", "n_batch", "n_ubatch", "n_seq", "flash_attn",
                                   "type_k", "type_v", "swa_full", "kv_unified", "n_outputs_max",
                                   "n_outputs_max_per_seq"))
    p = subprocess.run([str(work / "probe"), str(work / "gguf" / f"{r['model']}.gguf"),
                        "--no-alloc", "--debug"], input=line + "\n", capture_output=True,
                       text=True, env={"LD_PRELOAD": str(lib)})
    # the first worst-case (pp) reserve is the one llama.cpp measures in no_alloc mode
    part = p.stdout.split("graph_reserve: reserving a graph")[-3]
    peaks = [x for x in part.splitlines() if "max_size" in x]
    m = re.match(r"LOG max_size\[0\] = ([\d.]+) MB: tensors: (.*)", peaks[-1])
    print(f"{rid}: compute {int(r['compute_bytes'])} B; live at the peak ({m.group(1)} MB):")
    end = 0
    for t in re.finditer(r"(\S+(?: \(\w+\))*) \[0: ([0-9a-f]+)-([0-9a-f]+)\]", m.group(2)):
        lo, hi = int(t.group(2), 16), int(t.group(3), 16)
        if lo > end:
            print(f"    {'(hole)':32} {end:>12} {lo - end:>12}")
        print(f"    {t.group(1):32} {lo:>12} {hi - lo:>12}")
        end = max(end, hi)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", type=Path, default=FIXTURE)
    ap.add_argument("-v", action="store_true", help="print each row outside ±5 %%")
    ap.add_argument("--hmn", type=Path, help="an hmn binary: compare its estimate too")
    ap.add_argument("--gguf", type=Path, help="the grid's GGUF files (with --hmn)")
    ap.add_argument("--explain", help="a row id (needs --work: bench/llama_cpp_grid.sh's work dir)")
    ap.add_argument("--work", type=Path)
    a = ap.parse_args()
    rows = load(a.table)
    if a.explain:
        explain(rows, a.explain, a.work)
        return 0
    rc = check(rows, a.v)
    if a.hmn:
        hmn_compare(rows, a.hmn, a.gguf)
    return rc


if __name__ == "__main__":
    sys.exit(main())
