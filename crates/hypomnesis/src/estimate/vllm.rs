//! vLLM's own sizing rules and startup refusals, read in its source (`docs/estimation.md`
//! cites each file and commit):
//!
//! | Rule | Source | Here |
//! |---|---|---|
//! | blocks per request: full `⌈L / 16⌉`, sliding `⌈min(window − 1 + max_num_batched_tokens, L) / 16⌉ + 1` | `FullAttentionSpec`, `SlidingWindowSpec` (`vllm/v1/kv_cache_interface.py`) | [`blocks_per_request`] |
//! | layers grouped by type: `group_size = min(count per type)` (the max when max < 1.5 × min), `⌈n / group_size⌉` groups per type, each group `group_size` pages | `_get_kv_cache_groups_uniform_page_size`, `_max_memory_usage_bytes_from_groups` (`vllm/v1/core/kv_cache_utils.py`) | [`request_kv_bytes`] |
//! | KV heads per tensor-parallel rank `max(1, n_kv / tp)`; MLA's latent is not split | `ModelConfig.get_num_kv_heads`, `QKVParallelLinear` | [`kv_heads_per_rank`] |
//! | context beyond the derived `max_model_len` is refused | `_get_and_verify_max_len` (`vllm/config/model.py`) | [`context_refusal`] |
//!
//! The other two refusals (the reservation not free at start; one request's KV not fitting
//! what is left) are the budget's ([`super::budget::Budget::from_free_with`]) and the verdict's
//! ([`super::judge::judge`]).

use super::arch::{Architecture, Layer, LayerKind, VLLM_BLOCK};
use super::runtime::KvDtype;

/// `max_num_batched_tokens` when not given: `vllm serve`'s default on a ≥ 70 GiB GPU other than
/// an A100 (`EngineArgs.get_batch_defaults`; 2048 on smaller GPUs — a smaller value shrinks the
/// sliding-window term and the profile run, so 8192 is the conservative default).
pub const DEFAULT_MAX_NUM_BATCHED_TOKENS: u64 = 8192;

/// Blocks of [`VLLM_BLOCK`] tokens one request of `len` tokens needs in a layer of `kind`.
pub fn blocks_per_request(kind: LayerKind, len: u64, batched_tokens: u64) -> u64 {
    match kind {
        LayerKind::None => 0,
        LayerKind::Full | LayerKind::Mla { .. } => len.div_ceil(VLLM_BLOCK),
        LayerKind::Sliding { window } => window
            .saturating_sub(1)
            .saturating_add(batched_tokens)
            .min(len)
            .div_ceil(VLLM_BLOCK)
            .saturating_add(1),
    }
}

/// KV heads one tensor-parallel rank holds: `max(1, n_kv / tp)` (replicated when `tp > n_kv`);
/// an MLA latent is whole on every rank.
pub fn kv_heads_per_rank(layer: &Layer, tp: u64) -> u64 {
    match layer.kind {
        LayerKind::Mla { .. } => layer.kv_heads,
        _ => (layer.kv_heads / tp.max(1)).max(1).min(layer.kv_heads),
    }
}

/// One layer's page (16 tokens) on one rank, in bytes.
fn page_bytes(layer: &Layer, dtype: KvDtype, tp: u64) -> u64 {
    let mut l = *layer;
    l.kv_heads = kv_heads_per_rank(layer, tp);
    l.bytes_per_token(dtype).saturating_mul(VLLM_BLOCK)
}

/// The KV cache one request of `len` tokens needs on one tensor-parallel rank, in bytes — what
/// vLLM checks at start ("To serve at least one request with the models's max seq len …").
///
/// Layers of the same kind (full, or sliding with the same window) form a type; with a uniform
/// page size the types are cut into groups of `group_size` layers, the last group padded, and
/// every group costs `group_size` pages per block. Where the page sizes differ (different head
/// sizes per layer type) the layers are summed one by one (no group padding).
pub fn request_kv_bytes(
    arch: &Architecture,
    len: u64,
    batched_tokens: u64,
    dtype: KvDtype,
    tp: u64,
) -> u64 {
    let attn: Vec<&Layer> = arch
        .layers
        .iter()
        .filter(|l| l.kind != LayerKind::None)
        .collect();
    let pages: Vec<u64> = attn.iter().map(|l| page_bytes(l, dtype, tp)).collect();
    let per_layer = || {
        attn.iter()
            .zip(&pages)
            .map(|(l, p)| p.saturating_mul(blocks_per_request(l.kind, len, batched_tokens)))
            .fold(0u64, u64::saturating_add)
    };
    let Some(&page) = pages.first() else {
        return 0;
    };
    if pages.iter().any(|p| *p != page) {
        return per_layer();
    }
    // Types in order of first appearance, with their layer counts.
    let mut types: Vec<(LayerKind, u64)> = Vec::new();
    for l in &attn {
        match types.iter_mut().find(|(k, _)| *k == l.kind) {
            Some((_, n)) => *n += 1,
            None => types.push((l.kind, 1)),
        }
    }
    let min = types.iter().map(|t| t.1).min().unwrap_or(1).max(1);
    let max = types.iter().map(|t| t.1).max().unwrap_or(1);
    let group_size = if 2 * max < 3 * min { max } else { min };
    let blocks: u64 = types
        .iter()
        .map(|(kind, n)| {
            n.div_ceil(group_size)
                .saturating_mul(blocks_per_request(*kind, len, batched_tokens))
        })
        .fold(0u64, u64::saturating_add);
    group_size.saturating_mul(page).saturating_mul(blocks)
}

/// vLLM's refusal of a context beyond the derived `max_model_len` (`ValueError`
/// "User-specified max_model_len (N) is greater than the derived max_model_len …"), unless
/// `VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`.
pub fn context_refusal(arch: &Architecture, context: u64) -> Option<String> {
    let derived = arch.max_context?;
    (context > derived).then(|| {
        format!(
            "vLLM refuses to start: max_model_len {context} is greater than the derived max_model_len {derived} ({}); set VLLM_ALLOW_LONG_MAX_MODEL_LEN=1 to override at your own risk",
            arch.context_rule.as_deref().unwrap_or("from the model's config")
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sliding_blocks_follow_the_batched_tokens() {
        let w = LayerKind::Sliding { window: 1024 };
        assert_eq!(blocks_per_request(w, 131_072, 8192), 577);
        assert_eq!(blocks_per_request(w, 131_072, 2048), 193);
        // Never more than the request itself, plus the partly filled block.
        assert_eq!(blocks_per_request(w, 1000, 8192), 64);
        assert_eq!(blocks_per_request(LayerKind::Full, 1000, 8192), 63);
        assert_eq!(blocks_per_request(LayerKind::None, 1000, 8192), 0);
    }

    #[test]
    fn tensor_parallel_splits_or_replicates_kv_heads() {
        let gqa = Layer::new(LayerKind::Full, 8, 128, 128);
        assert_eq!(kv_heads_per_rank(&gqa, 1), 8);
        assert_eq!(kv_heads_per_rank(&gqa, 2), 4);
        assert_eq!(kv_heads_per_rank(&gqa, 16), 1, "replicated");
        let mla = Layer::new(LayerKind::Mla { latent_dim: 576 }, 1, 0, 0);
        assert_eq!(kv_heads_per_rank(&mla, 8), 1);
        let a = Architecture::new(vec![gqa; 32]);
        assert_eq!(
            request_kv_bytes(&a, 8192, 8192, KvDtype::BF16, 2) * 2,
            request_kv_bytes(&a, 8192, 8192, KvDtype::BF16, 1)
        );
    }

    #[test]
    fn groups_pad_the_smaller_type() {
        // 3 full + 5 sliding: group_size 3 (5 ≥ 1.5 × 3), sliding in 2 groups of 3 (one padded).
        let mut layers = vec![Layer::new(LayerKind::Full, 1, 8, 8); 3];
        layers.extend(vec![
            Layer::new(LayerKind::Sliding { window: 17 }, 1, 8, 8);
            5
        ]);
        let a = Architecture::new(layers);
        let page = 16 * 16 * 2;
        let full = 4096 / 16;
        let sliding = (16u64 + 64).div_ceil(16) + 1;
        assert_eq!(
            request_kv_bytes(&a, 4096, 64, KvDtype::BF16, 1),
            3 * page * (full + 2 * sliding)
        );
    }
}
