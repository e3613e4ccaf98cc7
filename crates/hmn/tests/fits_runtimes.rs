//! `hmn fits` end to end for issue 12: the runtime settings, partial offload, the split over
//! devices, CPU-only runs, the runtimes' refusals, incomplete estimates and the stated
//! assumptions — models written here, judged against the fake NVML and the fixture host RAM.
//! The expected figures are the library's regression cases (`docs/estimation.md`); here they
//! are checked through the command line and its JSON.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use hmn_testbed::{FakeDevice, FakeNvml, GgufWriter, ggml};
use serde_json::Value;

use crate::util::{Bed, component, json, stderr, stdout};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
/// The fixture host's MemAvailable (`proc/meminfo`), in bytes.
const HOST_AVAILABLE: u64 = 24_444_784 * 1024;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hypomnesis/tests/fixtures/models")
        .join(name)
}

/// A directory with `config` as config.json and one BF16 tensor of `bytes` (sparse).
fn model_dir(dir: &Path, name: &str, config: Option<&str>, bytes: u64) -> PathBuf {
    let model = dir.join(name);
    std::fs::create_dir_all(&model).unwrap();
    let mut header = format!(
        r#"{{"weight":{{"dtype":"BF16","shape":[{},1024],"data_offsets":[0,{bytes}]}}}}"#,
        bytes / 2048
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::fs::File::create(model.join("model.safetensors")).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.set_len(8 + header.len() as u64 + bytes).unwrap();
    if let Some(c) = config {
        std::fs::copy(fixture(c), model.join("config.json")).unwrap();
    }
    model
}

/// A 32-block Llama-3-8B-shaped GGUF: blocks of 100 MiB, a 500 MiB token embedding and a 500
/// MiB output (sparse).
fn llama_gguf(dir: &Path) -> PathBuf {
    let mut w = GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", 32)
        .u32("llama.attention.head_count", 32)
        .u32("llama.attention.head_count_kv", 8)
        .u32("llama.embedding_length", 4096)
        .u32("llama.feed_forward_length", 14336)
        .u32("llama.context_length", 131_072)
        .u32("llama.vocab_size", 128_256)
        .tensor("token_embd.weight", &[4096, 64_000], ggml::F16)
        .tensor("output_norm.weight", &[4096], ggml::F32)
        .tensor("output.weight", &[4096, 64_000], ggml::F16);
    for i in 0..32 {
        w = w.tensor(
            &format!("blk.{i}.ffn_up.weight"),
            &[4096, 12_800],
            ggml::F16,
        );
    }
    let p = dir.join("llama.gguf");
    w.write_sparse(&p).unwrap();
    p
}

/// Deliver 3: no GPU → the model is judged as llama.cpp on the CPU against MemAvailable;
/// `--device cpu` asks for it with a GPU present; vLLM has no CPU rule (exit 2).
#[test]
fn cpu_only_against_host_ram() {
    let bed = Bed::new();
    let model = model_dir(
        bed.dir.path(),
        "llama",
        Some("llama-3.1-8b.json"),
        16_060_522_496,
    );
    let o = bed.run(&["fits", model.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["plan"], "cpu");
    assert_eq!(v["params"]["runtime"], "llama.cpp");
    assert_eq!(v["params"]["cpu_only"], true);
    assert_eq!(v["devices"][0]["kind"], "cpu");
    assert_eq!(v["devices"][0]["budget_source"], "host_available");
    assert_eq!(v["devices"][0]["verdict"]["budget_bytes"], HOST_AVAILABLE);
    assert_eq!(v["estimate"]["assumptions"]["target"], "cpu");
    assert!(v["notes"][0].as_str().unwrap().contains("no GPU found"));
    // f16 KV, 4096 cells.
    assert_eq!(component(&v, "kv_cache")["low_bytes"], 512 * MIB);
    let o = bed.run(&["fits", model.to_str().unwrap()]);
    assert!(
        stdout(&o).contains("CPU: 23.3 GiB available (MemAvailable) — fits"),
        "{}",
        stdout(&o)
    );
    assert!(
        stderr(&o).contains("CPU, as llama.cpp without a GPU"),
        "{}",
        stderr(&o)
    );
    // 128 K tokens of KV (16 GiB) + 15 GiB of weights do not fit 22.8 GiB.
    let o = bed.run(&["fits", model.to_str().unwrap(), "--context", "131072"]);
    assert_eq!(o.status.code(), Some(1));
    let o = bed.run(&["fits", model.to_str().unwrap(), "--runtime", "vllm"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("vLLM needs a GPU"), "{}", stderr(&o));
    // With a GPU present, --device cpu still judges the host.
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let model = model_dir(
        bed.dir.path(),
        "llama",
        Some("llama-3.1-8b.json"),
        16_060_522_496,
    );
    let o = bed.run(&["fits", model.to_str().unwrap(), "--device", "cpu", "--json"]);
    assert_eq!(json(&o)["plan"], "cpu");
    let o = bed.run(&["fits", "20GiB", "--device", "cpu"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(
        stderr(&o).contains("available (MemAvailable) >= 20 GiB requested"),
        "{}",
        stderr(&o)
    );
}

/// Deliver 2: `--gpu-layers N` (llama.cpp): the offloaded layers in VRAM, the rest, their KV
/// and token_embd in host RAM, both judged; the largest `--gpu-layers` that fits is reported.
#[test]
fn partial_offload_judges_vram_and_host_ram() {
    // 75 GiB in use: about 4.6 GiB free.
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0).memory_used(&[75 * GIB])));
    let path = llama_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let o = bed.run(&[
        "fits",
        p,
        "--runtime",
        "llama.cpp",
        "--context",
        "8192",
        "--json",
    ]);
    assert_eq!(
        o.status.code(),
        Some(1),
        "full offload does not fit 4.6 GiB"
    );
    let v = json(&o);
    let n = v["devices"][0]["verdict"]["max_gpu_layers"]
        .as_u64()
        .unwrap();
    assert!(0 < n && n < 33, "{n}");
    assert_eq!(v["estimate"]["assumptions"]["offloadable_layers"], 33);
    let at = |ngl: u64| {
        let o = bed.run(&[
            "fits",
            p,
            "--runtime",
            "llama.cpp",
            "--context",
            "8192",
            "--gpu-layers",
            &ngl.to_string(),
            "--json",
        ]);
        (o.status.code(), json(&o))
    };
    let (code, v) = at(n);
    assert_eq!(code, Some(0), "the largest --gpu-layers fits: {v}");
    assert_eq!(v["devices"][0]["verdict"]["host"]["fit"], "fits");
    // The host part: token_embd, the CPU blocks and their KV (32 MiB each at 8k, f16).
    let cpu_blocks = 33 - n;
    assert_eq!(
        component(&v, "host_weights")["low_bytes"],
        500 * MIB + cpu_blocks * 100 * MIB
    );
    assert_eq!(
        component(&v, "host_kv_cache")["low_bytes"],
        cpu_blocks * 32 * MIB
    );
    assert_eq!(component(&v, "host_kv_cache")["memory"], "host");
    assert_eq!(v["host"]["budget_bytes"], HOST_AVAILABLE);
    let (code, v) = at(n + 1);
    assert_eq!(code, Some(1));
    assert_eq!(v["devices"][0]["verdict"]["device_fit"], "tight");
    let o = bed.run(&["fits", p, "--runtime", "llama.cpp", "--context", "8192"]);
    assert!(
        stdout(&o).contains(&format!("largest --gpu-layers {n}")),
        "{}",
        stdout(&o)
    );
    assert!(stdout(&o).contains("total host RAM"), "{}", stdout(&o));
}

/// `hmn fits` of the Llama GGUF for llama.cpp over every device of `fake`, as JSON: the bed
/// (for more runs) and the output.
fn layer_split(fake: &FakeNvml) -> (Bed, std::process::Output) {
    let bed = Bed::with_nvml(fake);
    let path = llama_gguf(bed.dir.path());
    let o = bed.run(&[
        "fits",
        path.to_str().unwrap(),
        "--runtime",
        "llama.cpp",
        "--device",
        "all",
        "--json",
    ]);
    (bed, o)
}

/// Deliver 2: `--device all` uses the runtime's split — llama.cpp spreads the layers over every
/// GPU in proportion to free memory (the output layer on the last); vLLM tensor parallel puts
/// one rank on each of the first N GPUs.
#[test]
fn the_split_each_runtime_would_use() {
    let (bed, o) = layer_split(
        &FakeNvml::new()
            .device(FakeDevice::h100(0).memory_used(&[40 * GIB]))
            .device(FakeDevice::h100(1)),
    );
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["plan"], "split_layers");
    assert_eq!(v["devices_used"], serde_json::json!([0, 1]));
    let share = |i: usize| {
        v["devices"][i]["share"]["components"][0]["low_bytes"]
            .as_u64()
            .unwrap()
    };
    // GPU 1 has about twice GPU 0's free memory: about two thirds of the 3700 MiB offloaded.
    assert!(share(1) > share(0) * 3 / 2, "{} {}", share(0), share(1));
    assert_eq!(share(0) + share(1), 32 * 100 * MIB + 500 * MIB + 16 * 1024);
    assert!(stderr(&o).contains("split over devices 0, 1 (llama.cpp --split-mode layer)"));
    // vLLM TP 2 over the same two GPUs: each rank holds half the weights.
    let model = model_dir(
        bed.dir.path(),
        "llama",
        Some("llama-3.1-8b.json"),
        16_060_522_496,
    );
    let o = bed.run(&[
        "fits",
        model.to_str().unwrap(),
        "--runtime",
        "vllm",
        "--tensor-parallel-size",
        "2",
        "--context",
        "8192",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(v["plan"], "tensor_parallel");
    assert_eq!(v["devices_used"], serde_json::json!([0, 1]));
    assert_eq!(component(&v, "weights")["low_bytes"], 16_060_522_496u64 / 2);
    // GPU 0 has 40 GiB in use: less than 0.9 × total free, so vLLM refuses there.
    assert_eq!(v["devices"][0]["verdict"]["fit"], "does_not_fit");
    assert_eq!(v["fit"], "does_not_fit");
    assert_eq!(o.status.code(), Some(1));
    let o = bed.run(&[
        "fits",
        model.to_str().unwrap(),
        "--runtime",
        "vllm",
        "--tensor-parallel-size",
        "4",
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("needs 4 GPUs; 2 found"),
        "{}",
        stderr(&o)
    );
}

/// Two H100s, the second's memory calls failing with NVML_ERROR_UNKNOWN: its free memory is
/// unknown. (Both answering NOT_SUPPORTED would be a GB10-class part whose pool is host RAM,
/// issue 23.)
fn second_without_free_memory() -> FakeNvml {
    FakeNvml::new().device(FakeDevice::h100(0)).device(
        FakeDevice::h100(1)
            .error("nvmlDeviceGetMemoryInfo_v2", 999)
            .error("nvmlDeviceGetMemoryInfo", 999),
    )
}

/// Issue 21 (unknown is never 0): a device whose free memory cannot be read leaves llama.cpp's
/// layer split unknown — the other device is not judged as if it held every layer. (The
/// memory calls fail with NVML_ERROR_UNKNOWN: both answering NOT_SUPPORTED is a GB10-class
/// part whose pool is host RAM, issue 23.)
#[test]
fn an_unknown_free_figure_leaves_the_split_without_a_verdict() {
    let (_bed, o) = layer_split(&second_without_free_memory());
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["plan"], "split_layers");
    assert_eq!(v["devices"][1]["free_bytes"], Value::Null);
    for d in 0..2 {
        assert_eq!(
            v["devices"][d]["verdict"],
            Value::Null,
            "{}",
            v["devices"][d]
        );
        assert_eq!(v["devices"][d]["share"], Value::Null, "{}", v["devices"][d]);
    }
    assert_eq!(
        v["devices"][0]["error"],
        "its share of the layer split is unknown: device 1 does not report its free memory"
    );
    assert!(
        v["devices"][1]["error"]
            .as_str()
            .unwrap()
            .starts_with("device 1 does not report its free memory"),
        "{}",
        v["devices"][1]
    );
    assert_eq!(v["fit"], Value::Null);
    assert_eq!(v["error"], v["devices"][0]["error"]);
    assert!(
        stderr(&o).contains("its share of the layer split is unknown"),
        "{}",
        stderr(&o)
    );
}

/// Issue 21: with `--tensor-split` the proportions are given, so the shares need no free
/// figure: the device that reports its free memory is judged on its share, and only the one
/// whose budget is unknown has no verdict (exit 2: a split's answer is every part's).
#[test]
fn explicit_proportions_judge_the_devices_an_unknown_free_figure_does_not_concern() {
    let (bed, _) = layer_split(&second_without_free_memory());
    let path = bed.dir.path().join("llama.gguf");
    let o = bed.run(&[
        "fits",
        path.to_str().unwrap(),
        "--runtime",
        "llama.cpp",
        "--device",
        "all",
        "--tensor-split",
        "3,1",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["plan"], "split_layers");
    let d0 = &v["devices"][0];
    assert_eq!(d0["verdict"]["fit"], "fits", "{d0}");
    assert_eq!(d0["error"], Value::Null, "{d0}");
    let share = |d: &Value| d["share"]["components"][0]["low_bytes"].as_u64().unwrap();
    let d1 = &v["devices"][1];
    assert!(share(d0) > 2 * share(d1), "3 : 1: {d0} {d1}");
    assert_eq!(d1["verdict"], Value::Null, "{d1}");
    assert!(
        d1["error"]
            .as_str()
            .unwrap()
            .starts_with("device 1 does not report its free memory"),
        "{d1}"
    );
    assert_eq!(v["fit"], Value::Null);
    assert_eq!(v["error"], d1["error"]);
}

/// Issue bullet 5: vLLM refuses a context beyond the derived max_model_len (R19); llama.cpp
/// warns (n_ctx_train). Issue bullet 6: a KV type the runtime does not have is refused.
#[test]
fn refusals_and_warnings_beyond_the_trained_context() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let model = model_dir(
        bed.dir.path(),
        "qwen",
        Some("qwen2.5-7b-instruct.json"),
        15_231_232_000,
    );
    let m = model.to_str().unwrap();
    let o = bed.run(&[
        "fits",
        m,
        "--runtime",
        "vllm",
        "--max-model-len",
        "65536",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["fit"], "does_not_fit");
    let refusal = v["devices"][0]["verdict"]["refusal"].as_str().unwrap();
    assert!(
        refusal.contains("greater than the derived max_model_len 32768"),
        "{refusal}"
    );
    let o = bed.run(&["fits", m, "--runtime", "vllm", "--max-model-len", "65536"]);
    assert!(
        stderr(&o).starts_with("hmn: does not fit — vLLM refuses to start"),
        "{}",
        stderr(&o)
    );
    let o = bed.run(&[
        "fits",
        m,
        "--runtime",
        "llama.cpp",
        "--context",
        "65536",
        "--json",
    ]);
    let w = json(&o)["estimate"]["warnings"].to_string();
    assert!(w.contains("n_ctx_train 32768"), "{w}");
    for (args, needle) in [
        (
            &["--runtime", "vllm", "--kv-dtype", "q8_0"][..],
            "--kv-dtype q8_0 is not accepted by vllm",
        ),
        (
            &["--runtime", "llama.cpp", "--kv-dtype", "fp8"],
            "--kv-dtype fp8 is not accepted by llama.cpp",
        ),
        (
            &[
                "--runtime",
                "llama.cpp",
                "--kv-dtype",
                "q4_0",
                "--flash-attn",
                "off",
            ],
            "quantized V cache",
        ),
        (
            &["--runtime", "vllm", "--gpu-layers", "3"],
            "--gpu-layers is a llama.cpp setting",
        ),
        (
            &["--max-model-len", "8192"],
            "--max-model-len is a vLLM setting",
        ),
    ] {
        let mut all = vec!["fits", m];
        all.extend_from_slice(args);
        let o = bed.run(&all);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(stderr(&o).contains(needle), "{args:?}: {}", stderr(&o));
        assert_eq!(stderr(&o).lines().count(), 1);
    }
}

/// Issue bullet 9: no config.json is a weights-only estimate marked incomplete, never "fits".
#[test]
fn a_weights_only_estimate_is_incomplete() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let model = model_dir(bed.dir.path(), "bare", None, 2 * GIB);
    let o = bed.run(&["fits", model.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["fit"], "incomplete");
    assert_eq!(v["complete"], false);
    assert!(
        v["input"]["warnings"][0]
            .as_str()
            .unwrap()
            .contains("no config.json")
    );
    let o = bed.run(&["fits", model.to_str().unwrap()]);
    assert!(
        stderr(&o).starts_with("hmn: may not fit — ") && stderr(&o).contains("incomplete"),
        "{}",
        stderr(&o)
    );
    assert!(
        stdout(&o).contains("without kv_cache: incomplete"),
        "{}",
        stdout(&o)
    );
}

/// Deliver 4: the assumptions are stated in text and JSON; flash attention off brings the
/// score tensor back (R2, 560 MiB at 8k for Llama-3-8B); Gemma-3-4B's defaults give R10's
/// 334 MiB through the command line.
#[test]
fn assumptions_flash_attention_and_gemma3_end_to_end() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let path = llama_gguf(bed.dir.path());
    let p = path.to_str().unwrap();
    let o = bed.run(&[
        "fits",
        p,
        "--runtime",
        "llama.cpp",
        "--context",
        "8192",
        "--flash-attn",
        "off",
        "--json",
    ]);
    let v = json(&o);
    // The printed 560.00 MiB of older builds + the transposed-V index input the current graph
    // has (8 × 512 × 1024 B), + a few KiB of small inputs.
    let low = component(&v, "activations")["low_bytes"].as_u64().unwrap();
    assert!((564 * MIB..564 * MIB + (64 << 10)).contains(&low), "{low}");
    let a = &v["estimate"]["assumptions"];
    assert_eq!(a["llama_api"], "server");
    assert_eq!(
        (a["graph_tokens"].as_u64(), a["graph_outputs"].as_u64()),
        (Some(512), Some(1))
    );
    assert!(
        a["compute_band"]
            .as_str()
            .unwrap()
            .contains("measured on an H200: full offload within ±5 %")
    );
    assert_eq!(a["flash_attn"], false);
    assert_eq!(a["flash_attn_requested"], "off");
    assert_eq!(
        (
            a["ubatch"].as_u64(),
            a["n_batch"].as_u64(),
            a["slots"].as_u64()
        ),
        (Some(512), Some(2048), Some(1))
    );
    assert!(a["runtime_family"].as_str().unwrap().contains("PR #17046"));
    let o = bed.run(&["fits", p, "--runtime", "llama.cpp", "--context", "8192"]);
    let out = stdout(&o);
    for needle in [
        "assumes: runtime: llama.cpp",
        "assumes: flash attention auto → on",
        "assumes: -c 8192",
        "assumes: offload: 33 of 33 layers",
    ] {
        assert!(out.contains(needle), "{needle:?} in\n{out}");
    }
    let gemma = model_dir(
        bed.dir.path(),
        "gemma",
        Some("gemma-3-4b-it.json"),
        8_600_371_200,
    );
    let o = bed.run(&[
        "fits",
        gemma.to_str().unwrap(),
        "--runtime",
        "llama.cpp",
        "--context",
        "8192",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(component(&v, "kv_cache")["low_bytes"], 334 * MIB);
    assert_eq!(v["input"]["architecture"]["sliding_layers"], 29);
    let filled = v["estimate"]["assumptions"]["defaults_filled"].to_string();
    assert!(filled.contains("num_key_value_heads = 4"), "{filled}");
}
