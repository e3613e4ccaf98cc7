//! Where the weights are, by tensor name: bytes per transformer block, the token embedding, the
//! output projection and the final norm. Partial offload places whole blocks, so it needs these
//! sums ([`WeightsLayout::from_tensors`], a pure function over names and sizes).
//!
//! | Part | GGUF (llama.cpp) | safetensors (transformers) |
//! |---|---|---|
//! | block `i` | `blk.{i}.*` | `…layers.{i}.*`, `…h.{i}.*` |
//! | token embedding | `token_embd.weight` | `…embed_tokens.weight`, `…wte.weight`, `…word_embeddings.weight` |
//! | output | `output.weight` | `lm_head.weight` |
//! | final norm | `output_norm.*` | `…norm.weight` / `.bias` outside the blocks |
//!
//! Vision and audio towers and projectors (`vision`, `visual`, `audio`, `multi_modal`,
//! `mm_projector` in the name) are "other", never a block of the language model.

/// Bytes of the weights by part.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WeightsLayout {
    /// Bytes of block `i` at index `i` (absent blocks are 0).
    pub blocks: Vec<u64>,
    /// The token embedding (`token_embd`): llama.cpp keeps it in host memory.
    pub token_embd: u64,
    /// The output projection; `None` when the embedding is tied (llama.cpp then duplicates
    /// `token_embd` into the output layer's buffer).
    pub output: Option<u64>,
    /// The final norm.
    pub output_norm: u64,
    /// Everything else.
    pub other: u64,
    /// The largest single tensor of any block (llama.cpp copies a host-resident matmul weight
    /// into the GPU's compute buffer when it offloads the op: partial offload).
    pub largest_block_tensor: u64,
}

/// Hard limit on a block index taken from a name (a hostile name cannot allocate more).
const MAX_BLOCK: u64 = 4096;

fn is_tower(name: &str) -> bool {
    ["vision", "visual", "audio", "multi_modal", "mm_projector"]
        .iter()
        .any(|t| name.contains(t))
}

/// The block index of a tensor name, if it belongs to a block.
fn block_index(name: &str) -> Option<u64> {
    let after = |marker: &str| -> Option<u64> {
        let rest = if let Some(r) = name.strip_prefix(marker.trim_start_matches('.')) {
            r
        } else {
            let at = name.find(marker)?;
            &name[at + marker.len()..]
        };
        let digits: &str = rest.split('.').next()?;
        (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit()))
            .then(|| digits.parse().ok())
            .flatten()
            .filter(|i| *i < MAX_BLOCK)
    };
    after("blk.")
        .or_else(|| after(".layers."))
        .or_else(|| after(".h."))
}

impl WeightsLayout {
    /// The layout of tensors given as `(name, bytes)`.
    pub fn from_tensors<'a>(tensors: impl IntoIterator<Item = (&'a str, u64)>) -> WeightsLayout {
        let mut l = WeightsLayout::default();
        for (name, bytes) in tensors {
            l.add(name, bytes);
        }
        l
    }

    /// Adds one tensor (a header read as a stream keeps these sums, not the names).
    pub fn add(&mut self, name: &str, bytes: u64) {
        if is_tower(name) {
            self.other = self.other.saturating_add(bytes);
        } else if let Some(i) = block_index(name) {
            let i = usize::try_from(i).unwrap_or(usize::MAX);
            if self.blocks.len() <= i {
                self.blocks.resize(i + 1, 0);
            }
            if let Some(b) = self.blocks.get_mut(i) {
                *b = b.saturating_add(bytes);
            }
            self.largest_block_tensor = self.largest_block_tensor.max(bytes);
        } else if name == "token_embd.weight"
            || name.ends_with("embed_tokens.weight")
            || name.ends_with("wte.weight")
            || name.ends_with("word_embeddings.weight")
        {
            self.token_embd = self.token_embd.saturating_add(bytes);
        } else if name == "output.weight" || name.ends_with("lm_head.weight") {
            self.output = Some(self.output.unwrap_or(0).saturating_add(bytes));
        } else if name.starts_with("output_norm.")
            || name.ends_with("norm.weight")
            || name.ends_with("norm.bias")
        {
            self.output_norm = self.output_norm.saturating_add(bytes);
        } else {
            self.other = self.other.saturating_add(bytes);
        }
    }

    /// Adds another file's layout (the shards of one checkpoint).
    pub fn merge(&mut self, o: &WeightsLayout) {
        if self.blocks.len() < o.blocks.len() {
            self.blocks.resize(o.blocks.len(), 0);
        }
        for (a, b) in self.blocks.iter_mut().zip(&o.blocks) {
            *a = a.saturating_add(*b);
        }
        self.token_embd = self.token_embd.saturating_add(o.token_embd);
        self.output = match (self.output, o.output) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0).saturating_add(b.unwrap_or(0))),
        };
        self.output_norm = self.output_norm.saturating_add(o.output_norm);
        self.other = self.other.saturating_add(o.other);
        self.largest_block_tensor = self.largest_block_tensor.max(o.largest_block_tensor);
    }

    /// Whether the names located any block at all.
    pub fn has_blocks(&self) -> bool {
        self.blocks.iter().any(|b| *b > 0)
    }

    /// Bytes of blocks `range` (missing blocks count 0).
    pub fn blocks_bytes(&self, range: std::ops::Range<u64>) -> u64 {
        range
            .filter_map(|i| self.blocks.get(usize::try_from(i).ok()?))
            .fold(0u64, |a, b| a.saturating_add(*b))
    }

    /// Total bytes.
    pub fn total(&self) -> u64 {
        self.blocks_bytes(0..self.blocks.len() as u64)
            .saturating_add(self.token_embd)
            .saturating_add(self.output.unwrap_or(0))
            .saturating_add(self.output_norm)
            .saturating_add(self.other)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gguf_and_transformers_names() {
        let l = WeightsLayout::from_tensors([
            ("token_embd.weight", 100),
            ("blk.0.attn_k.weight", 10),
            ("blk.0.ffn_up.weight", 5),
            ("blk.2.attn_q.weight", 7),
            ("output_norm.weight", 1),
            ("output.weight", 90),
            ("rope_freqs.weight", 3),
        ]);
        assert_eq!(l.blocks, vec![15, 0, 7]);
        assert_eq!(l.largest_block_tensor, 10);
        assert_eq!(
            (l.token_embd, l.output, l.output_norm, l.other),
            (100, Some(90), 1, 3)
        );
        assert_eq!(l.total(), 216);
        let hf = WeightsLayout::from_tensors([
            ("language_model.model.embed_tokens.weight", 50),
            ("language_model.model.layers.1.self_attn.k_proj.weight", 4),
            ("language_model.model.norm.weight", 2),
            (
                "vision_tower.vision_model.encoder.layers.0.mlp.fc1.weight",
                9,
            ),
            ("multi_modal_projector.mm_input_projection_weight", 1),
        ]);
        assert_eq!(hf.blocks, vec![0, 4]);
        assert_eq!(
            (hf.token_embd, hf.output, hf.output_norm, hf.other),
            (50, None, 2, 10)
        );
        // GPT-2 style.
        let g = WeightsLayout::from_tensors([("transformer.h.3.attn.c_attn.weight", 8)]);
        assert_eq!(g.blocks_bytes(3..4), 8);
    }

    #[test]
    fn merged_halves_are_the_whole() {
        let all = [
            ("model.embed_tokens.weight", 50),
            ("model.layers.0.mlp.up_proj.weight", 4),
            ("model.layers.2.mlp.up_proj.weight", 9),
            ("model.norm.weight", 2),
            ("lm_head.weight", 40),
            ("extra", 1),
        ];
        let mut a = WeightsLayout::from_tensors(all[..2].iter().copied());
        a.merge(&WeightsLayout::from_tensors(all[2..].iter().copied()));
        assert_eq!(a, WeightsLayout::from_tensors(all));
        assert_eq!(a.blocks, vec![4, 0, 9]);
        let mut none = WeightsLayout::default();
        none.merge(&WeightsLayout::default());
        assert_eq!(none.output, None);
    }

    #[test]
    fn hostile_indices_are_other() {
        let l = WeightsLayout::from_tensors([("blk.99999999999.attn_k.weight", 1)]);
        assert!(l.blocks.is_empty() && l.other == 1);
    }
}
