//! What an estimate assumed, stated: the runtime's version family, flash attention (asked and
//! resolved), the batch sizes, slots and offload (llama.cpp), tensor parallelism and
//! utilization (vLLM), the trained context and how it was derived, and the config defaults that
//! were filled in. Owns [`Assumptions`]; `hmn fits` prints [`Assumptions::statements`] and
//! serialises the fields.

use super::arch::{KvHeadsFrom, ModelSpec};
use super::llama_cpp::{Cells, resolve_flash_attn};
use super::params::FitParams;
use super::runtime::{FlashAttn, LlamaApi, Runtime};

#[cfg(feature = "serde")]
use serde::Serialize;

/// The assumptions behind one estimate. Fields that do not apply to the runtime are `None`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Assumptions {
    /// `generic`, `llama.cpp`, `vllm`.
    pub runtime: &'static str,
    /// The version family whose behaviour is modelled ([`Runtime::family`]).
    pub runtime_family: &'static str,
    /// `gpu`, or `cpu` for a CPU-only run.
    pub target: &'static str,
    /// Flash attention as asked.
    pub flash_attn_requested: FlashAttn,
    /// Flash attention as it resolves (`None` for vLLM, whose attention backends never
    /// materialise the score matrix).
    pub flash_attn: Option<bool>,
    /// Why it resolves so.
    pub flash_attn_reason: Option<String>,
    /// llama.cpp `n_ctx` (after padding; `-c`).
    pub n_ctx: Option<u64>,
    /// llama.cpp slots (`-np`).
    pub slots: Option<u64>,
    /// llama.cpp: one KV stream for every slot.
    pub kv_unified: Option<bool>,
    /// llama.cpp `n_ubatch`.
    pub ubatch: Option<u64>,
    /// llama.cpp `n_batch`.
    pub n_batch: Option<u64>,
    /// llama.cpp `--swa-full` (on by default for the `library` API).
    pub swa_full: Option<bool>,
    /// llama.cpp: which caller's context parameters (`server`, `library`, `common`).
    pub llama_api: Option<LlamaApi>,
    /// llama.cpp: tokens of the reserved worst-case graph.
    pub graph_tokens: Option<u64>,
    /// llama.cpp: outputs that graph reserves (the slots, or `n_batch`).
    pub graph_outputs: Option<u64>,
    /// What the compute buffer's band means, in words (llama.cpp).
    pub compute_band: Option<String>,
    /// llama.cpp `--tensor-split`, as given.
    pub tensor_split: Option<String>,
    /// llama.cpp `-ngl` in effect.
    pub gpu_layers: Option<u64>,
    /// llama.cpp: offloadable units (blocks + the output layer).
    pub offloadable_layers: Option<u64>,
    /// vLLM tensor-parallel size.
    pub tensor_parallel: Option<u64>,
    /// vLLM `gpu_memory_utilization`, as written (`0.9`).
    pub gpu_memory_utilization: Option<String>,
    /// vLLM `max_num_batched_tokens`.
    pub max_num_batched_tokens: Option<u64>,
    /// The trained context (vLLM's derived `max_model_len`, llama.cpp's `n_ctx_train`).
    pub trained_context: Option<u64>,
    /// How it was derived.
    pub context_rule: Option<String>,
    /// Config keys filled from the model type's defaults.
    pub defaults_filled: Vec<String>,
    /// Where the KV head counts came from.
    pub kv_heads_from: Option<KvHeadsFrom>,
    /// Every assumption as one sentence, for people.
    pub statements: Vec<String>,
}

impl Assumptions {
    /// The assumptions of an estimate of `model` under `p`.
    pub fn of(model: &ModelSpec, p: &FitParams) -> Assumptions {
        let arch = model.arch.as_ref();
        let mut a = Assumptions {
            runtime: p.runtime.as_str(),
            runtime_family: p.runtime.family(),
            target: if p.cpu_only { "cpu" } else { "gpu" },
            flash_attn_requested: p.flash_attn,
            flash_attn: None,
            flash_attn_reason: None,
            n_ctx: None,
            slots: None,
            kv_unified: None,
            ubatch: None,
            n_batch: None,
            swa_full: None,
            llama_api: None,
            graph_tokens: None,
            graph_outputs: None,
            compute_band: None,
            tensor_split: None,
            gpu_layers: None,
            offloadable_layers: None,
            tensor_parallel: None,
            gpu_memory_utilization: None,
            max_num_batched_tokens: None,
            trained_context: arch.and_then(|a| a.max_context),
            context_rule: arch.and_then(|a| a.context_rule.clone()),
            defaults_filled: arch.map(|a| a.defaults_filled.clone()).unwrap_or_default(),
            kv_heads_from: arch.map(|a| a.kv_heads_from),
            statements: Vec::new(),
        };
        let mut s = vec![format!("runtime: {}", p.runtime.family())];
        match p.runtime {
            Runtime::LlamaCpp => {
                let c = Cells::new(p);
                let fa = resolve_flash_attn(p, arch);
                s.push(format!(
                    "-c {} ({} cells per {}), {} slot{} {}, n_batch {}, n_ubatch {}{}",
                    c.n_ctx,
                    c.n_ctx_seq,
                    if c.unified { "stream" } else { "slot" },
                    c.n_seq,
                    if c.n_seq == 1 { "" } else { "s" },
                    if c.unified {
                        "(unified KV)"
                    } else {
                        "(one KV stream each)"
                    },
                    c.n_batch,
                    c.n_ubatch,
                    if c.swa_full { ", --swa-full" } else { "" }
                ));
                if p.slots.is_none() && !p.cpu_only {
                    s.push(
                        "slots: 1 per sequence (llama-cli); llama-server without -np runs 4 unified slots: --parallel 4 --kv-unified"
                            .to_string(),
                    );
                }
                let api = p.api();
                s.push(format!(
                    "llama.cpp API {}: {} — {} output{} reserved in the worst-case graph of {} tokens{}",
                    api.as_str(),
                    api.tools(),
                    c.outputs(api),
                    if c.outputs(api) == 1 { "" } else { "s" },
                    c.tokens(),
                    if api.swa_full() { ", swa_full on" } else { "" }
                ));
                s.push(format!("flash attention {}", fa.why));
                let band = if p.cpu_only {
                    "compute buffer: llama.cpp's graph reserve modelled phase by phase (±5 % of the buffers llama.cpp allocated on 612 measured CPU configurations); the band's high end adds that 5 %"
                } else {
                    "compute buffer: the CPU model (±5 % of llama.cpp's own buffers, 612 measured configurations) split into the CUDA device and CUDA_Host buffers as llama.cpp places them — measured on an H200: full offload within ±5 % on 288 of 292 configurations (the other 4, a quantized cache with flash attention beside a large output phase, within the band: worst −10.7 %); partial offload a band (where the copied host weights land is not modelled); the high end adds 5 % and one hidden block (fused CUDA ops); the CUDA pool, cuBLAS workspace and fragmentation are in runtime_overhead"
                };
                s.push(band.to_string());
                if let Some(t) = p.tensor_split {
                    s.push(format!("--tensor-split {t}: the offloaded layers over the GPUs in these proportions (llama.cpp normalises them)"));
                }
                let n_layer = arch.map(|a| a.layers.len() as u64);
                if p.cpu_only {
                    s.push("CPU only: every layer, the KV cache and the compute buffer in host RAM (mmap'd weights count as page cache)".to_string());
                } else if let Some(n) = n_layer {
                    let ngl = p.gpu_layers.unwrap_or(n + 1).min(n + 1);
                    s.push(format!(
                        "offload: {ngl} of {} layers on the GPU (the output layer first, then the last blocks; token_embd stays in host RAM); --fit off or explicit -c/-ngl",
                        n + 1
                    ));
                    a.gpu_layers = Some(ngl);
                    a.offloadable_layers = Some(n + 1);
                }
                a.flash_attn = Some(fa.on);
                a.flash_attn_reason = Some(fa.why);
                a.n_ctx = Some(c.n_ctx);
                a.slots = Some(c.n_seq);
                a.kv_unified = Some(c.unified);
                a.ubatch = Some(c.n_ubatch);
                a.n_batch = Some(c.n_batch);
                a.swa_full = Some(c.swa_full);
                a.llama_api = Some(api);
                a.graph_tokens = Some(c.tokens());
                a.graph_outputs = Some(c.outputs(api));
                a.compute_band = Some(band.to_string());
                a.tensor_split = p.tensor_split.map(|t| t.to_string());
            }
            Runtime::Vllm => {
                let tp = p.tensor_parallel.max(1);
                s.push(format!(
                    "gpu_memory_utilization {}{}, max_num_batched_tokens {}, tensor parallel {tp}, hybrid KV cache manager on",
                    p.utilization(),
                    if p.gpu_memory_utilization.is_some() {
                        ""
                    } else {
                        " (vLLM ≤ 0.20's default; 0.92 from v0.21)"
                    },
                    p.batched_tokens()
                ));
                s.push("attention: vLLM's backends never materialise the score matrix".to_string());
                a.tensor_parallel = Some(tp);
                a.gpu_memory_utilization = Some(p.utilization().to_string());
                a.max_num_batched_tokens = Some(p.batched_tokens());
            }
            Runtime::Generic => {
                let on = p.flash_attn != FlashAttn::Off;
                s.push(if on {
                    "attention: SDPA/flash (no score matrix); --flash-attn off for eager attention"
                        .to_string()
                } else {
                    "attention: eager (--flash-attn off): one layer's heads × context² scores"
                        .to_string()
                });
                a.flash_attn = Some(on);
            }
        }
        if let Some(c) = arch.and_then(|x| x.max_context) {
            s.push(format!(
                "trained context {c} ({})",
                arch.and_then(|x| x.context_rule.as_deref())
                    .unwrap_or("from the model's metadata")
            ));
        }
        for d in &a.defaults_filled {
            s.push(format!("config default: {d}"));
        }
        a.statements = s;
        a
    }
}
