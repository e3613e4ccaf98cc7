//! The synthetic models of `bench/llama_cpp_grid.py` (`tests/fixtures/llama_cpp/models.json` of
//! the library): their tensors and metadata as that script writes them, for the tests that
//! rebuild the same files (`hmn fits` on a GGUF) or the same layouts (the library's estimate).

use serde_json::Value;

use crate::gguf::{GgufWriter, ggml};

/// One tensor: name, dimensions (fastest first, as GGUF stores them) and GGML type.
pub type GridTensor = (String, Vec<u64>, u32);

/// The GGML type id of a type name of `models.json` (`F16`, `Q4_0`, …).
///
/// # Panics
/// On a type the models do not use (a test bug).
#[allow(clippy::panic)]
pub fn ggml_type(name: &str) -> u32 {
    match name {
        "F32" => ggml::F32,
        "F16" => ggml::F16,
        "Q4_0" => ggml::Q4_0,
        "Q8_0" => ggml::Q8_0,
        "Q6_K" => ggml::Q6_K,
        t => panic!("type {t}"),
    }
}

/// Every tensor of the model `m` of `models.json`, as the script's `tensors()` lists them.
///
/// # Panics
/// On a model without its dimensions (a test bug).
#[allow(clippy::expect_used)]
pub fn tensors(m: &Value) -> Vec<GridTensor> {
    let n = |k: &str| m[k].as_u64().expect("a dimension of models.json");
    let flag = |k: &str| m[k].as_bool().unwrap_or(false);
    let (e, hd, ff, v) = (n("n_embd"), n("head_dim"), n("n_ff"), n("n_vocab"));
    let (q, kv) = (n("n_head") * hd, n("n_head_kv") * hd);
    let w = ggml_type(m["wtype"].as_str().unwrap_or("F16"));
    let out = m["out_type"].as_str().map_or(w, ggml_type);
    let mut t: Vec<GridTensor> = vec![
        ("token_embd.weight".into(), vec![e, v], w),
        ("output_norm.weight".into(), vec![e], ggml::F32),
    ];
    if !flag("tied") {
        t.push(("output.weight".into(), vec![e, v], out));
    }
    for i in 0..n("n_layer") {
        let mut add =
            |s: &str, dims: &[u64], ty: u32| t.push((format!("blk.{i}.{s}"), dims.to_vec(), ty));
        add("attn_norm.weight", &[e], ggml::F32);
        if flag("fused") {
            add("attn_qkv.weight", &[e, q + 2 * kv], w);
        } else {
            add("attn_q.weight", &[e, q], w);
            add("attn_k.weight", &[e, kv], w);
            add("attn_v.weight", &[e, kv], w);
        }
        if flag("qkv_bias") {
            add("attn_q.bias", &[q], ggml::F32);
            add("attn_k.bias", &[kv], ggml::F32);
            add("attn_v.bias", &[kv], ggml::F32);
        }
        if flag("qk_norm") {
            add("attn_q_norm.weight", &[hd], ggml::F32);
            add("attn_k_norm.weight", &[hd], ggml::F32);
        }
        add("attn_output.weight", &[q, e], w);
        if flag("post_norms") {
            add("post_attention_norm.weight", &[e], ggml::F32);
        }
        add("ffn_norm.weight", &[e], ggml::F32);
        if flag("fused") {
            add("ffn_up.weight", &[e, 2 * ff], w);
        } else {
            add("ffn_gate.weight", &[e, ff], w);
            add("ffn_up.weight", &[e, ff], w);
        }
        add("ffn_down.weight", &[ff, e], w);
        if flag("post_norms") {
            add("post_ffw_norm.weight", &[e], ggml::F32);
        }
    }
    t
}

/// The model `m` as a GGUF: llama.cpp's `{arch}.*` metadata and [`tensors`].
///
/// # Panics
/// On a model without its dimensions, or one beyond `u32` (a test bug).
#[allow(clippy::expect_used)]
pub fn gguf(m: &Value) -> GgufWriter {
    let n =
        |k: &str| u32::try_from(m[k].as_u64().expect("a dimension of models.json")).expect("a u32");
    let arch = m["arch"].as_str().expect("an arch");
    let key = |k: &str| format!("{arch}.{k}");
    let mut g = GgufWriter::new()
        .str("general.architecture", arch)
        .u32(&key("context_length"), n("ctx_train"))
        .u32(&key("embedding_length"), n("n_embd"))
        .u32(&key("block_count"), n("n_layer"))
        .u32(&key("feed_forward_length"), n("n_ff"))
        .u32(&key("attention.head_count"), n("n_head"))
        .u32(&key("attention.head_count_kv"), n("n_head_kv"))
        .u32(&key("attention.key_length"), n("head_dim"))
        .u32(&key("attention.value_length"), n("head_dim"))
        .u32(&key("rope.dimension_count"), n("head_dim"))
        .u32(&key("vocab_size"), n("n_vocab"));
    if m["n_swa"].is_u64() {
        g = g.u32(&key("attention.sliding_window"), n("n_swa"));
    }
    for (name, dims, ty) in tensors(m) {
        g = g.tensor(&name, &dims, ty);
    }
    g
}
