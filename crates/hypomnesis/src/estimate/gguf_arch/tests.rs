//! The GGUF metadata reader's tests: llama.cpp's sliding patterns, absent and invalid keys,
//! the bounds of every dimension (zeros included), per-layer arrays.

use super::*;

#[test]
fn llama_cpp_swa_patterns() {
    // set_swa_pattern(n): layer il slides iff il % n < n − 1.
    let slides = |p, d| (0..8).filter(|il| is_swa(p, d, *il)).collect::<Vec<_>>();
    assert_eq!(slides(2, false), vec![0, 2, 4, 6]);
    assert_eq!(slides(4, false), vec![0, 1, 2, 4, 5, 6]);
    assert_eq!(slides(4, true), vec![1, 2, 3, 5, 6, 7]);
    assert!(swa_rule("phi3", 32).is_none());
    assert!(swa_rule("qwen2", 28).is_none());
    assert!(swa_rule("exaone4", 30).is_none() && swa_rule("exaone4", 64).is_some());
}

fn header(pairs: &[(&str, Value)]) -> Header {
    let mut h = Header::default();
    for (k, v) in pairs {
        h.metadata.insert((*k).to_string(), v.clone());
    }
    h
}

#[test]
fn absent_is_no_architecture_and_invalid_is_an_error() {
    let arch = ("general.architecture", Value::String("llama".into()));
    let heads = ("llama.attention.head_count", Value::Int(4));
    assert_eq!(from_gguf(&header(&[arch.clone(), heads.clone()])), Ok(None));
    let err = |pairs: &[(&str, Value)]| from_gguf(&header(pairs)).unwrap_err().message;
    let blocks = |v| ("llama.block_count", v);
    for (v, shown) in [
        (Value::String("2".into()), "\"2\""),
        (Value::Int(-1), "-1"),
        (Value::Float(2.0), "2.0"),
        (Value::Bool(true), "true"),
    ] {
        let e = err(&[arch.clone(), heads.clone(), blocks(v)]);
        assert_eq!(
            e,
            format!("invalid llama.block_count ({shown}: expected a non-negative integer)")
        );
    }
    let e = err(&[arch.clone(), heads.clone(), blocks(Value::Int(0))]);
    assert!(e.contains("(0: expected 1 to 4096 layers)"), "{e}");
    // A per-layer array whose items were not kept (too long) or are not numbers.
    let long = Value::Array {
        len: 5000,
        items: Vec::new(),
    };
    let e = err(&[
        arch.clone(),
        blocks(Value::Int(2)),
        ("llama.attention.head_count", long),
    ]);
    assert!(
        e.starts_with("invalid llama.attention.head_count (an array of 5000"),
        "{e}"
    );
    let floats = Value::Array {
        len: 2,
        items: vec![Value::Float(1.5), Value::Int(2)],
    };
    let e = err(&[
        arch.clone(),
        heads.clone(),
        blocks(Value::Int(2)),
        ("llama.attention.head_count_kv", floats),
    ]);
    assert!(
        e.starts_with("invalid llama.attention.head_count_kv"),
        "{e}"
    );
    let e = err(&[("general.architecture", Value::Int(1))]);
    assert_eq!(e, "invalid general.architecture (1: expected a string)");
    let e = err(&[
        arch,
        heads,
        blocks(Value::Int(2)),
        (
            "llama.attention.sliding_window_pattern",
            Value::String("x".into()),
        ),
    ]);
    assert!(
        e.starts_with("invalid llama.attention.sliding_window_pattern"),
        "{e}"
    );
}

/// Every dimension the estimators multiply is refused beyond its bound, naming the key and
/// the value, as a number or in a per-layer array; at the bound it is accepted.
#[test]
fn implausible_dimensions_are_refused_by_name() {
    let base = || {
        vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", Value::Int(2)),
            ("llama.attention.head_count", Value::Int(4)),
            ("llama.embedding_length", Value::Int(256)),
            // 65,536 heads of a 256-wide embedding would derive a head size of 0.
            ("llama.attention.key_length", Value::Int(64)),
        ]
    };
    let with = |key: &'static str, v: Value| {
        let mut pairs = base();
        pairs.retain(|(k, _)| *k != key);
        pairs.push((key, v));
        from_gguf(&header(&pairs))
    };
    for (key, max, unit) in [
        ("llama.vocab_size", 1u64 << 24, "tokens"),
        ("llama.embedding_length", 1 << 20, "elements"),
        ("llama.feed_forward_length", 1 << 22, "elements"),
        ("llama.attention.head_count", 1 << 16, "heads"),
        ("llama.attention.head_count_kv", 1 << 16, "heads"),
        ("llama.attention.key_length", 1 << 16, "elements"),
        ("llama.attention.value_length", 1 << 16, "elements"),
        ("llama.attention.key_length_swa", 1 << 16, "elements"),
        ("llama.attention.value_length_swa", 1 << 16, "elements"),
        ("llama.attention.kv_lora_rank", 1 << 16, "elements"),
        ("llama.rope.dimension_count", 1 << 16, "elements"),
        ("llama.context_length", 1 << 32, "tokens"),
        ("llama.attention.sliding_window", 1 << 32, "tokens"),
    ] {
        let ok = with(key, Value::Int(i128::from(max)));
        assert!(matches!(ok, Ok(Some(_))), "{key} at its bound: {ok:?}");
        for bad in [max + 1, u64::from(u32::MAX).max(max + 1), u64::MAX] {
            let e = with(key, Value::Int(i128::from(bad))).unwrap_err().message;
            assert_eq!(
                e,
                format!("invalid {key} ({bad}: expected at most {max} {unit})")
            );
        }
    }
    // One layer of a per-layer array.
    let arr = Value::Array {
        len: 2,
        items: vec![Value::Int(8), Value::Int(i128::from(u64::MAX))],
    };
    let e = with("llama.attention.head_count_kv", arr)
        .unwrap_err()
        .message;
    assert_eq!(
        e,
        "invalid llama.attention.head_count_kv (18446744073709551615: expected at most 65536 heads)"
    );
    // The vocabulary from the token list's length.
    let tokens = Value::Array {
        len: u64::MAX,
        items: Vec::new(),
    };
    let e = with("tokenizer.ggml.tokens", tokens).unwrap_err().message;
    assert_eq!(
        e,
        "invalid tokenizer.ggml.tokens (an array of 18446744073709551615: expected at most 16777216 tokens)"
    );
}

/// A zero that would leave an attention layer without a KV cache is refused by name (the
/// QA's `embd0`, `heads0`, `keylen0`, `kv0` files: KV 0 B and "fits"); a 0 that means a
/// layer without attention (no attention tensors: Jamba's, a Mamba's) is taken.
#[test]
fn zero_dimensions_of_an_attention_layer_are_refused() {
    let base = || {
        vec![
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", Value::Int(2)),
            ("llama.attention.head_count", Value::Int(4)),
            ("llama.attention.head_count_kv", Value::Int(2)),
            ("llama.embedding_length", Value::Int(256)),
        ]
    };
    let with = |pairs: &[(&'static str, Value)], attn_k: bool| {
        let mut all = base();
        for (k, v) in pairs {
            all.retain(|(x, _)| x != k);
            all.push((k, v.clone()));
        }
        let mut h = header(&all);
        if attn_k {
            for i in 0..2 {
                h.tensors.push(crate::estimate::gguf::TensorInfo {
                    name: format!("blk.{i}.attn_k.weight"),
                    dims: vec![256, 128],
                    ggml_type: crate::estimate::dtype::GgmlType::F16,
                    bytes: 256 * 128 * 2,
                });
            }
        }
        from_gguf(&h)
    };
    let err = |pairs: &[(&'static str, Value)]| with(pairs, true).unwrap_err().message;
    for (key, unit) in [
        ("llama.embedding_length", "element"),
        ("llama.attention.key_length", "element"),
        ("llama.attention.value_length", "element"),
        ("llama.attention.key_length_swa", "element"),
        ("llama.context_length", "token"),
        ("llama.vocab_size", "token"),
    ] {
        assert_eq!(
            err(&[(key, Value::Int(0))]),
            format!("invalid {key} (0: expected at least 1 {unit})")
        );
    }
    assert_eq!(
        err(&[("llama.attention.head_count", Value::Int(0))]),
        "invalid llama.attention.head_count (0: expected at least 1 head: layer 0 has 2 KV heads)"
    );
    assert_eq!(
        err(&[("llama.attention.head_count_kv", Value::Int(0))]),
        "invalid llama.attention.head_count_kv (0: expected at least 1 head: layer 0 has attention tensors (blk.0.attn_k.weight))"
    );
    let one_zero = Value::Array {
        len: 2,
        items: vec![Value::Int(2), Value::Int(0)],
    };
    let e = err(&[("llama.attention.head_count_kv", one_zero.clone())]);
    assert!(e.contains("layer 1 has attention tensors"), "{e}");
    // A head size derived as 0, or not at all.
    let e = err(&[("llama.embedding_length", Value::Int(2))]);
    assert_eq!(
        e,
        "invalid llama.embedding_length (2: expected at least llama.attention.head_count 4, or an attention.key_length)"
    );
    let mut no_embd = base();
    no_embd.retain(|(k, _)| *k != "llama.embedding_length");
    assert_eq!(
        from_gguf(&header(&no_embd)).unwrap_err().message,
        "no llama.attention.key_length and no llama.embedding_length to derive it"
    );
    // Layers without attention tensors: a per-layer 0 is a recurrent layer, and a Mamba's
    // head_count 0 (no head_count_kv) an attention-free model.
    let a = with(&[("llama.attention.head_count_kv", one_zero)], false)
        .unwrap()
        .unwrap();
    assert_eq!(a.layers[1].kind, LayerKind::None);
    assert_eq!(a.layers[0].kind, LayerKind::Full);
    let mut mamba = base();
    mamba.retain(|(k, _)| *k != "llama.attention.head_count_kv");
    mamba.retain(|(k, _)| *k != "llama.attention.head_count");
    mamba.push(("llama.attention.head_count", Value::Int(0)));
    let a = from_gguf(&header(&mamba)).unwrap().unwrap();
    assert!(a.layers.iter().all(|l| l.kind == LayerKind::None));
}

/// QA (defect 7): `block_count` 4 with `head_count_kv` `[4, 4]` or `[4]` was taken (the
/// first item standing for the missing layers); an array must have one item per layer,
/// as llama.cpp's `get_key_or_arr` requires ("wrong array length; expected 4, got 2").
#[test]
fn a_per_layer_array_must_have_one_item_per_layer() {
    let arr = |items: &[i128]| Value::Array {
        len: items.len() as u64,
        items: items.iter().map(|i| Value::Int(*i)).collect(),
    };
    let with = |key: &'static str, v: Value| {
        from_gguf(&header(&[
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", Value::Int(4)),
            ("llama.attention.head_count", Value::Int(4)),
            ("llama.embedding_length", Value::Int(256)),
            (key, v),
        ]))
    };
    for (items, len) in [(&[4, 4][..], 2), (&[4], 1), (&[4, 4, 4, 4, 4], 5)] {
        for key in ["llama.attention.head_count_kv", "llama.feed_forward_length"] {
            assert_eq!(
                with(key, arr(items)).unwrap_err().message,
                format!("invalid {key} (an array of {len}: expected one item per layer, 4 layers)")
            );
        }
    }
    let bools = Value::Array {
        len: 2,
        items: vec![Value::Bool(true), Value::Bool(false)],
    };
    assert_eq!(
        with("llama.attention.sliding_window_pattern", bools)
            .unwrap_err()
            .message,
        "invalid llama.attention.sliding_window_pattern (an array of 2: expected one item per layer, 4 layers)"
    );
    let a = with("llama.attention.head_count_kv", arr(&[4, 2, 4, 2]))
        .unwrap()
        .unwrap();
    let kv: Vec<u64> = a.layers.iter().map(|l| l.kv_heads).collect();
    assert_eq!(kv, [4, 2, 4, 2]);
}

/// QA (defect 8): a GGUF with no vocab_size and no tokenizer.ggml.tokens had no vocabulary,
/// so an output buffer of 0 B; it is `token_embd`'s (else `output`'s) `ne[1]`, the shape
/// llama.cpp creates them with — and unknown when neither is there or the shape is
/// implausible.
#[test]
fn the_vocabulary_from_the_token_embedding_shape() {
    let with = |tensors: &[(&str, Vec<u64>)]| {
        let mut h = header(&[
            ("general.architecture", Value::String("llama".into())),
            ("llama.block_count", Value::Int(2)),
            ("llama.attention.head_count", Value::Int(4)),
            ("llama.embedding_length", Value::Int(256)),
        ]);
        for (name, dims) in tensors {
            h.tensors.push(crate::estimate::gguf::TensorInfo {
                name: (*name).to_string(),
                dims: dims.clone(),
                ggml_type: crate::estimate::dtype::GgmlType::F16,
                bytes: dims.iter().product::<u64>() * 2,
            });
        }
        from_gguf(&h).unwrap().unwrap().vocab_size
    };
    assert_eq!(with(&[("token_embd.weight", vec![256, 1000])]), Some(1000));
    assert_eq!(with(&[("output.weight", vec![256, 32_000])]), Some(32_000));
    assert_eq!(with(&[]), None);
    assert_eq!(with(&[("token_embd.weight", vec![256, 1 << 25])]), None);
    assert_eq!(with(&[("token_embd.weight", vec![256, 0])]), None);
}
