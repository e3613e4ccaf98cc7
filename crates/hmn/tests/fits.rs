//! `hmn fits` end to end: model files written here (safetensors headers over sparse data, GGUF
//! through the testbed's writer) judged against the fake NVML's free memory, a DRM iGPU, and
//! hostile files.

use std::io::Write as _;
use std::path::{Path, PathBuf};

use hmn_testbed::{FakeDevice, FakeGpu, FakeNvml, GgufWriter, ggml};
use hypomnesis::estimate::model::open;
use hypomnesis::estimate::{FitParams, KvDtype, Runtime, estimate};

use crate::util::{Bed, component, json, stderr, stdout};

const GIB: u64 = 1 << 30;
/// Llama-3.1-8B in BF16: 8,030,261,248 parameters.
const LLAMA_8B_BYTES: u64 = 16_060_522_496;

impl Bed {
    /// The first device's free memory as `hmn --json` reports it.
    fn free(&self) -> u64 {
        json(&self.run(&["--json"]))["devices"][0]["memory"]["free_bytes"]
            .as_u64()
            .unwrap()
    }
}

/// A one-tensor safetensors file whose data is a hole (sparse): real headers, no disk use.
pub(crate) fn sparse_safetensors(path: &Path, dtype: &str, shape: &[u64], bytes: u64) {
    sparse_tensor(path, "weight", dtype, shape, bytes);
}

/// [`sparse_safetensors`] with the tensor named `name`.
fn sparse_tensor(path: &Path, name: &str, dtype: &str, shape: &[u64], bytes: u64) {
    let mut header = format!(
        r#"{{"{name}":{{"dtype":"{dtype}","shape":{shape:?},"data_offsets":[0,{bytes}]}}}}"#
    );
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut f = std::fs::File::create(path).unwrap();
    f.write_all(&(header.len() as u64).to_le_bytes()).unwrap();
    f.write_all(header.as_bytes()).unwrap();
    f.set_len(8 + header.len() as u64 + bytes).unwrap();
}

/// Llama-3.1-8B's weights (one BF16 tensor of the real size) and its real config.json.
pub(crate) fn llama_8b(dir: &Path) -> PathBuf {
    let model = dir.join("llama");
    std::fs::create_dir_all(&model).unwrap();
    sparse_safetensors(
        &model.join("model.safetensors"),
        "BF16",
        &[LLAMA_8B_BYTES / 2 / 4096, 4096],
        LLAMA_8B_BYTES,
    );
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../hypomnesis/tests/fixtures/models/llama-3.1-8b.json"),
        model.join("config.json"),
    )
    .unwrap();
    model
}

/// An H100 with `used` bytes in use.
fn busy_h100(used: u64) -> FakeNvml {
    FakeNvml::new().device(FakeDevice::h100(0).memory_used(&[used]))
}

#[test]
fn a_size_against_free_memory_with_upstream_exit_codes() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let free = bed.free();
    let o = bed.run(&["fits", "10GiB"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
    assert!(
        stderr(&o).starts_with("hmn: fits — ")
            && stderr(&o).contains("free >= 10 GiB requested")
            && stderr(&o).contains("device 0 [NVIDIA H100 80GB HBM3]"),
        "{}",
        stderr(&o)
    );
    // Exactly the free memory fits; one byte more does not.
    assert_eq!(bed.run(&["fits", &free.to_string()]).status.code(), Some(0));
    let o = bed.run(&["fits", &(free + 1).to_string()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("does not fit") && stderr(&o).contains("short by 1 B"));
    let o = bed.run(&["fits", "100GiB", "--json"]);
    assert_eq!(o.status.code(), Some(1));
    let v = json(&o);
    assert_eq!(v["input"]["kind"], "size");
    assert_eq!(v["fit"], "does_not_fit");
    assert_eq!(v["device"], 0);
    assert_eq!(
        v["devices"][0]["verdict"]["headroom_bytes"]
            .as_i64()
            .unwrap(),
        free as i64 - 100 * GIB as i64
    );
    assert!(v["params"].is_null());
}

#[test]
fn a_model_directory_component_by_component() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap(), "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["input"]["format"], "safetensors");
    assert_eq!(v["input"]["weights_bytes"], LLAMA_8B_BYTES);
    assert_eq!(v["input"]["architecture"]["layers"], 32);
    assert_eq!(v["input"]["architecture"]["kv_bytes_per_token"], 131_072);
    assert_eq!(component(&v, "weights")["low_bytes"], LLAMA_8B_BYTES);
    assert_eq!(component(&v, "weights")["high_bytes"], LLAMA_8B_BYTES);
    // 4096 tokens × 32 layers × 8 KV heads × (128 + 128) × 2 bytes.
    assert_eq!(component(&v, "kv_cache")["low_bytes"], 512 << 20);
    assert_eq!(v["params"]["context"], 4096);
    assert_eq!(v["params"]["kv_dtype"], "bf16");
    assert_eq!(v["fit"], "fits");
    // An 80 GB H100 holds the whole 128 K trained context.
    assert_eq!(v["devices"][0]["verdict"]["max_context"], 131_072);
    let low = v["estimate"]["low_bytes"].as_u64().unwrap();
    let high = v["estimate"]["high_bytes"].as_u64().unwrap();
    assert!(
        LLAMA_8B_BYTES + (512 << 20) < low && low < high,
        "{low} {high}"
    );

    let text = bed.run(&["fits", model.to_str().unwrap()]);
    let out = stdout(&text);
    for needle in [
        "model: model.safetensors (safetensors, 1 tensor, 32 layers, trained context 131072; architecture from config.json)",
        "run: generic, context 4096 × batch 1, KV cache bf16",
        "COMPONENT",
        "weights",
        "15 GiB",
        "kv_cache",
        "512 MiB",
        "GPU 0 [NVIDIA H100 80GB HBM3]",
        "largest context 131072",
    ] {
        assert!(out.contains(needle), "{needle:?} in\n{out}");
    }
}

#[test]
fn the_largest_context_is_the_boundary_of_the_band() {
    // 56 GiB in use: about 23 GiB left, not enough for 128 K tokens (16 GiB of KV) + 15 GiB.
    let bed = Bed::with_nvml(&busy_h100(56 * GIB));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap(), "--json"]);
    let v = json(&o);
    let verdict = &v["devices"][0]["verdict"];
    let budget = verdict["budget_bytes"].as_u64().unwrap();
    assert_eq!(budget, bed.free());
    let c = verdict["max_context"].as_u64().unwrap();
    assert!(4096 < c && c < 131_072, "{c}");
    let spec = open(&model).unwrap().spec;
    let high = |context| {
        estimate(
            &spec,
            FitParams::new(context, 1, KvDtype::BF16, Runtime::Generic),
        )
        .high_bytes
    };
    assert!(high(c) <= budget && high(c + 1) > budget);
    let b = verdict["max_batch"].as_u64().unwrap();
    let at_batch = |batch| {
        estimate(
            &spec,
            FitParams::new(4096, batch, KvDtype::BF16, Runtime::Generic),
        )
        .high_bytes
    };
    assert!(b > 1 && at_batch(b) <= budget && at_batch(b + 1) > budget);
    // Asking for more context than fits flips the verdict.
    let o = bed.run(&["fits", model.to_str().unwrap(), "--context", "131072"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}

#[test]
fn tight_and_does_not_fit_exit_1() {
    // ~17 GiB free: the low end (15 GiB + 0.5 GiB KV + overheads) fits, the high end does not.
    let bed = Bed::with_nvml(&busy_h100(62 * GIB));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("hmn: may not fit — "),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("tight"));
    let bed = Bed::with_nvml(&busy_h100(70 * GIB));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).starts_with("hmn: does not fit — "),
        "{}",
        stderr(&o)
    );
    assert!(stdout(&o).contains("at the high end no context fits"));
}

#[test]
fn a_gguf_for_llama_cpp() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let path = bed.path("tiny.gguf");
    let weights = GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", 2)
        .u32("llama.attention.head_count", 8)
        .u32("llama.attention.head_count_kv", 2)
        .u32("llama.embedding_length", 512)
        .u32("llama.attention.key_length", 128)
        .u32("llama.context_length", 8192)
        .u32("llama.vocab_size", 32_000)
        .tensor("token_embd.weight", &[512, 32_000], ggml::Q4_K)
        .tensor("output_norm.weight", &[512], ggml::F32)
        .write(&path)
        .unwrap();
    let o = bed.run(&[
        "fits",
        path.to_str().unwrap(),
        "--runtime",
        "llama.cpp",
        "--context",
        "8192",
        "--json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["input"]["format"], "gguf");
    assert_eq!(v["input"]["weights_bytes"], weights);
    // 512 × 32000 / 256 blocks of 144 bytes, and 512 × 4 bytes.
    assert_eq!(weights, 64_000 * 144 + 2048);
    assert_eq!(v["params"]["kv_dtype"], "f16");
    assert_eq!(v["params"]["runtime"], "llama.cpp");
    // 8192 tokens × 2 layers × 2 KV heads × 256 × 2 bytes.
    assert_eq!(
        component(&v, "kv_cache")["low_bytes"],
        8192 * 2 * 2 * 256 * 2
    );
    assert_eq!(component(&v, "margin")["high_bytes"], GIB);
}

#[test]
fn every_device_and_the_best_one() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[70 * GIB]))
        .device(FakeDevice::h100(1));
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["fits", "20GiB", "--device", "all", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["device"], 1);
    assert_eq!(v["fit"], "fits");
    assert_eq!(v["devices"][0]["verdict"]["fit"], "does_not_fit");
    assert_eq!(v["devices"][1]["verdict"]["fit"], "fits");
    let o = bed.run(&["fits", "20GiB", "--device", "all"]);
    let lines: Vec<String> = stdout(&o).lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert!(lines[0].starts_with("GPU 0") && lines[0].contains("does not fit"));
    assert!(lines[1].starts_with("GPU 1") && lines[1].contains("fits"));
    assert!(stderr(&o).contains("device 1 [NVIDIA H100 80GB HBM3]"));
    // Device 0 alone, the default, does not fit.
    assert_eq!(bed.run(&["fits", "20GiB"]).status.code(), Some(1));
}

#[test]
fn vllm_needs_its_whole_reservation_free() {
    let bed = Bed::with_nvml(&busy_h100(30 * GIB));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap(), "--runtime", "vllm"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stdout(&o).contains("refuse to start"), "{}", stdout(&o));
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&[
        "fits",
        model.to_str().unwrap(),
        "--runtime",
        "vllm",
        "--json",
    ]);
    let v = json(&o);
    assert_eq!(
        v["params"]["context"], 131_072,
        "vLLM's default max_model_len"
    );
    assert_eq!(v["devices"][0]["budget_source"], "vllm_utilization");
    assert_eq!(
        v["devices"][0]["verdict"]["budget_bytes"].as_u64().unwrap(),
        85_520_809_984 * 9 / 10
    );
}

#[test]
fn an_integrated_gpu_is_judged_against_host_ram() {
    let bed = Bed::new();
    bed.world.gpu(FakeGpu::i915_igpu(0, 128)).unwrap();
    let o = bed.run(&["fits", "1GiB", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "host_available");
    assert_eq!(
        v["devices"][0]["verdict"]["budget_bytes"],
        24_444_784u64 * 1024
    );
    let o = bed.run(&["fits", "30GiB"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stderr(&o).contains("available (shared system RAM)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn no_gpu_for_a_size_and_bad_devices_exit_2_with_the_estimate_still_shown() {
    let bed = Bed::new();
    let o = bed.run(&["fits", "1GiB"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: no GPU found"),
        "{}",
        stderr(&o)
    );
    // A model on a machine without a GPU is judged as llama.cpp on the CPU (issue 12); a
    // device asked for by index is still an error, with the estimate shown.
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap(), "--device", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stdout(&o).contains("kv_cache"), "{}", stdout(&o));
    let o = bed.run(&["fits", model.to_str().unwrap(), "--device", "0", "--json"]);
    assert_eq!(o.status.code(), Some(2));
    let v = json(&o);
    assert!(v["fit"].is_null() && v["error"].as_str().unwrap().contains("no GPU"));
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let o = bed.run(&["fits", "1GiB", "--device", "7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: fits failed to query device 7"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn hostile_and_wrong_inputs_are_one_line_errors() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let write = |name: &str, bytes: &[u8]| {
        let p = bed.path(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };
    let mut huge_count = b"GGUF".to_vec();
    huge_count.extend(3u32.to_le_bytes());
    huge_count.extend((1u64 << 40).to_le_bytes());
    huge_count.extend(0u64.to_le_bytes());
    let good = GgufWriter::new()
        .tensor("t", &[1024, 1024], ggml::F16)
        .to_bytes();
    let cases: Vec<(PathBuf, &str)> = vec![
        (write("magic.gguf", b"GGML\x03\0\0\0"), "wrong magic"),
        (write("count.gguf", &huge_count), "limit"),
        (write("cut.gguf", &good[..good.len() / 2]), "truncated"),
        (write("len.safetensors", &u64::MAX.to_le_bytes()), "exceeds"),
        (
            write(
                "json.safetensors",
                &[&8u64.to_le_bytes()[..], b"not json"].concat(),
            ),
            "invalid",
        ),
        (bed.path("missing.gguf"), "no such file"),
    ];
    for (path, needle) in cases {
        let o = bed.run(&["fits", path.to_str().unwrap()]);
        let err = stderr(&o);
        let name = path.file_name().unwrap().to_str().unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert!(stdout(&o).is_empty(), "{name}");
        assert_eq!(err.lines().count(), 1, "{name}: {err}");
        assert!(
            err.starts_with("hmn: ") && err.contains(name) && err.contains(needle),
            "{name}: {err}"
        );
    }
    let o = bed.run(&["fits", "14GiB", "--context", "8192"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("need a model file"));
}

/// A driver that fails (NVML cannot initialise, no `nvidia-smi` answering for it) may hide
/// GPUs: `fits` says so and exits 2, the estimate still shown — never "no GPU" and a verdict
/// for the CPU with exit 0 (QA), whichever way the device is chosen.
#[test]
fn a_failed_driver_is_no_reason_to_judge_on_the_cpu() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).init_error(999));
    let model = llama_8b(bed.dir.path());
    let model = model.to_str().unwrap();
    for extra in [
        &[][..],
        &["--device", "all"],
        &["--device", "0"],
        &["--device", "GPU-x"],
    ] {
        let o = bed.run(&[&["fits", model, "--json"][..], extra].concat());
        assert_eq!(o.status.code(), Some(2), "{extra:?}: {}", stderr(&o));
        let v = json(&o);
        let error = v["error"].as_str().unwrap_or_default();
        assert!(
            error.starts_with("fits failed to count devices: NVML"),
            "{extra:?}: {v}"
        );
        assert!(v["fit"].is_null(), "{extra:?}: {v}");
        assert_ne!(v["plan"], "cpu", "{extra:?}: {v}");
        assert!(
            v["estimate"]["components"].is_array(),
            "{extra:?}: estimate shown"
        );
    }
}

/// A directory without an index is one model only when its files are one shard set: files
/// that are not (a set beside an adapter, `model.safetensors` beside its `consolidated` copy,
/// two shards of three) are refused, never summed (QA: part of a set, or twice the weights).
#[test]
fn a_directory_that_is_not_one_model_is_refused_not_summed() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    let config = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../hypomnesis/tests/fixtures/models/llama-3.1-8b.json");
    let dir = |name: &str, files: &[&str]| {
        let d = bed.path(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::copy(&config, d.join("config.json")).unwrap();
        for (i, f) in files.iter().enumerate() {
            sparse_tensor(&d.join(f), &format!("t{i}"), "BF16", &[1024, 1024], 2 << 20);
        }
        d
    };
    let set = [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ];
    let whole = dir("whole", &set);
    let o = bed.run(&["fits", whole.to_str().unwrap(), "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["input"]["weights_bytes"].as_u64(), Some(4 << 20), "{v}");
    assert_eq!(v["input"]["tensor_count"], 2, "{v}");
    for (d, needle) in [
        (
            dir("adapter", &[set[0], set[1], "adapter_model.safetensors"]),
            "3 .safetensors files that are not one shard set (adapter_model.safetensors, ",
        ),
        (
            dir("copy", &["model.safetensors", "consolidated.safetensors"]),
            "2 .safetensors files that are not one shard set (consolidated.safetensors, model.safetensors)",
        ),
        (
            dir(
                "two-of-three",
                &[
                    "model-00001-of-00003.safetensors",
                    "model-00002-of-00003.safetensors",
                ],
            ),
            "model-00003-of-00003.safetensors: shard 3 of 3 is missing",
        ),
    ] {
        let o = bed.run(&["fits", d.to_str().unwrap()]);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{}: {err}", d.display());
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.contains(needle), "{}: {err}", d.display());
        assert!(stdout(&o).is_empty());
    }
}

#[test]
fn a_given_budget_plans_for_a_device_that_is_not_here() {
    let bed = Bed::new();
    let o = bed.run(&["fits", "20GiB", "--free", "24GiB"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        stderr(&o)
            .contains("24 GiB free >= 20 GiB requested (4 GiB headroom; budget given with --free)"),
        "{}",
        stderr(&o)
    );
    let model = llama_8b(bed.dir.path());
    let o = bed.run(&["fits", model.to_str().unwrap(), "--free", "24GiB", "--json"]);
    let v = json(&o);
    assert!(v["device"].is_null() && v["error"].is_null());
    assert_eq!(v["devices"][0]["budget_source"], "given");
    assert_eq!(v["devices"][0]["verdict"]["budget_bytes"], 24 * GIB);
    // 15 GiB of weights + 0.5 GiB KV: the high end (~21.4 GiB) fits in 24 GiB.
    assert_eq!(v["fit"], "fits");
    assert_eq!(o.status.code(), Some(0));
    let o = bed.run(&["fits", model.to_str().unwrap(), "--free", "12GiB"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(
        stdout(&o).contains("--free: 12 GiB free — does not fit"),
        "{}",
        stdout(&o)
    );
}
