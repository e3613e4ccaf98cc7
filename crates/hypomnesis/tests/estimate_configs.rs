//! Reading what a model states and what it leaves out (issue 12): transformers' config-class
//! defaults for Gemma-3's `text_config`, KV heads from the `k_proj` shapes, one shard of a set,
//! no `config.json`, Qwen2's window layers.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use hypomnesis::estimate::model::open;
use hypomnesis::estimate::{
    Budget, Fit, FitParams, KvDtype, KvHeadsFrom, LayerKind, Runtime, estimate, judge,
};

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/models")
        .join(name)
}

/// A safetensors file with the given (name, dtype, shape) tensors over a hole (sparse).
fn sparse(path: &Path, tensors: &[(&str, &str, &[u64])]) -> u64 {
    let mut header = String::from("{");
    let mut offset = 0u64;
    for (i, (name, dtype, shape)) in tensors.iter().enumerate() {
        let bytes = shape.iter().product::<u64>() * if *dtype == "F32" { 4 } else { 2 };
        if i > 0 {
            header.push(',');
        }
        header.push_str(&format!(
            r#""{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[{offset},{}]}}"#,
            offset + bytes
        ));
        offset += bytes;
    }
    header.push('}');
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.set_len(8 + header.len() as u64 + offset).unwrap();
    offset
}

/// Issue bullet "vision-language configs that leave head counts to the library's defaults
/// (Gemma-3 `text_config`) are refused": the published gemma-3-4b-it config is read with
/// `Gemma3TextConfig`'s defaults (v4.50, `configuration_gemma3.py`), and the estimate says so.
#[test]
fn gemma3_text_config_defaults_are_filled_and_stated() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture("gemma-3-4b-it.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    sparse(
        &dir.path().join("model.safetensors"),
        &[(
            "language_model.model.embed_tokens.weight",
            "BF16",
            &[262_208, 2560],
        )],
    );
    let m = open(dir.path()).unwrap();
    let a = m.spec.arch.as_ref().unwrap();
    assert_eq!(a.layers.len(), 34);
    assert_eq!(a.attention_heads, Some(8));
    assert_eq!((a.layers[0].kv_heads, a.layers[0].head_dim_k), (4, 256));
    assert_eq!(a.kv_heads_from, KvHeadsFrom::ModelTypeDefault);
    assert_eq!(a.vocab_size, Some(262_208));
    let full: Vec<usize> = (0..34)
        .filter(|i| a.layers[*i].kind == LayerKind::Full)
        .collect();
    assert_eq!(full, vec![5, 11, 17, 23, 29]);
    assert_eq!(a.layers[0].kind, LayerKind::Sliding { window: 1024 });
    for key in [
        "num_attention_heads = 8",
        "num_key_value_heads = 4",
        "head_dim = 256",
        "max_position_embeddings = 131072",
        "vocab_size = 262208",
    ] {
        assert!(
            a.defaults_filled.iter().any(|d| d.starts_with(key)),
            "{key}: {:?}",
            a.defaults_filled
        );
    }
    let e = estimate(
        &m.spec,
        FitParams::new(8192, 1, KvDtype::F16, Runtime::LlamaCpp),
    );
    let s = e.assumptions.unwrap().statements.join("\n");
    assert!(
        s.contains("config default: num_key_value_heads = 4 (Gemma3TextConfig default)"),
        "{s}"
    );
}

/// Issue bullet "`num_key_value_heads` missing from a GQA config silently gives MHA (4× KV)
/// although the `k_proj` tensor shapes say otherwise": Llama-3.1-8B's config without the key,
/// and its real k_proj shape [1024, 4096] (8 heads × 128).
#[test]
fn missing_kv_heads_come_from_the_k_proj_shapes() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixture("llama-3.1-8b.json")).unwrap()).unwrap();
    cfg.as_object_mut().unwrap().remove("num_key_value_heads");
    std::fs::write(dir.path().join("config.json"), cfg.to_string()).unwrap();
    // The config alone: assumed MHA, with a warning.
    let mut tensors: Vec<(String, &str, Vec<u64>)> = Vec::new();
    for i in 0..32 {
        tensors.push((
            format!("model.layers.{i}.self_attn.k_proj.weight"),
            "BF16",
            vec![1024, 4096],
        ));
    }
    let names: Vec<(&str, &str, &[u64])> = tensors
        .iter()
        .map(|(n, d, s)| (n.as_str(), *d, s.as_slice()))
        .collect();
    sparse(&dir.path().join("model.safetensors"), &names);
    let m = open(dir.path()).unwrap();
    let a = m.spec.arch.as_ref().unwrap();
    assert_eq!(a.kv_heads_from, KvHeadsFrom::Tensors);
    assert!(a.layers.iter().all(|l| l.kv_heads == 8));
    assert!(
        a.warnings
            .iter()
            .any(|w| w.contains("read from the k_proj tensor shapes"))
    );
    // 1 GiB at 8k (bf16), not the 4 GiB of MHA.
    let kv = hypomnesis::estimate::kv_cache_bytes(a, 8192, 1, KvDtype::BF16, Runtime::Generic);
    assert_eq!(kv, 1 << 30);
}

/// Issue bullet "one shard file of a set (`…-00001-of-00002…`) silently counts only its own
/// bytes": naming one shard reads the whole set (through the index when it names the shard,
/// else by transformers' shard names), and a missing shard is an error naming it.
#[test]
fn one_shard_brings_its_set_or_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("model-00001-of-00002.safetensors");
    let a = sparse(&one, &[("a", "BF16", &[1024, 1024])]);
    let e = open(&one).unwrap_err().to_string();
    assert!(
        e.contains("model-00002-of-00002.safetensors") && e.contains("shard 2 of 2 is missing"),
        "{e}"
    );
    assert_eq!(e.lines().count(), 1);
    let b = sparse(
        &dir.path().join("model-00002-of-00002.safetensors"),
        &[("b", "F32", &[256])],
    );
    let m = open(&one).unwrap();
    assert_eq!(m.spec.weights_bytes, a + b);
    assert_eq!(m.files.len(), 2);
    // The second shard names the same set.
    let m = open(&dir.path().join("model-00002-of-00002.safetensors")).unwrap();
    assert_eq!(m.spec.weights_bytes, a + b);
}

/// Issue bullet "a model with no `config.json` gets 'fits' on weights alone": the estimate is
/// marked incomplete and the verdict is never "fits".
#[test]
fn no_config_is_a_weights_only_estimate_never_a_fit() {
    let dir = tempfile::tempdir().unwrap();
    let w = sparse(
        &dir.path().join("model.safetensors"),
        &[("weight", "BF16", &[1 << 20, 1024])],
    );
    let m = open(dir.path()).unwrap();
    assert!(m.spec.arch.is_none());
    assert!(m.warnings[0].contains("no config.json"), "{:?}", m.warnings);
    let p = FitParams::new(4096, 1, KvDtype::BF16, Runtime::Generic);
    let e = estimate(&m.spec, p);
    assert!(!e.is_complete() && e.unknown_components == vec!["kv_cache"]);
    let v = judge(&m.spec, p, &Budget::given(80 << 30));
    assert_eq!(v.fit, Fit::Incomplete);
    assert!(w < 80 << 30);
}

/// Qwen2.5-7B-Instruct's published config carries `sliding_window: 131072` with
/// `use_sliding_window: false`: every layer is full (transformers `Qwen2Config`); with the
/// window on, only layers ≥ `max_window_layers` (28 of 28: none) would slide.
#[test]
fn qwen2_window_layers() {
    let text = std::fs::read(fixture("qwen2.5-7b-instruct.json")).unwrap();
    let a = hypomnesis::estimate::config::from_config_json(&text).unwrap();
    assert!(a.layers.iter().all(|l| l.kind == LayerKind::Full));
    assert!(a.warnings.is_empty(), "{:?}", a.warnings);
    let mut cfg: serde_json::Value = serde_json::from_slice(&text).unwrap();
    cfg["use_sliding_window"] = true.into();
    cfg["max_window_layers"] = 20.into();
    let a = hypomnesis::estimate::config::from_config_json(cfg.to_string().as_bytes()).unwrap();
    let sliding = a
        .layers
        .iter()
        .filter(|l| l.kind != LayerKind::Full)
        .count();
    assert_eq!(sliding, 8);
}

/// QA (defect 6): a dimension of 0 in `config.json` made a KV cache of 0 bytes and "fits"; it
/// is refused by name like `num_hidden_layers: 0`, and `num_attention_heads: 0` is named
/// itself (it read "no head_dim and no hidden_size to derive it", with `hidden_size` there).
/// A 0 that means "none" (a window, an FFN width, an MLA part) is still taken.
#[test]
fn a_zero_dimension_in_config_json_is_invalid_by_name() {
    use hypomnesis::estimate::config::from_config_json;
    let base = serde_json::json!({
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "hidden_size": 256, "vocab_size": 1000, "max_position_embeddings": 8192
    });
    let with = |key: &str| {
        let mut c = base.clone();
        c[key] = 0.into();
        from_config_json(c.to_string().as_bytes())
    };
    for (key, unit) in [
        ("head_dim", "element"),
        ("hidden_size", "element"),
        ("num_attention_heads", "head"),
        ("num_key_value_heads", "head"),
        ("vocab_size", "token"),
        ("max_position_embeddings", "token"),
    ] {
        assert_eq!(
            with(key).unwrap_err().message,
            format!("invalid {key} (0: out of range, at least 1 {unit})")
        );
    }
    for key in ["sliding_window", "intermediate_size"] {
        assert!(with(key).is_ok(), "{key}: 0 is none");
    }
    // A hidden size smaller than the head count derives a head size of 0.
    let mut c = base.clone();
    c["hidden_size"] = 2.into();
    assert_eq!(
        from_config_json(c.to_string().as_bytes())
            .unwrap_err()
            .message,
        "invalid hidden_size (2: smaller than num_attention_heads 4, no head_dim to use instead)"
    );
}
