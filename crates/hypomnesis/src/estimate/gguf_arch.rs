//! The architecture from GGUF metadata (pure), as llama.cpp's `llama_model::load_hparams` reads
//! it:
//!
//! | Key / rule | Here |
//! |---|---|
//! | `{arch}.block_count`, `.attention.head_count` (number or per-layer array), `.attention.head_count_kv` (number or per-layer array; absent: inferred from `blk.{i}.attn_k.weight`, with a warning) | [`from_gguf`] |
//! | `.attention.key_length` / `.value_length` (else `embedding_length / head_count`); sliding layers `.attention.key_length_swa` / `.value_length_swa` (Gemma-4) | [`from_gguf`] |
//! | `.attention.sliding_window` with the architecture's pattern (`set_swa_pattern`: gemma2 2, gemma3 6, gemma3n 5, gemma-embedding 6, cohere2 4, llama4 4 (chunked 8192), gpt-oss 2, olmo2 4, exaone4 4, afmoe 4, smallthinker 4 dense-first); phi3 and any other architecture: no sliding layers | `swa_rule` |
//! | `.attention.sliding_window_pattern`: a per-layer bool array or a period, overriding the table | [`from_gguf`] |
//! | `.attention.kv_lora_rank` + `.rope.dimension_count` for MLA | [`from_gguf`] |
//! | `.context_length` = `n_ctx_train` | [`from_gguf`] |
//!
//! A key that is absent is a default or, for the architecture, block count and head count, a
//! weights-only estimate; a key present with the wrong type or out of range (a negative count,
//! a float, a string, an array that is not per-layer) is an error: "invalid {key} (…)". So is a
//! dimension no real model has (`arch::Dim`: vocabulary, embedding and feed-forward widths,
//! head counts, head sizes, context and window lengths): "invalid llama.vocab_size
//! (18446744073709551615: expected at most 16777216 tokens)".

use super::arch::{Architecture, KvHeadsFrom, Layer, LayerKind};
use super::arch::{Dim, MAX_LAYERS};
use super::gguf::{Header, Value, shown};
use crate::types::error::ParseError;

/// An architecture's sliding-window rule: the period, whether the dense layer comes first, and
/// the window used when the file gives none (`None`: no sliding layers without the key).
fn swa_rule(arch: &str, n_layer: u64) -> Option<(u64, bool, Option<u64>)> {
    Some(match arch {
        "gemma2" => (2, false, Some(4096)),
        "gemma3" | "gemma-embedding" | "gemma4" => (6, false, None),
        "gemma3n" => (5, false, None),
        "cohere2" | "olmo2" | "afmoe" => (4, false, None),
        "llama4" => (4, false, Some(8192)),
        "gpt-oss" => (2, false, None),
        "exaone4" if n_layer == 64 => (4, false, Some(4096)),
        "smallthinker" => (4, true, None),
        _ => return None,
    })
}

fn is_swa(period: u64, dense_first: bool, il: u64) -> bool {
    if period == 0 {
        return true;
    }
    if dense_first {
        !il.is_multiple_of(period)
    } else {
        il % period < period - 1
    }
}

/// "invalid {key} ({value}: expected {expected})".
fn invalid(key: &str, v: &Value, expected: &str) -> ParseError {
    ParseError::new(format!("invalid {key} ({}: expected {expected})", shown(v)))
}

/// An integer key: `None` when absent, an error when present but not a non-negative integer.
fn int(h: &Header, key: &str) -> Result<Option<u64>, ParseError> {
    match h.metadata.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| invalid(key, v, "a non-negative integer")),
    }
}

/// "invalid {key} ({value}: expected at most {max} {unit})" when `x` is beyond `dim`'s bound,
/// "… expected at least 1 {unit}" when below it.
fn within(key: &str, x: u64, dim: Dim) -> Result<u64, ParseError> {
    match dim.outside(x) {
        Some(why) => Err(invalid(key, &Value::Int(i128::from(x)), &why)),
        None => Ok(x),
    }
}

/// A dimension the estimators multiply ([`int`], then [`Dim`]'s bound).
fn dim(h: &Header, key: &str, dim: Dim) -> Result<Option<u64>, ParseError> {
    int(h, key)?.map(|x| within(key, x, dim)).transpose()
}

/// A number or a per-layer array of numbers (`None` when absent), each at most `dim`'s bound.
/// An array must have one item per layer, `n` (llama.cpp's `get_key_or_arr`: "key … has
/// wrong array length; expected {n}, got {len}"). A 0 is taken here (a layer without attention, or without an FFN); whether it is
/// meaningful is [`check_attention`]'s.
fn per_layer(h: &Header, key: &str, n: u64, dim: Dim) -> Result<Option<Vec<u64>>, ParseError> {
    let expected = "a non-negative integer or a per-layer array of at most 4096 of them";
    let all = match h.metadata.get(key) {
        None => return Ok(None),
        Some(v @ Value::Array { items, len }) => {
            let all: Option<Vec<u64>> = items.iter().map(Value::as_u64).collect();
            match all {
                Some(all) if !all.is_empty() && *len != n => {
                    return Err(not_per_layer(key, v, n));
                }
                Some(all) if !all.is_empty() => all,
                _ => return Err(invalid(key, v, expected)),
            }
        }
        Some(v) => match v.as_u64() {
            Some(x) => vec![x; usize::try_from(n).unwrap_or(0)],
            None => return Err(invalid(key, v, expected)),
        },
    };
    for x in &all {
        if let Some(why) = dim.beyond(*x) {
            return Err(invalid(key, &Value::Int(i128::from(*x)), &why));
        }
    }
    Ok(Some(all))
}

/// "invalid {key} (an array of {len}: expected one item per layer, {n} layers)".
fn not_per_layer(key: &str, v: &Value, n: u64) -> ParseError {
    invalid(key, v, &format!("one item per layer, {n} layers"))
}

/// A per-layer pattern of bools (or 0/1), or a period (`None` when absent); an array must have
/// one item per layer, as [`per_layer`]'s.
fn swa_pattern(h: &Header, key: &str, n_layers: u64) -> Result<Option<Vec<bool>>, ParseError> {
    let expected = "a period or a per-layer array of bools";
    match h.metadata.get(key) {
        None => Ok(None),
        Some(v @ Value::Array { items, len }) => {
            let all: Option<Vec<bool>> = items
                .iter()
                .map(|x| match x {
                    Value::Bool(b) => Some(*b),
                    x => x.as_u64().map(|i| i != 0),
                })
                .collect();
            match all {
                Some(all) if !all.is_empty() && *len != n_layers => {
                    Err(not_per_layer(key, v, n_layers))
                }
                Some(all) if !all.is_empty() => Ok(Some(all)),
                _ => Err(invalid(key, v, expected)),
            }
        }
        Some(v) => match v.as_u64() {
            Some(p) => Ok(Some((0..n_layers).map(|il| is_swa(p, false, il)).collect())),
            None => Err(invalid(key, v, expected)),
        },
    }
}

/// The vocabulary from the token embedding's shape (`token_embd.weight`, else
/// `output.weight`: `{n_embd, n_vocab}`, the shape llama.cpp creates them with), for a file
/// that states it neither as `{arch}.vocab_size` nor as `tokenizer.ggml.tokens`; `None` when
/// neither tensor is there or its `ne[1]` is outside [`Dim::Vocab`] (not taken, as a KV head
/// count from an implausible shape is not).
fn vocab_from_tensors(h: &Header) -> Option<u64> {
    ["token_embd.weight", "output.weight"]
        .iter()
        .find_map(|name| {
            h.tensors
                .iter()
                .find(|t| t.name == *name)
                .and_then(|t| t.dims.get(1).copied())
                .filter(|v| Dim::Vocab.outside(*v).is_none())
        })
}

/// Layer `i`'s item of a per-layer list ([`per_layer`]: one item per layer).
fn at(v: &[u64], i: u64) -> Option<u64> {
    v.get(usize::try_from(i).ok()?).copied()
}

/// Refuses the zeros that would leave a layer with attention without a KV cache (llama.cpp
/// would refuse such a file's attention tensors, whose shapes the counts decide):
/// - a layer with KV heads but 0 query heads (`head_count`);
/// - a layer with attention tensors (`blk.{i}.attn_k.weight`, `attn_qkv.weight`) but 0 KV
///   heads (`head_count_kv`; `head_count` when that is absent and the heads default to it).
///   A 0 without those tensors is a layer without attention — llama.cpp's recurrent layers
///   (`recurrent_layer_arr[i] = n_head_kv(i) == 0`: Jamba, LFM2, Nemotron-H), and a Mamba's
///   or RWKV's `head_count` 0 — and is taken;
/// - a head size of 0: no `attention.key_length` and no `embedding_length` to derive it, or an
///   `embedding_length` smaller than the head count (`key_length` itself is at least 1:
///   [`Dim::HeadSize`]).
fn check_attention(
    h: &Header,
    arch: &str,
    layers: &[Layer],
    heads: &[u64],
    hidden: Option<u64>,
) -> Result<(), ParseError> {
    let key = |k: &str| format!("{arch}.{k}");
    let shown_key = |k: &str| {
        let k = key(k);
        let v = h.metadata.get(&k).cloned().unwrap_or(Value::Int(0));
        (k, v)
    };
    // The attention tensors' names, gathered once (a header may list 2²⁰ tensors).
    let attn: std::collections::BTreeSet<&str> =
        if layers.iter().any(|l| matches!(l.kind, LayerKind::None)) {
            h.tensors
                .iter()
                .map(|t| t.name.as_str())
                .filter(|n| n.ends_with(".attn_k.weight") || n.ends_with(".attn_qkv.weight"))
                .collect()
        } else {
            std::collections::BTreeSet::new()
        };
    for (i, l) in (0u64..).zip(layers) {
        match l.kind {
            LayerKind::Full | LayerKind::Sliding { .. } => {
                if at(heads, i) == Some(0) {
                    let (k, v) = shown_key("attention.head_count");
                    return Err(invalid(
                        &k,
                        &v,
                        &format!("at least 1 head: layer {i} has {} KV heads", l.kv_heads),
                    ));
                }
                if l.head_dim_k == 0 || l.head_dim_v == 0 {
                    let top = heads.iter().copied().max().unwrap_or(0);
                    return Err(match hidden {
                        Some(n) => invalid(
                            &key("embedding_length"),
                            &Value::Int(i128::from(n)),
                            &format!(
                                "at least {arch}.attention.head_count {top}, or an attention.key_length"
                            ),
                        ),
                        None => ParseError::new(format!(
                            "no {arch}.attention.key_length and no {arch}.embedding_length to derive it"
                        )),
                    });
                }
            }
            LayerKind::None => {
                let tensor = ["attn_k", "attn_qkv"]
                    .iter()
                    .map(|t| format!("blk.{i}.{t}.weight"))
                    .find(|name| attn.contains(name.as_str()));
                if let Some(tensor) = tensor {
                    let stated = h.metadata.contains_key(&key("attention.head_count_kv"));
                    let (k, v) = shown_key(if stated {
                        "attention.head_count_kv"
                    } else {
                        "attention.head_count"
                    });
                    return Err(invalid(
                        &k,
                        &v,
                        &format!("at least 1 head: layer {i} has attention tensors ({tensor})"),
                    ));
                }
            }
            LayerKind::Mla { .. } => {}
        }
    }
    Ok(())
}

/// The architecture from a GGUF header's metadata (pure). `None` when it has no
/// `general.architecture`, block count or head count.
///
/// # Errors
/// "invalid {key} (…)" for a key it reads that is present with the wrong type or out of range.
pub fn from_gguf(h: &Header) -> Result<Option<Architecture>, ParseError> {
    let arch = match h.metadata.get("general.architecture") {
        None => return Ok(None),
        Some(Value::String(s)) => s.clone(),
        Some(v) => return Err(invalid("general.architecture", v, "a string")),
    };
    let key = |k: &str| format!("{arch}.{k}");
    let Some(n_layers) = int(h, &key("block_count"))? else {
        return Ok(None);
    };
    if n_layers == 0 || n_layers > MAX_LAYERS {
        return Err(invalid(
            &key("block_count"),
            &Value::Int(i128::from(n_layers)),
            "1 to 4096 layers",
        ));
    }
    let Some(heads_arr) = per_layer(h, &key("attention.head_count"), n_layers, Dim::Heads)? else {
        return Ok(None);
    };
    let heads = heads_arr.iter().copied().max().unwrap_or(0);
    let hidden = dim(h, &key("embedding_length"), Dim::Hidden)?;
    let derived = hidden.filter(|_| heads > 0).map_or(0, |h| h / heads);
    let k_len = dim(h, &key("attention.key_length"), Dim::HeadSize)?.unwrap_or(derived);
    let v_len = dim(h, &key("attention.value_length"), Dim::HeadSize)?.unwrap_or(k_len);
    let k_swa = dim(h, &key("attention.key_length_swa"), Dim::HeadSize)?.unwrap_or(k_len);
    let v_swa = dim(h, &key("attention.value_length_swa"), Dim::HeadSize)?.unwrap_or(v_len);
    let mut warnings = Vec::new();
    let mut kv_from = KvHeadsFrom::Config;
    let kv_heads = match per_layer(h, &key("attention.head_count_kv"), n_layers, Dim::Heads)? {
        Some(v) => v,
        None => {
            // llama.cpp assumes head_count; the attn_k shapes say what the file holds.
            let from_tensors: Vec<u64> = (0..n_layers)
                .map(|i| {
                    let name = format!("blk.{i}.attn_k.weight");
                    h.tensors
                        .iter()
                        .find(|t| t.name == name)
                        .and_then(|t| t.dims.get(1).copied())
                        .filter(|_| k_len > 0)
                        .map(|rows| rows / k_len)
                        // More heads than any model has: the shape is unusable.
                        .filter(|kv| Dim::Heads.beyond(*kv).is_none())
                        .unwrap_or(heads)
                })
                .collect();
            if from_tensors.iter().any(|k| *k != heads) {
                kv_from = KvHeadsFrom::Tensors;
                warnings.push(format!(
                    "{arch}.attention.head_count_kv is absent: KV heads read from the attn_k tensor shapes (llama.cpp itself would assume {heads} and refuse to load the file)"
                ));
            }
            from_tensors
        }
    };
    let window_key = dim(h, &key("attention.sliding_window"), Dim::Window)?;
    let rule = swa_rule(&arch, n_layers);
    let window = match (window_key, rule) {
        (Some(0), _) => None,
        (Some(w), _) => Some(w),
        (None, Some((_, _, default))) => default,
        (None, None) => None,
    };
    // A per-layer pattern (bools) or a period, when the file has one.
    let pattern = swa_pattern(h, &key("attention.sliding_window_pattern"), n_layers)?;
    if window.is_some() && rule.is_none() && pattern.is_none() {
        warnings.push(format!(
            "{arch}.attention.sliding_window is set, but llama.cpp applies no sliding-window pattern to {arch:?} (phi3 disables it; other architectures do not use it): every layer is treated as full attention"
        ));
    }
    let rope_dim = dim(h, &key("rope.dimension_count"), Dim::LatentPart)?;
    let mla = dim(h, &key("attention.kv_lora_rank"), Dim::LatentPart)?
        .map(|r| r.saturating_add(rope_dim.unwrap_or(0)));
    let layers = (0..n_layers)
        .map(|i| {
            let kv = at(&kv_heads, i).unwrap_or(heads);
            let sliding = match (&pattern, rule) {
                (Some(p), _) => p
                    .get(usize::try_from(i).unwrap_or(usize::MAX))
                    .copied()
                    .unwrap_or(false),
                (None, Some((period, dense_first, _))) => is_swa(period, dense_first, i),
                (None, None) => false,
            };
            match (mla, window) {
                (Some(latent_dim), _) => {
                    Layer::new(LayerKind::Mla { latent_dim }, kv, k_len, v_len)
                }
                (None, _) if kv == 0 => Layer::new(LayerKind::None, 0, k_len, v_len),
                (None, Some(w)) if sliding => {
                    Layer::new(LayerKind::Sliding { window: w }, kv, k_swa, v_swa)
                }
                _ => Layer::new(LayerKind::Full, kv, k_len, v_len),
            }
        })
        .collect::<Vec<Layer>>();
    check_attention(h, &arch, &layers, &heads_arr, hidden)?;
    let mut a = Architecture::new(layers);
    a.name = Some(arch.clone());
    a.hidden_size = hidden;
    a.attention_heads = Some(heads);
    a.max_context = dim(h, &key("context_length"), Dim::Context)?;
    a.context_rule = a
        .max_context
        .map(|_| format!("{arch}.context_length (llama.cpp's n_ctx_train)"));
    a.intermediate_size = per_layer(h, &key("feed_forward_length"), n_layers, Dim::FeedForward)?
        .and_then(|v| v.into_iter().max());
    a.vocab_size = match dim(h, &key("vocab_size"), Dim::Vocab)? {
        Some(v) => Some(v),
        None => match h.metadata.get("tokenizer.ggml.tokens") {
            Some(v @ Value::Array { len, .. }) => match Dim::Vocab.outside(*len) {
                Some(why) => return Err(invalid("tokenizer.ggml.tokens", v, &why)),
                None => Some(*len),
            },
            _ => vocab_from_tensors(h),
        },
    };
    a.tied_embeddings = Some(!h.tensors.iter().any(|t| t.name == "output.weight"));
    a.kv_heads_from = kv_from;
    a.warnings = warnings;
    Ok(Some(a))
}

#[cfg(test)]
mod tests;
