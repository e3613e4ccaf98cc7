//! Every estimator path over models at the dimension bounds (`arch::Dim`, what a parsed
//! `config.json` or GGUF header can hold), beyond them (an [`Architecture`] built by a library
//! caller is not bounded), and at zero, with the CLI's extreme settings and beyond. Tests run
//! with overflow checks: an arithmetic overflow anywhere is a failure. A figure that saturates
//! is a "does not fit", never a wrapped small number.

use super::arch::{Architecture, Layer, LayerKind, ModelSpec};
use super::budget::Budget;
use super::judge::{Fit, judge_with_host, largest_gpu_layers};
use super::layout::WeightsLayout;
use super::offload::{estimate_split, estimate_split_by};
use super::params::FitParams;
use super::runtime::{FlashAttn, KvDtype, LlamaApi, Runtime};
use super::split::TensorSplit;
use super::{estimate, kv};

/// The parsers' layer bound (`arch::MAX_LAYERS`, a `models` feature item).
const MAX_LAYERS: u64 = 4096;

/// The CLI's bounds (`crates/hmn/src/args/fits.rs`).
const CLI_CONTEXT: u64 = 1 << 32;
const CLI_BATCH: u64 = 1 << 20;
const CLI_PARALLEL: u64 = 4096;
const CLI_TP: u64 = 1024;
const CLI_MNBT: u64 = 1 << 24;
const CLI_GPU_LAYERS: u64 = 1 << 16;

/// A model whose every dimension is `dim` (vocabulary, widths, heads, head sizes, windows,
/// trained context), with `layers` layers of `kind` (a sliding window of `dim`), per-block
/// weights when `layout`.
fn model(layers: u64, dims: Dims, kind: fn(u64) -> LayerKind, layout: bool) -> ModelSpec {
    let n = usize::try_from(layers).unwrap();
    let mut ls: Vec<Layer> = (0..n)
        .map(|i| {
            // Mix in the other kinds: every 4th layer full, every 7th without KV.
            let k = match i % 7 {
                6 => LayerKind::None,
                _ if i % 4 == 3 => LayerKind::Full,
                _ => kind(dims.window),
            };
            Layer::new(k, dims.heads, dims.head_dim, dims.head_dim)
        })
        .collect();
    if let Some(l) = ls.first_mut() {
        l.kind = kind(dims.window);
    }
    let mut a = Architecture::new(ls);
    a.name = Some("llama".to_string());
    a.hidden_size = Some(dims.hidden);
    a.attention_heads = Some(dims.heads);
    a.vocab_size = Some(dims.vocab);
    a.intermediate_size = Some(dims.ff);
    a.max_context = Some(dims.context);
    let mut m = ModelSpec::new(dims.weights, Some(a));
    m.tensor_count = Some(u64::MAX);
    if layout {
        let mut l = WeightsLayout::default();
        for i in 0..layers {
            l.add(&format!("blk.{i}.ffn_up.weight"), dims.weights);
        }
        l.add("token_embd.weight", dims.weights);
        l.add("output.weight", dims.weights);
        m.layout = Some(l);
    }
    m
}

#[derive(Clone, Copy)]
struct Dims {
    vocab: u64,
    hidden: u64,
    ff: u64,
    heads: u64,
    head_dim: u64,
    window: u64,
    context: u64,
    weights: u64,
}

/// The largest values `config.json` and GGUF metadata may hold (`arch::Dim`).
const AT_BOUNDS: Dims = Dims {
    vocab: 1 << 24,
    hidden: 1 << 20,
    ff: 1 << 22,
    heads: 1 << 16,
    head_dim: 1 << 16,
    window: 1 << 32,
    context: 1 << 32,
    weights: 1 << 50,
};

const BEYOND: Dims = Dims {
    vocab: u64::MAX,
    hidden: u64::MAX,
    ff: u64::MAX,
    heads: u64::MAX,
    head_dim: u64::MAX,
    window: u64::MAX,
    context: u64::MAX,
    weights: u64::MAX,
};

const ZERO: Dims = Dims {
    vocab: 0,
    hidden: 0,
    ff: 0,
    heads: 0,
    head_dim: 0,
    window: 0,
    context: 0,
    weights: 0,
};

fn models() -> Vec<(&'static str, ModelSpec)> {
    let full = |_| LayerKind::Full;
    let sliding = |window| LayerKind::Sliding { window };
    let mla = |d: u64| LayerKind::Mla {
        latent_dim: d.saturating_mul(2),
    };
    let mut out = Vec::new();
    for (name, dims) in [("at bounds", AT_BOUNDS), ("beyond", BEYOND), ("zero", ZERO)] {
        out.push((name, model(MAX_LAYERS, dims, full, true)));
        out.push((name, model(64, dims, sliding, false)));
        out.push((name, model(2, dims, mla, true)));
        out.push((name, model(1, dims, sliding, false)));
    }
    out
}

/// The settings each runtime is tried with: its extremes under the CLI's bounds and beyond.
fn params(runtime: Runtime) -> Vec<FitParams> {
    let mut out = Vec::new();
    for context in [1, CLI_CONTEXT, u64::MAX] {
        for batch in [1, CLI_BATCH, u64::MAX] {
            let p = FitParams::new(context, batch, KvDtype::F16, runtime);
            match runtime {
                Runtime::Generic => {
                    out.push(p.kv_dtype(KvDtype::BF16));
                    out.push(p.flash_attn(FlashAttn::Off));
                }
                Runtime::Vllm => {
                    out.push(p.kv_dtype(KvDtype::BF16));
                    out.push(p.tensor_parallel(CLI_TP).max_num_batched_tokens(CLI_MNBT));
                    out.push(p.max_num_batched_tokens(u64::MAX).tensor_parallel(u64::MAX));
                }
                Runtime::LlamaCpp => {
                    for api in [LlamaApi::Server, LlamaApi::Library, LlamaApi::Common] {
                        let q = p.llama_api(api);
                        out.push(q);
                        out.push(q.ubatch(CLI_BATCH).n_batch(CLI_BATCH));
                        out.push(q.ubatch(u64::MAX).n_batch(u64::MAX));
                        out.push(q.flash_attn(FlashAttn::Off).kv_dtype(KvDtype::F32));
                        out.push(q.kv_dtype(KvDtype::Q4_0).flash_attn(FlashAttn::On));
                        out.push(q.kv_dtype(KvDtype::Q8_0).ubatch(CLI_BATCH));
                        out.push(q.cpu_only(true));
                        out.push(q.gpu_layers(0));
                        out.push(q.gpu_layers(1).ubatch(CLI_BATCH));
                        out.push(q.gpu_layers(2).kv_dtype(KvDtype::Q4_0));
                        out.push(q.gpu_layers(CLI_GPU_LAYERS));
                        out.push(q.swa_full(true));
                        if batch == 1 {
                            for slots in [CLI_PARALLEL, u64::MAX] {
                                out.push(q.slots(slots));
                                out.push(q.slots(slots).kv_unified(true).ubatch(CLI_BATCH));
                            }
                        }
                    }
                }
            }
        }
    }
    out
}

fn check(what: &str, e: &super::Estimate) {
    assert!(e.low_bytes <= e.high_bytes, "{what}: {e:?}");
    if let (Some(lo), Some(hi)) = (e.host_low_bytes, e.host_high_bytes) {
        assert!(lo <= hi, "{what}: host {e:?}");
    }
}

#[test]
fn every_runtime_survives_extreme_models_and_settings() {
    let split = TensorSplit::parse("1,3,0,2").unwrap();
    for (name, m) in models() {
        for runtime in [Runtime::Generic, Runtime::LlamaCpp, Runtime::Vllm] {
            for p in params(runtime) {
                let what = format!(
                    "{name}, {} layers, {p:?}",
                    m.arch.as_ref().unwrap().layers.len()
                );
                let e = estimate(&m, p);
                check(&what, &e);
                let _ = kv::kv_cache_bytes_for(m.arch.as_ref().unwrap(), &p);
                if name == "zero" {
                    continue;
                }
                // A model at the bounds (or beyond) with a long context or many sequences:
                // terabytes, never a wrapped small figure.
                if p.context >= CLI_CONTEXT || p.batch >= CLI_BATCH {
                    assert!(e.high_bytes > 1 << 40, "{what}: {}", e.high_bytes);
                }
                if runtime == Runtime::LlamaCpp && !p.cpu_only {
                    for s in estimate_split(&m, &p, &[u64::MAX, 1, 0, 80 << 30]) {
                        check(&what, &s);
                    }
                    let q = p.tensor_split(split);
                    for s in estimate_split_by(&m, &q, &split.for_devices(4).unwrap()) {
                        check(&what, &s);
                    }
                }
            }
        }
    }
}

/// The verdict's searches (largest context, batch, `--gpu-layers`) over the same models: a
/// model at the bounds fits no 80 GiB device at its largest settings.
#[test]
fn verdicts_over_extreme_models_do_not_fit() {
    for (name, m) in models() {
        for runtime in [Runtime::Generic, Runtime::LlamaCpp, Runtime::Vllm] {
            let mut ps = vec![FitParams::new(
                CLI_CONTEXT,
                CLI_BATCH,
                KvDtype::BF16,
                runtime,
            )];
            if runtime == Runtime::LlamaCpp {
                ps = vec![
                    FitParams::new(CLI_CONTEXT, 1, KvDtype::F16, runtime).slots(CLI_PARALLEL),
                    FitParams::new(u64::MAX, u64::MAX, KvDtype::Q4_0, runtime)
                        .ubatch(CLI_BATCH)
                        .flash_attn(FlashAttn::On),
                ];
            }
            for p in ps {
                let what = format!("{name}, {p:?}");
                let v = judge_with_host(
                    &m,
                    p,
                    &Budget::given(80 << 30),
                    Some(&Budget::host(1 << 40)),
                );
                if name != "zero" {
                    assert_eq!(v.fit, Fit::DoesNotFit, "{what}: {v:?}");
                }
                if runtime == Runtime::LlamaCpp {
                    let _ = largest_gpu_layers(&m, p, &Budget::given(u64::MAX));
                }
            }
        }
    }
}

/// Realistic settings on a model at the bounds give the same figures with and without the
/// saturating arithmetic: nothing saturates short of the extremes (a 2-layer model, 4096
/// tokens: the KV cache is exact).
#[test]
fn a_model_at_the_bounds_with_ordinary_settings_is_exact() {
    let m = model(2, AT_BOUNDS, |_| LayerKind::Full, false);
    let p = FitParams::new(4096, 1, KvDtype::F16, Runtime::LlamaCpp);
    let e = estimate(&m, p);
    let kv = e.components.iter().find(|c| c.name == "kv_cache").unwrap();
    // 2 layers × 4096 cells × 2¹⁶ heads × 2¹⁶ × 2 (K and V) × 2 bytes.
    assert_eq!(kv.high_bytes, Some(2 * 4096 * (1u64 << 32) * 2 * 2));
    assert!(e.high_bytes < u64::MAX);
}
