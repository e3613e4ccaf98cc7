"""`hmn fits` against a real load (bench/validate-fits.sh, step 3 of bench/device/run-all.sh).

    fits_model.py build DIR [LAYERS]          # a Llama-style model, random bf16 weights, saved
    fits_model.py measure DIR CONTEXTS RESULT  # load it, one forward per context, the peaks

`build` creates the model on the GPU directly in bf16 (a second instead of minutes on the
CPU; no download) and saves it with `save_pretrained` (safetensors), in a process of its own so
the measurement starts from a clean allocator. `measure` loads it as a user would, runs a
16-token warm-up forward (kernels loaded, cuBLAS initialised: the CUDA context at its working
size), then for each context: empty the cache, reset the peaks, one forward of batch 1 with a
KV cache (`use_cache=True`) keeping the last token's logits only (`logits_to_keep=1`, as
`generate()` does and as hmn's generic estimate counts logits), under `torch.no_grad()`, with
SDPA attention (hmn's generic default). It writes RESULT (JSON): per context
`torch.cuda.max_memory_reserved()`, `max_memory_allocated()`, the process's NVML figure at the
end, and the CUDA context (NVML figure minus `memory_reserved()` at a quiet point), so that
peak = max reserved + context.
"""

import inspect
import json
import os
import sys
import time

from nvml_pid import nvml_used

CONFIG = dict(hidden_size=4096, intermediate_size=14336, num_hidden_layers=16,
              num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
              max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
              tie_word_embeddings=False)


def _dtype_kw(version, dtype):
    """`from_pretrained`'s dtype keyword: `dtype` since transformers 4.56 (`torch_dtype`
    deprecated then, and in 5.x only a warning's alias), `torch_dtype` before."""
    try:
        major, minor = (int(x) for x in version.split(".")[:2])
    except ValueError:
        return {"dtype": dtype}
    return {"dtype": dtype} if (major, minor) >= (4, 56) else {"torch_dtype": dtype}


def build(out, layers):
    import torch
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM
    t0 = time.time()
    cfg = LlamaConfig(**dict(CONFIG, num_hidden_layers=layers))
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = LlamaForCausalLM(cfg).to(torch.bfloat16)  # a no-op unless init chose float32
    torch.cuda.synchronize()
    t1 = time.time()
    model.save_pretrained(out)  # safetensors: the default since transformers 4.35
    print(json.dumps({"built_s": round(t1 - t0, 2), "saved_s": round(time.time() - t1, 2),
                      "transformers": transformers.__version__, "torch": torch.__version__,
                      "files": sorted(os.listdir(out))}), flush=True)


def cache_bytes(cache, torch, seen=None):
    """Bytes of the KV cache's tensors: a DynamicCache (transformers 5: `.layers[i].keys`,
    `.values`; 4.x: `.key_cache`, `.value_cache`) or the legacy tuples; None if unknown.

    Only tensors are de-duplicated (by storage pointer, so a view is not counted twice). The
    device run of 2026-11-26 counted one layer of sixteen: the old code kept `id()`s of the
    short-lived lists built per layer, and CPython gave the next layer's list the same id.
    """
    seen = set() if seen is None else seen
    if cache is None:
        return 0
    if isinstance(cache, torch.Tensor):
        key = (cache.data_ptr(), cache.nbytes) if hasattr(cache, "data_ptr") else id(cache)
        if key in seen:
            return 0
        seen.add(key)
        return cache.nbytes
    if isinstance(cache, (list, tuple)):
        parts = [cache_bytes(x, torch, seen) for x in cache]
        return None if any(p is None for p in parts) else sum(parts)
    if hasattr(cache, "layers"):
        parts = [cache_bytes([getattr(layer, "keys", None), getattr(layer, "values", None)], torch, seen)
                 for layer in cache.layers]
        return None if any(p is None for p in parts) else sum(parts)
    if hasattr(cache, "key_cache"):
        return cache_bytes([cache.key_cache, cache.value_cache], torch, seen)
    return None


def measure(path, contexts, result):
    import torch
    import transformers
    from transformers import LlamaForCausalLM
    pid = os.getpid()
    kw = _dtype_kw(transformers.__version__, torch.bfloat16)
    t0 = time.time()
    model = LlamaForCausalLM.from_pretrained(path, attn_implementation="sdpa", **kw)
    model = model.to("cuda").eval()
    torch.cuda.synchronize()
    fwd = inspect.signature(model.forward).parameters
    keep = ({"logits_to_keep": 1} if "logits_to_keep" in fwd
            else {"num_logits_to_keep": 1} if "num_logits_to_keep" in fwd else {})
    vocab = model.config.vocab_size
    out = {"transformers": transformers.__version__, "torch": torch.__version__,
           "attn_implementation": getattr(model.config, "_attn_implementation", None),
           "logits_kept": keep or "all (this transformers has no logits_to_keep)",
           "load_s": round(time.time() - t0, 2), "pid": pid,
           "weights_allocated": torch.cuda.memory_allocated(), "runs": []}

    def quiet():
        torch.cuda.synchronize()
        time.sleep(0.3)
        used = nvml_used(pid)
        return used, (used - torch.cuda.memory_reserved()) if used is not None else None

    with torch.no_grad():
        model(torch.randint(0, vocab, (1, 16), device="cuda"), use_cache=True, **keep)
    out["nvml_used_after_warmup"], out["context_bytes"] = quiet()
    for ctx in contexts:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        run = {"context": ctx, "batch": 1}
        t1 = time.time()
        try:
            ids = torch.randint(0, vocab, (1, ctx), device="cuda")
            with torch.no_grad():
                o = model(ids, use_cache=True, **keep)
            torch.cuda.synchronize()
            run["forward_s"] = round(time.time() - t1, 3)
            run["max_reserved"] = torch.cuda.max_memory_reserved()
            run["max_allocated"] = torch.cuda.max_memory_allocated()
            try:
                run["kv_bytes"] = cache_bytes(getattr(o, "past_key_values", None), torch)
            except Exception as e:  # a cache layout this code does not know: no figure
                run["kv_bytes"], run["kv_error"] = None, f"{type(e).__name__}: {e}"[:200]
            run["nvml_used_end"], run["context_bytes_end"] = quiet()
            del o, ids
        except Exception as e:  # an OOM at a large context is a result, not a crash
            run["error"] = f"{type(e).__name__}: {e}"[:500]
        out["runs"].append(run)
        with open(result + ".tmp", "w") as f:
            json.dump(out, f, indent=1)
        os.replace(result + ".tmp", result)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    if sys.argv[1] == "build":
        build(sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else CONFIG["num_hidden_layers"])
    elif sys.argv[1] == "measure":
        measure(sys.argv[2], [int(c) for c in sys.argv[3].split(",")], sys.argv[4])
    else:
        sys.exit(f"unknown command {sys.argv[1]}")
