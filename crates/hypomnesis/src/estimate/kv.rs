//! The model's attention layers and the KV cache they need, per layer and per runtime.
//!
//! `KV = Σ_layers tokens_l × batch × elements_per_token_l × bytes_per_element`, where
//! `elements_per_token_l` is `kv_heads × (head_dim_k + head_dim_v)` for ordinary attention
//! (GQA/MQA through `kv_heads`; `head_dim` as the config says, never assumed to be
//! `hidden / heads`) and the latent size `kv_lora_rank + qk_rope_head_dim` for MLA (one shared
//! latent, not ×2). How many tokens a sliding-window layer holds depends on the runtime, so the
//! runtime is an input:
//!
//! | Runtime | full layer | sliding-window layer |
//! |---|---|---|
//! | generic (PyTorch/transformers) | context × batch | min(context, window) × batch |
//! | llama.cpp | pad256(context × batch) | min(full, pad256(window × batch + 2048)) |
//! | vLLM | ceil16(context) × batch | as a full layer (what vLLM allocated in the published gpt-oss measurements) |

use crate::error::ParseError;

/// How a layer caches keys and values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum LayerKind {
    /// Full (global) attention: every token of the context.
    Full,
    /// Sliding-window attention over the last `window` tokens.
    Sliding {
        /// The window, in tokens.
        window: u64,
    },
    /// Multi-head latent attention (DeepSeek): one latent of `latent_dim` elements per token.
    Mla {
        /// `kv_lora_rank + qk_rope_head_dim`.
        latent_dim: u64,
    },
    /// No KV cache (recurrent/state-space layers, whose small fixed state is not modelled).
    None,
}

/// One attention layer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Layer {
    /// How it caches.
    pub kind: LayerKind,
    /// Key/value heads (GQA: fewer than query heads).
    pub kv_heads: u64,
    /// Elements per key head.
    pub head_dim_k: u64,
    /// Elements per value head.
    pub head_dim_v: u64,
}

impl Layer {
    /// An ordinary attention layer.
    pub const fn new(kind: LayerKind, kv_heads: u64, head_dim_k: u64, head_dim_v: u64) -> Layer {
        Layer {
            kind,
            kv_heads,
            head_dim_k,
            head_dim_v,
        }
    }

    /// KV elements one token needs in this layer.
    pub fn elements_per_token(&self) -> u64 {
        match self.kind {
            LayerKind::Mla { latent_dim } => latent_dim,
            LayerKind::None => 0,
            LayerKind::Full | LayerKind::Sliding { .. } => self
                .kv_heads
                .saturating_mul(self.head_dim_k.saturating_add(self.head_dim_v)),
        }
    }
}

/// What the estimators need to know about a model besides its weights.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Architecture {
    /// `general.architecture` / `model_type`.
    pub name: Option<String>,
    /// The attention layers, in order.
    pub layers: Vec<Layer>,
    /// Hidden size (embedding length).
    pub hidden_size: Option<u64>,
    /// Query heads.
    pub attention_heads: Option<u64>,
    /// Vocabulary size.
    pub vocab_size: Option<u64>,
    /// Trained context length.
    pub max_context: Option<u64>,
}

impl Architecture {
    /// An architecture from its layers.
    pub fn new(layers: Vec<Layer>) -> Architecture {
        Architecture {
            layers,
            ..Architecture::default()
        }
    }
}

/// The KV cache's element type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum KvDtype {
    /// 4 bytes.
    F32,
    /// 2 bytes.
    F16,
    /// 2 bytes.
    BF16,
    /// 1 byte (vLLM `fp8`, `fp8_e4m3`, `fp8_e5m2`).
    F8,
    /// llama.cpp `q8_0`: 34 bytes per 32 elements.
    Q8_0,
    /// llama.cpp `q4_0`: 18 bytes per 32 elements.
    Q4_0,
}

impl KvDtype {
    /// Parses `f32`, `f16`, `bf16`, `fp8`/`f8`/`fp8_e4m3`/`fp8_e5m2`, `q8_0`, `q4_0`
    /// (case-insensitive).
    pub fn parse(s: &str) -> Result<KvDtype, ParseError> {
        Ok(match s.to_ascii_lowercase().as_str() {
            "f32" | "fp32" | "float32" => KvDtype::F32,
            "f16" | "fp16" | "float16" | "half" => KvDtype::F16,
            "bf16" | "bfloat16" | "auto" => KvDtype::BF16,
            "f8" | "fp8" | "fp8_e4m3" | "fp8_e5m2" => KvDtype::F8,
            "q8_0" => KvDtype::Q8_0,
            "q4_0" => KvDtype::Q4_0,
            other => {
                return Err(ParseError::new(format!(
                    "unknown KV cache type {other:?} (expected f32, f16, bf16, fp8, q8_0 or q4_0)"
                )));
            }
        })
    }

    /// The canonical name (`f32`, `f16`, `bf16`, `fp8`, `q8_0`, `q4_0`).
    pub const fn as_str(self) -> &'static str {
        match self {
            KvDtype::F32 => "f32",
            KvDtype::F16 => "f16",
            KvDtype::BF16 => "bf16",
            KvDtype::F8 => "fp8",
            KvDtype::Q8_0 => "q8_0",
            KvDtype::Q4_0 => "q4_0",
        }
    }

    /// Bytes for `elements` elements (block types round up to whole blocks).
    pub fn bytes(self, elements: u64) -> u64 {
        match self {
            KvDtype::F32 => elements.saturating_mul(4),
            KvDtype::F16 | KvDtype::BF16 => elements.saturating_mul(2),
            KvDtype::F8 => elements,
            KvDtype::Q8_0 => elements.div_ceil(32).saturating_mul(34),
            KvDtype::Q4_0 => elements.div_ceil(32).saturating_mul(18),
        }
    }
}

/// The runtime that will hold the model; it decides sliding-window caching, padding and
/// overheads.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Runtime {
    /// PyTorch / transformers.
    #[default]
    Generic,
    /// llama.cpp (and servers built on it).
    LlamaCpp,
    /// vLLM.
    Vllm,
}

impl Runtime {
    /// The canonical name (`generic`, `llama.cpp`, `vllm`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Runtime::Generic => "generic",
            Runtime::LlamaCpp => "llama.cpp",
            Runtime::Vllm => "vllm",
        }
    }

    /// Parses `generic`, `llama.cpp` (or `llamacpp`), `vllm`.
    pub fn parse(s: &str) -> Result<Runtime, ParseError> {
        match s.to_ascii_lowercase().as_str() {
            "generic" | "pytorch" | "transformers" => Ok(Runtime::Generic),
            "llama.cpp" | "llamacpp" | "llama-cpp" => Ok(Runtime::LlamaCpp),
            "vllm" => Ok(Runtime::Vllm),
            other => Err(ParseError::new(format!(
                "unknown runtime {other:?} (expected generic, llama.cpp or vllm)"
            ))),
        }
    }
}

/// llama.cpp's logical batch (`-b`), which bounds what a sliding-window layer keeps.
pub const LLAMA_CPP_N_BATCH: u64 = 2048;
/// vLLM's KV block size in tokens.
pub const VLLM_BLOCK: u64 = 16;

fn round_up(v: u64, m: u64) -> u64 {
    v.div_ceil(m).saturating_mul(m)
}

/// Tokens a layer caches for `batch` sequences of `context` tokens.
pub fn tokens_cached(kind: LayerKind, context: u64, batch: u64, runtime: Runtime) -> u64 {
    let full = match runtime {
        Runtime::Generic => context.saturating_mul(batch),
        Runtime::LlamaCpp => round_up(context.saturating_mul(batch), 256),
        Runtime::Vllm => round_up(context, VLLM_BLOCK).saturating_mul(batch),
    };
    match (kind, runtime) {
        (LayerKind::None, _) => 0,
        (LayerKind::Full | LayerKind::Mla { .. }, _)
        | (LayerKind::Sliding { .. }, Runtime::Vllm) => full,
        (LayerKind::Sliding { window }, Runtime::Generic) => {
            context.min(window).saturating_mul(batch)
        }
        (LayerKind::Sliding { window }, Runtime::LlamaCpp) => full.min(round_up(
            window
                .saturating_mul(batch)
                .saturating_add(LLAMA_CPP_N_BATCH),
            256,
        )),
    }
}

/// The KV cache of `arch` for `batch` sequences of `context` tokens, in bytes.
pub fn kv_cache_bytes(
    arch: &Architecture,
    context: u64,
    batch: u64,
    dtype: KvDtype,
    runtime: Runtime,
) -> u64 {
    arch.layers
        .iter()
        .map(|l| {
            let tokens = tokens_cached(l.kind, context, batch, runtime);
            dtype.bytes(l.elements_per_token()).saturating_mul(tokens)
        })
        .fold(0u64, u64::saturating_add)
}

/// KV bytes per token if every layer cached the whole context (the figure published
/// comparisons quote).
pub fn kv_bytes_per_token(arch: &Architecture, dtype: KvDtype) -> u64 {
    arch.layers
        .iter()
        .map(|l| dtype.bytes(l.elements_per_token()))
        .fold(0u64, u64::saturating_add)
}

/// Attention working memory of one forward pass over `seq` tokens: Q and the output
/// (`heads × head_dim`), K and V (`kv_heads × head_dim`), and — unless the kernel never
/// materialises them (flash attention) — the `heads × seq × seq` score matrix.
pub fn attention_bytes(
    batch: u64,
    seq: u64,
    heads: u64,
    kv_heads: u64,
    head_dim: u64,
    bytes_per_element: u64,
    materialised_scores: bool,
) -> u64 {
    let bs = batch.saturating_mul(seq);
    let q_and_out = bs
        .saturating_mul(heads)
        .saturating_mul(head_dim)
        .saturating_mul(2);
    let k_and_v = bs
        .saturating_mul(kv_heads)
        .saturating_mul(head_dim)
        .saturating_mul(2);
    let scores = if materialised_scores {
        batch
            .saturating_mul(heads)
            .saturating_mul(seq)
            .saturating_mul(seq)
    } else {
        0
    };
    q_and_out
        .saturating_add(k_and_v)
        .saturating_add(scores)
        .saturating_mul(bytes_per_element)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3.1-8B: 32 layers, 8 KV heads of 128.
    fn llama_8b() -> Architecture {
        Architecture::new(vec![Layer::new(LayerKind::Full, 8, 128, 128); 32])
    }

    #[test]
    fn canonical_names_parse_back() {
        for d in [
            KvDtype::F32,
            KvDtype::F16,
            KvDtype::BF16,
            KvDtype::F8,
            KvDtype::Q8_0,
            KvDtype::Q4_0,
        ] {
            assert_eq!(KvDtype::parse(d.as_str()).unwrap(), d);
        }
        for r in [Runtime::Generic, Runtime::LlamaCpp, Runtime::Vllm] {
            assert_eq!(Runtime::parse(r.as_str()).unwrap(), r);
        }
        assert!(KvDtype::parse("int3").is_err());
        assert!(Runtime::parse("ollama").is_err());
    }

    #[test]
    fn gqa_per_token_and_context() {
        let a = llama_8b();
        assert_eq!(kv_bytes_per_token(&a, KvDtype::BF16), 131_072);
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::Generic),
            1 << 30
        );
        assert_eq!(
            kv_cache_bytes(&a, 131_072, 1, KvDtype::BF16, Runtime::Generic),
            16 << 30
        );
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::Q8_0, Runtime::LlamaCpp),
            32 * 8192 * (2048 / 32 * 34)
        );
    }

    #[test]
    fn sliding_layers_per_runtime() {
        let a = Architecture::new(vec![
            Layer::new(LayerKind::Sliding { window: 128 }, 8, 64, 64),
            Layer::new(LayerKind::Full, 8, 64, 64),
        ]);
        let per_layer_token = 8 * 128 * 2;
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::Generic),
            per_layer_token * (128 + 8192)
        );
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::Vllm),
            per_layer_token * (8192 + 8192)
        );
        // llama.cpp: window × n_seq + n_batch, padded to 256.
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::LlamaCpp),
            per_layer_token * (2304 + 8192)
        );
        assert_eq!(
            tokens_cached(
                LayerKind::Sliding { window: 4096 },
                1000,
                1,
                Runtime::LlamaCpp
            ),
            1024,
            "never more than the full layer"
        );
    }

    #[test]
    fn mla_caches_one_latent() {
        let a = Architecture::new(vec![
            Layer::new(LayerKind::Mla { latent_dim: 576 }, 1, 0, 0);
            61
        ]);
        assert_eq!(kv_bytes_per_token(&a, KvDtype::BF16), 61 * 576 * 2);
    }

    #[test]
    fn kv_types() {
        assert_eq!(KvDtype::parse("Q8_0").unwrap(), KvDtype::Q8_0);
        assert_eq!(KvDtype::Q4_0.bytes(64), 36);
        assert_eq!(KvDtype::Q8_0.bytes(33), 68, "whole blocks");
        assert!(KvDtype::parse("int3").is_err());
        assert_eq!(Runtime::parse("llama.cpp").unwrap(), Runtime::LlamaCpp);
        assert!(Runtime::parse("tensorrt").is_err());
    }

    #[test]
    fn attention_with_and_without_scores() {
        let eager = attention_bytes(1, 4096, 32, 8, 128, 2, true);
        let flash = attention_bytes(1, 4096, 32, 8, 128, 2, false);
        assert_eq!(flash, (4096 * 32 * 128 * 2 + 4096 * 8 * 128 * 2) * 2);
        assert_eq!(eager - flash, 32 * 4096 * 4096 * 2, "the n² score matrix");
    }
}
