//! llama.cpp's own sizing rules, read in its source (ggml-org/llama.cpp at `ec98e2002`, as
//! vendored by ollama `f63eea3d`, and later upstream files; `docs/estimation.md` cites each):
//!
//! | Rule | Source | Here |
//! |---|---|---|
//! | `n_ctx = pad₂₅₆(-c)`; split streams: `n_ctx_seq = pad₂₅₆(n_ctx / slots)`, `n_ctx = n_ctx_seq × slots` | `llama_context::llama_context` (PR #17046) | [`Cells::new`] |
//! | `n_batch = min(n_ctx, -b)`, `n_ubatch = min(n_batch, -ub)` | same | [`Cells::new`] |
//! | SWA cells `pad₂₅₆(min(n_ctx_seq, window × (unified ? slots : 1) + n_ubatch))`, full with `--swa-full` | `llama_kv_cache_iswa` (PR #13833) | [`Cells::per_stream`] |
//! | K and V per layer: `cells × streams × row_size(type, n_embd_{k,v}_gqa)` | `llama_kv_cache` | [`Cells::layer_bytes`] |
//! | flash attention `auto` | `llama_context` ("resolve automatic Flash Attention use"), `ggml-cuda/fattn.cu` | [`resolve_flash_attn`] |
//! | the reserved graph: `T = min(n_ctx, n_ubatch)` rounded up to the slots; `n_out` the slots (llama-server) or `n_batch` (C API, `common`) | `graph_reserve`, `sched_reserve` (`llama-context.cpp:250, 629, 670-675, 2528-2531` at `0c1e57098`) | [`Cells::tokens`], [`Cells::outputs`] |
//! | compute buffers: the live set at each phase as ggml-alloc lays it out (CPU; the CUDA split derived) | `ggml-alloc.c`, `llama-graph.cpp` (`0c1e57098`) | [`compute`], [`super::llama_graph`] |
//!
//! Partial offload and the split across devices are in [`super::offload`].

use super::arch::{Architecture, Layer, LayerKind};
use super::llama_graph::{ALIGN_CPU, ALIGN_CUDA, CacheKind, CudaPhases, Graph, Phase};
use super::params::FitParams;
use super::runtime::{FlashAttn, KvDtype, LlamaApi};

/// llama.cpp's default `-ub` / `n_ubatch`.
pub const DEFAULT_UBATCH: u64 = 512;
/// llama.cpp's default `-b` / `n_batch` (llama-server, the C API, `common`; llama-cpp-python
/// passes 512).
pub const DEFAULT_N_BATCH: u64 = 2048;
/// Every cache size is padded to this many cells.
const PAD: u64 = 256;

fn pad(v: u64) -> u64 {
    v.div_ceil(PAD).saturating_mul(PAD)
}

/// The context sizes llama.cpp derives from `-c`, `-np`, `-b`, `-ub`, `--kv-unified` and
/// `--swa-full` (on by default for [`LlamaApi::Library`]).
///
/// hmn's `--context` is llama.cpp's `-c` when `--parallel` (`-np`) is given; otherwise `-c` is
/// `context × batch` with `batch` slots, each slot holding `context` tokens.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Cells {
    /// `n_ctx` after padding (and, for split streams, rounding to whole slots).
    pub n_ctx: u64,
    /// `n_seq_max`: the slots.
    pub n_seq: u64,
    /// One stream shared by every slot (`--kv-unified`, llama-server's default when `-np` is
    /// not given) or one per slot.
    pub unified: bool,
    /// Cells of a full-attention layer in one stream.
    pub n_ctx_seq: u64,
    /// Streams: 1 unified, `n_seq` split.
    pub n_stream: u64,
    /// `n_batch`.
    pub n_batch: u64,
    /// `n_ubatch`: tokens per graph, which sizes the compute buffers.
    pub n_ubatch: u64,
    /// `--swa-full`: sliding layers as large as full ones.
    pub swa_full: bool,
}

impl Cells {
    /// The sizes for `p` (`p.slots`, `p.kv_unified`, `p.n_batch`, `p.ubatch`, `p.swa_full`,
    /// the API's defaults).
    pub fn new(p: &FitParams) -> Cells {
        let requested = match p.slots {
            Some(_) => p.context,
            None => p.context.saturating_mul(p.batch),
        };
        let n_seq = p.slots.unwrap_or(p.batch).max(1);
        let unified = p.kv_unified.unwrap_or(false) || n_seq == 1;
        let mut n_ctx = pad(requested.max(1));
        let n_ctx_seq = if unified {
            n_ctx
        } else {
            let per = pad(n_ctx / n_seq).max(PAD);
            n_ctx = per.saturating_mul(n_seq);
            per
        };
        let n_batch = n_ctx.min(p.n_batch_requested().max(1));
        let n_ubatch = n_batch.min(p.ubatch.unwrap_or(DEFAULT_UBATCH).max(1));
        Cells {
            n_ctx,
            n_seq,
            unified,
            n_ctx_seq,
            n_stream: if unified { 1 } else { n_seq },
            n_batch,
            n_ubatch,
            swa_full: p.swa_full || p.api().swa_full(),
        }
    }

    /// Tokens of the reserved worst-case graph: `min(n_ctx, n_ubatch)` rounded up to a
    /// multiple of the slots (`graph_reserve`, `llama-context.cpp:629, 2528-2531`).
    pub fn tokens(&self) -> u64 {
        let t = self.n_ctx.min(self.n_ubatch);
        t.div_ceil(self.n_seq.max(1))
            .saturating_mul(self.n_seq.max(1))
    }

    /// Outputs the worst-case graph reserves, `min(T, n_outputs_max)`: the slots for
    /// llama-server (`tools/server/server-context.cpp:41-53`), `n_batch` for the C API and
    /// the `common` tools (`n_outputs_max = 0`, `llama-context.cpp:250, 670-675`).
    pub fn outputs(&self, api: LlamaApi) -> u64 {
        let max = if api.outputs_per_token() {
            self.n_batch
        } else {
            self.n_seq
        };
        self.tokens().min(max)
    }

    /// Cells of a layer of `kind` in one stream.
    pub fn per_stream(&self, kind: LayerKind) -> u64 {
        match kind {
            LayerKind::None => 0,
            LayerKind::Full | LayerKind::Mla { .. } => self.n_ctx_seq,
            LayerKind::Sliding { .. } if self.swa_full => self.n_ctx_seq,
            LayerKind::Sliding { window } => {
                let slots = if self.unified { self.n_seq } else { 1 };
                pad(self
                    .n_ctx_seq
                    .min(window.saturating_mul(slots).saturating_add(self.n_ubatch)))
            }
        }
    }

    /// Cells of a layer of `kind` over every stream.
    pub fn total(&self, kind: LayerKind) -> u64 {
        self.per_stream(kind).saturating_mul(self.n_stream)
    }

    /// Bytes of one layer's K and V.
    pub fn layer_bytes(&self, layer: &Layer, dtype: KvDtype) -> u64 {
        self.total(layer.kind)
            .saturating_mul(layer.bytes_per_token(dtype))
    }

    /// The largest cache of any attention layer, in cells per stream: the `n_kv` the
    /// worst-case graph is reserved with.
    pub fn n_kv(&self, arch: &Architecture) -> u64 {
        arch.layers
            .iter()
            .map(|l| self.per_stream(l.kind))
            .max()
            .unwrap_or(0)
    }

    /// The sliding layers' cache in cells per stream, when there are any (their own mask).
    pub fn n_kv_swa(&self, arch: &Architecture) -> Option<u64> {
        arch.layers
            .iter()
            .find(|l| matches!(l.kind, LayerKind::Sliding { .. }))
            .map(|l| self.per_stream(l.kind))
    }
}

/// How flash attention resolves.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct FlashResolved {
    /// Whether it is on.
    pub on: bool,
    /// Why, in words.
    pub why: String,
    /// What would change if the assumption is wrong.
    pub warning: Option<String>,
}

/// Head sizes CUDA has flash-attention kernels for (K = V; 512 and 576 need GQA, 576 is MLA):
/// `ggml_cuda_get_best_fattn_kernel` (`ggml-cuda/fattn.cu`).
const CUDA_FA_HEADS: [u64; 10] = [40, 64, 72, 80, 96, 112, 128, 256, 512, 576];

/// Flash attention under `p`: `on`/`off` as given; `auto` resolves **on** for the CPU backend
/// and, on a GPU, when CUDA has a kernel for the cache type (f32, f16, q4_0, q8_0 without
/// `GGML_CUDA_FA_ALL_QUANTS`) and for every layer's head size (`ggml-cuda/fattn.cu`); otherwise
/// the op falls back to the CPU and `auto` resolves **off** — except that a quantized V cache
/// needs flash attention (2026 builds force it on: "enabling flash_attn since it is required
/// for quantized V cache"; older ones refuse to start).
pub fn resolve_flash_attn(p: &FitParams, arch: Option<&Architecture>) -> FlashResolved {
    let r = |on: bool, why: &str, warning: Option<String>| FlashResolved {
        on,
        why: why.to_string(),
        warning,
    };
    let heads_ok = arch.is_none_or(|a| {
        a.layers.iter().all(|l| match l.kind {
            LayerKind::Full | LayerKind::Sliding { .. } => {
                l.head_dim_k == l.head_dim_v && CUDA_FA_HEADS.contains(&l.head_dim_k)
            }
            _ => true,
        })
    });
    let type_ok = matches!(
        p.kv_dtype,
        KvDtype::F32 | KvDtype::F16 | KvDtype::Q4_0 | KvDtype::Q8_0
    );
    match p.flash_attn {
        FlashAttn::On => r(true, "on (--flash-attn on)", None),
        FlashAttn::Off => r(
            false,
            "off (--flash-attn off): the KQ score tensor is allocated",
            None,
        ),
        FlashAttn::Auto if p.cpu_only => r(
            true,
            "auto → on (the CPU backend runs every layer's attention)",
            None,
        ),
        FlashAttn::Auto if type_ok && heads_ok => r(
            true,
            "auto → on (assumed: a CUDA build, every layer's attention on the device that holds its KV)",
            Some(
                "if flash attention resolves off on your backend, the compute buffer also holds the n_kv × n_ubatch × n_head × 4 B score tensor: check with --flash-attn off"
                    .to_string(),
            ),
        ),
        FlashAttn::Auto if p.kv_dtype.is_quantized() => r(
            true,
            "auto → on (a quantized V cache needs flash attention)",
            Some(format!(
                "CUDA has no flash-attention kernel for a {} cache (without GGML_CUDA_FA_ALL_QUANTS) or for this head size: 2026 builds run it on the CPU (slow), older builds refuse to start",
                p.kv_dtype.as_str()
            )),
        ),
        FlashAttn::Auto => r(
            false,
            "auto → off (no CUDA flash-attention kernel for this cache type or head size)",
            Some(format!(
                "CUDA flash-attention kernels cover f32/f16/q4_0/q8_0 caches and head sizes 40–256, 512, 576; with a {} cache llama.cpp falls back and allocates the score tensor",
                p.kv_dtype.as_str()
            )),
        ),
    }
}

/// llama.cpp's compute and output buffers for one graph of `n_ubatch` tokens
/// ([`super::llama_graph`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Compute {
    /// The CPU backend's compute buffer (every layer on the CPU): the largest phase, within
    /// ±5 % of llama.cpp's own buffer on every measured configuration.
    pub cpu: u64,
    /// The phase that sets it.
    pub peak: Phase,
    /// The CUDA device's compute buffer with every layer offloaded (measured on an H200 within
    /// ±5 %: `tests/fixtures/llama_cpp/cuda.csv`).
    pub device: u64,
    /// Its phases, which a partial offload's copied weights join.
    pub device_phases: CudaPhases,
    /// The `CUDA_Host` compute buffer beside it: the graph inputs and the token-embedding rows.
    pub host: u64,
    /// The F32 score tensor inside the buffer (0 with flash attention).
    pub kq: u64,
    /// The graph inputs (masks, index inputs, positions, …).
    pub inputs: u64,
    /// One hidden-state block, `4 · n_embd · T` (the slot a fused CUDA op may hold longer).
    pub hidden_block: u64,
    /// Tokens of the reserved graph.
    pub tokens: u64,
    /// Outputs it reserves: the slots (llama-server) or `n_batch` (the C API, `common`).
    pub outputs: u64,
    /// Host output buffer at creation: logits for each slot (`n_vocab × n_seq × 4`).
    pub output: u64,
    /// The output buffer once a batch asks for every token's logits (`n_vocab × n_batch × 4`;
    /// llama-cpp-python with `logits_all`, llama-perplexity): the API's high end.
    pub output_grown: u64,
}

/// The graph of `arch` under `p` with flash attention `fa_on`; `None` without a hidden size
/// and head count.
pub fn graph(arch: &Architecture, p: &FitParams, fa_on: bool) -> Option<Graph> {
    let n_embd = arch.hidden_size?;
    let n_head = arch.attention_heads?;
    let cells = Cells::new(p);
    let attn_layers = || {
        arch.layers
            .iter()
            .filter(|l| !matches!(l.kind, LayerKind::None))
    };
    let kind_of = |sliding: bool| {
        let mut it = attn_layers()
            .filter(|l| matches!(l.kind, LayerKind::Sliding { .. }) == sliding)
            .peekable();
        let first = *it.peek()?;
        let v_gqa = it
            .map(|l| l.kv_heads.saturating_mul(l.head_dim_v))
            .max()
            .unwrap_or(0);
        Some(CacheKind {
            cells: cells.per_stream(first.kind),
            head_dim_k: first.head_dim_k,
            v_gqa,
        })
    };
    // The full cache always exists (an iSWA model has both kinds, `llama-kv-cache-iswa.cpp`).
    let mut caches = vec![kind_of(false).unwrap_or(CacheKind {
        cells: cells.n_ctx_seq,
        head_dim_k: 0,
        v_gqa: 0,
    })];
    caches.extend(kind_of(true));
    let head_dim = attn_layers()
        .map(|l| l.head_dim_k)
        .max()
        .filter(|d| *d > 0)
        .unwrap_or(n_embd / n_head.max(1));
    let (fused_qkv, residual_first) = Graph::traits(arch.name.as_deref());
    Some(Graph {
        tokens: cells.tokens(),
        outputs: cells.outputs(p.api()),
        n_embd,
        n_head,
        head_dim,
        n_ff: arch.intermediate_size.unwrap_or(0),
        n_vocab: arch.vocab_size.unwrap_or(0),
        caches,
        flash_attn: fa_on,
        quantized_kv: p.kv_dtype.is_quantized(),
        fused_qkv,
        residual_first,
    })
}

/// The compute buffers of `arch` under `p`, with flash attention `fa_on`; `None` without a
/// hidden size and head count.
///
/// The buffer is the peak of the graph as ggml-alloc lays it out, not a sum of tensors:
/// the largest of the FFN phase (three `n_ff`-wide tensors live at once), the attention phase
/// (without flash attention, the F32 scores `n_kv × T × n_head × 4`) and the output phase
/// (logits of `n_out` rows), each on top of the graph inputs that stay alive through every
/// layer (masks, index inputs) — [`super::llama_graph::Graph::cpu`].
pub fn compute(arch: &Architecture, p: &FitParams, fa_on: bool) -> Option<Compute> {
    let g = graph(arch, p, fa_on)?;
    let cells = Cells::new(p);
    let phases = g.cpu(ALIGN_CPU);
    let (device, host) = g.cuda_full_offload(cells.n_stream);
    let device_phases = g.cuda_device_phases(cells.n_stream);
    let rows = |n: u64| g.n_vocab.saturating_mul(n).saturating_mul(4);
    Some(Compute {
        cpu: phases.total(),
        peak: phases.peak(),
        device,
        device_phases,
        host,
        kq: phases.kq,
        inputs: phases.inputs,
        hidden_block: g.hidden_block(ALIGN_CUDA),
        tokens: g.tokens,
        outputs: g.outputs,
        output: rows(cells.n_seq),
        output_grown: if p.api().outputs_per_token() {
            rows(cells.n_seq.max(cells.n_batch))
        } else {
            rows(cells.n_seq)
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::runtime::Runtime;

    fn p(context: u64) -> FitParams {
        FitParams::new(context, 1, KvDtype::F16, Runtime::LlamaCpp)
    }

    #[test]
    fn context_is_padded_and_split_streams_round_up() {
        let c = Cells::new(&p(1000));
        assert_eq!((c.n_ctx, c.n_ctx_seq, c.n_stream), (1024, 1024, 1));
        // unsloth PR #7530: `-c 1024 -np 3` allocates 1536 cells (3 × pad256(341)).
        let split = Cells::new(&p(1024).slots(3));
        assert_eq!(
            (split.n_ctx, split.n_ctx_seq, split.n_stream),
            (1536, 512, 3)
        );
        assert_eq!(split.total(LayerKind::Full), 1536);
        assert_eq!(Cells::new(&p(1024).slots(4)).total(LayerKind::Full), 1024);
        // `--batch 2` is two slots of the context each.
        let b = Cells::new(&p(4096).batch(2));
        assert_eq!((b.n_ctx, b.n_ctx_seq, b.n_stream), (8192, 4096, 2));
        // Tiny contexts cap n_batch and n_ubatch.
        let tiny = Cells::new(&p(100));
        assert_eq!((tiny.n_batch, tiny.n_ubatch), (256, 256));
    }

    #[test]
    fn sliding_cells_from_ubatch_and_slots() {
        let w = LayerKind::Sliding { window: 1024 };
        // One slot: pad256(1024 + 512).
        assert_eq!(Cells::new(&p(8192)).per_stream(w), 1536);
        // Unified, 4 slots (llama-server's auto): pad256(1024 × 4 + 512) = 4608.
        let unified = Cells::new(&p(8192).slots(4).kv_unified(true));
        assert_eq!(unified.total(w), 4608);
        // Split, 2 slots: each pad256(min(4096, 1024 + 512)).
        let split = Cells::new(&p(8192).slots(2));
        assert_eq!(split.total(w), 2 * 1536);
        // --swa-full: as a full layer; --ubatch moves the window term.
        assert_eq!(Cells::new(&p(8192).swa_full(true)).total(w), 8192);
        assert_eq!(Cells::new(&p(8192).ubatch(2048)).per_stream(w), 3072);
    }

    #[test]
    fn flash_attention_auto() {
        let on = |q: FitParams, a: Option<&Architecture>| resolve_flash_attn(&q, a).on;
        assert!(on(p(8192), None));
        assert!(!on(p(8192).kv_dtype(KvDtype::BF16), None));
        assert!(
            on(p(8192).kv_dtype(KvDtype::Q5_1), None),
            "quantized V forces it"
        );
        assert!(on(p(8192).kv_dtype(KvDtype::BF16).cpu_only(true), None));
        assert!(!on(p(8192).flash_attn(FlashAttn::Off), None));
        // Head size 48: no CUDA kernel.
        let odd = Architecture::new(vec![Layer::new(LayerKind::Full, 2, 48, 48)]);
        assert!(!on(p(8192), Some(&odd)));
        let mla = Architecture::new(vec![Layer::new(
            LayerKind::Mla { latent_dim: 576 },
            1,
            0,
            0,
        )]);
        assert!(on(p(8192), Some(&mla)));
    }
}
