//! Model headers whose figures mean nothing (QA of `hmn fits`): a dimension of 0 that would
//! leave an attention layer without a KV cache, a per-layer array that is not one item per
//! layer, a vocabulary stated nowhere but in the tensor shapes. Each is refused as the bounds
//! of `fits_bounds` are — one line naming the file, the key and the value, exit 2 — or read
//! from where the file does state it.

use hmn_testbed::{GgufWriter, ggml};

use crate::fits_bounds::{each_gguf_refused, model_with_config, refused, tiny_llama};
use crate::util::Bed;

/// QA (defect 6): a 0 that leaves an attention layer without a KV cache was taken — KV 0 B and
/// "fits", exit 0. It is refused as `num_hidden_layers: 0` is: one line naming the file, the
/// key and the value, exit 2.
#[test]
fn zero_model_dimensions_are_refused_by_name() {
    let bed = Bed::new();
    for (key, want) in [
        (
            "head_dim",
            "invalid head_dim (0: out of range, at least 1 element)",
        ),
        (
            "hidden_size",
            "invalid hidden_size (0: out of range, at least 1 element)",
        ),
        (
            "num_attention_heads",
            "invalid num_attention_heads (0: out of range, at least 1 head)",
        ),
    ] {
        let dir = model_with_config(&bed, &format!("zero-{key}"), key, "0");
        let err = refused(&bed, &dir, "config.json");
        assert!(err.contains(want), "{err}");
    }
    let base = || tiny_llama().tensor("blk.0.attn_k.weight", &[256, 128], ggml::F16);
    each_gguf_refused(
        &bed,
        "zero",
        [
            (
                base().u32("llama.attention.key_length", 0),
                "invalid llama.attention.key_length (0: expected at least 1 element)",
            ),
            (
                GgufWriter::new()
                    .str("general.architecture", "llama")
                    .u32("llama.block_count", 2)
                    .u32("llama.attention.head_count", 4)
                    .u32("llama.embedding_length", 0),
                "invalid llama.embedding_length (0: expected at least 1 element)",
            ),
            (
                GgufWriter::new()
                    .str("general.architecture", "llama")
                    .u32("llama.block_count", 2)
                    .u32("llama.attention.head_count", 0)
                    .u32("llama.attention.head_count_kv", 2)
                    .u32("llama.attention.key_length", 64),
                "invalid llama.attention.head_count (0: expected at least 1 head: layer 0 has 2 KV heads)",
            ),
            (
                base().u32("llama.attention.head_count_kv", 0),
                "invalid llama.attention.head_count_kv (0: expected at least 1 head: layer 0 has attention tensors (blk.0.attn_k.weight))",
            ),
        ],
    );
}

/// QA (defect 7): `llama.block_count` 4 with `head_count_kv` `[4, 4]` or `[4]` was taken; the
/// documented rule is "an array that is not per-layer: invalid {key}" (llama.cpp: "wrong array
/// length").
#[test]
fn a_per_layer_array_of_another_length_is_refused() {
    let bed = Bed::new();
    let base = || {
        GgufWriter::new()
            .str("general.architecture", "llama")
            .u32("llama.block_count", 4)
            .u32("llama.attention.head_count", 4)
            .u32("llama.embedding_length", 256)
            .tensor("token_embd.weight", &[256, 32], ggml::F16)
    };
    each_gguf_refused(
        &bed,
        "short",
        [
            (
                base().u32s("llama.attention.head_count_kv", &[4, 4]),
                "invalid llama.attention.head_count_kv (an array of 2: expected one item per layer, 4 layers)",
            ),
            (
                base().u32s("llama.attention.head_count_kv", &[4]),
                "invalid llama.attention.head_count_kv (an array of 1: expected one item per layer, 4 layers)",
            ),
            (
                base().u32s("llama.feed_forward_length", &[512, 512, 512, 512, 512]),
                "invalid llama.feed_forward_length (an array of 5: expected one item per layer, 4 layers)",
            ),
        ],
    );
}

/// QA (defect 8): a GGUF with no vocabulary size and no `tokenizer.ggml.tokens` gave
/// `--llama-api library` an output buffer of 0 B, `complete: true`. The vocabulary is in
/// `token_embd`'s shape; without that tensor (or `output`'s) the output buffer is unknown and
/// the answer incomplete (exit 1), never 0 B.
#[test]
fn the_vocabulary_comes_from_the_token_embedding_or_stays_unknown() {
    let bed = Bed::new();
    let model = |embd: bool| {
        let w = GgufWriter::new()
            .str("general.architecture", "llama")
            .u32("llama.block_count", 2)
            .u32("llama.attention.head_count", 4)
            .u32("llama.attention.head_count_kv", 2)
            .u32("llama.embedding_length", 256)
            .tensor("blk.0.attn_k.weight", &[256, 128], ggml::F16);
        if embd {
            w.tensor("token_embd.weight", &[256, 1000], ggml::F16)
        } else {
            w
        }
    };
    let fits = |name: &str, embd: bool| {
        let path = bed.path(name);
        model(embd).write(&path).unwrap();
        let o = bed
            .cmd(&["fits", "--free", "80GiB", "--runtime", "llama.cpp"])
            .args(["--llama-api", "library", "--json"])
            .arg(&path)
            .output()
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        let out = v["estimate"]["components"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == "output_buffer")
            .cloned()
            .unwrap();
        (o.status.code(), v, out)
    };
    let (code, v, out) = fits("embd.gguf", true);
    assert_eq!(code, Some(0), "{v}");
    // One slot's logits: 1000 tokens × 4 B; library grows it to n_batch 512 rows.
    assert_eq!(out["low_bytes"], 4000);
    assert_eq!(out["high_bytes"], 4000 * 512);
    assert_eq!(v["complete"], true);
    let (code, v, out) = fits("novocab.gguf", false);
    assert_eq!(code, Some(1), "{v}");
    assert!(
        out["low_bytes"].is_null() && out["high_bytes"].is_null(),
        "{out}"
    );
    assert_eq!(v["complete"], false);
    assert_eq!(v["fit"], "incomplete");
}
