#!/usr/bin/env bash
# Compares `hmn fits` with what PyTorch really uses, on a real NVIDIA machine, for a model built
# locally (random weights, no download): a Llama-style config saved with transformers, loaded
# back in bf16, one forward pass over CONTEXT tokens with a KV cache. Prints the process's peak
# device memory (torch.cuda.max_memory_reserved() + the CUDA context, read from NVML for the
# pid) next to hmn's low/high band; paste both into docs/validation.md (goal: within ±10 %).
# Needs: an NVIDIA GPU, python3 with torch, transformers and nvidia-ml-py, a built hmn.
set -euo pipefail
cd "$(dirname "$0")/.."
HMN=${HMN:-target/release/hmn}
CONTEXT=${CONTEXT:-8192}
DIR=${DIR:-$(mktemp -d)}

python3 - "$DIR" "$CONTEXT" <<'PY'
import os, sys, torch, pynvml
from transformers import LlamaConfig, LlamaForCausalLM
out, ctx = sys.argv[1], int(sys.argv[2])
cfg = LlamaConfig(hidden_size=4096, intermediate_size=14336, num_hidden_layers=16,
                  num_attention_heads=32, num_key_value_heads=8, vocab_size=128256,
                  max_position_embeddings=131072, torch_dtype="bfloat16")
if not os.path.exists(os.path.join(out, "config.json")):
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(out, safe_serialization=True)
model = LlamaForCausalLM.from_pretrained(out, torch_dtype=torch.bfloat16).cuda().eval()
ids = torch.randint(0, cfg.vocab_size, (1, ctx), device="cuda")
with torch.no_grad():
    model(ids, use_cache=True)
torch.cuda.synchronize()
pynvml.nvmlInit()
h = pynvml.nvmlDeviceGetHandleByIndex(torch.cuda.current_device())
mine = [p.usedGpuMemory for p in pynvml.nvmlDeviceGetComputeRunningProcesses(h) if p.pid == os.getpid()]
print(f"torch max_memory_reserved {torch.cuda.max_memory_reserved()}")
print(f"NVML process used (reserved + CUDA context) {mine[0] if mine else 'n/a'}")
PY
"$HMN" fits "$DIR" --context "$CONTEXT" --json | python3 -c '
import json, sys
v = json.load(sys.stdin)
e = v["estimate"]
print("hmn fits low", e["low_bytes"], "high", e["high_bytes"])
for c in e["components"]:
    print(" ", c["name"], c["low_bytes"], c["high_bytes"])
'
