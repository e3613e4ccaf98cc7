//! Issue 22's bounds on model files, through the built binary: hostile GGUF headers cost a
//! bounded amount of memory; a shard set is read once per file however many names lead to it
//! (a Hugging Face cache included); integer fields of the wrong type are "invalid", not
//! absent; the trained-context warning is a top-level warning too; and no control character
//! from a model file reaches the terminal.

use std::io::Write as _;
use std::path::Path;

use hmn_testbed::hostile_models::{
    self, at_the_bounds, gguf_attacks, hf_cache, safetensors_with_header, symlinked_shards,
};
use hmn_testbed::{GgufWriter, ggml};
use serde_json::Value;

use crate::util::{Bed, json, max_rss_kib, stderr};

/// The most memory `hmn fits` may take on any header, KiB.
const RSS_LIMIT_KIB: u64 = 64 << 10;

/// `hmn fits PATH --free 1TiB` (no GPU needed) as JSON, checked to be an answer (exit 0 or 1).
fn fits_json(bed: &Bed, path: &Path) -> Value {
    let o = bed.run(&["fits", path.to_str().unwrap(), "--free", "1TiB", "--json"]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{}: {}",
        path.display(),
        stderr(&o)
    );
    json(&o)
}

/// Runs `hmn fits ARG` and checks it is one `hmn:` line naming `names` with exit 2 and no
/// control character (other than the final newline) anywhere in its output; returns the line.
/// Writes each GGUF as `{stem}{i}.gguf`: [`refused`], the line holding its needle.
pub(crate) fn each_gguf_refused<const N: usize>(
    bed: &Bed,
    stem: &str,
    cases: [(GgufWriter, &str); N],
) {
    for (i, (w, needle)) in cases.into_iter().enumerate() {
        let name = format!("{stem}{i}.gguf");
        let path = bed.path(&name);
        w.write(&path).unwrap();
        let err = refused(bed, &path, &name);
        assert!(err.contains(needle), "{err}");
    }
}

pub(crate) fn refused(bed: &Bed, arg: &Path, names: &str) -> String {
    let o = bed
        .cmd(&["fits", "--free", "1TiB"])
        .arg(arg)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr).into_owned();
    assert_eq!(o.status.code(), Some(2), "{err:?}");
    assert!(o.stdout.is_empty(), "{:?}", o.stdout);
    assert_eq!(err.lines().count(), 1, "{err:?}");
    assert!(err.starts_with("hmn: ") && err.contains(names), "{err:?}");
    let body = err.strip_suffix('\n').unwrap_or(&err);
    assert!(
        !body
            .chars()
            .any(|c| c.is_control() || ('\u{80}'..='\u{9f}').contains(&c)),
        "a control character reached the terminal: {err:?}"
    );
    err
}

#[test]
fn hostile_gguf_headers_cost_bounded_memory() {
    let bed = Bed::new();
    let mut report = Vec::new();
    for (name, w) in gguf_attacks(64 << 20) {
        let path = bed.path(&name);
        w.write_sparse(&path).unwrap();
        let (kib, o) = max_rss_kib(&bed, &["fits", path.to_str().unwrap(), "--free", "1TiB"]);
        let err = stderr(&o);
        report.push(format!("{name}: {kib} KiB, exit {:?}", o.status.code()));
        match o.status.code() {
            // An answer: the junk was skipped and the model around it read.
            Some(0 | 1) => assert!(err.contains("1 TiB free"), "{name}: {err}"),
            // A refusal: one line naming the file and the limit.
            Some(2) => assert!(
                err.lines().count() == 1 && err.contains(&name) && err.contains("limit"),
                "{name}: {err}"
            ),
            other => panic!("{name}: {other:?} {err}"),
        }
        assert!(kib < RSS_LIMIT_KIB, "{name}: peak RSS {kib} KiB");
        std::fs::remove_file(&path).unwrap();
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("hmn fits peak RSS on 64 MiB of junk: {report:#?}");
    }
}

/// A safetensors header is streamed, never built into a JSON tree: a 10 MB header of about
/// 150,000 tensors stays under the bound GGUF headers keep (as a tree it took about 140 MiB;
/// at the format's 100 MB limit 1.2 GiB — docs/security.md). The tensor limit that bounds
/// what streaming keeps is tested on the parser (`safetensors_header`), where 2²⁰ tensors do
/// not cost a debug build half a minute.
#[test]
fn large_safetensors_headers_cost_bounded_memory() {
    let bed = Bed::new();
    let path = bed.path("large-header.safetensors");
    let tensors = safetensors_with_header(&path, "t", 10_000_000).unwrap();
    assert!(tensors > 140_000, "{tensors}");
    let (kib, o) = max_rss_kib(
        &bed,
        &["fits", path.to_str().unwrap(), "--free", "1TiB", "--json"],
    );
    assert_eq!(o.status.code(), Some(1), "weights only: {}", stderr(&o));
    assert_eq!(json(&o)["input"]["tensor_count"], tensors);
    assert!(kib < RSS_LIMIT_KIB, "peak RSS {kib} KiB");
}

#[test]
fn a_set_of_names_of_one_file_is_read_once() {
    let bed = Bed::new();
    let dir = bed.path("links");
    let blob = symlinked_shards(&dir, 64 << 10, 32).unwrap();
    let v = fits_json(&bed, &dir.join("model-00001-of-00032.safetensors"));
    let input = &v["input"];
    assert_eq!(input["files"].as_array().unwrap().len(), 1, "{input}");
    assert_eq!(input["tensor_count"], blob, "counted once, not 32 times");
    let another = input["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w.as_str().unwrap().contains("is another name of"))
        .count();
    assert_eq!(another, 31, "{input}");
}

/// The GGUF half of the (device, inode) rule: a split set `m-0000K-of-0000N.gguf` whose names
/// all lead to one file is read once, with a warning per other name.
#[test]
fn a_split_gguf_set_of_names_of_one_file_is_read_once() {
    const N: u32 = 8;
    let bed = Bed::new();
    let dir = bed.path("gguf-links");
    std::fs::create_dir_all(&dir).unwrap();
    tiny_llama().write(&dir.join("blob.gguf")).unwrap();
    for k in 1..=N {
        hmn_testbed::symlink("blob.gguf", dir.join(format!("m-{k:05}-of-{N:05}.gguf"))).unwrap();
    }
    let v = fits_json(&bed, &dir.join(format!("m-00003-of-{N:05}.gguf")));
    let input = &v["input"];
    assert_eq!(input["format"], "gguf", "{input}");
    let files = input["files"].as_array().unwrap();
    assert_eq!(files.len(), 1, "{input}");
    assert!(
        files[0]
            .as_str()
            .unwrap()
            .ends_with(&format!("m-00001-of-{N:05}.gguf")),
        "the first name is the one read: {input}"
    );
    assert_eq!(input["tensor_count"], 1, "counted once, not {N} times");
    let another: Vec<&str> = input["warnings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w.as_str().unwrap())
        .filter(|w| w.contains("is another name of"))
        .collect();
    assert_eq!(another.len(), N as usize - 1, "{input}");
    for k in 2..=N {
        let name = format!("m-{k:05}-of-{N:05}.gguf is another name of");
        assert!(
            another
                .iter()
                .any(|w| w.contains(&name)
                    && w.ends_with(&format!("m-00001-of-{N:05}.gguf: read once"))),
            "{name}: {another:#?}"
        );
    }
}

#[test]
fn a_hugging_face_cache_reads_every_distinct_blob_once() {
    let bed = Bed::new();
    // Distinct blobs: every shard read, through the index and by the shard names alike.
    for index in [true, false] {
        let snapshot = hf_cache(&bed.path(&format!("distinct-{index}")), 4, false, index).unwrap();
        for arg in [
            snapshot.clone(),
            snapshot.join("model-00003-of-00004.safetensors"),
        ] {
            let v = fits_json(&bed, &arg);
            assert_eq!(v["input"]["tensor_count"], 4, "{}: {v}", arg.display());
            assert_eq!(v["input"]["files"].as_array().unwrap().len(), 4);
            assert_eq!(
                v["input"]["warnings"].as_array().unwrap().len(),
                1,
                "no config.json"
            );
        }
    }
    // Shards 1 and 2 are one blob: read once, with a warning naming both.
    for index in [true, false] {
        let snapshot = hf_cache(&bed.path(&format!("same-{index}")), 4, true, index).unwrap();
        let v = fits_json(&bed, &snapshot);
        assert_eq!(v["input"]["tensor_count"], 3, "{v}");
        assert_eq!(v["input"]["files"].as_array().unwrap().len(), 3);
        let w = v["input"]["warnings"].to_string();
        assert!(
            w.contains("model-00002-of-00004.safetensors is another name of")
                && w.contains("model-00001-of-00004.safetensors: read once"),
            "{w}"
        );
    }
}

/// A `config.json` with `key` set to `value` (JSON text) beside a one-tensor safetensors file.
pub(crate) fn model_with_config(
    bed: &Bed,
    name: &str,
    key: &str,
    value: &str,
) -> std::path::PathBuf {
    let dir = bed.path(name);
    std::fs::create_dir_all(&dir).unwrap();
    hmn_testbed::hostile_models::safetensors_with_header(&dir.join("model.safetensors"), "t", 0)
        .unwrap();
    let mut cfg = serde_json::json!({
        "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 64, "hidden_size": 256, "max_position_embeddings": 4096
    });
    cfg[key] = serde_json::from_str(value).unwrap();
    std::fs::write(dir.join("config.json"), cfg.to_string()).unwrap();
    dir
}

#[test]
fn integer_fields_of_the_wrong_type_are_invalid_not_absent() {
    let bed = Bed::new();
    for (i, (key, value, why)) in [
        ("num_hidden_layers", "-1", "(-1: negative)"),
        ("num_hidden_layers", "2.5", "(2.5: not a whole number)"),
        (
            "num_hidden_layers",
            "\"2\"",
            "(\"2\": a string, not a number)",
        ),
        ("num_hidden_layers", "0", "(0: out of range, 1 to 4096)"),
        ("num_attention_heads", "-4", "(-4: negative)"),
        ("head_dim", "64.0", "(64.0: a float, not an integer)"),
        ("model_max_length", "1e30", "(1e+30: out of range)"),
        (
            "max_position_embeddings",
            "[4096]",
            "([4096]: not a number)",
        ),
        ("num_key_value_heads", "true", "(true: not a number)"),
    ]
    .into_iter()
    .enumerate()
    {
        let dir = model_with_config(&bed, &format!("m{i}"), key, value);
        let err = refused(&bed, &dir, "config.json");
        assert!(err.contains(&format!("invalid {key} {why}")), "{err}");
    }
    // null is absent: a default, or "no" for a required key.
    let dir = model_with_config(&bed, "null-head-dim", "max_position_embeddings", "null");
    fits_json(&bed, &dir);
    let dir = model_with_config(&bed, "null-layers", "num_hidden_layers", "null");
    assert!(refused(&bed, &dir, "config.json").contains("no num_hidden_layers"));

    // GGUF metadata: a count of another type, a negative one, a per-layer array of strings.
    let base = || {
        GgufWriter::new()
            .str("general.architecture", "llama")
            .u32("llama.attention.head_count", 4)
            .u32("llama.embedding_length", 256)
            .tensor("token_embd.weight", &[256, 32], ggml::F16)
    };
    each_gguf_refused(
        &bed,
        "bad",
        [
            (
                base().str("llama.block_count", "2"),
                "invalid llama.block_count (\"2\": expected a non-negative integer)",
            ),
            (
                base().raw("llama.block_count", 5, &(-1i32).to_le_bytes()),
                "invalid llama.block_count (-1: expected a non-negative integer)",
            ),
            (
                base().raw("llama.block_count", 6, &2.5f32.to_le_bytes()),
                "invalid llama.block_count (2.5: expected a non-negative integer)",
            ),
            (
                base().u32("llama.block_count", 2).raw(
                    "llama.attention.head_count_kv",
                    5,
                    &(-2i32).to_le_bytes(),
                ),
                "invalid llama.attention.head_count_kv (-2: expected",
            ),
            (
                base().u32("llama.block_count", 2).raw(
                    "llama.context_length",
                    12,
                    &4096.0f64.to_le_bytes(),
                ),
                "invalid llama.context_length (4096.0: expected a non-negative integer)",
            ),
        ],
    );
}

/// A 2-layer llama GGUF whose `llama.vocab_size` is `u64::MAX` (QA's `vocab_u64max.gguf`:
/// the estimator's `batch · vocab · 4` overflowed).
pub(crate) fn vocab_u64_max_gguf(path: &Path) {
    hostile_models::base()
        .raw("llama.vocab_size", 10, &u64::MAX.to_le_bytes())
        .tensor("token_embd.weight", &[256, 32], ggml::F16)
        .write(path)
        .unwrap();
}

/// Dimensions no real model has are refused where the header is read — one line naming the
/// file, the key and the value, exit 2, for every runtime — never a panic or a wrapped figure.
#[test]
fn implausible_model_dimensions_are_refused_by_name() {
    let bed = Bed::new();
    let path = bed.path("vocab.gguf");
    vocab_u64_max_gguf(&path);
    let want = "invalid llama.vocab_size (18446744073709551615: expected at most 16777216 tokens)";
    for runtime in ["generic", "llama.cpp", "vllm"] {
        let o = bed
            .cmd(&["fits", "--free", "8GiB", "--runtime", runtime])
            .arg(&path)
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{runtime}: {err}");
        assert_eq!(err.lines().count(), 1, "{runtime}: {err}");
        assert!(
            err.contains("vocab.gguf") && err.contains(want),
            "{runtime}: {err}"
        );
    }
    let base = tiny_llama;
    let max = u64::MAX.to_le_bytes();
    each_gguf_refused(
        &bed,
        "dim",
        [
            (
                base().raw("llama.context_length", 10, &max),
                "invalid llama.context_length (18446744073709551615: expected at most 4294967296 tokens)",
            ),
            (
                base().u32("llama.feed_forward_length", u32::MAX),
                "invalid llama.feed_forward_length (4294967295: expected at most 4194304 elements)",
            ),
            (
                base().raw("llama.attention.key_length", 10, &max),
                "invalid llama.attention.key_length (18446744073709551615: expected at most 65536 elements)",
            ),
            (
                base().u32s("llama.attention.head_count_kv", &[2, u32::MAX]),
                "invalid llama.attention.head_count_kv (4294967295: expected at most 65536 heads)",
            ),
        ],
    );
    // config.json: a width, and a YaRN factor deriving a context beyond 2³².
    let dir = model_with_config(&bed, "hidden", "hidden_size", "18446744073709551615");
    let err = refused(&bed, &dir, "config.json");
    assert!(
        err.contains(
            "invalid hidden_size (18446744073709551615: out of range, at most 1048576 elements)"
        ),
        "{err}"
    );
    let rope = r#"{"type":"yarn","factor":1e308,"original_max_position_embeddings":4096}"#;
    let dir = model_with_config(&bed, "rope", "rope_scaling", rope);
    let err = refused(&bed, &dir, "config.json");
    assert!(
        err.contains("invalid rope_scaling.factor (1e+308: out of range"),
        "{err}"
    );
}

/// In-range dimensions at the bounds with `--context` at its own bound: an answer (it does not
/// fit), not an overflow.
#[test]
fn a_model_at_the_bounds_with_the_longest_context_does_not_fit() {
    let bed = Bed::new();
    let path = bed.path("bounds.gguf");
    at_the_bounds(
        GgufWriter::new()
            .str("general.architecture", "llama")
            .u32("llama.block_count", 2),
    )
    .tensor("token_embd.weight", &[256, 32], ggml::F16)
    .write(&path)
    .unwrap();
    for args in [
        &["--runtime", "generic"][..],
        &["--runtime", "llama.cpp", "--context", "4294967296"],
        &[
            "--runtime",
            "llama.cpp",
            "--context",
            "4294967296",
            "--ubatch",
            "1048576",
            "--flash-attn",
            "off",
        ],
        &[
            "--runtime",
            "llama.cpp",
            "--parallel",
            "4096",
            "--kv-unified",
        ],
        &["--runtime", "vllm"],
    ] {
        let o = bed
            .cmd(&["fits", "--free", "80GiB", "--json"])
            .args(args)
            .arg(&path)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(1), "{args:?}: {}", stderr(&o));
        let v = json(&o);
        assert_eq!(v["fit"], "does_not_fit", "{args:?}: {v}");
    }
}

#[test]
fn the_trained_context_warning_is_a_top_level_warning_too() {
    let bed = Bed::new();
    let dir = model_with_config(&bed, "short", "max_position_embeddings", "2048");
    let o = bed.run(&[
        "fits",
        dir.to_str().unwrap(),
        "--free",
        "1TiB",
        "--context",
        "8192",
        "--json",
    ]);
    let v = json(&o);
    let strings = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|w| w.as_str().unwrap().to_string())
            .collect()
    };
    let estimate = strings(&v["estimate"]["warnings"]);
    let beyond: Vec<&String> = estimate
        .iter()
        .filter(|w| w.contains("> the trained context 2048"))
        .collect();
    assert_eq!(beyond.len(), 1, "{estimate:?}");
    let top = strings(&v["warnings"]);
    assert!(top.contains(beyond[0]), "top-level warnings: {top:?}");
    for w in strings(&v["input"]["warnings"]) {
        assert!(top.contains(&w), "{w} missing from {top:?}");
    }
}

/// Text that sets the terminal's title and writes the clipboard, as a file could hold it.
const HOSTILE: &str = "\x1b]2;pwned\x07\x1b]52;c;cHduZWQ=\x07\u{9b}31m\x7f";

#[test]
fn control_sequences_in_model_files_never_reach_the_terminal() {
    let bed = Bed::new();
    // A safetensors file of this header, with `data` bytes of data.
    let write = |name: &str, header: String, data: u64| {
        let path = bed.path(name);
        let mut f = std::fs::File::create(&path).unwrap();
        f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
        f.write_all(header.as_bytes()).unwrap();
        f.set_len(8 + header.len() as u64 + data).unwrap();
        path
    };
    // The hostile text as a JSON string, quotes included.
    let quoted = serde_json::to_string(HOSTILE).unwrap();
    // A safetensors dtype.
    let header = format!(r#"{{"w":{{"dtype":{quoted},"shape":[1],"data_offsets":[0,4]}}}}"#);
    refused(
        &bed,
        &write("dtype.safetensors", header, 4),
        "dtype.safetensors",
    );
    // Tensor names that the crate's validation quotes (their offsets overlap).
    let name = |suffix: &str| format!("{}{suffix}\"", &quoted[..quoted.len() - 1]);
    let header = format!(
        r#"{{{}:{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}},{}:{{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}}}"#,
        name("a"),
        name("b")
    );
    refused(
        &bed,
        &write("names.safetensors", header, 8),
        "names.safetensors",
    );
    // A shard named in an index that does not exist.
    let dir = bed.path("index");
    std::fs::create_dir(&dir).unwrap();
    let index = serde_json::json!({"weight_map": {"w": format!("{HOSTILE}.safetensors")}});
    std::fs::write(dir.join("model.safetensors.index.json"), index.to_string()).unwrap();
    refused(&bed, &dir, "index");
    // A shard file name, the set's other shard missing.
    let dir = bed.path("shards");
    std::fs::create_dir(&dir).unwrap();
    let shard = dir.join(format!("{HOSTILE}-00001-of-00002.safetensors"));
    hmn_testbed::hostile_models::safetensors_with_header(&shard, "t", 0).unwrap();
    refused(&bed, &shard, "is missing");
    // A GGUF architecture (every key is named after it) and a tensor name.
    let path = bed.path("arch.gguf");
    GgufWriter::new()
        .str("general.architecture", HOSTILE)
        .str(&format!("{HOSTILE}.block_count"), "2")
        .u32(&format!("{HOSTILE}.attention.head_count"), 4)
        .write(&path)
        .unwrap();
    assert!(refused(&bed, &path, "arch.gguf").contains("invalid \\x1b]2;pwned"));
    let path = bed.path("tensor.gguf");
    let mut b = GgufWriter::new().to_bytes();
    b[8..16].copy_from_slice(&1u64.to_le_bytes());
    b.truncate(24);
    b.extend((HOSTILE.len() as u64).to_le_bytes());
    b.extend(HOSTILE.as_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend(1u64.to_le_bytes());
    b.extend(999u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    std::fs::write(&path, b).unwrap();
    refused(&bed, &path, "tensor.gguf");
}

/// A two-layer llama GGUF header of the smallest real shape (4 heads, 256 wide, a 32-token
/// embedding), for tests that add the one key or tensor they are about.
pub(crate) fn tiny_llama() -> GgufWriter {
    GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", 2)
        .u32("llama.attention.head_count", 4)
        .u32("llama.embedding_length", 256)
        .tensor("token_embd.weight", &[256, 32], ggml::F16)
}
