//! The model's attention layers ([`Layer`], [`Architecture`]) and the KV cache they need, per
//! layer and per runtime.
//!
//! `KV = Σ_layers cells_l × bytes_per_cell_l`, where a cell holds one token's keys and values:
//! `kv_heads × (head_dim_k + head_dim_v)` elements for ordinary attention (GQA/MQA through
//! `kv_heads`; `head_dim` as the config says, never assumed to be `hidden / heads`) and the
//! latent `kv_lora_rank + qk_rope_head_dim` for MLA (one shared latent, not ×2). How many cells a
//! layer gets is the runtime's rule ([`kv_cache_bytes_for`]):
//!
//! | Runtime | full layer | sliding-window layer | rule in |
//! |---|---|---|---|
//! | generic (PyTorch) | context × batch | min(context, window) × batch | here |
//! | llama.cpp | pad₂₅₆(-c), per stream | pad₂₅₆(min(full, window × (unified ? slots : 1) + ubatch)), per stream | [`super::llama_cpp::Cells`] |
//! | vLLM | ⌈context / 16⌉ blocks per request | ⌈min(window − 1 + max_num_batched_tokens, context) / 16⌉ + 1 blocks, grouped | [`super::vllm::request_kv_bytes`] |

pub use super::arch::{Architecture, KvHeadsFrom, Layer, LayerKind, VLLM_BLOCK};
use super::params::FitParams;
pub use super::runtime::{KvDtype, Runtime};

/// Tokens a layer caches for `batch` sequences of `context` tokens, under the runtime's
/// default settings ([`FitParams::new`]): llama.cpp's cells (`-c context × batch`, `batch`
/// slots, ubatch 512), vLLM's blocks × 16 for `batch` requests (before the grouping
/// [`kv_cache_bytes_for`] applies).
pub fn tokens_cached(kind: LayerKind, context: u64, batch: u64, runtime: Runtime) -> u64 {
    let p = FitParams::new(context, batch, KvDtype::F16, runtime);
    match runtime {
        Runtime::Generic => generic_tokens(kind, context).saturating_mul(batch),
        Runtime::LlamaCpp => super::llama_cpp::Cells::new(&p).total(kind),
        Runtime::Vllm => super::vllm::blocks_per_request(kind, context, p.batched_tokens())
            .saturating_mul(VLLM_BLOCK)
            .saturating_mul(batch),
    }
}

fn generic_tokens(kind: LayerKind, context: u64) -> u64 {
    match kind {
        LayerKind::None => 0,
        LayerKind::Full | LayerKind::Mla { .. } => context,
        LayerKind::Sliding { window } => context.min(window),
    }
}

/// The KV cache of `arch` for `batch` sequences of `context` tokens, in bytes, under the
/// runtime's default settings (see [`kv_cache_bytes_for`]).
pub fn kv_cache_bytes(
    arch: &Architecture,
    context: u64,
    batch: u64,
    dtype: KvDtype,
    runtime: Runtime,
) -> u64 {
    kv_cache_bytes_for(arch, &FitParams::new(context, batch, dtype, runtime))
}

/// The KV cache of `arch` under `p`, in bytes, on every device together (vLLM: one rank's share
/// × the tensor-parallel size is not summed: this is the whole cache of the model):
///
/// - generic: every layer's tokens ([`tokens_cached`]) × bytes per token;
/// - llama.cpp: the cells of [`super::llama_cpp::Cells`] (ubatch, slots, unified or split,
///   `swa_full`) × each layer's K and V row sizes;
/// - vLLM: `batch` × the KV one request of `context` tokens needs
///   ([`super::vllm::request_kv_bytes`], the hybrid manager's grouping), at tensor-parallel 1.
pub fn kv_cache_bytes_for(arch: &Architecture, p: &FitParams) -> u64 {
    match p.runtime {
        Runtime::Generic => arch
            .layers
            .iter()
            .map(|l| {
                l.bytes_per_token(p.kv_dtype)
                    .saturating_mul(generic_tokens(l.kind, p.context))
                    .saturating_mul(p.batch)
            })
            .fold(0u64, u64::saturating_add),
        Runtime::LlamaCpp => {
            let cells = super::llama_cpp::Cells::new(p);
            arch.layers
                .iter()
                .map(|l| cells.layer_bytes(l, p.kv_dtype))
                .fold(0u64, u64::saturating_add)
        }
        Runtime::Vllm => {
            super::vllm::request_kv_bytes(arch, p.context, p.batched_tokens(), p.kv_dtype, 1)
                .saturating_mul(p.batch)
        }
    }
}

/// KV bytes per token if every layer cached the whole context (the figure published
/// comparisons quote).
pub fn kv_bytes_per_token(arch: &Architecture, dtype: KvDtype) -> u64 {
    arch.layers
        .iter()
        .map(|l| l.bytes_per_token(dtype))
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
        for r in [Runtime::Generic, Runtime::LlamaCpp, Runtime::Vllm] {
            assert_eq!(Runtime::parse(r.as_str()).unwrap(), r);
        }
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
        // vLLM SlidingWindowSpec: ⌈min(127 + 8192, 8192) / 16⌉ + 1 = 513 blocks of 16.
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::Vllm),
            per_layer_token * (8192 + 513 * 16)
        );
        // llama.cpp (PR #13833, #17046): pad256(min(pad256(-c), window × 1 slot + ubatch 512)).
        assert_eq!(
            kv_cache_bytes(&a, 8192, 1, KvDtype::BF16, Runtime::LlamaCpp),
            per_layer_token * (768 + 8192)
        );
        assert_eq!(
            tokens_cached(
                LayerKind::Sliding { window: 4096 },
                1000,
                1,
                Runtime::LlamaCpp
            ),
            1024,
            "never more than the full layer (-c 1000 is padded to 1024)"
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
        // K and V rows are rounded separately (ggml_row_size): 40 + 40 elements of q8_0.
        let odd = Layer::new(LayerKind::Full, 1, 40, 40);
        assert_eq!(odd.bytes_per_token(KvDtype::Q8_0), 68 + 68);
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
