//! What the estimators know about a model: its attention layers ([`Layer`], [`LayerKind`]), the
//! [`Architecture`] they make up (and where its KV head counts came from), and the
//! [`ModelSpec`] being loaded — weights, architecture, layout. Public through `estimate::kv`
//! and `estimate::fit` (and the `estimate` root).

use super::layout::WeightsLayout;
use super::runtime::KvDtype;
use crate::types::spelling::spelled;

/// Hard limit on layers (a config claiming more is refused).
#[cfg(feature = "models")]
pub(crate) const MAX_LAYERS: u64 = 4096;

/// A model dimension the estimators multiply, with the largest value a `config.json` or a GGUF
/// header may claim for it, and the smallest ([`Dim::min`]: 1 where 0 means nothing a model
/// can have): a file claiming more, or less, is refused where it is read ("invalid {key}
/// (…)", [`super::config::from_config_json`], [`super::gguf_arch::from_gguf`]).
///
/// Each bound is a power of two with more than 50× headroom over the largest real model, so
/// no real model comes near it while a hostile header's `u64::MAX` (or `u32::MAX`) is refused
/// with the key named instead of flowing into the arithmetic. The arithmetic saturates anyway
/// (a figure that saturates is a "does not fit"), since the CLI's own bounds (`--context` ≤ 2³²,
/// `--batch`, `--ubatch`, `--n-batch` ≤ 2²⁰, `--parallel` ≤ 4096, …) multiplied with these
/// still exceed `u64`.
#[cfg(feature = "models")]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dim {
    /// Vocabulary (`vocab_size`, `tokenizer.ggml.tokens`): 2²⁴ = 16,777,216 tokens. The
    /// largest real vocabularies are about 2¹⁸ (Gemma-3 262,208; Llama-4 202,048).
    Vocab,
    /// Hidden size (`hidden_size`, `embedding_length`): 2²⁰ = 1,048,576. The largest real ones
    /// are 16,384 (Llama-3.1-405B) to 20,480 (MT-NLG 530B).
    Hidden,
    /// Feed-forward width (`intermediate_size`, `feed_forward_length`): 2²² = 4,194,304. The
    /// largest real ones are 53,248 (Llama-3.1-405B) and 73,728 (Nemotron-4-340B, PaLM).
    FeedForward,
    /// Attention heads, query or key/value: 2¹⁶ = 65,536. The largest real counts are 128
    /// (Llama-3.1-405B, DeepSeek-V3).
    Heads,
    /// Elements per head (`head_dim`, `key_length`, `value_length`, Gemma-4's
    /// `global_head_dim`) and the MLA latent's parts (`kv_lora_rank`, `qk_rope_head_dim`):
    /// 2¹⁶ = 65,536. The largest real ones are 512 (Gemma-4's global layers, DeepSeek's
    /// `kv_lora_rank`) and 576 (the whole MLA latent).
    HeadSize,
    /// The MLA latent's parts (`kv_lora_rank`, `qk_rope_head_dim`, `rope.dimension_count`):
    /// [`Dim::HeadSize`]'s bound, and 0 accepted (a part a model does not have).
    LatentPart,
    /// Tokens of context (`max_position_embeddings` and the other length keys,
    /// `context_length`, the YaRN `original_max_position_embeddings` and the context it
    /// derives): 2³² = 4,294,967,296, `--context`'s own maximum. The longest real trained
    /// context is 10,485,760 (Llama-4 Scout).
    Context,
    /// Tokens of a sliding window (`sliding_window`, `attention.sliding_window`):
    /// [`Dim::Context`]'s bound; 0 accepted (no window), and `u32::MAX`, a window some files
    /// use for "unbounded".
    Window,
}

#[cfg(feature = "models")]
impl Dim {
    /// The largest value accepted.
    pub(crate) const fn max(self) -> u64 {
        match self {
            Dim::Vocab => 1 << 24,
            Dim::Hidden => 1 << 20,
            Dim::FeedForward => 1 << 22,
            Dim::Heads | Dim::HeadSize | Dim::LatentPart => 1 << 16,
            Dim::Context | Dim::Window => 1 << 32,
        }
    }

    /// The smallest value accepted: 1 where 0 means nothing a model can have (a vocabulary,
    /// a hidden size, a head count or size, a trained context of 0 would make a KV cache or
    /// an output of 0 bytes); 0 where it means "none" (a feed-forward width per layer — layers
    /// without an FFN —, an MLA part, a window).
    pub(crate) const fn min(self) -> u64 {
        match self {
            Dim::FeedForward | Dim::LatentPart | Dim::Window => 0,
            Dim::Vocab | Dim::Hidden | Dim::Heads | Dim::HeadSize | Dim::Context => 1,
        }
    }

    /// What it counts, for the error ("at most 16777216 tokens").
    pub(crate) const fn unit(self) -> &'static str {
        match self {
            Dim::Vocab | Dim::Context | Dim::Window => "tokens",
            Dim::Hidden | Dim::FeedForward | Dim::HeadSize | Dim::LatentPart => "elements",
            Dim::Heads => "heads",
        }
    }

    /// `Some(why)` when `v` is beyond the bound: "at most {max} {unit}".
    pub(crate) fn beyond(self, v: u64) -> Option<String> {
        (v > self.max()).then(|| format!("at most {} {}", self.max(), self.unit()))
    }

    /// `Some(why)` when `v` is outside `min()..=max()`: [`Dim::beyond`]'s words, or "at least
    /// 1 {unit}" (singular: "at least 1 head").
    pub(crate) fn outside(self, v: u64) -> Option<String> {
        if v < self.min() {
            let unit = self.unit();
            return Some(format!(
                "at least {} {}",
                self.min(),
                unit.strip_suffix('s').unwrap_or(unit)
            ));
        }
        self.beyond(v)
    }
}

/// The largest rope scaling factor accepted: 2¹⁶; real YaRN and linear factors are 2 to 64
/// (DeepSeek-V2 40, gpt-oss 32). A factor must also be finite and positive, and the context it
/// derives at most [`Dim::Context`]'s bound.
#[cfg(feature = "models")]
pub(crate) const MAX_ROPE_FACTOR: f64 = 65_536.0;

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

    /// KV bytes one token needs in this layer: the K row and the V row, each rounded to whole
    /// blocks of `dtype` (llama.cpp's `ggml_row_size`); MLA's one latent row.
    pub fn bytes_per_token(&self, dtype: KvDtype) -> u64 {
        match self.kind {
            LayerKind::Mla { latent_dim } => dtype.bytes(latent_dim),
            LayerKind::None => 0,
            LayerKind::Full | LayerKind::Sliding { .. } => dtype
                .bytes(self.kv_heads.saturating_mul(self.head_dim_k))
                .saturating_add(dtype.bytes(self.kv_heads.saturating_mul(self.head_dim_v))),
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

spelled! {
    /// Where the KV head count of the layers came from.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
    #[non_exhaustive]
    pub enum KvHeadsFrom {
        /// The config or the GGUF metadata states it.
        #[default]
        Config = "config",
        /// The config omits it: the model type's default in its transformers config class.
        ModelTypeDefault = "model_type_default",
        /// The config omits it and nothing better is known: the query head count (what vLLM
        /// and transformers' `LlamaConfig` assume), with a warning.
        AttentionHeads = "attention_heads",
        /// Read from the `k_proj` / `attn_k` tensor shapes.
        Tensors = "tensors",
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
    /// Trained context length: the longest context the runtimes accept without an override
    /// (vLLM's derived `max_model_len`, llama.cpp's `n_ctx_train`); [`Architecture::context_rule`]
    /// says how it was derived.
    pub max_context: Option<u64>,
    /// Feed-forward (MLP) width, when known.
    pub intermediate_size: Option<u64>,
    /// Whether the output projection reuses the token embedding (`tie_word_embeddings`).
    pub tied_embeddings: Option<bool>,
    /// How [`Architecture::max_context`] was derived (`max_position_embeddings`, YaRN factor ×
    /// original length, a model-type default, …).
    pub context_rule: Option<String>,
    /// Config keys that were absent and filled from the model type's defaults, as
    /// `key = value (source)`.
    pub defaults_filled: Vec<String>,
    /// Where the KV head counts came from.
    pub kv_heads_from: KvHeadsFrom,
    /// Things about the input the estimate does not model, or had to assume.
    pub warnings: Vec<String>,
}

impl Architecture {
    /// An architecture from its layers.
    pub fn new(layers: Vec<Layer>) -> Architecture {
        Architecture {
            layers,
            ..Architecture::default()
        }
    }

    /// Whether any layer uses a sliding window.
    pub fn has_sliding_layers(&self) -> bool {
        self.layers
            .iter()
            .any(|l| matches!(l.kind, LayerKind::Sliding { .. }))
    }
}

/// vLLM's KV block size in tokens.
pub const VLLM_BLOCK: u64 = 16;

/// What is being loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ModelSpec {
    /// Exact bytes of the weights.
    pub weights_bytes: u64,
    /// The architecture, when a config or GGUF metadata gave it.
    pub arch: Option<Architecture>,
    /// Number of tensors, when known (llama.cpp's graph size depends on it).
    pub tensor_count: Option<u64>,
    /// Bytes per block, embedding and output, when the tensor names say (partial offload).
    pub layout: Option<WeightsLayout>,
}

impl ModelSpec {
    /// A model of `weights_bytes` with an optional architecture.
    pub fn new(weights_bytes: u64, arch: Option<Architecture>) -> ModelSpec {
        ModelSpec {
            weights_bytes,
            arch,
            tensor_count: None,
            layout: None,
        }
    }
}
