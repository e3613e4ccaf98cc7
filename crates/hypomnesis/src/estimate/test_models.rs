//! Models the estimate's unit tests share (test builds only).

use super::arch::{Architecture, Layer, LayerKind, ModelSpec};

/// A Llama-3.1-8B-shaped model: 32 full-attention layers of 8 KV heads × 128, 16.06 GB of
/// weights, a 14336-wide FFN, a 131072-token trained context.
pub(crate) fn llama_8b() -> ModelSpec {
    let mut a = Architecture::new(vec![Layer::new(LayerKind::Full, 8, 128, 128); 32]);
    a.hidden_size = Some(4096);
    a.attention_heads = Some(32);
    a.vocab_size = Some(128_256);
    a.intermediate_size = Some(14336);
    a.max_context = Some(131_072);
    ModelSpec::new(16_060_522_496, Some(a))
}
