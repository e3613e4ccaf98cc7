#!/usr/bin/env python3
"""Writes seed inputs for the model-header fuzz targets into fuzz/corpus/ (not committed)."""
import pathlib
import shutil
import struct

here = pathlib.Path(__file__).resolve().parent
gguf_dir = here / "corpus" / "gguf_header"
st_dir = here / "corpus" / "safetensors_header"
gguf_dir.mkdir(parents=True, exist_ok=True)
st_dir.mkdir(parents=True, exist_ok=True)


def s(v):
    v = v.encode()
    return struct.pack("<Q", len(v)) + v


def gguf(kvs, tensors, version=3):
    b = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    for k, t, payload in kvs:
        b += s(k) + struct.pack("<I", t) + payload
    off = 0
    for name, dims, ty, nbytes in tensors:
        b += s(name) + struct.pack("<I", len(dims))
        b += b"".join(struct.pack("<Q", d) for d in dims)
        b += struct.pack("<IQ", ty, off)
        off += (nbytes + 31) // 32 * 32
    return b + b"\0" * ((-len(b)) % 32) + b"\0" * off


u32 = lambda v: struct.pack("<I", v)  # noqa: E731
kv = [
    ("general.architecture", 8, s("llama")),
    ("llama.block_count", 4, u32(2)),
    ("llama.attention.head_count", 4, u32(4)),
    ("llama.attention.head_count_kv", 9, struct.pack("<IQ", 4, 2) + u32(2) + u32(0)),
    ("llama.embedding_length", 4, u32(64)),
    ("llama.attention.sliding_window", 4, u32(16)),
    ("general.alignment", 4, u32(32)),
    ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 2) + s("a") + s("b")),
    ("f", 6, struct.pack("<f", 1.5)),
    ("b", 7, b"\x01"),
]
(gguf_dir / "llama.gguf").write_bytes(
    gguf(kv, [("tok", [64, 8], 0, 64 * 8 * 4), ("q", [32, 2], 8, 2 * 34)])
)
(gguf_dir / "v2.gguf").write_bytes(gguf(kv[:3], [("t", [256], 12, 144)], version=2))
for cfg in (here.parent / "crates/hypomnesis/tests/fixtures/models").glob("*.json"):
    shutil.copy(cfg, st_dir / cfg.name)
(st_dir / "header.json").write_text(
    '{"__metadata__":{"format":"pt"},'
    '"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12]},'
    '"b":{"dtype":"F4","shape":[4],"data_offsets":[12,14]}}'
)
