//! llama.cpp regression cases (issue 12): each against a figure llama.cpp printed in a published
//! log, or computed from its source where no log exists (marked "computed"). The rows R1–R15,
//! R25 are the research notes' regression table (`docs/estimation.md`, "Regression cases").

use std::path::PathBuf;

use hmn_testbed::{GgufWriter, ggml};
use hypomnesis::estimate::config::from_config_json;
use hypomnesis::estimate::llama_cpp::{Cells, compute};
use hypomnesis::estimate::llama_graph::Phase;
use hypomnesis::estimate::model::open;
use hypomnesis::estimate::{
    Architecture, Budget, FitParams, FlashAttn, KvDtype, Layer, LayerKind, LlamaApi, Memory,
    ModelSpec, Runtime, estimate, judge_with_host, kv_cache_bytes_for,
};

const MIB: u64 = 1 << 20;

fn config(name: &str) -> Architecture {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/models")
        .join(name);
    from_config_json(&std::fs::read(&path).unwrap()).unwrap_or_else(|e| panic!("{name}: {e}"))
}

fn llama(context: u64) -> FitParams {
    FitParams::new(context, 1, KvDtype::F16, Runtime::LlamaCpp)
}

fn kv_mib(a: &Architecture, p: FitParams) -> f64 {
    kv_cache_bytes_for(a, &p) as f64 / MIB as f64
}

/// Mistral-7B-Instruct-v0.2: 32 layers, 32 heads, 8 KV heads × 128, n_embd 4096, n_ff 14336,
/// vocabulary 32000 (its published config).
fn mistral_7b() -> Architecture {
    let mut a = Architecture::new(vec![Layer::new(LayerKind::Full, 8, 128, 128); 32]);
    a.hidden_size = Some(4096);
    a.attention_heads = Some(32);
    a.intermediate_size = Some(14336);
    a.vocab_size = Some(32000);
    a
}

/// R1: "llama_kv_cache: … KV self size = 1024.00 MiB" for Llama-3.1-8B at n_ctx 8192, f16
/// (ollama / llama.cpp logs 2024–25); 4096.00 MiB at 32768 for Mistral-7B, the same shape
/// (fedora-copr/logdetective PR #106).
#[test]
fn r1_gqa_kv_cache_as_printed() {
    let l = config("llama-3.1-8b.json");
    assert_eq!(kv_mib(&l, llama(8192)), 1024.0);
    assert_eq!(kv_mib(&mistral_7b(), llama(32768)), 4096.0);
}

/// R2–R5: the compute buffers older llama.cpp builds printed without flash attention
/// (n_ubatch 512), against the model of `0c1e57098` (`tests/estimate_llama_grid.rs` checks it
/// against 612 measured configurations): Llama-3.1-8B at 8192 cells "CUDA0 compute buffer size
/// = 560.00 MiB", "CUDA_Host … 24.01 MiB" (three ollama logs); Mistral-7B-v0.2 at 32768
/// 2144.00 / 72.01 MiB and at 2048 164.00 MiB (logdetective PR #106); Llama-3-8B with n_ctx ≤
/// 2048 258.50 MiB (several CPU and CUDA logs, outputs reserved for the whole ubatch).
///
/// Those builds had no `inp_embd` input and no KV index inputs: the current graph holds the
/// transposed-V index `8 · T · n_embd_v_gqa` (4 MiB here) on the device and, in `CUDA_Host`,
/// that and `inp_embd` (8 MiB) more — the model predicts the old figures plus exactly those.
#[test]
fn r2_to_r5_compute_buffers_as_printed() {
    let mut l = config("llama-3.1-8b.json");
    l.intermediate_size = Some(14336);
    let off = |ctx| llama(ctx).flash_attn(FlashAttn::Off);
    let v_idxs = 8 * 512 * 1024;
    let inp_embd = 4 * 4096 * 512;
    // The small inputs (positions, K indices, output ids): a few KiB.
    let close = |got: u64, want: u64| got >= want && got - want < 64 << 10;
    let c = compute(&l, &off(8192), false).unwrap();
    assert!(close(c.device, 560 * MIB + v_idxs), "{}", c.device);
    assert!(
        close(c.host, 24 * MIB + v_idxs + inp_embd),
        "printed 24.01: {}",
        c.host
    );
    assert_eq!(c.peak, Phase::Attention);
    let m = mistral_7b();
    let c = compute(&m, &off(32768), false).unwrap();
    assert!(close(c.device, 2144 * MIB + v_idxs), "{}", c.device);
    assert!(
        close(c.host, 72 * MIB + v_idxs + inp_embd),
        "printed 72.01: {}",
        c.host
    );
    let c = compute(&m, &off(2048), false).unwrap();
    assert!(close(c.device, 164 * MIB + v_idxs), "{}", c.device);
    // ≤ 2048 cells with every token an output (the C API, `common`), the output rows
    // dominate: 128256 × 512 × 4 + 4096 × 512 × 4 = 258.50 MiB on the device.
    let all_out = |p: FitParams| p.llama_api(LlamaApi::Common);
    let c = compute(&l, &all_out(off(2048)), false).unwrap();
    assert_eq!(
        (c.device, c.peak, c.outputs),
        (517 * MIB / 2, Phase::Output, 512)
    );
    let on = compute(&l, &all_out(llama(2048)), true).unwrap();
    assert_eq!(on.device, 517 * MIB / 2);
    // llama-server (one output per slot) reserves far less with flash attention on.
    let server = compute(&l, &llama(2048), true).unwrap();
    assert!(
        server.device < 120 * MIB && server.peak == Phase::Ffn,
        "{server:?}"
    );
    // The estimate's GPU band: the device buffer, +5 % and one hidden block at the high end.
    let spec = ModelSpec::new(16_060_522_496, Some(l));
    let act = |p: FitParams| {
        let e = estimate(&spec, p);
        let a = e
            .components
            .iter()
            .find(|c| c.name == "activations")
            .unwrap();
        (a.low_bytes.unwrap(), a.high_bytes.unwrap())
    };
    let (lo, hi) = act(off(8192));
    assert!(close(lo, 560 * MIB + v_idxs));
    assert_eq!(hi, lo + lo.div_ceil(20) + inp_embd);
    assert!(
        act(off(32768)).0 > act(llama(32768)).0 * 4,
        "the scores at 32k"
    );
}

/// R5 (CPU): Llama-3-8B CPU-only at n_ctx 512: "CPU KV buffer size = 64.00 MiB", "CPU compute
/// buffer size = 258.50 MiB" (an older build, `n_ubatch` outputs); the current graph adds
/// `inp_embd` (8 MiB) and the index inputs.
#[test]
fn r5_cpu_only_buffers_as_printed() {
    let mut l = config("llama-3.1-8b.json");
    l.intermediate_size = Some(14336);
    let spec = ModelSpec::new(4_920_739_232, Some(l));
    let e = estimate(&spec, llama(512).cpu_only(true).llama_api(LlamaApi::Common));
    let get = |n: &str| e.components.iter().find(|c| c.name == n).unwrap();
    assert_eq!(get("kv_cache").low_bytes, Some(64 * MIB));
    let cpu = get("activations").low_bytes.unwrap();
    assert!(
        (517 * MIB / 2 + 8 * MIB..517 * MIB / 2 + 9 * MIB).contains(&cpu),
        "{cpu}"
    );
    assert!(
        e.components.iter().all(|c| c.memory == Memory::Device),
        "one memory: the host"
    );
    assert_eq!(e.host_high_bytes, None);
    assert_eq!(e.assumptions.unwrap().target, "cpu");
}

/// R6, R7 (computed from `llama_kv_cache_iswa`): Gemma-2-9B's published config (no layer
/// types, `sliding_window` 4096): 21 sliding + 21 global layers; at 8k the sliding layers hold
/// pad256(4096 + 512) = 4608 cells: 2100 MiB, where counting every layer global gives 2688
/// (+28 %); at 32k 6132 against 10752 (+75 %) — the figures.
#[test]
fn r6_r7_gemma2_sliding_layers() {
    let g = config("gemma-2-9b-it.json");
    let sliding = g
        .layers
        .iter()
        .filter(|l| l.kind != LayerKind::Full)
        .count();
    assert_eq!(sliding, 21);
    assert_eq!(g.layers[0].kind, LayerKind::Sliding { window: 4096 });
    assert_eq!(g.layers[1].kind, LayerKind::Full);
    assert_eq!(Cells::new(&llama(8192)).total(g.layers[0].kind), 4608);
    assert_eq!(kv_mib(&g, llama(8192)), 2100.0);
    assert_eq!(kv_mib(&g, llama(32768)), 6132.0);
    let all_global = |ctx: u64| 42.0 * ctx as f64 * 8192.0 / MIB as f64;
    assert_eq!(all_global(8192), 2688.0);
    assert_eq!(all_global(32768), 10752.0);
}

/// R8–R11 (computed; the 4608-cell rule is printed for Gemma-4-12B, R14): Gemma-3 from the
/// published configs, f16.
#[test]
fn r8_to_r11_gemma3_sliding_layers() {
    let g27 = config("gemma-3-27b-it.json");
    let full = g27
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::Full)
        .count();
    assert_eq!((full, g27.layers.len() - full), (10, 52));
    // R8: 640 + 52 × 1536 cells × 8 KiB = 624 → 1264 MiB (the old n_batch rule: 1888).
    assert_eq!(kv_mib(&g27, llama(8192)), 1264.0);
    // R9: llama-server's auto slots (4, unified): 52 × 4608 cells → 640 + 1872 = 2512 MiB.
    assert_eq!(kv_mib(&g27, llama(8192).slots(4).kv_unified(true)), 2512.0);
    // R10: Gemma-3-4B with transformers' defaults (4 KV heads × 256): 160 + 174 = 334 MiB.
    let g4 = config("gemma-3-4b-it.json");
    assert_eq!(g4.layers[0].kv_heads, 4);
    assert_eq!(kv_mib(&g4, llama(8192)), 334.0);
    // R11: Gemma-3-12B: 8 global + 40 sliding, 8 KV heads × 256: 512 + 480 = 992 MiB.
    let g12 = config("gemma-3-12b-it.json");
    assert_eq!(kv_mib(&g12, llama(8192)), 992.0);
}

/// A Gemma-4-12B GGUF header as llama.cpp b10665 reads it: 48 layers, 8 global (1 KV head ×
/// 512) and 40 sliding (8 KV heads × 256, `key_length_swa`), window 1024, the per-layer
/// `sliding_window_pattern` bool array.
fn gemma4_12b(dir: &std::path::Path) -> PathBuf {
    let pattern: Vec<bool> = (0..48).map(|i| (i + 1) % 6 != 0).collect();
    let kv: Vec<u32> = pattern.iter().map(|s| if *s { 8 } else { 1 }).collect();
    let p = dir.join("gemma4.gguf");
    GgufWriter::new()
        .str("general.architecture", "gemma4")
        .u32("gemma4.block_count", 48)
        .u32("gemma4.attention.head_count", 16)
        .u32s("gemma4.attention.head_count_kv", &kv)
        .u32("gemma4.embedding_length", 3840)
        .u32("gemma4.attention.key_length", 512)
        .u32("gemma4.attention.value_length", 512)
        .u32("gemma4.attention.key_length_swa", 256)
        .u32("gemma4.attention.value_length_swa", 256)
        .u32("gemma4.attention.sliding_window", 1024)
        .bools("gemma4.attention.sliding_window_pattern", &pattern)
        .u32("gemma4.context_length", 131_072)
        .tensor("token_embd.weight", &[3840, 32], ggml::Q8_0)
        .write(&p)
        .unwrap();
    p
}

/// R12–R14: Gemma-4-12B as llama-server b10665 printed it ("llama_kv_cache: size = … MiB"):
/// `-c 16384` q8_0 136.00 + 255.00 MiB; `-c 8192 -np 2` f16 (split) 128.00 + 960.00 MiB;
/// `-c 8192` q8_0 with 4 unified slots 68.00 + 765.00 MiB (SWA 4608 cells).
#[test]
fn r12_to_r14_gemma4_as_printed() {
    let dir = tempfile::tempdir().unwrap();
    let a = open(&gemma4_12b(dir.path())).unwrap().spec.arch.unwrap();
    let global: Vec<&Layer> = a
        .layers
        .iter()
        .filter(|l| l.kind == LayerKind::Full)
        .collect();
    assert_eq!(global.len(), 8);
    assert_eq!((global[0].kv_heads, global[0].head_dim_k), (1, 512));
    assert_eq!((a.layers[0].kv_heads, a.layers[0].head_dim_k), (8, 256));
    let split = |a: &Architecture, p: FitParams| {
        let cells = Cells::new(&p);
        let sum = |full: bool| {
            a.layers
                .iter()
                .filter(|l| (l.kind == LayerKind::Full) == full)
                .map(|l| cells.layer_bytes(l, p.kv_dtype))
                .sum::<u64>() as f64
                / MIB as f64
        };
        (sum(true), sum(false))
    };
    let q8 = |ctx| llama(ctx).kv_dtype(KvDtype::Q8_0);
    assert_eq!(split(&a, q8(16384)), (136.0, 255.0));
    assert_eq!(split(&a, llama(8192).slots(2)), (128.0, 960.0));
    assert_eq!(split(&a, q8(8192).slots(4).kv_unified(true)), (68.0, 765.0));
    assert_eq!(
        Cells::new(&q8(8192).slots(4).kv_unified(true)).total(a.layers[0].kind),
        4608
    );
}

/// R15: unsloth PR #7530 checked 39 configurations byte-exact: `-c 1024 -np 3` allocates 1536
/// cells (3 × pad256(341)), `-np 4` 1024.
#[test]
fn r15_split_streams_round_up() {
    let a = Architecture::new(vec![Layer::new(LayerKind::Full, 1, 32, 32)]);
    let cells = |np| kv_cache_bytes_for(&a, &llama(1024).slots(np)) / 128;
    assert_eq!(cells(3), 1536);
    assert_eq!(cells(4), 1024);
}

/// A 32-block model in GGUF whose tensors name their blocks: 10 MiB per block, a 40 MiB token
/// embedding and a 40 MiB output (written sparse).
fn llama_32_blocks(dir: &std::path::Path) -> PathBuf {
    let mut w = GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", 32)
        .u32("llama.attention.head_count", 32)
        .u32("llama.attention.head_count_kv", 8)
        .u32("llama.embedding_length", 4096)
        .u32("llama.feed_forward_length", 14336)
        .u32("llama.context_length", 131_072)
        .u32("llama.vocab_size", 128_256)
        .tensor("token_embd.weight", &[4096, 5120], ggml::F16)
        .tensor("output_norm.weight", &[4096], ggml::F32)
        .tensor("output.weight", &[4096, 5120], ggml::F16);
    for i in 0..32 {
        w = w.tensor(&format!("blk.{i}.ffn_up.weight"), &[4096, 1280], ggml::F16);
    }
    let p = dir.join("llama32.gguf");
    w.write_sparse(&p).unwrap();
    p
}

/// R25 (`llama_model::load_tensors` after PR #18148): `-ngl 1` puts the output layer alone on
/// the GPU, `-ngl 32` leaves block 0 on the CPU, `-ngl 33` is full offload; the token embedding
/// stays in host memory; both parts are judged; the largest `-ngl` that fits is found.
#[test]
fn r25_partial_offload_device_and_host() {
    let dir = tempfile::tempdir().unwrap();
    let m = open(&llama_32_blocks(dir.path())).unwrap();
    let block = 10 * MIB;
    let (embd, out) = (40 * MIB, 40 * MIB);
    let part = |ngl: u64, name: &str| {
        estimate(&m.spec, llama(8192).gpu_layers(ngl))
            .components
            .iter()
            .find(|c| c.name == name)
            .and_then(|c| c.low_bytes)
            .unwrap_or(0)
    };
    assert_eq!(part(1, "weights"), out + 16 * 1024);
    assert_eq!(part(1, "host_weights"), embd + 32 * block);
    assert_eq!(part(32, "weights"), 31 * block + out + 16 * 1024);
    assert_eq!(part(32, "host_weights"), embd + block);
    assert_eq!(part(33, "host_weights"), embd);
    assert_eq!(part(33, "host_kv_cache"), 0);
    // KV of the CPU layers is in host memory: one block of 32 at 8k, f16 = 32 MiB.
    assert_eq!(part(32, "host_kv_cache"), 32 * MIB);
    assert_eq!(part(32, "kv_cache"), 31 * 32 * MIB);
    // The largest -ngl whose device part fits 1 GiB: compute (258.5 MiB high) + overhead
    // (768 MiB) + margin (1 GiB) already exceed it → 0; 3 GiB holds some layers, not all.
    let host = Budget::host(64 << 30);
    let v = judge_with_host(&m.spec, llama(8192), &Budget::given(1 << 30), Some(&host));
    assert_eq!(v.max_gpu_layers, Some(0));
    let v = judge_with_host(&m.spec, llama(8192), &Budget::given(3 << 30), Some(&host));
    let n = v.max_gpu_layers.unwrap();
    assert!(0 < n && n < 33, "{n}");
    let high = |ngl| estimate(&m.spec, llama(8192).gpu_layers(ngl)).high_bytes;
    assert!(high(n) <= 3 << 30 && high(n + 1) > 3 << 30);
    // The host part is judged too: 64 GiB holds it, 50 MiB does not.
    assert!(v.host.is_some());
    let tiny = Budget::host(50 * MIB);
    let v = judge_with_host(
        &m.spec,
        llama(8192).gpu_layers(n),
        &Budget::given(3 << 30),
        Some(&tiny),
    );
    assert_eq!(v.device_fit, hypomnesis::estimate::Fit::Fits);
    assert_eq!(v.fit, hypomnesis::estimate::Fit::DoesNotFit);
}

/// GGUF sliding-window rules (`llama_model::load_hparams` at ec98e2002): an architecture
/// llama.cpp gives no pattern keeps every layer full even with a window key (phi3 disables it
/// explicitly); gemma2 slides even layers with the 4096 default; a missing `head_count_kv` is
/// read from `attn_k`.
#[test]
fn gguf_window_rules_and_kv_heads_from_attn_k() {
    let dir = tempfile::tempdir().unwrap();
    let write = |name: &str, arch: &str, window: Option<u32>| {
        let p = dir.path().join(name);
        let mut w = GgufWriter::new()
            .str("general.architecture", arch)
            .u32(&format!("{arch}.block_count"), 4)
            .u32(&format!("{arch}.attention.head_count"), 8)
            .u32(&format!("{arch}.embedding_length"), 1024);
        if let Some(win) = window {
            w = w.u32(&format!("{arch}.attention.sliding_window"), win);
        }
        w.tensor("blk.0.attn_k.weight", &[1024, 256], ggml::F16)
            .tensor("blk.1.attn_k.weight", &[1024, 256], ggml::F16)
            .tensor("blk.2.attn_k.weight", &[1024, 256], ggml::F16)
            .tensor("blk.3.attn_k.weight", &[1024, 256], ggml::F16)
            .write(&p)
            .unwrap();
        open(&p).unwrap().spec.arch.unwrap()
    };
    for arch in ["phi3", "newarch"] {
        let a = write(&format!("{arch}.gguf"), arch, Some(2047));
        assert!(a.layers.iter().all(|l| l.kind == LayerKind::Full), "{arch}");
        assert!(
            a.warnings
                .iter()
                .any(|w| w.contains("treated as full attention")),
            "{arch}"
        );
    }
    let g = write("gemma2.gguf", "gemma2", None);
    let kinds: Vec<LayerKind> = g.layers.iter().map(|l| l.kind).collect();
    let s = LayerKind::Sliding { window: 4096 };
    assert_eq!(kinds, vec![s, LayerKind::Full, s, LayerKind::Full]);
    // 256 rows of attn_k / key_length 128 = 2 KV heads, not head_count 8.
    assert!(g.layers.iter().all(|l| l.kv_heads == 2));
    assert!(
        g.warnings.iter().any(|w| w.contains("attn_k")),
        "{:?}",
        g.warnings
    );
}
