//! llama.cpp's compute buffer as ggml-alloc lays it out: the live tensors of the worst-case
//! graph at each phase (FFN, attention, output) plus the holes best-fit cannot reuse, for the
//! CPU backend, and the CUDA split derived from it (device vs `CUDA_Host`).
//!
//! The port of `bench/llama_cpp_model.py::compute_cpu`, rule by rule; every source line is
//! ggml-org/llama.cpp `0c1e57098` (vendored by llama-cpp-python 0.3.36). Checked on every test
//! run against the 612 configurations llama.cpp itself allocated
//! (`tests/fixtures/llama_cpp/grid.csv`, `tests/estimate_llama_grid.rs`): within ±5 %.
//!
//! ggml-alloc (`ggml/src/ggml-alloc.c`) allocates the graph inputs first (`:723-755`), frees
//! each tensor after its last consumer (`:793-822`), reuses a parent in place for ADD, MUL,
//! RMS_NORM, ROPE, SOFT_MAX, … (`:22-51`, `:623-680`; never MUL_MAT, GLU, GET_ROWS,
//! FLASH_ATTN_EXT), places by best fit among the freed blocks, else on the tail (`:202-272`),
//! and the buffer is the tail's high-water mark. Sizes are aligned to 32 bytes on the CPU and
//! `CUDA_Host` (`ggml-impl.h:44`), 128 on CUDA (`ggml-cuda.cu:897-900`).
//!
//! | symbol | bytes | what |
//! |---|---|---|
//! | `T` | `min(n_ctx, n_ubatch)` rounded up to a multiple of `n_seq` | tokens of the reserved graph (`llama-context.cpp:629`, `:2528-2531`) |
//! | `n_out` | `min(T, n_outputs_max)`: the slots (llama-server) or `n_batch` (C API, `common`) | outputs reserved (`llama-context.cpp:250`, `:670-675`) |
//! | `E` | `a(4 · n_embd · T)` | one F32 hidden-state block |
//! | `Q` | `a(4 · n_head · head_dim · T)` | Q, and the flash-attention output |
//! | `F` | `a(4 · n_ff · T)` | one FFN intermediate (gate, up, GLU output) |
//! | `KQ` | `a(4 · max n_kv · T · n_head)` | the F32 scores without flash attention (`llama-graph.cpp:2688`) |
//! | `E_out`, `L` | `a(4 · n_embd · n_out)`, `a(4 · n_vocab · n_out)` | the last hidden state and the logits |
//! | `I` | [`Graph::inputs`] | the graph inputs, alive until their last consumer |
//!
//! `compute = max(FFN, ATTN, OUT)` ([`Graph::cpu`]).

use super::sat::{add_all, mul_all};
use crate::types::spelling::spelled;

/// Alignment of CPU and `CUDA_Host` buffers (`TENSOR_ALIGNMENT`, `ggml-impl.h:44`).
pub const ALIGN_CPU: u64 = 32;
/// Alignment of CUDA device buffers (`ggml-cuda.cu:897-900`).
pub const ALIGN_CUDA: u64 = 128;

/// Architectures whose attention projection is one fused matmul (`attn_qkv`, a view per Q, K
/// and V: `src/models/phi3.cpp`), which drops the Q-sized slot.
const FUSED_QKV: [&str; 2] = ["phi3", "phi2"];
/// Architectures whose residual add keeps the residual as the first operand
/// (`ggml_add(residual, cur)`, `src/models/phi3.cpp:166`; llama has `ggml_add(cur, ffn_inp)`,
/// `src/models/llama.cpp:220`), which moves where the last hidden state lands.
const RESIDUAL_FIRST: [&str; 1] = ["phi3"];

fn pad(x: u64, n: u64) -> u64 {
    x.div_ceil(n).saturating_mul(n)
}

/// One KV cache kind (full, or sliding-window) as the graph sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheKind {
    /// Cells per stream: the mask's and the scores' `n_kv` (`llama-kv-cache.cpp:2791`).
    pub cells: u64,
    /// Elements per K head (the Hadamard rotation needs `% 64 == 0`).
    pub head_dim_k: u64,
    /// `n_embd_v_gqa`: V elements per token (the transposed-V index input).
    pub v_gqa: u64,
}

/// Everything the compute buffer depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graph {
    /// Tokens of the reserved graph, `T`.
    pub tokens: u64,
    /// Outputs of the reserved graph, `n_out`.
    pub outputs: u64,
    /// `n_embd`.
    pub n_embd: u64,
    /// Query heads.
    pub n_head: u64,
    /// Elements per query head.
    pub head_dim: u64,
    /// `n_ff` (the widest layer's).
    pub n_ff: u64,
    /// `n_vocab`.
    pub n_vocab: u64,
    /// The cache kinds: full, then sliding when the model has sliding layers.
    pub caches: Vec<CacheKind>,
    /// Flash attention on.
    pub flash_attn: bool,
    /// A block-quantized K and V cache.
    pub quantized_kv: bool,
    /// One fused QKV matmul.
    pub fused_qkv: bool,
    /// `ggml_add(residual, cur)`.
    pub residual_first: bool,
}

spelled! {
    /// The phase of the graph that sets a compute buffer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Phase {
        /// Gate, up and the GLU output live at once.
        Ffn = "ffn",
        /// The F32 scores without flash attention.
        Attention = "attention",
        /// The last hidden state and the logits.
        Output = "output",
    }
}

/// The CUDA device buffer with every layer offloaded, and the phases a partial offload's
/// copied weights join ([`Graph::cuda_device_phases`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CudaPhases {
    /// The buffer.
    pub total: u64,
    /// The FFN phase.
    pub ffn: u64,
    /// The output phase.
    pub out: u64,
    /// `F`: one FFN intermediate.
    pub f: u64,
    /// The F32 scores (0 with flash attention): a hole the FFN phase can reuse.
    pub kq: u64,
    /// Flash attention on a quantized cache: how far the F16 copies of K and V outgrow the
    /// FFN's freed blocks (0 otherwise); where they leave the output phase is not modelled.
    pub kv16_overflow: u64,
}

/// The phases of the CPU buffer and the one that sets it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Phases {
    /// `I`: the graph inputs.
    pub inputs: u64,
    /// The FFN phase.
    pub ffn: u64,
    /// The attention phase (0 with flash attention).
    pub attn: u64,
    /// The output phase.
    pub out: u64,
    /// The F32 score tensor (0 with flash attention).
    pub kq: u64,
}

impl Phases {
    /// The buffer: the largest phase.
    pub fn total(&self) -> u64 {
        self.ffn.max(self.attn).max(self.out)
    }

    /// The phase that sets the buffer.
    pub fn peak(&self) -> Phase {
        let t = self.total();
        if t == self.out && self.out >= self.ffn {
            Phase::Output
        } else if t == self.attn && self.attn > self.ffn {
            Phase::Attention
        } else {
            Phase::Ffn
        }
    }
}

impl Graph {
    /// Whether `arch` (`general.architecture`, `model_type`) has a fused QKV projection and a
    /// residual-first add.
    pub fn traits(arch: Option<&str>) -> (bool, bool) {
        let a = arch.unwrap_or("");
        (FUSED_QKV.contains(&a), RESIDUAL_FIRST.contains(&a))
    }

    /// `4 · nrot²` of the K rotation (`llama-kv-cache.cpp:1447-1466`): `nrot` the largest power
    /// of two ≥ 64 dividing the head size; `None` without a rotation (a float cache, or a head
    /// size not a multiple of 64: `llama-kv-cache.cpp:321-325`).
    fn k_rot(&self, c: &CacheKind) -> Option<u64> {
        if !self.quantized_kv || c.head_dim_k == 0 || !c.head_dim_k.is_multiple_of(64) {
            return None;
        }
        let mut nrot = 64u64;
        while let Some(next) = nrot
            .checked_mul(2)
            .filter(|n| c.head_dim_k.is_multiple_of(*n))
        {
            nrot = next;
        }
        Some(mul_all([4, nrot, nrot]))
    }

    /// Whether the phases see the rotation (the full cache's).
    fn rot(&self) -> bool {
        self.caches.first().and_then(|c| self.k_rot(c)).is_some()
    }

    /// `I`: the graph inputs (`ggml_set_input`), each aligned, allocated before any node:
    /// `inp_tokens` `4T` (`llama-graph.cpp:2384`) and `inp_embd` `4 · n_embd · T`
    /// (`:2388-2390`, never consumed for a token batch, never freed) — both only when
    /// `with_host_only` —, `inp_pos` `4T` (`:2465-2475`), then per cache kind `k_idxs` `8T`
    /// (`llama-kv-cache.cpp:1419-1428`), `v_idxs` `8T`, or `8 · T · n_embd_v_gqa` without flash
    /// attention (V transposed, `:1430-1445`), the mask `n_kv · T · (2 F16 | 4 F32)`
    /// (`llama-graph.cpp:29-46`), the K and V rotations of a quantized cache
    /// (`llama-kv-cache.cpp:1447-1486`); and `out_ids` `4 · n_out` (`llama-graph.cpp:2494-2516`).
    pub fn inputs(&self, align: u64, with_host_only: bool) -> u64 {
        let a = |x: u64| pad(x, align);
        let t = self.tokens;
        let mut sum = 0u64;
        if with_host_only {
            sum = add_all([a(mul_all([4, t])), a(mul_all([4, self.n_embd, t]))]);
        }
        sum = sum.saturating_add(a(mul_all([4, t])));
        let mask_bytes = if self.flash_attn { 2 } else { 4 };
        for c in &self.caches {
            let v_idxs = if self.flash_attn { 1 } else { c.v_gqa };
            sum = add_all([
                sum,
                a(mul_all([8, t])),
                a(mul_all([8, t, v_idxs])),
                a(mul_all([c.cells, t, mask_bytes])),
            ]);
            if let Some(k) = self.k_rot(c) {
                sum = add_all([sum, a(k), a(4 * 64 * 64)]);
            }
        }
        sum.saturating_add(a(mul_all([4, self.outputs])))
    }

    /// The CPU backend's compute buffer, phase by phase, with sizes aligned to `align`.
    pub fn cpu(&self, align: u64) -> Phases {
        let a = |x: u64| pad(x, align);
        let (t, n_out) = (self.tokens, self.outputs);
        let i = self.inputs(align, true);
        // Every product and sum saturates: a buffer beyond u64 fits nowhere.
        let e = a(mul_all([4, self.n_embd, t]));
        let q = a(mul_all([4, self.n_head, self.head_dim, t]));
        let f = a(mul_all([4, self.n_ff, t]));
        let e_out = a(mul_all([4, self.n_embd, n_out]));
        let l = a(mul_all([4, self.n_vocab, n_out]));
        let fa = self.flash_attn;
        let fused = self.fused_qkv;
        let rot = self.rot();
        let full_width = n_out == t;
        // The token-ids hole and inp_embd (never freed); the inputs freed after the last
        // layer's attention.
        let base = a(mul_all([4, t])).saturating_add(e);
        let i_rest = i.saturating_sub(base);
        let q_slot = if fused { 0 } else { q };
        // FFN (`build_ffn`, `llama-graph.cpp:1762-1960`): gate, up and the GLU output
        // (`ggml_swiglu_split`, `:1865`; GLU is not in place) — 3F live at once (fused up: 2F
        // + F) — above the residual and two E-sized slots; with flash attention a Q-sized
        // slot below them too (the FA output). The Hadamard rotation of a quantized cache
        // (`llama-graph.cpp:2884-2889, 2929`) reshuffles the slots: the residual lands in a
        // Q-sized hole when Q == E, above two of them when Q < E.
        let mut ffn = if fa && rot {
            let x = match q.cmp(&e) {
                std::cmp::Ordering::Greater => q,
                std::cmp::Ordering::Less => mul_all([2, q]),
                std::cmp::Ordering::Equal => 0,
            };
            add_all([i, mul_all([2, e]), x, mul_all([3, f])])
        } else if fa {
            add_all([i, mul_all([2, e]), q_slot, mul_all([3, f])])
        } else {
            add_all([i, mul_all([2, e]), mul_all([3, f])])
        };
        // The last layer with every token an output: its residual (a GET_ROWS of out_ids,
        // `src/models/llama.cpp:174-177`) sits above the freed inputs and two slots, a low
        // block of I_rest + 2E. The FFN tensors go there in order while they fit (gate, up,
        // GLU: F, F, F; fused: 2F, F), the rest on the tail above the residual.
        if (rot || self.residual_first) && full_width {
            let mut free = add_all([i_rest, mul_all([2, e])]);
            let mut top = 0u64;
            let parts: &[u64] = if fused {
                &[mul_all([2, f]), f]
            } else {
                &[f, f, f]
            };
            for part in parts {
                if *part <= free {
                    free -= part;
                } else {
                    top = top.saturating_add(*part);
                }
            }
            ffn = ffn.max(add_all([i, mul_all([3, e]), top]));
        }
        // Attention without flash attention: the F32 scores [n_kv, T, n_head] (soft-max in
        // place, `llama-graph.cpp:2722`); kqv and its cont fit in the holes.
        let kq = self
            .caches
            .iter()
            .map(|c| mul_all([4, c.cells, t, self.n_head]))
            .max()
            .unwrap_or(0);
        let (attn, kq) = if fa {
            (0, 0)
        } else {
            let rows = if fused {
                e.saturating_add(q)
            } else {
                add_all([mul_all([2, e]), mul_all([2, q])])
            };
            (add_all([i, rows, a(kq)]), a(kq))
        };
        // Output: the last hidden state (E_out) and the logits (L) above inp_embd; for
        // residual-first graphs above the layer's slots unless the freed inputs can hold it.
        // Every token an output, flash attention, separate QKV: the last layer's residual
        // starts at R (rotation with Q == E: I + 2E; no rotation with Q < E, where the
        // residual does not fit the Q-sized FA hole: I + 2E + Q); when the GLU output fits
        // below R but the down projection no longer does, the last hidden state lands on the
        // residual and the logits above it.
        let r = match (fa && full_width && !fused, rot) {
            (true, true) if q == e => Some(add_all([i, mul_all([2, e])])),
            (true, false) if q < e => Some(add_all([i, mul_all([2, e]), q])),
            _ => None,
        };
        let out = if self.residual_first && i_rest < e_out {
            add_all([i, mul_all([2, e]), e_out, l])
        } else {
            match r.map(|r| (r, r.saturating_sub(base))) {
                Some((r, above)) if f <= above && above < f.saturating_add(e_out) => {
                    add_all([r, e, e_out, l])
                }
                _ => add_all([base, e_out, l]),
            }
        };
        Phases {
            inputs: i,
            ffn,
            attn,
            out,
            kq,
        }
    }

    /// Every layer and the output on one CUDA device, no pipeline parallelism, as
    /// `(device, host)` — measured: `tests/fixtures/llama_cpp/cuda.csv` (an H200, 288 of the 292 full-offload
    /// configurations within ±5 %, the other 4 within the band: `tests/estimate_llama_cuda.rs`):
    ///
    /// - device (`CUDA0`): the CPU phases at 128-byte alignment without the token ids and
    ///   `inp_embd` (they stay in host memory; the copied embedding rows take the slot the CPU
    ///   graph had anyway; every other input is copied in, `ggml-backend.cpp:1364-1392`). With
    ///   flash attention on a quantized cache the FA output is allocated with F16 copies of the
    ///   K and V it reads (`ggml_cuda_flash_attn_ext_get_alloc_size`, `ggml-cuda/fattn.cu:722-756`:
    ///   the tile and MMA kernels need F16; the vector kernel, for tiny batches, does not):
    ///   `2 · 2 · n_kv · n_embd_v_gqa` in the attention phase, where the FFN's three freed
    ///   `F` blocks less one `E` absorb it — `max(FFN, FFN − 3F + E + KV16)`;
    /// - host (`CUDA_Host`): every graph input (inputs run on the last backend, the CPU, whose
    ///   buffer type is the device's host type: `ggml-backend.cpp:944-949`,
    ///   `llama-context.cpp:406-419`) and the token-embedding rows (GET_ROWS is never
    ///   offloaded, `ggml-cuda.cu:5636-5640`), all live at once.
    pub fn cuda_full_offload(&self, n_stream: u64) -> (u64, u64) {
        let d = self.cuda_device_phases(n_stream);
        let host = self
            .inputs(ALIGN_CPU, true)
            .saturating_add(pad(mul_all([4, self.n_embd, self.tokens]), ALIGN_CPU));
        (d.total, host)
    }

    /// The device buffer's phases with every layer offloaded (see [`Graph::cuda_full_offload`]).
    pub fn cuda_device_phases(&self, n_stream: u64) -> CudaPhases {
        let t = self.tokens;
        // The slots as a float cache lays them out (measured: a quantized cache's Hadamard
        // rotation does not reshuffle them on CUDA, as it does on the CPU), with its inputs.
        let float = Graph {
            quantized_kv: false,
            ..self.clone()
        };
        let rot_inputs = self
            .inputs(ALIGN_CUDA, true)
            .saturating_sub(float.inputs(ALIGN_CUDA, true));
        let mut phases = float.cpu(ALIGN_CUDA);
        phases.ffn = phases.ffn.saturating_add(rot_inputs);
        if phases.attn > 0 {
            phases.attn = phases.attn.saturating_add(rot_inputs);
        }
        phases.out = phases.out.saturating_add(rot_inputs);
        let host_only = pad(mul_all([4, t]), ALIGN_CUDA)
            .saturating_add(pad(mul_all([4, self.n_embd, t]), ALIGN_CUDA));
        let f = pad(mul_all([4, self.n_ff, t]), ALIGN_CUDA);
        let e = pad(mul_all([4, self.n_embd, t]), ALIGN_CUDA);
        let ffn = phases.ffn.saturating_sub(host_only);
        let mut total = phases.total().saturating_sub(host_only);
        let mut kv16_overflow = 0;
        if self.flash_attn && self.quantized_kv {
            let cells = self.caches.iter().map(|c| c.cells).max().unwrap_or(0);
            let gqa = self.caches.iter().map(|c| c.v_gqa).max().unwrap_or(0);
            let kv16 = mul_all([2, pad(mul_all([cells, n_stream, gqa, 2]), ALIGN_CUDA)]);
            kv16_overflow = kv16.saturating_add(e).saturating_sub(mul_all([3, f]));
            total = total.max(ffn.saturating_add(kv16_overflow));
        }
        CudaPhases {
            total,
            ffn,
            out: phases.out.saturating_sub(host_only),
            f,
            kq: phases.kq,
            kv16_overflow,
        }
    }

    /// One `E` at `align`: the slot CUDA's fused-op dependencies may keep alive longer.
    pub fn hidden_block(&self, align: u64) -> u64 {
        pad(mul_all([4, self.n_embd, self.tokens]), align)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Llama-3.1-8B at 4096 cells, ub 512, one slot (grid row llama31-8b-001: 125,841,440 B).
    fn llama(fa: bool, n_out: u64) -> Graph {
        Graph {
            tokens: 512,
            outputs: n_out,
            n_embd: 4096,
            n_head: 32,
            head_dim: 128,
            n_ff: 14336,
            n_vocab: 128_256,
            caches: vec![CacheKind {
                cells: 4096,
                head_dim_k: 128,
                v_gqa: 1024,
            }],
            flash_attn: fa,
            quantized_kv: false,
            fused_qkv: false,
            residual_first: false,
        }
    }

    #[test]
    fn ffn_phase_holds_three_ffn_tensors() {
        let g = llama(true, 1);
        let p = g.cpu(ALIGN_CPU);
        let t = 512;
        let e = 4 * 4096 * t;
        let f = 4 * 14336 * t;
        // inputs: tokens, inp_embd, pos, k_idxs, v_idxs, F16 mask, out_ids (32-aligned)
        let i = 4 * t + e + 4 * t + 8 * t + 8 * t + 4096 * t * 2 + 32;
        assert_eq!(p.inputs, i);
        assert_eq!(p.ffn, i + 2 * e + e + 3 * f, "Q == E here");
        assert_eq!(
            p.total(),
            125_841_440,
            "llama.cpp's own buffer for this row"
        );
        assert_eq!(p.peak(), Phase::Ffn);
    }

    #[test]
    fn no_flash_attention_adds_the_scores_and_the_transposed_v_index() {
        let g = llama(false, 1);
        let p = g.cpu(ALIGN_CPU);
        assert_eq!(p.kq, 4 * 4096 * 512 * 32);
        assert!(p.attn > p.ffn);
        let with_fa = llama(true, 1).inputs(ALIGN_CPU, true);
        // v_idxs 8·T·1024 instead of 8·T; the mask F32 instead of F16.
        assert_eq!(p.inputs - with_fa, 8 * 512 * 1023 + 4096 * 512 * 2);
    }

    #[test]
    fn cuda_split_moves_the_token_inputs_to_the_host() {
        let g = llama(false, 1);
        let (device, host) = g.cuda_full_offload(1);
        let cpu = g.cpu(ALIGN_CUDA).total();
        assert_eq!(device, cpu - 4 * 512 - 4 * 4096 * 512);
        // 2 KiB + 8 MiB + 2 KiB + 4 KiB + 4 MiB + 8 MiB (F32 mask 4096 × 512) + 32 + 8 MiB
        assert_eq!(
            host,
            2048 + (8 << 20) + 2048 + 4096 + (4 << 20) + (8 << 20) + 32 + (8 << 20)
        );
    }
}
