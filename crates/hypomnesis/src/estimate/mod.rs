//! Estimation: exact tensor sizes, the KV cache per layer and runtime, compute buffers, "will it
//! fit" with named components, a band, the assumptions behind it and the runtime's own
//! refusals, and a thread-safe [`MemoryTracker`].
//!
//! | Module | Owns |
//! |---|---|
//! | [`dtype`] | element types of safetensors and GGML; [`tensor_bytes`] |
//! | [`runtime`] | [`Runtime`] and its version family, [`KvDtype`] per runtime, [`FlashAttn`], [`Utilization`], [`ParamError`] |
//! | [`kv`] | [`Architecture`], [`kv_cache_bytes`] per runtime, [`attention_bytes`] |
//! | [`llama_cpp`] | llama.cpp's cells (`-c`, `-np`, `-b`, `-ub`, SWA), flash attention `auto`, compute buffers |
//! | [`llama_graph`] | llama.cpp's compute buffer as ggml-alloc lays it out (CPU; the CUDA split) |
//! | [`split`] | llama.cpp `--tensor-split` and the layer assignment over GPUs |
//! | [`offload`] | llama.cpp `-ngl`, the split across devices, CPU-only, the llama.cpp components |
//! | [`vllm`] | vLLM's per-request KV (hybrid manager groups), tensor parallelism, `max_model_len` refusal |
//! | [`layout`] | bytes per block / embedding / output from tensor names |
//! | [`params`] | [`FitParams`]: defaults per runtime, validation |
//! | [`fit`] | [`ModelSpec`], [`estimate`] components and band |
//! | [`assume`] | [`Assumptions`]: what each estimate assumed, stated |
//! | [`mod@judge`] | [`Verdict`] against a budget and the host, refusals, largest context / batch / `--gpu-layers` |
//! | [`budget`] | the [`Budget`] a runtime may use on a device and its [`BudgetSource`]; a device with a memory pool through `pool_budget` |
//! | [`mod@plan`] | [`plan()`]: where an estimate is judged over devices (one, the best, llama.cpp's layer split, vLLM tensor parallel, the CPU, a given budget), the chosen device and the overall verdict |
//! | [`pick`] | picking free devices for a command (`hmn pick`, `hmn run --gpu`): candidates, best fit, claims under device leases, the child's visibility variables |
//! | [`tracker`] | [`MemoryTracker`] (atomic check-and-add) |
//! | `gguf`, `safetensors`, `safetensors_header`, `config`, `gguf_arch`, `model` | header readers (feature `models`): headers only, with limits; a safetensors header streamed into the sums the estimator uses |
//! | `hub` | the same headers from a Hugging Face Hub or an `https://` URL, by range requests (feature `hub`) |
//!
//! The maths is always compiled and has no dependencies; reading model files needs the
//! `models` feature (serde and serde_json).

// Layer 4 (ARCHITECTURE.md "Layers"): will it fit. May import the layers below (it uses
// `types`, `system` to read model files and hold device leases, `probe` and `backends` to pick
// devices); never `measure` (its sibling) or anything above.

mod arch;
pub mod assume;
pub mod budget;
pub mod dtype;
pub mod fit;
pub mod judge;
pub mod kv;
pub mod layout;
pub mod llama_cpp;
pub mod llama_graph;
pub mod offload;
pub mod params;
mod parts;
pub mod pick;
pub mod plan;
// The budget of a device with a memory pool (APU, unified memory, Apple's working set).
#[cfg(test)]
mod extremes;
mod pool_budget;
pub mod runtime;
// Saturating products and sums of dimensions and settings.
mod sat;
pub mod split;
#[cfg(test)]
mod test_models;
pub mod tracker;
pub mod vllm;

#[cfg(feature = "models")]
pub mod config;
#[cfg(feature = "models")]
pub mod gguf;
#[cfg(feature = "models")]
pub mod gguf_arch;
#[cfg(feature = "hub")]
pub mod hub;
#[cfg(feature = "hub")]
mod hub_spec;
#[cfg(feature = "models")]
pub mod model;
#[cfg(feature = "models")]
pub mod safetensors;
#[cfg(feature = "models")]
pub mod safetensors_header;

pub use assume::Assumptions;
pub use budget::{Budget, BudgetSource, NoBudget, VLLM_UTILIZATION};
pub use dtype::{Dtype, GgmlType, SafetensorsDtype, tensor_bytes};
pub use fit::{Component, DEFAULT_CONTEXT, Estimate, FitParams, Memory, ModelSpec, estimate};
pub use judge::{
    Fit, HostVerdict, Verdict, host_verdict, judge, judge_estimate, judge_host, judge_with_host,
    largest_gpu_layers,
};
pub use kv::{
    Architecture, KvHeadsFrom, Layer, LayerKind, attention_bytes, kv_bytes_per_token,
    kv_cache_bytes, kv_cache_bytes_for,
};
pub use layout::WeightsLayout;
pub use plan::{DeviceFit, NoAnswer, NoVerdict, Placement, Plan, Target, TargetKind, plan};
pub use runtime::{FlashAttn, KvDtype, LlamaApi, ParamError, Runtime, Utilization};
pub use split::TensorSplit;
pub use tracker::{LimitExceeded, MemoryTracker};
