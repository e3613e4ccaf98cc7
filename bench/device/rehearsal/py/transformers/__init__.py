"""REHEARSAL STAND-IN for transformers' Llama, never used on a GPU machine.

Put first on PYTHONPATH by `bench/device/rehearsal/setup.sh` only when REHEARSAL=1.
`save_pretrained` writes what transformers writes for LlamaForCausalLM in bf16 — `config.json`
and `model.safetensors` whose header names every tensor with its shape (the data region is a
sparse file of the right length: hmn reads headers only) — so `hmn fits` reads a real layout.
The forward pass "allocates" (through the stub torch) the KV cache, the MLP intermediates of one
layer and the logits kept, to exercise the measurement's control flow; its figures mean nothing.
"""

import json
import os
import struct

import torch

__version__ = "0.0-rehearsal-stub"


class _Layer:
    def __init__(self, keys, values):
        self.keys, self.values = keys, values


class _Cache:
    def __init__(self, layers):
        self.layers = layers


class LlamaConfig:
    model_type = "llama"

    def __init__(self, **kw):
        self.hidden_size = 4096
        self.intermediate_size = 11008
        self.num_hidden_layers = 32
        self.num_attention_heads = 32
        self.num_key_value_heads = None
        self.vocab_size = 32000
        self.max_position_embeddings = 2048
        self.torch_dtype = "float32"
        self.tie_word_embeddings = False
        self.__dict__.update(kw)
        if self.num_key_value_heads is None:
            self.num_key_value_heads = self.num_attention_heads
        self._attn_implementation = kw.get("attn_implementation", "sdpa")

    def to_dict(self):
        d = {k: v for k, v in self.__dict__.items() if not k.startswith("_")}
        d.update(model_type="llama", architectures=["LlamaForCausalLM"])
        return d


def _tensors(c):
    h, i, v = c.hidden_size, c.intermediate_size, c.vocab_size
    hd = h // c.num_attention_heads
    q, kv = c.num_attention_heads * hd, c.num_key_value_heads * hd
    out = [("model.embed_tokens.weight", (v, h)), ("model.norm.weight", (h,))]
    for n in range(c.num_hidden_layers):
        p = f"model.layers.{n}."
        out += [(p + "input_layernorm.weight", (h,)), (p + "post_attention_layernorm.weight", (h,)),
                (p + "self_attn.q_proj.weight", (q, h)), (p + "self_attn.k_proj.weight", (kv, h)),
                (p + "self_attn.v_proj.weight", (kv, h)), (p + "self_attn.o_proj.weight", (h, q)),
                (p + "mlp.gate_proj.weight", (i, h)), (p + "mlp.up_proj.weight", (i, h)),
                (p + "mlp.down_proj.weight", (h, i))]
    if not c.tie_word_embeddings:
        out.append(("lm_head.weight", (v, h)))
    return out


class _Output:
    def __init__(self, logits, past):
        self.logits, self.past_key_values = logits, past


class LlamaForCausalLM:
    def __init__(self, config):
        self.config = config
        self.weights = [torch.Tensor(s, torch.bfloat16) for _, s in _tensors(config)]

    @classmethod
    def from_pretrained(cls, path, torch_dtype=None, attn_implementation=None, **_):
        with open(os.path.join(path, "config.json")) as f:
            cfg = LlamaConfig(**json.load(f))
        if attn_implementation:
            cfg._attn_implementation = attn_implementation
        with torch.device("cpu"):
            return cls(cfg)

    def save_pretrained(self, path, safe_serialization=True, **_):
        os.makedirs(path, exist_ok=True)
        with open(os.path.join(path, "config.json"), "w") as f:
            json.dump(self.config.to_dict(), f, indent=2)
        header, off = {"__metadata__": {"format": "pt"}}, 0
        for name, shape in _tensors(self.config):
            n = 2
            for s in shape:
                n *= s
            header[name] = {"dtype": "BF16", "shape": list(shape), "data_offsets": [off, off + n]}
            off += n
        raw = json.dumps(header, separators=(",", ":")).encode()
        raw += b" " * (-len(raw) % 8)
        with open(os.path.join(path, "model.safetensors"), "wb") as f:
            f.write(struct.pack("<Q", len(raw)) + raw)
            f.truncate(8 + len(raw) + off)

    def to(self, dev=None, **_):
        self.weights = [w.to(dev) for w in self.weights]
        return self

    def cuda(self):
        return self.to("cuda")

    def eval(self):
        return self

    def forward(self, input_ids=None, use_cache=None, logits_to_keep=0, **_):
        c = self.config
        b, t = input_ids.shape
        hd = c.hidden_size // c.num_attention_heads
        dev = input_ids.device
        # transformers 5's DynamicCache: `.layers[i].keys` / `.values` (the layout the real run
        # met; the measurement once counted only its first layer).
        past = _Cache([_Layer(torch.Tensor((b, c.num_key_value_heads, t, hd), torch.bfloat16, dev),
                              torch.Tensor((b, c.num_key_value_heads, t, hd), torch.bfloat16, dev))
                       for _ in range(c.num_hidden_layers)]) if use_cache else None
        mlp = [torch.Tensor((b, t, c.intermediate_size), torch.bfloat16, dev) for _ in range(3)]
        del mlp
        kept = logits_to_keep or t
        return _Output(torch.Tensor((b, kept, c.vocab_size), torch.bfloat16, dev), past)

    __call__ = forward
