//! `hmn fits --runtime llama.cpp` for issue 27 end to end: the tool families
//! (`--llama-api server|library|common`), `--n-batch`, `--tensor-split` over several GPUs, and
//! the one-line refusals of bad values (exit 2).

use std::path::{Path, PathBuf};

use hmn_testbed::{FakeDevice, FakeNvml, GgufWriter, ggml};
use serde_json::Value;

use crate::util::{Bed, component, json, stderr, stdout};

const GIB: u64 = 1 << 30;

/// A 12-block Gemma-3-12B-shaped GGUF (window 1024, every 6th layer global), sparse: 10 MiB
/// blocks.
fn gemma3_gguf(dir: &Path) -> PathBuf {
    let mut w = GgufWriter::new()
        .str("general.architecture", "gemma3")
        .u32("gemma3.block_count", 12)
        .u32("gemma3.attention.head_count", 16)
        .u32("gemma3.attention.head_count_kv", 8)
        .u32("gemma3.attention.key_length", 256)
        .u32("gemma3.attention.value_length", 256)
        .u32("gemma3.attention.sliding_window", 1024)
        .u32("gemma3.embedding_length", 3840)
        .u32("gemma3.feed_forward_length", 15360)
        .u32("gemma3.context_length", 131_072)
        .u32("gemma3.vocab_size", 262_208)
        .tensor("token_embd.weight", &[3840, 1024], ggml::F16)
        .tensor("output_norm.weight", &[3840], ggml::F32);
    for i in 0..12 {
        w = w.tensor(&format!("blk.{i}.ffn_up.weight"), &[1024, 5120], ggml::F16);
    }
    let p = dir.join("gemma3.gguf");
    w.write_sparse(&p).unwrap();
    p
}

fn low(v: &Value, name: &str) -> u64 {
    component(v, name)["low_bytes"].as_u64().unwrap()
}

/// Each tool family gets its own estimate: `library` turns swa_full on (the sliding layers'
/// cache is full-size), reserves an output per token and leaves flash attention off unless
/// asked; `common` reserves the same outputs with swa_full off.
#[test]
fn each_llama_api_gets_its_own_estimate() {
    let bed = Bed::new();
    let path = gemma3_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec!["fits", p, "--device", "cpu", "--context", "32768", "--json"];
        args.extend_from_slice(extra);
        let o = bed.run(&args);
        assert!(o.status.code().is_some_and(|c| c < 2), "{}", stderr(&o));
        json(&o)
    };
    let server = run(&[]);
    let library = run(&["--llama-api", "library"]);
    let common = run(&["--llama-api", "common"]);
    let a = |v: &Value, k: &str| v["estimate"]["assumptions"][k].clone();
    assert_eq!(a(&server, "llama_api"), "server");
    assert_eq!(a(&library, "llama_api"), "library");
    assert_eq!(
        (a(&server, "swa_full"), a(&library, "swa_full")),
        (false.into(), true.into())
    );
    assert_eq!(a(&common, "swa_full"), false);
    assert_eq!(a(&server, "graph_outputs"), 1);
    assert_eq!(a(&library, "graph_outputs"), 512);
    assert_eq!(a(&common, "graph_outputs"), 512);
    // llama-cpp-python passes flash_attn=False unless asked; n_batch 512.
    assert_eq!(a(&library, "flash_attn"), false);
    assert_eq!(a(&library, "n_batch"), 512);
    assert_eq!(
        a(&server, "flash_attn"),
        true,
        "auto → on for the CPU backend"
    );
    // 2 full + 10 sliding layers × 8 heads × 256 × 2 (K, V) × 2 B: full 32768 cells, sliding
    // pad256(1024 + 512) = 1536; swa_full makes them 32768.
    let per_cell = 8 * 256 * 2 * 2;
    assert_eq!(low(&server, "kv_cache"), (2 * 32768 + 10 * 1536) * per_cell);
    assert_eq!(low(&library, "kv_cache"), 12 * 32768 * per_cell);
    assert_eq!(low(&common, "kv_cache"), low(&server, "kv_cache"));
    // Outputs for every token: the logits of 512 rows dominate.
    assert!(low(&common, "activations") > low(&server, "activations") + 512 * 262_208 * 4 / 2);
    // The output buffer grows to n_batch rows for the per-token families.
    let out = |v: &Value| {
        let c = component(v, "output_buffer");
        (
            c["low_bytes"].as_u64().unwrap(),
            c["high_bytes"].as_u64().unwrap(),
        )
    };
    assert_eq!(out(&server), (262_208 * 4, 262_208 * 4));
    assert_eq!(out(&library), (262_208 * 4, 262_208 * 4 * 512));
    // --n-batch and an explicit flash attention override the family's defaults.
    let c_api = run(&[
        "--llama-api",
        "library",
        "--n-batch",
        "2048",
        "--flash-attn",
        "on",
    ]);
    assert_eq!(a(&c_api, "n_batch"), 2048);
    assert_eq!(a(&c_api, "flash_attn"), true);
    assert_eq!(c_api["params"]["llama_api"], "library");
    assert_eq!(c_api["params"]["n_batch"], 2048);
    // Text: the family is stated.
    let o = bed.run(&["fits", p, "--device", "cpu", "--llama-api", "library"]);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(
        out.contains(
            "assumes: llama.cpp API library: the C API's defaults as llama-cpp-python passes them"
        ),
        "{out}"
    );
}

/// `--tensor-split` puts the layers where llama.cpp would, whatever the free memory says.
#[test]
fn tensor_split_places_the_layers() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[40 * GIB]))
        .device(FakeDevice::h100(1));
    let bed = Bed::with_nvml(&fake);
    let path = gemma3_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let share = |extra: &[&str]| {
        let mut args = vec![
            "fits",
            p,
            "--runtime",
            "llama.cpp",
            "--device",
            "all",
            "--json",
        ];
        args.extend_from_slice(extra);
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        let v = json(&o);
        assert_eq!(v["plan"], "split_layers");
        (0..2)
            .map(|i| {
                let c = &v["devices"][i]["share"]["components"][0];
                c["low_bytes"].as_u64().unwrap()
            })
            .collect::<Vec<u64>>()
    };
    let block = 1024 * 5120 * 2;
    // By free memory (about 1 : 2), then 3 : 1 and 1 : 0. 13 units: 12 blocks + the output
    // layer (the tied embedding's duplicate and the norm).
    let by_free = share(&[]);
    assert!(by_free[1] > by_free[0]);
    // 3,1: units k with k/13 < 0.75 → 0..=9 on GPU 0.
    let output = 3840 * 1024 * 2 + 3840 * 4;
    assert_eq!(
        share(&["--tensor-split", "3,1"]),
        vec![10 * block, 2 * block + output]
    );
    assert_eq!(
        share(&["--tensor-split", "1/0"]),
        vec![12 * block + output, 0]
    );
    let o = bed.run(&[
        "fits",
        p,
        "--runtime",
        "llama.cpp",
        "--device",
        "all",
        "--tensor-split",
        "3,1",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(v["params"]["tensor_split"], serde_json::json!([3.0, 1.0]));
    assert!(
        v["devices"][0]["share"]["components"][0]["note"]
            .as_str()
            .unwrap()
            .contains("by --tensor-split")
    );
}

/// Bad values: one line naming the input, exit 2.
#[test]
fn bad_llama_values_are_refused() {
    let bed = Bed::new();
    let path = gemma3_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let gpu = Bed::with_nvml(&FakeNvml::h100s(1));
    let gp = gemma3_gguf(gpu.dir.path());
    let o = gpu.run(&[
        "fits",
        gp.to_str().unwrap(),
        "--runtime",
        "llama.cpp",
        "--tensor-split",
        "1,1",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("use it with --device all"),
        "{}",
        stderr(&o)
    );
    let o = gpu.run(&[
        "fits",
        gp.to_str().unwrap(),
        "--runtime",
        "generic",
        "--llama-api",
        "server",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("--llama-api is a llama.cpp setting"),
        "{}",
        stderr(&o)
    );
    for (args, needle) in [
        (
            vec!["--tensor-split", "3,-1"],
            "invalid tensor split \"3,-1\"",
        ),
        (
            vec!["--tensor-split", "abc"],
            "invalid tensor split \"abc\"",
        ),
        (vec!["--tensor-split", ""], "invalid tensor split"),
        (
            vec!["--llama-api", "ollama"],
            "unknown llama.cpp API \"ollama\"",
        ),
        (vec!["--n-batch", "0"], "--n-batch"),
        // No GPU in this bed: CPU only, where a split has no meaning.
        (
            vec!["--tensor-split", "1,1"],
            "--tensor-split spreads layers over GPUs",
        ),
        (
            vec!["--tensor-split", "1,1", "--device", "cpu"],
            "--device cpu",
        ),
        (
            vec![
                "--llama-api",
                "library",
                "--kv-dtype",
                "q8_0",
                "--device",
                "cpu",
            ],
            "flash_attn=True",
        ),
    ] {
        let mut all = vec!["fits", p];
        all.extend_from_slice(&args);
        let o = bed.run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let e = stderr(&o);
        assert!(e.contains(needle), "{args:?}: {e}");
        assert_eq!(e.trim_end().lines().count(), 1, "{args:?}: {e}");
    }
}

/// `--free` with a size per GPU plans for GPUs that are not here: the split llama.cpp would
/// make over them, on a machine without a GPU.
#[test]
fn free_per_gpu_plans_a_split_for_gpus_that_are_not_here() {
    let bed = Bed::new();
    let path = gemma3_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let plan = |extra: &[&str]| {
        let mut args = vec!["fits", p, "--runtime", "llama.cpp", "--json"];
        args.extend_from_slice(extra);
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
        json(&o)
    };
    let v = plan(&["--free", "24GiB,24GiB", "--tensor-split", "3,1"]);
    assert_eq!(v["plan"], "split_layers", "{v}");
    let block = 1024 * 5120 * 2;
    let output = 3840 * 1024 * 2 + 3840 * 4;
    for (i, want) in [(0, 10 * block), (1, 2 * block + output)] {
        let d = &v["devices"][i];
        assert_eq!(d["kind"], "given", "{d}");
        assert_eq!(d["index"], i, "{d}");
        assert_eq!(d["free_bytes"], 24 * GIB, "{d}");
        assert_eq!(d["budget_source"], "given", "{d}");
        assert_eq!(d["share"]["components"][0]["low_bytes"], want, "{d}");
    }
    // By the given figures: the larger takes more layers.
    let v = plan(&["--free", "8GiB,24GiB"]);
    let low = |i: usize| {
        v["devices"][i]["share"]["components"][0]["low_bytes"]
            .as_u64()
            .unwrap()
    };
    assert!(low(1) > low(0), "{v}");
    let o = bed.run(&["fits", p, "--runtime", "llama.cpp", "--free", "8GiB,24GiB"]);
    assert!(
        stdout(&o).contains("--free GPU 1: 24 GiB free"),
        "{}",
        stdout(&o)
    );
    // One size is one given budget, as before.
    assert_eq!(plan(&["--free", "24GiB"])["plan"], "given");
    // Bad input: one line naming it, exit 2.
    for args in [
        vec!["fits", p, "--free", "24GiB,abc"],
        vec!["fits", p, "--free", "24GiB,24GiB", "--device", "all"],
    ] {
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).trim_end().lines().count(), 1, "{}", stderr(&o));
    }
}
