//! `hmn fits` itself against the real llama.cpp's table: for rows of
//! `crates/hypomnesis/tests/fixtures/llama_cpp/grid.csv` (the CPU build, `bench/llama_cpp_grid.sh`),
//! the same synthetic GGUF — the dimensions and tensors of `models.json`, written here with the
//! test bed's writer, data a hole — read by `hmn fits FILE --device cpu --json` with the row's
//! settings as flags. The GGUF reader, the flags and the estimate together: the weights equal
//! llama.cpp's mapped range, the KV cache and the output buffer exact, the compute buffer within
//! ±5 %. (The library's test, `estimate_llama_grid.rs`, runs every row through `estimate`.)

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::util::{Bed, component, json, stderr};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hypomnesis/tests/fixtures/llama_cpp")
        .join(name)
}

/// The rows of `grid.csv`, by column name.
fn rows() -> Vec<BTreeMap<String, String>> {
    let text = std::fs::read_to_string(fixture("grid.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    lines
        .map(|l| {
            header
                .iter()
                .map(|h| (*h).to_string())
                .zip(l.split(',').map(String::from))
                .collect()
        })
        .collect()
}

/// The model `m` of `models.json` as `bench/llama_cpp_grid.py` writes it, data a hole.
fn write_gguf(m: &Value, path: &Path) -> u64 {
    hmn_testbed::llama_grid::gguf(m).write_sparse(path).unwrap()
}

/// The row's settings as `hmn fits` flags.
fn flags(r: &BTreeMap<String, String>) -> Vec<String> {
    let api = match r["family"].as_str() {
        "bench" => "common",
        f => f,
    };
    let mut a = vec![
        "--device",
        "cpu",
        "--runtime",
        "llama.cpp",
        "--json",
        "--context",
        &r["n_ctx_req"],
        "--parallel",
        &r["n_seq"],
        "--ubatch",
        &r["n_ubatch"],
        "--n-batch",
        &r["n_batch"],
        "--kv-dtype",
        &r["type_k"],
        "--llama-api",
        api,
        "--flash-attn",
        if r["flash_attn"] == "1" { "on" } else { "off" },
    ]
    .into_iter()
    .map(String::from)
    .collect::<Vec<_>>();
    if r["kv_unified"] == "1" {
        a.push("--kv-unified".into());
    }
    if r["swa_full"] == "1" && api == "server" {
        a.push("--swa-full".into());
    }
    a
}

#[test]
fn hmn_fits_reads_the_same_files_llama_cpp_read() {
    let models: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("models.json")).unwrap()).unwrap();
    let rows = rows();
    let bed = Bed::new();
    let mut checked = 0;
    // Every model's first rows with its weights in one mapped buffer (no extra buffer type),
    // one of each tool family and `--swa-full` where the model has rows of them.
    for (key, m) in models.as_object().unwrap() {
        let path = bed.path(&format!("{key}.gguf"));
        let weights = write_gguf(m, &path);
        let mut seen = std::collections::BTreeSet::new();
        for r in rows
            .iter()
            .filter(|r| &r["model"] == key && r["repack"] == "off")
        {
            let kind = (
                r["family"].clone(),
                r["swa_full"].clone(),
                r["flash_attn"].clone(),
            );
            if !seen.insert(kind) {
                continue;
            }
            let id = &r["id"];
            let mut args = vec!["fits".to_string(), path.to_str().unwrap().to_string()];
            args.extend(flags(r));
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let o = bed.run(&args);
            // The verdict (0 fits, 1 does not) is the host's RAM against the estimate; the
            // estimate is what is checked.
            assert!(
                matches!(o.status.code(), Some(0 | 1)),
                "{id}: {}",
                stderr(&o)
            );
            let v = json(&o);
            let n = |k: &str| r[k].parse::<u64>().unwrap();
            assert_eq!(v["input"]["weights_bytes"], weights, "{id}");
            assert_eq!(
                weights,
                n("weights_mapped_bytes"),
                "{id}: llama.cpp's mapped range"
            );
            assert_eq!(
                component(&v, "kv_cache")["low_bytes"],
                n("kv_bytes"),
                "{id}: KV"
            );
            let printed = n("n_vocab") * n("n_seq") * 4;
            assert_eq!(
                component(&v, "output_buffer")["low_bytes"],
                printed,
                "{id}: output"
            );
            let est = component(&v, "activations")["low_bytes"].as_u64().unwrap();
            let err = est as f64 / n("compute_bytes") as f64 - 1.0;
            assert!(
                err.abs() <= 0.05,
                "{id}: compute {est} vs {} ({err:+.3})",
                n("compute_bytes")
            );
            checked += 1;
        }
    }
    println!("{checked} rows of grid.csv through hmn fits");
    // 21 models, each with at least its server rows with and without flash attention.
    assert!(checked >= 60, "{checked} rows checked");
}
