//! llama.cpp: which layers live where, and the components of a llama.cpp estimate.
//!
//! | Rule | Source | Here |
//! |---|---|---|
//! | `-ngl N`: units `0..=n_layer` (`n_layer` = the output layer); the last `min(N, n_layer + 1)` units are on the GPU: `-ngl 1` is the output layer alone, full offload needs `n_layer + 1` | `llama_model::load_tensors` (after PR #18148) | [`Offload`] |
//! | `token_embd` always stays in host memory; a tied output is a duplicate of it in the output layer's buffer | same (`TENSOR_DUPLICATED`) | [`components`] |
//! | each layer's K/V on its layer's device (`offload_kqv`) | `llama_kv_cache` | [`components`] |
//! | `--split-mode layer`: units spread by `--tensor-split` or, without it, each device's free memory, the output layer on the last | `llama_model::load_tensors` (`src/llama-model.cpp:1557-1600` at `0c1e57098`) | [`split_units`], [`super::split`] |
//! | the compute buffers: CPU (measured), the CUDA device and `CUDA_Host` split (derived), a host-resident matmul weight copied into the GPU's buffer when its op is offloaded (partial offload, `T ≥ 32`: `ggml-backend.cpp:969-976`, `ggml-cuda.cu:5825`), pipeline parallelism's 4 input copies on several GPUs (`ggml-backend.cpp:1888`) | [`super::llama_graph`] | [`components`], [`split_components`] |
//! | CPU only: weights (mmap), KV, one CPU compute buffer, output buffer in host RAM | §12 of the research notes | [`components`] |

use std::ops::Range;

use super::arch::ModelSpec;
use super::llama_cpp::{Cells, Compute, compute, resolve_flash_attn};
use super::params::FitParams;
use super::parts::{Component, Estimate, GIB, MIB, host_line, kv_line, line};
use super::sat::add_all;
use super::split::{assign_units, split_weights};

/// Where `-ngl` puts the units of a model of `n_layer` blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Offload {
    /// Blocks.
    pub n_layer: u64,
    /// Units on the GPU, `min(-ngl, n_layer + 1)`.
    pub on_gpu: u64,
}

impl Offload {
    /// `-ngl gpu_layers` (`None`: all, llama.cpp's default `-ngl -1`/`999`).
    pub fn new(n_layer: u64, gpu_layers: Option<u64>) -> Offload {
        let units = n_layer.saturating_add(1);
        Offload {
            n_layer,
            on_gpu: gpu_layers.unwrap_or(units).min(units),
        }
    }

    /// The blocks on the GPU: the last `on_gpu − 1`.
    pub fn gpu_blocks(&self) -> Range<u64> {
        let start = self
            .n_layer
            .saturating_add(1)
            .saturating_sub(self.on_gpu)
            .min(self.n_layer);
        start..self.n_layer
    }

    /// Whether the output layer is on the GPU (`-ngl ≥ 1`).
    pub fn output_on_gpu(&self) -> bool {
        self.on_gpu >= 1
    }

    /// Whether every unit is on the GPU.
    pub fn full(&self) -> bool {
        self.on_gpu == self.n_layer.saturating_add(1)
    }
}

/// Weights on the GPU and in host memory, with how they were located.
struct WeightsSplit {
    gpu: u64,
    host: u64,
    note: String,
}

fn weights_split(model: &ModelSpec, off: &Offload) -> WeightsSplit {
    let w = model.weights_bytes;
    let blocks = off.gpu_blocks();
    let Some(l) = model.layout.as_ref().filter(|l| l.has_blocks()) else {
        // No per-block names: an even split by block.
        let gpu_blocks = blocks.end - blocks.start;
        let gpu = if off.full() {
            w
        } else {
            u64::try_from(u128::from(w) * u128::from(gpu_blocks) / u128::from(off.n_layer.max(1)))
                .unwrap_or(w)
        };
        return WeightsSplit {
            gpu,
            host: w.saturating_sub(gpu),
            note: if off.full() {
                "exact, from the file headers (all on the GPU: no tensor names to keep token_embd apart)".to_string()
            } else {
                "no per-block tensor names: the weights split evenly by block".to_string()
            },
        };
    };
    let beyond = l.blocks_bytes(off.n_layer..l.blocks.len() as u64);
    let head = l
        .output
        .unwrap_or(l.token_embd)
        .saturating_add(l.output_norm)
        .saturating_add(l.other)
        .saturating_add(beyond);
    let mut gpu = l.blocks_bytes(blocks.clone());
    let mut host = l.token_embd.saturating_add(l.blocks_bytes(0..blocks.start));
    if off.output_on_gpu() {
        gpu = gpu.saturating_add(head);
    } else {
        host = host
            .saturating_add(head)
            .saturating_sub(if l.output.is_none() { l.token_embd } else { 0 });
    }
    let tied = if l.output.is_none() && off.output_on_gpu() {
        "; tied embedding: token_embd duplicated as the output layer"
    } else {
        ""
    };
    WeightsSplit {
        gpu,
        host,
        note: format!(
            "exact by tensor: blocks {}..{} and the output layer{tied} (token_embd stays in host RAM)",
            blocks.start, blocks.end
        ),
    }
}

/// The components of a llama.cpp estimate of `model` under `p`, and its warnings.
pub fn components(model: &ModelSpec, p: &FitParams) -> (Vec<Component>, Vec<String>) {
    let mut warnings = Vec::new();
    let fa = resolve_flash_attn(p, model.arch.as_ref());
    if let Some(w) = &fa.warning {
        if !p.cpu_only && p.flash_attn == super::runtime::FlashAttn::Auto {
            warnings.push(w.clone());
        }
    }
    let cells = Cells::new(p);
    let Some(arch) = model.arch.as_ref() else {
        let w = model.weights_bytes;
        let c = vec![
            line("weights", Some(w), Some(w), "exact, from the file headers"),
            kv_line(None, String::new()),
            line(
                "activations",
                Some(w / 20),
                Some(w / 5),
                "5–20 % of the weights (no architecture)",
            ),
            overhead(p),
            margin(p, 0),
        ];
        return (c, warnings);
    };
    let n_layer = arch.layers.len() as u64;
    let off = if p.cpu_only {
        Offload::new(n_layer, Some(0))
    } else {
        Offload::new(n_layer, p.gpu_layers)
    };
    let gpu_blocks = off.gpu_blocks();
    let kv_of = |r: Range<u64>| {
        arch.layers
            .iter()
            .enumerate()
            .filter(|(i, _)| r.contains(&(*i as u64)))
            .map(|(_, l)| cells.layer_bytes(l, p.kv_dtype))
            .fold(0u64, u64::saturating_add)
    };
    let kv_gpu = kv_of(gpu_blocks.clone());
    let kv_host = kv_of(0..gpu_blocks.start);
    let kv_note = format!(
        "{} cells per full layer{}, {}, K and V rows per layer",
        cells.total(super::arch::LayerKind::Full),
        match cells.n_kv_swa(arch) {
            Some(_) => format!(
                ", {} per sliding layer",
                cells.total(
                    arch.layers
                        .iter()
                        .find(|l| matches!(l.kind, super::arch::LayerKind::Sliding { .. }))
                        .map_or(super::arch::LayerKind::None, |l| l.kind)
                )
            ),
            None => String::new(),
        },
        p.kv_dtype.as_str()
    );
    let comp = compute(arch, p, fa.on);
    if arch.vocab_size.is_none() {
        warnings.push(
            "the model states no vocabulary size (GGUF: no vocab_size, tokenizer.ggml.tokens or token_embd tensor; config.json: no vocab_size): the output buffer is unknown and the compute buffer's logits are not counted"
                .to_string(),
        );
    }
    if arch.intermediate_size.is_none() {
        warnings.push(
            "no feed-forward width (intermediate_size / feed_forward_length): the compute buffer's FFN phase is not counted"
                .to_string(),
        );
    }
    let split = weights_split(model, &off);
    if p.cpu_only {
        return (
            cpu_components(
                model,
                p,
                kv_gpu.saturating_add(kv_host),
                &kv_note,
                comp.as_ref(),
            ),
            warnings,
        );
    }
    // Partial offload, measured on an H200 (`tests/fixtures/llama_cpp/cuda.csv`): with a graph
    // of T ≥ 32 tokens every op of a CPU layer runs on the GPU (an op whose weight is in host
    // memory is offloaded, `ggml-backend.cpp:969-976`, `ggml-cuda.cu:5825`, and the ops
    // around it follow), so `CUDA_Host` holds the inputs as with full offload, and each host
    // weight is copied into the device buffer for its own op (a split per weight,
    // `ggml-backend.cpp:1324-1340`): the output matrix when the output layer is on the CPU and
    // the graph reserves ≥ 32 outputs (on the output phase: exact on every measured row), and
    // a block's largest tensor `W` when a block is, which best fit places among the FFN's freed
    // blocks — not modelled: a band from FFN + max(0, W − F) (without flash attention, the
    // full-offload buffer when W fits the scores' freed block) to FFN + W + F + E.
    let offloaded = comp
        .as_ref()
        .is_some_and(|c| c.tokens >= OP_OFFLOAD_MIN_BATCH);
    let layout = model.layout.as_ref();
    let block_copy = if offloaded && gpu_blocks.start > 0 {
        layout.map_or(0, |l| l.largest_block_tensor)
    } else {
        0
    };
    let out_copy = match &comp {
        Some(c) if offloaded && !off.output_on_gpu() && c.outputs >= OP_OFFLOAD_MIN_BATCH => {
            layout.map_or(0, |l| l.output.unwrap_or(l.token_embd))
        }
        _ => 0,
    };
    let (cl, ch, cnote) = match &comp {
        Some(c) => {
            let d = &c.device_phases;
            let mut low = c.device;
            let mut high = band_high(low).saturating_add(c.hidden_block);
            if d.kv16_overflow > 0 {
                high = high.saturating_add(d.kv16_overflow);
            }
            if block_copy > 0 {
                // Without flash attention the copy fits the scores' freed block when it can.
                if block_copy > d.kq {
                    low = low.max(d.ffn.saturating_add(block_copy.saturating_sub(d.f)));
                }
                high = high.max(add_all([d.ffn, block_copy, d.f, c.hidden_block]));
            }
            if out_copy > 0 {
                let out = d.out.saturating_add(out_copy);
                low = low.max(out);
                high = high.max(band_high(out).saturating_add(c.hidden_block));
            }
            (
                Some(low),
                Some(high.max(low)),
                compute_note(c, block_copy, out_copy),
            )
        }
        None => (
            Some(model.weights_bytes / 20),
            Some(model.weights_bytes / 5),
            "5–20 % of the weights (no hidden size or head count known)".to_string(),
        ),
    };
    let mut c = vec![
        line("weights", Some(split.gpu), Some(split.gpu), split.note),
        line("kv_cache", Some(kv_gpu), Some(kv_gpu), kv_note.clone()),
        line("activations", cl, ch, cnote),
        overhead(p),
    ];
    c.push(margin(p, 0));
    // Host memory beside the GPU.
    c.push(host_line(
        "host_weights",
        Some(split.host),
        Some(split.host),
        "token_embd and the blocks left on the CPU (mmap'd: page cache counted in MemAvailable)",
    ));
    if kv_host > 0 {
        c.push(host_line(
            "host_kv_cache",
            Some(kv_host),
            Some(kv_host),
            format!("the CPU layers' KV: {kv_note}"),
        ));
    }
    if let Some(k) = &comp {
        let (host, note) = if gpu_blocks.start > 0 && !offloaded {
            (
                k.host.max(k.cpu),
                "CUDA_Host buffer: the graph inputs and the CPU layers' activations (fewer than 32 tokens: their ops stay on the CPU; the CPU buffer's phases, not measured on a GPU)",
            )
        } else {
            (
                k.host,
                "CUDA_Host buffer: every graph input (masks, index inputs, positions, token ids) + the token-embedding rows (measured within ±5 % on an H200, partial offload included)",
            )
        };
        c.push(host_line(
            "host_compute",
            Some(host),
            Some(band_high(host)),
            note,
        ));
        c.push(output_line(k, p, true, arch.vocab_size));
    }
    if !off.full()
        && p.gpu_layers.is_some()
        && !model.layout.as_ref().is_some_and(|l| l.has_blocks())
    {
        warnings.push(
            "the weights have no per-block tensor names: the offload split is even by block"
                .to_string(),
        );
    }
    (c, warnings)
}

/// `GGML_OP_OFFLOAD_MIN_BATCH` (`ggml-cuda.cu:5825`): smaller graphs keep host weights' ops
/// on the CPU.
const OP_OFFLOAD_MIN_BATCH: u64 = 32;

/// The high end of a compute buffer: the model's measured tolerance (±5 % of llama.cpp's own
/// buffers on every configuration of `tests/fixtures/llama_cpp/grid.csv`).
fn band_high(v: u64) -> u64 {
    v.saturating_add(v.div_ceil(20))
}

fn compute_note(c: &Compute, block_copy: u64, out_copy: u64) -> String {
    let mut s = format!(
        "CUDA compute buffer, {} tokens × {} outputs reserved, peak at the {} phase{}: the CPU model split as llama.cpp places it (measured within ±5 % on an H200, full offload); high end +5 % and one hidden block (fused CUDA ops)",
        c.tokens,
        c.outputs,
        c.peak,
        if c.kq > 0 {
            format!(
                ", F32 scores {:.1} MiB (flash attention off)",
                c.kq as f64 / MIB as f64
            )
        } else {
            String::new()
        }
    );
    if block_copy > 0 {
        s.push_str(&format!(
            "; a block's weights on the CPU: each copied in for its offloaded op, the largest {:.1} MiB (where best fit places it is not modelled: a band)",
            block_copy as f64 / MIB as f64
        ));
    }
    if out_copy > 0 {
        s.push_str(&format!(
            "; the output matrix on the CPU: {:.1} MiB copied in for the logits",
            out_copy as f64 / MIB as f64
        ));
    }
    s
}

/// The output buffer: logits for each slot at creation; the C API and `common` tools grow it
/// to `n_batch` rows when a batch asks for every token's logits. Unknown without a vocabulary
/// size (`n_vocab` rows of logits), never 0 bytes.
fn output_line(k: &Compute, p: &FitParams, host: bool, vocab: Option<u64>) -> Component {
    let f = if host { host_line } else { line };
    if vocab.is_none() {
        return f("output_buffer", None, None, NO_VOCAB.to_string());
    }
    let note = if k.output_grown > k.output {
        format!(
            "logits, n_vocab × slots × 4 B at creation; n_vocab × n_batch × 4 B once a batch asks for every token's logits ({}: logits_all, perplexity)",
            p.api().as_str()
        )
    } else {
        "logits, n_vocab × slots × 4 B".to_string()
    };
    f("output_buffer", Some(k.output), Some(k.output_grown), note)
}

/// The output buffer's note when the vocabulary size is unknown.
const NO_VOCAB: &str = "unknown: the model states no vocabulary size (n_vocab rows of logits)";

fn overhead(p: &FitParams) -> Component {
    if p.cpu_only {
        line(
            "runtime_overhead",
            Some(150 * MIB),
            Some(150 * MIB),
            "150 MiB RAM footprint (gguf-parser's default)",
        )
    } else {
        // Measured on an H200 (driver 580, CUDA 13.0; tests/fixtures/llama_cpp/cuda-serving.json):
        // 523 MiB beside llama.cpp's buffers with a context created, 703 MiB once a 512-token
        // batch and a few tokens were decoded (kernel modules, cuBLAS workspace, the CUDA pool).
        line(
            "runtime_overhead",
            Some(250 * MIB),
            Some(768 * MIB),
            "250 MiB footprint (gguf-parser) to 768 MiB: a serving process measured 703 MiB beside its buffers on an H200 (CUDA context, kernels, cuBLAS workspace, the CUDA pool)",
        )
    }
}

fn margin(p: &FitParams, rest_high: u64) -> Component {
    if p.cpu_only {
        line(
            "margin",
            Some(0),
            Some(rest_high / 10),
            "10 % for alignment and fragmentation (llama.cpp's --fit budgets devices only)",
        )
    } else {
        line(
            "margin",
            Some(0),
            Some(GIB),
            "llama.cpp --fit keeps 1 GiB free",
        )
    }
}

/// CPU only: everything in host RAM, judged against MemAvailable.
fn cpu_components(
    model: &ModelSpec,
    p: &FitParams,
    kv: u64,
    kv_note: &str,
    comp: Option<&Compute>,
) -> Vec<Component> {
    let w = model.weights_bytes;
    let mut c = vec![
        line(
            "weights",
            Some(w),
            Some(w),
            "exact; mmap'd (page cache, in MemAvailable); on an AVX2 build (assumed) Q4_0/Q4_K/IQ4_NL/MXFP4 matrices (Q2_K with AVX-512) are repacked into anonymous memory of the same size, read once from the map; an AMX build also copies Q4_1/Q8_0/Q5_K/Q6_K/IQ4_XS and F16 matrices",
        ),
        line("kv_cache", Some(kv), Some(kv), kv_note.to_string()),
    ];
    match comp {
        Some(k) => {
            c.push(line(
                "activations",
                Some(k.cpu),
                Some(band_high(k.cpu)),
                format!(
                    "CPU compute buffer, {} tokens × {} outputs reserved, peak at the {} phase (graph inputs and masks included): ±5 % of llama.cpp's own buffers on 612 measured configurations; high end +5 %",
                    k.tokens, k.outputs, k.peak
                ),
            ));
            c.push(output_line(
                k,
                p,
                false,
                model.arch.as_ref().and_then(|a| a.vocab_size),
            ));
        }
        None => c.push(line(
            "activations",
            Some(w / 20),
            Some(w / 5),
            "5–20 % of the weights",
        )),
    }
    c.push(overhead(p));
    let rest: u64 = c
        .iter()
        .filter_map(|x| x.high_bytes)
        .fold(0, u64::saturating_add);
    c.push(margin(p, rest));
    c
}

/// `--split-mode layer` across devices: the device (index into `free`) of each of the
/// `on_gpu` offloaded units, in unit order (blocks, then the output layer), proportionally to
/// each device's free memory as llama.cpp does when `--tensor-split` is not given (the sizes
/// taken as `float`, as llama.cpp does: [`assign_units`]).
pub fn split_units(off: &Offload, free: &[u64]) -> Vec<usize> {
    #[allow(clippy::cast_precision_loss)]
    let weights: Vec<f32> = free.iter().map(|f| *f as f32).collect();
    assign_units(off.on_gpu, &weights)
}

/// The units' devices under `p`: `--tensor-split` when given and not all zero for these
/// devices, else `free` memory (llama.cpp's rule).
pub fn split_units_for(off: &Offload, p: &FitParams, free: &[u64]) -> Vec<usize> {
    assign_units(off.on_gpu, &weights_for(p, free))
}

/// The proportions of the split over devices with `free` memory, all known ([`split_weights`]).
fn weights_for(p: &FitParams, free: &[u64]) -> Vec<f32> {
    let free: Vec<Option<u64>> = free.iter().copied().map(Some).collect();
    split_weights(p.tensor_split.as_ref(), &free).unwrap_or_default()
}

/// The estimate of each device under `--split-mode layer` (device components only; the host
/// part is the single-device estimate's): each device holds its units' weights and KV, its
/// own compute buffer and overhead. The units go by `--tensor-split` or `free` memory
/// ([`split_components_by`]).
pub fn split_components(model: &ModelSpec, p: &FitParams, free: &[u64]) -> Vec<Vec<Component>> {
    split_components_by(model, p, &weights_for(p, free))
}

/// [`split_components`] with the split's `proportions` already known, one per device
/// ([`split_weights`]: `--tensor-split`'s need no free figure).
pub fn split_components_by(
    model: &ModelSpec,
    p: &FitParams,
    proportions: &[f32],
) -> Vec<Vec<Component>> {
    let (single, _) = components(model, p);
    let Some(arch) = model.arch.as_ref() else {
        return vec![single; proportions.len().min(1)];
    };
    let n_layer = arch.layers.len() as u64;
    let off = Offload::new(n_layer, p.gpu_layers);
    let owner = assign_units(off.on_gpu, proportions);
    // Every unit offloaded on two or more GPUs: pipeline parallelism keeps 4 copies of every
    // input (`llama-context.cpp:430-435`, `GGML_SCHED_MAX_COPIES`, `ggml-backend.cpp:1888`).
    let used = {
        let mut d: Vec<usize> = owner.clone();
        d.dedup();
        d.len()
    };
    let pipeline = off.full() && used > 1;
    let copies = compute(arch, p, resolve_flash_attn(p, Some(arch)).on)
        .filter(|_| pipeline)
        .map_or(0, |c| c.inputs.saturating_mul(3));
    let start = off.gpu_blocks().start;
    let cells = Cells::new(p);
    let layout = model.layout.as_ref().filter(|l| l.has_blocks());
    let even = model.weights_bytes / n_layer.max(1);
    let get = |name: &str| single.iter().find(|c| c.name == name).cloned();
    (0..proportions.len())
        .map(|d| {
            let mut weights = 0u64;
            let mut kv = 0u64;
            for (k, dev) in owner.iter().enumerate() {
                if *dev != d {
                    continue;
                }
                let unit = start.saturating_add(k as u64);
                if unit < n_layer {
                    let w = layout.map_or(even, |l| l.blocks_bytes(unit..unit + 1));
                    weights = weights.saturating_add(w);
                    let layer = arch.layers.get(unit as usize);
                    kv = kv.saturating_add(layer.map_or(0, |l| cells.layer_bytes(l, p.kv_dtype)));
                } else {
                    let rest = model.weights_bytes.saturating_sub(even.saturating_mul(n_layer));
                    weights = weights.saturating_add(layout.map_or(rest, |l| {
                        add_all([
                            l.output.unwrap_or(l.token_embd),
                            l.output_norm,
                            l.other,
                            l.blocks_bytes(n_layer..l.blocks.len() as u64),
                        ])
                    }));
                }
            }
            let by = if p.tensor_split.and_then(|t| t.for_devices(proportions.len())).is_some() {
                "by --tensor-split"
            } else {
                "by free memory"
            };
            let mut c = vec![
                line("weights", Some(weights), Some(weights), format!("this device's share of the offloaded layers (--split-mode layer, {by})")),
                line("kv_cache", Some(kv), Some(kv), "the KV of this device's layers"),
            ];
            c.extend(get("activations").map(|mut a| {
                if copies > 0 {
                    a.low_bytes = a.low_bytes.map(|v| v.saturating_add(copies));
                    a.high_bytes = a.high_bytes.map(|v| v.saturating_add(copies));
                    a.note.push_str("; + 3 more copies of the graph inputs (pipeline parallelism over several GPUs, derived)");
                }
                a
            }));
            c.extend(get("runtime_overhead"));
            c.extend(get("margin"));
            c
        })
        .collect()
}

/// [`split_components`] as estimates, one per device (judge each against its own budget with
/// [`super::judge::judge_estimate`]; the host part stays with the whole-model
/// [`super::fit::estimate`]).
pub fn estimate_split(model: &ModelSpec, p: &FitParams, free: &[u64]) -> Vec<Estimate> {
    estimate_split_by(model, p, &weights_for(p, free))
}

/// [`estimate_split`] with the split's proportions already known ([`split_components_by`]).
pub fn estimate_split_by(model: &ModelSpec, p: &FitParams, proportions: &[f32]) -> Vec<Estimate> {
    split_components_by(model, p, proportions)
        .into_iter()
        .map(|c| Estimate::from_components(c, None, Vec::new()))
        .collect()
}

#[cfg(test)]
mod tests;
