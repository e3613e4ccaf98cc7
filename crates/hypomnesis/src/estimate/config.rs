//! The architecture from a Hugging Face `config.json` (pure), the way transformers and vLLM
//! read it:
//!
//! | Rule | Source | Function |
//! |---|---|---|
//! | the text model's keys from `text_config` when present (VLMs) | transformers `Gemma3Config` | [`from_config_json`] |
//! | absent keys filled from the model type's config class (Gemma-3 `text_config`: 8 heads, 4 KV heads, head_dim 256, 131072 positions, window 4096; Gemma-2, Mistral, Qwen2, Cohere-2) | `Gemma3TextConfig` (v4.50), `Gemma2Config`, `MistralConfig`, `Qwen2Config`, `Cohere2Config` | `model_type_default` |
//! | sliding layers: `layer_types`, else `sliding_window_pattern` (every N-th layer global), else the model type's pattern (gemma2 2, gemma3 6, cohere2 4), Qwen2/3 `max_window_layers`, Mistral all layers, else `use_sliding_window` | transformers config classes | `layer_kind` |
//! | trained context: min of the length keys, then `rope_scaling`/`rope_parameters` (YaRN: original × factor; `linear`/`dynamic`: × factor; `llama3`/`longrope`/`su` and Gemma-3 unchanged) | vLLM `_get_and_verify_max_len` | `derived_context` |
//! | `num_key_value_heads` absent: the model type's default, else the query heads with a warning (the tensor shapes decide later, [`infer_kv_heads`]) | vLLM `get_total_num_kv_heads` | [`from_config_json`] |
//! | Gemma-4 full layers: `global_head_dim`, `num_global_key_value_heads` | transformers `Gemma4TextConfig` | [`from_config_json`] |
//! | MLA: `kv_lora_rank + qk_rope_head_dim` | DeepSeek-V2/V3 | [`from_config_json`] |
//!
//! GGUF metadata is read by [`super::gguf_arch`] ([`from_gguf`] is re-exported here).
//!
//! An integer key that is absent (or `null`) is a default, or "no {key}" when required; one
//! present with the wrong type or out of range (`-1`, `2.5`, `"2"`) is "invalid {key} (…)",
//! never taken for absent. Out of range includes a dimension no real model has (`arch::Dim`:
//! "invalid hidden_size (18446744073709551615: out of range, at most 1048576 elements)"), and
//! a rope scaling factor that is not finite, not positive, above 65,536, or that derives a
//! context beyond 2³² tokens.

use serde_json::Value as Json;

use super::arch::{Architecture, KvHeadsFrom, Layer, LayerKind};
use crate::types::error::ParseError;

use super::arch::{Dim, MAX_LAYERS, MAX_ROPE_FACTOR};
pub use super::gguf_arch::from_gguf;

/// The bound of an integer key the estimators multiply ([`Dim`]); `None` for the keys that are
/// only compared or counted (layer indices, patterns, the layer count with its own bound).
fn dim_of(key: &str) -> Option<Dim> {
    Some(match key {
        "vocab_size" => Dim::Vocab,
        "hidden_size" | "n_embd" | "d_model" => Dim::Hidden,
        "intermediate_size" | "n_inner" => Dim::FeedForward,
        "num_attention_heads"
        | "n_head"
        | "num_key_value_heads"
        | "n_head_kv"
        | "num_kv_heads"
        | "multi_query_group_num"
        | "num_global_key_value_heads" => Dim::Heads,
        "head_dim" | "v_head_dim" | "global_head_dim" => Dim::HeadSize,
        "kv_lora_rank" | "qk_rope_head_dim" => Dim::LatentPart,
        "sliding_window" => Dim::Window,
        "original_max_position_embeddings" => Dim::Context,
        k if LENGTH_KEYS.contains(&k) => Dim::Context,
        _ => return None,
    })
}

/// An integer key: `None` when absent or `null`; an error when present but not a
/// non-negative integer, or outside its bounds ([`dim_of`]): "invalid {key} ({value}: out of
/// range, at most {max} {unit})", "invalid head_dim (0: out of range, at least 1 element)".
fn get(v: &Json, key: &str) -> Result<Option<u64>, ParseError> {
    let n = match v.get(key) {
        None | Some(Json::Null) => return Ok(None),
        Some(x) => x.as_u64().ok_or_else(|| invalid(key, x))?,
    };
    match dim_of(key).and_then(|d| d.outside(n)) {
        Some(why) => Err(ParseError::new(format!(
            "invalid {key} ({n}: out of range, {why})"
        ))),
        None => Ok(Some(n)),
    }
}

/// The first of `keys` present.
fn first(v: &Json, keys: &[&str]) -> Result<Option<u64>, ParseError> {
    for k in keys {
        if let Some(x) = get(v, k)? {
            return Ok(Some(x));
        }
    }
    Ok(None)
}

/// "invalid {key} ({value}: why)".
fn invalid(key: &str, x: &Json) -> ParseError {
    let why = match x {
        Json::Number(n) if n.is_i64() => "negative",
        Json::Number(n)
            if n.as_f64()
                .is_some_and(|f| f >= 18_446_744_073_709_551_616.0) =>
        {
            "out of range"
        }
        Json::Number(n) if n.as_f64().is_some_and(|f| f.fract() == 0.0) => {
            "a float, not an integer"
        }
        Json::Number(_) => "not a whole number",
        Json::String(_) => "a string, not a number",
        _ => "not a number",
    };
    let mut shown = x.to_string();
    if shown.len() > 40 {
        let cut = (0..=40)
            .rev()
            .find(|i| shown.is_char_boundary(*i))
            .unwrap_or(0);
        shown.truncate(cut);
        shown.push('…');
    }
    ParseError::new(format!("invalid {key} ({shown}: {why})"))
}

/// A default of a model type's transformers config class, for a key the file omits.
fn model_type_default(model_type: &str, key: &str) -> Option<(u64, &'static str)> {
    let gemma3 = "Gemma3TextConfig";
    let t = match model_type {
        "gemma3" | "gemma3_text" => match key {
            "num_attention_heads" => (8, gemma3),
            "num_key_value_heads" => (4, gemma3),
            "head_dim" => (256, gemma3),
            "max_position_embeddings" => (131_072, gemma3),
            "vocab_size" => (262_208, gemma3),
            "sliding_window" => (4096, gemma3),
            "sliding_window_pattern" => (6, gemma3),
            "hidden_size" => (2304, gemma3),
            _ => return None,
        },
        "gemma2" => match key {
            "num_attention_heads" => (8, "Gemma2Config"),
            "num_key_value_heads" => (4, "Gemma2Config"),
            "head_dim" => (256, "Gemma2Config"),
            "max_position_embeddings" => (8192, "Gemma2Config"),
            "sliding_window" => (4096, "Gemma2Config"),
            "sliding_window_pattern" => (2, "Gemma2Config"),
            _ => return None,
        },
        "cohere2" => match key {
            "sliding_window_pattern" => (4, "Cohere2Config"),
            _ => return None,
        },
        "mistral" => match key {
            "num_key_value_heads" => (8, "MistralConfig"),
            "max_position_embeddings" => (131_072, "MistralConfig"),
            _ => return None,
        },
        "qwen2" => match key {
            "num_key_value_heads" => (32, "Qwen2Config"),
            "max_position_embeddings" => (32_768, "Qwen2Config"),
            _ => return None,
        },
        _ => return None,
    };
    Some(t)
}

/// Reads `key`, else the model type's default (recorded in `filled`).
fn get_or_default(
    c: &Json,
    model_type: &str,
    key: &str,
    filled: &mut Vec<String>,
) -> Result<Option<u64>, ParseError> {
    if let Some(v) = get(c, key)? {
        return Ok(Some(v));
    }
    let Some((v, class)) = model_type_default(model_type, key) else {
        return Ok(None);
    };
    filled.push(format!("{key} = {v} ({class} default)"));
    Ok(Some(v))
}

/// The length keys vLLM takes the minimum of (`_get_and_verify_max_len`).
const LENGTH_KEYS: [&str; 9] = [
    "max_position_embeddings",
    "n_positions",
    "max_seq_len",
    "seq_length",
    "model_max_length",
    "max_target_positions",
    "max_sequence_length",
    "max_seq_length",
    "seq_len",
];

/// vLLM's derived `max_model_len` and how it was derived.
fn derived_context(
    c: &Json,
    model_type: &str,
    filled: &mut Vec<String>,
) -> Result<Option<(u64, String)>, ParseError> {
    let mut present: Vec<(&str, u64)> = Vec::new();
    for k in LENGTH_KEYS {
        if let Some(v) = get(c, k)? {
            present.push((k, v));
        }
    }
    let (mut key, mut len) = match present.iter().min_by_key(|(_, v)| *v) {
        Some((k, v)) => ((*k).to_string(), *v),
        None => {
            let Some(v) = get_or_default(c, model_type, "max_position_embeddings", filled)? else {
                return Ok(None);
            };
            ("max_position_embeddings (default)".to_string(), v)
        }
    };
    if let Some(v) = get(c, "model_max_length")? {
        (key, len) = ("model_max_length".to_string(), v);
    }
    let mut rule = format!("{key} {len}");
    if model_type.contains("gemma3") {
        return Ok(Some((
            len,
            format!("{rule}; rope scaling not applied to Gemma-3 (vLLM: already scaled)"),
        )));
    }
    // rope_parameters (transformers 5; may be one per layer type) or rope_scaling (legacy).
    let rope = c
        .get("rope_parameters")
        .filter(|r| r.is_object())
        .map(
            |r| match r.get("full_attention").filter(|f| f.is_object()) {
                Some(f) => ("rope_parameters.full_attention", f),
                None => ("rope_parameters", r),
            },
        )
        .or_else(|| {
            c.get("rope_scaling")
                .filter(|r| r.is_object())
                .map(|r| ("rope_scaling", r))
        });
    if let Some((rope_key, r)) = rope {
        let kind = r
            .get("rope_type")
            .or_else(|| r.get("type"))
            .and_then(Json::as_str)
            .unwrap_or("default");
        // A factor that is not a number is ignored; one that is must be plausible.
        let factor = r.get("factor").and_then(Json::as_f64).unwrap_or(1.0);
        // serde_json's shortest form: `1e+308`, not 309 digits.
        let shown = Json::from(factor).to_string();
        if !matches!(kind, "su" | "longrope" | "llama3") {
            if !(factor.is_finite() && factor > 0.0 && factor <= MAX_ROPE_FACTOR) {
                return Err(ParseError::new(format!(
                    "invalid {rope_key}.factor ({shown}: out of range, a positive number at most {MAX_ROPE_FACTOR})"
                )));
            }
            if kind == "yarn" {
                if let Some(orig) = get(r, "original_max_position_embeddings")? {
                    len = orig;
                    rule = format!("original_max_position_embeddings {orig}");
                }
            }
            if factor != 1.0 {
                let derived = len as f64 * factor;
                // `as` saturates: a product beyond u64 is u64::MAX, beyond the bound too.
                if let Some(why) = Dim::Context.beyond(derived as u64) {
                    return Err(ParseError::new(format!(
                        "invalid {rope_key}.factor ({shown}: the derived context {len} × {shown} is out of range, {why})"
                    )));
                }
                len = derived as u64;
                rule = format!("{rule} × {kind} factor {factor} = {len}");
            }
        } else {
            rule = format!("{rule} ({kind} rope scaling: not multiplied)");
        }
    }
    Ok(Some((len, rule)))
}

/// How layer `i` attends.
struct Pattern<'a> {
    window: Option<u64>,
    layer_types: Option<Vec<&'a str>>,
    period: Option<u64>,
    /// Qwen2/3: layers from this index slide (when `use_sliding_window`).
    from_layer: Option<u64>,
    all: bool,
}

fn layer_kind(p: &Pattern<'_>, i: u64) -> LayerKind {
    let Some(w) = p.window else {
        return match p.layer_types.as_ref().and_then(|t| t.get(i as usize)) {
            Some(&("linear_attention" | "mamba" | "recurrent")) => LayerKind::None,
            _ => LayerKind::Full,
        };
    };
    let sliding = LayerKind::Sliding { window: w };
    if let Some(types) = &p.layer_types {
        return match types.get(i as usize) {
            Some(&("sliding_attention" | "chunked_attention" | "local_attention")) => sliding,
            Some(&("linear_attention" | "mamba" | "recurrent")) => LayerKind::None,
            _ => LayerKind::Full,
        };
    }
    if let Some(n) = p.period {
        return if (i + 1).is_multiple_of(n) {
            LayerKind::Full
        } else {
            sliding
        };
    }
    if let Some(from) = p.from_layer {
        return if i >= from { sliding } else { LayerKind::Full };
    }
    if p.all { sliding } else { LayerKind::Full }
}

/// Parses `config.json` text (pure).
pub fn from_config_json(text: &[u8]) -> Result<Architecture, ParseError> {
    let root: Json =
        serde_json::from_slice(text).map_err(|e| ParseError::new(format!("invalid JSON: {e}")))?;
    if !root.is_object() {
        return Err(ParseError::new("not a JSON object"));
    }
    let c = root
        .get("text_config")
        .filter(|t| t.is_object())
        .unwrap_or(&root);
    let model_type = c
        .get("model_type")
        .or_else(|| root.get("model_type"))
        .and_then(Json::as_str)
        .unwrap_or("")
        .to_string();
    let mt = model_type.as_str();
    let mut filled = Vec::new();
    let mut warnings = Vec::new();
    let n_layers = first(c, &["num_hidden_layers", "n_layer", "num_layers"])?
        .ok_or_else(|| ParseError::new("no num_hidden_layers"))?;
    if n_layers == 0 || n_layers > MAX_LAYERS {
        return Err(ParseError::new(format!(
            "invalid num_hidden_layers ({n_layers}: out of range, 1 to {MAX_LAYERS})"
        )));
    }
    let heads = match get_or_default(c, mt, "num_attention_heads", &mut filled)? {
        Some(h) => h,
        None => get(c, "n_head")?.ok_or_else(|| ParseError::new("no num_attention_heads"))?,
    };
    let hidden = first(c, &["hidden_size", "n_embd", "d_model"])?;
    let kv_key = first(
        c,
        &[
            "num_key_value_heads",
            "n_head_kv",
            "num_kv_heads",
            "multi_query_group_num",
        ],
    )?;
    let (kv_heads, kv_from) = match kv_key {
        Some(k) => (k, KvHeadsFrom::Config),
        None => match get_or_default(c, mt, "num_key_value_heads", &mut filled)? {
            Some(k) => (k, KvHeadsFrom::ModelTypeDefault),
            None => (heads, KvHeadsFrom::AttentionHeads),
        },
    };
    let head_dim = get(c, "head_dim")?
        .or_else(|| {
            model_type_default(mt, "head_dim").map(|(v, class)| {
                filled.push(format!("head_dim = {v} ({class} default)"));
                v
            })
        })
        .map_or_else(
            || match hidden {
                None => Err(ParseError::new("no head_dim and no hidden_size to derive it")),
                // Both are at least 1 (`Dim`); a hidden size below the head count derives 0.
                Some(h) if h < heads => Err(ParseError::new(format!(
                    "invalid hidden_size ({h}: smaller than num_attention_heads {heads}, no head_dim to use instead)"
                ))),
                Some(h) => Ok(h / heads),
            },
            Ok,
        )?;
    let rope_dim = get(c, "qk_rope_head_dim")?;
    let mla = get(c, "kv_lora_rank")?.map(|r| r.saturating_add(rope_dim.unwrap_or(0)));
    let v_head_dim = match get(c, "v_head_dim")? {
        Some(v) if mla.is_none() => v,
        _ => head_dim,
    };
    // Sliding windows. `sliding_window: null` means none.
    let explicit_window = get(c, "sliding_window")?.filter(|w| *w > 0);
    let layer_types: Option<Vec<&str>> = c
        .get("layer_types")
        .and_then(Json::as_array)
        .map(|a| a.iter().filter_map(Json::as_str).collect());
    let period =
        first(c, &["sliding_window_pattern", "_sliding_window_pattern"])?.filter(|p| *p > 0);
    let type_period = model_type_default(mt, "sliding_window_pattern").map(|(p, _)| p);
    let use_sliding = c.get("use_sliding_window").and_then(Json::as_bool);
    let window_key_null = c.get("sliding_window").is_some_and(Json::is_null);
    let window = match explicit_window {
        Some(w) => Some(w),
        // Gemma-2/3 slide even when the file omits the window (the class default).
        None if type_period.is_some() && !window_key_null => {
            get_or_default(c, mt, "sliding_window", &mut filled)?
        }
        None => None,
    };
    let qwen = mt.starts_with("qwen2") || mt.starts_with("qwen3");
    let pattern = Pattern {
        window,
        period: if layer_types.is_none() {
            period.or(type_period)
        } else {
            None
        },
        from_layer: match qwen && use_sliding == Some(true) && layer_types.is_none() {
            true => Some(get(c, "max_window_layers")?.unwrap_or(0)),
            false => None,
        },
        all: use_sliding == Some(true) || (mt == "mistral" && use_sliding.is_none()),
        layer_types,
    };
    if window.is_some()
        && pattern.layer_types.is_none()
        && pattern.period.is_none()
        && pattern.from_layer.is_none()
        && !pattern.all
        && use_sliding.is_none()
    {
        warnings.push(format!(
            "config has sliding_window {} but no layer_types or pattern, and model_type {:?} has no known default: every layer is treated as full attention",
            window.unwrap_or(0),
            mt
        ));
    }
    // Gemma-4: full-attention layers have their own head size and KV head count.
    let global_dim = get(c, "global_head_dim")?;
    let global_kv = get(c, "num_global_key_value_heads")?;
    let mut layers = Vec::new();
    for i in 0..n_layers {
        let kind = match mla {
            Some(latent_dim) => LayerKind::Mla { latent_dim },
            None => layer_kind(&pattern, i),
        };
        let layer = match kind {
            LayerKind::Full if global_dim.is_some() || global_kv.is_some() => {
                let d = global_dim.unwrap_or(head_dim);
                Layer::new(kind, global_kv.unwrap_or(kv_heads), d, d)
            }
            _ => Layer::new(kind, kv_heads, head_dim, v_head_dim),
        };
        layers.push(layer);
    }
    if let Some(n) = get(c, "num_kv_shared_layers")?.filter(|n| *n > 0) {
        warnings.push(format!(
            "the last {n} layers reuse earlier layers' KV (num_kv_shared_layers): counted as caching their own, an over-estimate"
        ));
    }
    if kv_from == KvHeadsFrom::AttentionHeads && mla.is_none() {
        warnings.push(format!(
            "num_key_value_heads is absent: assumed {heads} (= num_attention_heads, as vLLM does); the k_proj tensor shapes decide when the weights are read"
        ));
    }
    let mut a = Architecture::new(layers);
    a.name = (!model_type.is_empty()).then_some(model_type.clone());
    a.hidden_size = match hidden {
        Some(h) => Some(h),
        None => get_or_default(c, mt, "hidden_size", &mut filled)?,
    };
    a.attention_heads = Some(heads);
    a.vocab_size = match get(c, "vocab_size")? {
        Some(v) => Some(v),
        None => match get(&root, "vocab_size")? {
            Some(v) => Some(v),
            None => get_or_default(c, mt, "vocab_size", &mut filled)?,
        },
    };
    a.intermediate_size = first(c, &["intermediate_size", "n_inner"])?;
    a.tied_embeddings = c
        .get("tie_word_embeddings")
        .or_else(|| root.get("tie_word_embeddings"))
        .and_then(Json::as_bool);
    if let Some((len, rule)) = derived_context(c, mt, &mut filled)? {
        a.max_context = Some(len);
        a.context_rule = Some(rule);
    }
    a.kv_heads_from = kv_from;
    a.defaults_filled = filled;
    a.warnings = warnings;
    Ok(a)
}

/// Replaces KV head counts that the config did not state with the ones the `k_proj` shapes
/// give: `rows(k_proj) / head_dim` per layer (`kv_rows[i]`, `None` when that layer's tensor is
/// absent or unusable: not a multiple of the head size, or more than 65,536 heads). A stated
/// count that disagrees with the tensor is kept (the runtime reads the config) and warned
/// about.
pub fn infer_kv_heads(arch: &mut Architecture, kv_rows: &[Option<u64>]) {
    let mut inferred = None;
    let mut disagree = None;
    for (i, layer) in arch.layers.iter_mut().enumerate() {
        if matches!(layer.kind, LayerKind::Mla { .. } | LayerKind::None) || layer.head_dim_k == 0 {
            continue;
        }
        let Some(rows) = kv_rows.get(i).copied().flatten() else {
            continue;
        };
        let from_tensor = rows / layer.head_dim_k;
        // A shape that does not divide, or gives more heads than any model has, is unusable.
        if rows % layer.head_dim_k != 0 || Dim::Heads.beyond(from_tensor).is_some() {
            continue;
        }
        if arch.kv_heads_from == KvHeadsFrom::Config {
            if from_tensor != layer.kv_heads && disagree.is_none() {
                disagree = Some((i, layer.kv_heads, from_tensor));
            }
        } else {
            layer.kv_heads = from_tensor;
            inferred = Some(from_tensor);
        }
    }
    if let Some(n) = inferred {
        arch.kv_heads_from = KvHeadsFrom::Tensors;
        arch.warnings
            .retain(|w| !w.starts_with("num_key_value_heads is absent"));
        arch.warnings.push(format!(
            "num_key_value_heads is absent: {n} per layer, read from the k_proj tensor shapes"
        ));
    }
    if let Some((i, stated, seen)) = disagree {
        arch.warnings.push(format!(
            "layer {i}: the config says {stated} KV heads, the k_proj tensor holds {seen}: the runtime will likely refuse to load it"
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_dim_is_taken_not_derived() {
        let cfg = br#"{"model_type":"qwen3","num_hidden_layers":36,"num_attention_heads":32,"num_key_value_heads":8,"hidden_size":2560,"head_dim":128,"vocab_size":151936,"max_position_embeddings":40960}"#;
        let a = from_config_json(cfg).unwrap();
        assert_eq!(a.layers[0].head_dim_k, 128, "not 2560 / 32 = 80");
        assert_eq!(a.layers.len(), 36);
        assert_eq!(a.max_context, Some(40960));
    }

    #[test]
    fn nested_text_config_and_pattern() {
        let cfg = br#"{"model_type":"gemma3","text_config":{"num_hidden_layers":12,"num_attention_heads":8,"num_key_value_heads":4,"head_dim":256,"sliding_window":1024,"sliding_window_pattern":6,"hidden_size":2048}}"#;
        let a = from_config_json(cfg).unwrap();
        let full: Vec<usize> = a
            .layers
            .iter()
            .enumerate()
            .filter(|(_, l)| l.kind == LayerKind::Full)
            .map(|(i, _)| i)
            .collect();
        assert_eq!(full, vec![5, 11]);
        assert_eq!(a.layers[0].kind, LayerKind::Sliding { window: 1024 });
    }

    #[test]
    fn a_window_without_a_known_pattern_is_full_with_a_warning() {
        let cfg = br#"{"model_type":"somethingnew","num_hidden_layers":4,"num_attention_heads":4,"num_key_value_heads":4,"head_dim":64,"sliding_window":512}"#;
        let a = from_config_json(cfg).unwrap();
        assert!(a.layers.iter().all(|l| l.kind == LayerKind::Full));
        assert!(
            a.warnings[0].contains("no layer_types or pattern"),
            "{:?}",
            a.warnings
        );
    }

    #[test]
    fn qwen2_slides_only_from_max_window_layers() {
        let cfg = br#"{"model_type":"qwen2","num_hidden_layers":8,"num_attention_heads":4,"num_key_value_heads":2,"head_dim":64,"sliding_window":4096,"use_sliding_window":true,"max_window_layers":6}"#;
        let a = from_config_json(cfg).unwrap();
        let sliding = a
            .layers
            .iter()
            .filter(|l| l.kind != LayerKind::Full)
            .count();
        assert_eq!(sliding, 2, "layers 6 and 7");
        assert_eq!(a.layers[7].kind, LayerKind::Sliding { window: 4096 });
    }

    #[test]
    fn missing_kv_heads_are_assumed_then_read_from_tensors() {
        let cfg = br#"{"model_type":"llama","num_hidden_layers":2,"num_attention_heads":32,"hidden_size":4096}"#;
        let mut a = from_config_json(cfg).unwrap();
        assert_eq!(a.kv_heads_from, KvHeadsFrom::AttentionHeads);
        assert_eq!(a.layers[0].kv_heads, 32);
        assert!(a.warnings[0].contains("num_key_value_heads is absent"));
        infer_kv_heads(&mut a, &[Some(1024), Some(1024)]);
        assert_eq!(a.kv_heads_from, KvHeadsFrom::Tensors);
        assert_eq!((a.layers[0].kv_heads, a.layers[1].kv_heads), (8, 8));
        assert_eq!(a.warnings.len(), 1, "{:?}", a.warnings);
        // A stated count is kept; a disagreeing tensor is a warning.
        let cfg = br#"{"num_hidden_layers":1,"num_attention_heads":32,"num_key_value_heads":8,"hidden_size":4096}"#;
        let mut b = from_config_json(cfg).unwrap();
        infer_kv_heads(&mut b, &[Some(4096)]);
        assert_eq!(b.layers[0].kv_heads, 8);
        assert!(b.warnings[0].contains("the k_proj tensor holds 32"));
    }

    #[test]
    fn bad_configs() {
        assert!(from_config_json(b"[]").is_err());
        assert!(
            from_config_json(br#"{"num_hidden_layers":0,"num_attention_heads":1,"head_dim":1}"#)
                .is_err()
        );
        assert!(
            from_config_json(
                br#"{"num_hidden_layers":99999999,"num_attention_heads":1,"head_dim":1}"#
            )
            .is_err()
        );
        assert!(
            from_config_json(br#"{"num_hidden_layers":2,"num_attention_heads":4}"#).is_err(),
            "no head size"
        );
        assert!(from_config_json(b"{").is_err());
        // Present with the wrong type or range: invalid, never taken for absent.
        let layers = |v: &str| {
            from_config_json(
                format!(r#"{{"num_hidden_layers":{v},"num_attention_heads":1,"head_dim":1}}"#)
                    .as_bytes(),
            )
            .unwrap_err()
            .message
        };
        assert_eq!(layers("-1"), "invalid num_hidden_layers (-1: negative)");
        assert_eq!(
            layers("2.5"),
            "invalid num_hidden_layers (2.5: not a whole number)"
        );
        assert_eq!(
            layers(r#""2""#),
            r#"invalid num_hidden_layers ("2": a string, not a number)"#
        );
        assert_eq!(layers("null"), "no num_hidden_layers");
        let e = from_config_json(
            br#"{"num_hidden_layers":1,"num_attention_heads":1,"head_dim":1,"vocab_size":-5}"#,
        )
        .unwrap_err();
        assert_eq!(e.message, "invalid vocab_size (-5: negative)");
        // A rope factor that is not a number is ignored, not a panic.
        let a = from_config_json(br#"{"num_hidden_layers":1,"num_attention_heads":1,"head_dim":8,"max_position_embeddings":100,"rope_scaling":{"type":"yarn","factor":"x"}}"#).unwrap();
        assert_eq!(a.max_context, Some(100));
    }

    /// Every dimension the estimators multiply is refused beyond its bound, naming the key and
    /// the value; at the bound it is accepted.
    #[test]
    fn implausible_dimensions_are_refused_by_name() {
        let base = r#""num_hidden_layers":2,"num_attention_heads":4,"head_dim":8"#;
        let parse = |extra: &str| from_config_json(format!("{{{base},{extra}}}").as_bytes());
        for (key, max, unit) in [
            ("vocab_size", 1u64 << 24, "tokens"),
            ("hidden_size", 1 << 20, "elements"),
            ("n_embd", 1 << 20, "elements"),
            ("intermediate_size", 1 << 22, "elements"),
            ("num_attention_heads", 1 << 16, "heads"),
            ("num_key_value_heads", 1 << 16, "heads"),
            ("num_global_key_value_heads", 1 << 16, "heads"),
            ("head_dim", 1 << 16, "elements"),
            ("v_head_dim", 1 << 16, "elements"),
            ("global_head_dim", 1 << 16, "elements"),
            ("kv_lora_rank", 1 << 16, "elements"),
            ("qk_rope_head_dim", 1 << 16, "elements"),
            ("max_position_embeddings", 1 << 32, "tokens"),
            ("seq_length", 1 << 32, "tokens"),
            ("model_max_length", 1 << 32, "tokens"),
            ("sliding_window", 1 << 32, "tokens"),
        ] {
            assert!(
                parse(&format!(r#""{key}":{max}"#)).is_ok(),
                "{key} at its bound"
            );
            for bad in [max + 1, u64::from(u32::MAX).max(max + 1), u64::MAX] {
                let e = parse(&format!(r#""{key}":{bad}"#)).unwrap_err().message;
                assert_eq!(
                    e,
                    format!("invalid {key} ({bad}: out of range, at most {max} {unit})")
                );
            }
        }
        // Inside text_config, and YaRN's original length.
        let e = from_config_json(
            br#"{"text_config":{"num_hidden_layers":2,"num_attention_heads":4,"hidden_size":18446744073709551615}}"#,
        )
        .unwrap_err();
        assert!(
            e.message
                .starts_with("invalid hidden_size (18446744073709551615"),
            "{e}"
        );
        let e = parse(r#""max_position_embeddings":4096,"rope_scaling":{"type":"yarn","factor":4,"original_max_position_embeddings":18446744073709551615}"#)
            .unwrap_err();
        assert!(
            e.message
                .starts_with("invalid original_max_position_embeddings (18446744073709551615"),
            "{e}"
        );
    }

    #[test]
    fn implausible_rope_factors_are_refused() {
        let rope = |key: &str, r: &str| {
            from_config_json(
                format!(r#"{{"num_hidden_layers":2,"num_attention_heads":4,"head_dim":8,"max_position_embeddings":4096,"{key}":{r}}}"#)
                    .as_bytes(),
            )
        };
        let e = |key: &str, r: &str| rope(key, r).unwrap_err().message;
        assert_eq!(
            e(
                "rope_scaling",
                r#"{"type":"yarn","factor":1e308,"original_max_position_embeddings":18446744073709551615}"#
            ),
            "invalid rope_scaling.factor (1e+308: out of range, a positive number at most 65536)"
        );
        assert_eq!(
            e("rope_scaling", r#"{"type":"linear","factor":-1}"#),
            "invalid rope_scaling.factor (-1.0: out of range, a positive number at most 65536)"
        );
        assert!(
            e("rope_scaling", r#"{"type":"dynamic","factor":0}"#).contains("(0.0: out of range")
        );
        assert!(
            e(
                "rope_parameters",
                r#"{"full_attention":{"rope_type":"yarn","factor":1e9}}"#
            )
            .starts_with("invalid rope_parameters.full_attention.factor (1000000000.0")
        );
        // A plausible factor deriving more than 2³² tokens.
        assert_eq!(
            e(
                "rope_scaling",
                r#"{"type":"yarn","factor":2,"original_max_position_embeddings":4294967296}"#
            ),
            "invalid rope_scaling.factor (2.0: the derived context 4294967296 × 2.0 is out of range, at most 4294967296 tokens)"
        );
        // At the bounds: accepted.
        let a = rope(
            "rope_scaling",
            r#"{"type":"yarn","factor":65536,"original_max_position_embeddings":65536}"#,
        )
        .unwrap();
        assert_eq!(a.max_context, Some(1 << 32));
        // Kinds that do not multiply keep ignoring their factor.
        let a = rope("rope_scaling", r#"{"rope_type":"llama3","factor":1e308}"#).unwrap();
        assert_eq!(a.max_context, Some(4096));
    }

    #[test]
    fn kv_heads_from_implausible_tensor_shapes_are_not_taken() {
        let cfg = br#"{"model_type":"llama","num_hidden_layers":1,"num_attention_heads":32,"hidden_size":4096}"#;
        let mut a = from_config_json(cfg).unwrap();
        infer_kv_heads(&mut a, &[Some(u64::MAX - u64::MAX % 128)]);
        assert_eq!(a.layers[0].kv_heads, 32, "the assumed count stays");
        assert_eq!(a.kv_heads_from, KvHeadsFrom::AttentionHeads);
    }
}
