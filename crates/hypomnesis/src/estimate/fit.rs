//! Will it fit? Named components with a low/high band.
//!
//! `peak ≈ weights + KV cache + activations + runtime overhead [+ CUDA graphs] + margin`.
//! Weights come exact from the file headers; the KV cache exact from the architecture for the
//! chosen runtime and its settings; the rest are bands whose ends are the runtimes' own rules
//! or published figures (`docs/estimation.md` cites each).
//!
//! Owns the model ([`ModelSpec`]) and the [`estimate`] with its [`Assumptions`] and warnings;
//! the run parameters are [`super::params`]'s. The per-runtime rules are in [`super::llama_cpp`],
//! [`super::offload`] and [`super::vllm`]; the verdict in [`mod@super::judge`]; the budget in
//! [`super::budget`].

use super::arch::Architecture;
pub use super::arch::ModelSpec;
use super::assume::Assumptions;
use super::kv::kv_cache_bytes_for;
pub use super::params::{DEFAULT_CONTEXT, FitParams};
pub use super::parts::{Component, Estimate, Memory};
use super::parts::{GIB, MIB, kv_line, line};
use super::runtime::{FlashAttn, Runtime};
use super::sat::{add_all, mul_all};
use super::{offload, vllm};

/// The estimate for `params` (`p` is taken as valid; see [`FitParams::validate`]).
pub fn estimate(model: &ModelSpec, p: FitParams) -> Estimate {
    let mut warnings = Vec::new();
    if let Some(a) = &model.arch {
        warnings.extend(a.warnings.iter().cloned());
        if let Some(w) = beyond_trained(a, &p) {
            warnings.push(w);
        }
    } else {
        warnings.push(
            "no architecture (no config.json beside the weights): weights only — the KV cache \
             is unknown and the estimate incomplete"
                .to_string(),
        );
    }
    let (components, more) = match p.runtime {
        Runtime::LlamaCpp => offload::components(model, &p),
        Runtime::Vllm => vllm_components(model, &p),
        Runtime::Generic => (generic_components(model, &p), Vec::new()),
    };
    warnings.extend(more);
    let assumptions = Assumptions::of(model, &p);
    Estimate::from_components(components, Some(assumptions), warnings)
}

/// The warning for a context beyond the trained one (vLLM's refusal is the verdict's).
fn beyond_trained(a: &Architecture, p: &FitParams) -> Option<String> {
    let trained = a.max_context?;
    let per_seq = match (p.runtime, p.slots) {
        (Runtime::LlamaCpp, Some(_)) => super::llama_cpp::Cells::new(p).n_ctx_seq,
        _ => p.context,
    };
    (per_seq > trained).then(|| match p.runtime {
        Runtime::LlamaCpp => format!(
            "context per sequence {per_seq} > n_ctx_train {trained}: llama.cpp warns \"possible \
             training context overflow\"; llama-server caps each slot at {trained} but still \
             allocates the whole -c"
        ),
        Runtime::Vllm => format!("context {per_seq} > the derived max_model_len {trained}"),
        Runtime::Generic => format!(
            "context {per_seq} > the trained context {trained}: memory is estimated as asked, \
             quality beyond it is not assured"
        ),
    })
}

fn weights_line(bytes: u64, note: &str) -> Component {
    line("weights", Some(bytes), Some(bytes), note)
}

fn with_margin(mut c: Vec<Component>, low: u64, high: u64, note: &str) -> Vec<Component> {
    c.push(line("margin", Some(low), Some(high), note));
    c
}

fn sum_high(c: &[Component]) -> u64 {
    c.iter()
        .filter_map(|x| x.high_bytes)
        .fold(0u64, u64::saturating_add)
}

/// PyTorch / transformers.
fn generic_components(model: &ModelSpec, p: &FitParams) -> Vec<Component> {
    let w = model.weights_bytes;
    let arch = model.arch.as_ref();
    let kv = arch.map(|a| kv_cache_bytes_for(a, p));
    let mut c = vec![
        weights_line(w, "exact, from the file headers"),
        kv_line(
            kv,
            format!(
                "{} tokens × {} sequence{}, {}, per layer for generic",
                p.context,
                p.batch,
                if p.batch == 1 { "" } else { "s" },
                p.kv_dtype.as_str()
            ),
        ),
    ];
    let (low, high, note) = generic_activations(arch, p, w);
    // Eager attention materialises one layer's heads × context² scores (bf16).
    let scores = match (p.flash_attn, arch.and_then(|a| a.attention_heads)) {
        (FlashAttn::Off, Some(heads)) => {
            super::kv::attention_bytes(p.batch, p.context, heads, 0, 0, 2, true)
        }
        _ => 0,
    };
    let note = if scores > 0 {
        format!("{note}; + the heads × context² score matrix of eager attention (--flash-attn off)")
    } else {
        note
    };
    c.push(line(
        "activations",
        Some(low.saturating_add(scores)),
        Some(high.saturating_add(scores)),
        note,
    ));
    c.push(line(
        "runtime_overhead",
        Some(300 * MIB),
        Some(GIB),
        "CUDA context + PyTorch: ~300 MiB lazy-loaded, > 1 GiB eager",
    ));
    let high = sum_high(&c) / 10;
    with_margin(c, 0, high, "10 % for alignment and fragmentation")
}

/// The activations of one PyTorch forward pass over the whole prompt (no chunking): the largest
/// transient of a layer, per token, plus the kept logits (one token, fp32).
///
/// With the MLP width known, the peak is inside the MLP: `act(gate(x))`, `up(x)` and their
/// product live at once (3 × intermediate), beside a few hidden-size tensors (the residual, the
/// normed input, the attention output, rotary tables): low 2 × intermediate + 2 × hidden, high
/// 3 × intermediate + 6 × hidden elements of 2 bytes (bf16/fp16) per token. Measured on an H200
/// (transformers 5.17, torch 2.11, SDPA, a 16-layer Llama-3-8B-shaped model,
/// `bench/device/run-all.sh`): 123 KB per token at 8192 and 120 KB at 32768 tokens, against
/// 74 KB low and 135 KB high here. Without it, logits + hidden states, up to 20 % of the weights.
fn generic_activations(arch: Option<&Architecture>, p: &FitParams, w: u64) -> (u64, u64, String) {
    let tokens = p.batch.saturating_mul(p.context);
    match arch.and_then(|a| Some((a.hidden_size?, a.vocab_size?, a.intermediate_size))) {
        None => (
            w / 20,
            w / 5,
            "5–20 % of the weights (no hidden/vocab size known)".to_string(),
        ),
        Some((h, v, Some(ff))) if ff > 0 => {
            let logits = p.batch.saturating_mul(v).saturating_mul(4);
            let per = |n_ff: u64, n_h: u64| {
                n_ff.saturating_mul(ff)
                    .saturating_add(n_h.saturating_mul(h))
                    .saturating_mul(2)
            };
            (
                tokens.saturating_mul(per(2, 2)).saturating_add(logits),
                tokens.saturating_mul(per(3, 6)).saturating_add(logits),
                "one layer's MLP transients over the whole prompt (2–3 × intermediate + \
                 hidden states, bf16) + the kept logits"
                    .to_string(),
            )
        }
        Some((h, v, _)) => {
            let low = mul_all([p.batch, v, 4]).saturating_add(mul_all([tokens, h, 2, 2]));
            (
                low,
                low.saturating_mul(2).max(w / 5),
                "logits + hidden states; up to 20 % of weights (EleutherAI rule)".to_string(),
            )
        }
    }
}

/// vLLM, per tensor-parallel rank.
fn vllm_components(model: &ModelSpec, p: &FitParams) -> (Vec<Component>, Vec<String>) {
    let tp = p.tensor_parallel.max(1);
    let arch = model.arch.as_ref();
    let mnbt = p.batched_tokens();
    let weights = model.weights_bytes.div_ceil(tp);
    let kv = arch.map(|a| {
        vllm::request_kv_bytes(a, p.context, mnbt, p.kv_dtype, tp).saturating_mul(p.batch)
    });
    let per_rank = if tp > 1 {
        format!(", one of {tp} tensor-parallel ranks")
    } else {
        String::new()
    };
    let mut c = vec![
        weights_line(
            weights,
            &if tp > 1 {
                format!("1/{tp} of the exact weights per rank (norms replicated: ≈)")
            } else {
                "exact, from the file headers".to_string()
            },
        ),
        kv_line(
            kv,
            format!(
                "{} request{} of max_model_len {}, {}, hybrid manager blocks of 16 (max_num_batched_tokens {mnbt}){per_rank}",
                p.batch,
                if p.batch == 1 { "" } else { "s" },
                p.context,
                p.kv_dtype.as_str()
            ),
        ),
    ];
    let w = model.weights_bytes;
    let (al, ah, anote) = match arch.and_then(|a| Some((a.hidden_size?, a.vocab_size?))) {
        None => (
            w / 20,
            w / 5,
            "5–20 % of the weights (no hidden/vocab size known)".to_string(),
        ),
        Some((h, v)) => {
            let low = mul_all([mnbt, h, 2, 8]);
            (
                low,
                add_all([mul_all([3, low]), mul_all([256, v, 4])]),
                format!("profile run of {mnbt} batched tokens + sampler logits"),
            )
        }
    };
    c.push(line("activations", Some(al), Some(ah), anote));
    let (oh, onote) = if tp > 1 {
        (
            3666 * MIB,
            "non-torch memory (CUDA context, NCCL, allocator): 0.20 GiB to 3.58 GiB per GPU at TP 2 (vllm PR #10511, #14447)",
        )
    } else {
        (
            1833 * MIB,
            "non-torch memory (CUDA context, cuBLAS, allocator): 0.20 GiB (vllm #14447) to 1.79 GiB (vllm PR #10511)",
        )
    };
    c.push(line("runtime_overhead", Some(200 * MIB), Some(oh), onote));
    c.push(line(
        "cuda_graphs",
        Some(360 * MIB),
        Some(2560 * MIB),
        "0.36–2.5 GiB in published vLLM logs",
    ));
    let c = with_margin(c, 150 * MIB, 150 * MIB, "vLLM's 150 MiB redundancy buffer");
    let warnings = vec![format!(
        "vLLM gives every byte left under gpu_memory_utilization {} to its KV cache; this \
         estimate needs room for {} request{} of max_model_len {}",
        p.utilization(),
        p.batch,
        if p.batch == 1 { "" } else { "s" },
        p.context
    )];
    (c, warnings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::runtime::KvDtype;
    use crate::estimate::test_models::llama_8b;

    fn find<'a>(e: &'a Estimate, name: &str) -> &'a Component {
        e.components.iter().find(|c| c.name == name).unwrap()
    }

    #[test]
    fn components_and_band() {
        let e = estimate(
            &llama_8b(),
            FitParams::new(8192, 1, KvDtype::F16, Runtime::LlamaCpp),
        );
        assert_eq!(find(&e, "kv_cache").low_bytes, Some(1 << 30));
        // Flash attention on (auto, f16), llama-server: the device buffer of the graph model
        // (the FFN phase), +5 % and one hidden block at the high end.
        let p = FitParams::new(8192, 1, KvDtype::F16, Runtime::LlamaCpp);
        let c =
            super::super::llama_cpp::compute(llama_8b().arch.as_ref().unwrap(), &p, true).unwrap();
        let act = find(&e, "activations");
        assert_eq!(c.peak, crate::estimate::llama_graph::Phase::Ffn);
        assert_eq!(act.low_bytes, Some(c.device));
        assert_eq!(
            act.high_bytes,
            Some(c.device + c.device.div_ceil(20) + 4 * 4096 * 512)
        );
        assert!(c.device > 100 * MIB && c.device < 130 * MIB, "{}", c.device);
        assert!(e.low_bytes < e.high_bytes);
        assert!(e.is_complete());
        let a = e.assumptions.as_ref().unwrap();
        assert_eq!(a.flash_attn, Some(true));
    }

    #[test]
    fn size_only_estimates_say_what_is_unknown() {
        let e = estimate(
            &ModelSpec::new(14 << 30, None),
            FitParams::new(4096, 1, KvDtype::F16, Runtime::Generic),
        );
        assert_eq!(e.unknown_components, vec!["kv_cache"]);
        assert!(!e.is_complete());
        assert!(e.warnings[0].contains("incomplete"), "{:?}", e.warnings);
        let given = Estimate::requested(14 << 30);
        assert!(given.is_complete() && given.assumptions.is_none());
    }

    /// The device run of 2026-11-26 (H200, transformers 5.17, SDPA, 16-layer Llama-3-8B shape,
    /// docs/validation.md): the forward pass's activations (max_allocated − weights − KV) were
    /// 1,010,958,336 B at 8192 tokens and 3,943,170,048 B at 32768; the old rule's high end
    /// (1,816,187,699 B at both) was below the second, and the whole peak +10.1 % above the band.
    #[test]
    fn generic_activations_scale_with_the_prompt_as_measured_on_an_h200() {
        // Activations do not depend on the layer count: the 32-layer model stands in, with
        // the MLP width of the measured one (config.json's intermediate_size).
        let mut m = llama_8b();
        if let Some(a) = m.arch.as_mut() {
            a.intermediate_size = Some(14336);
        }
        for (ctx, measured) in [(8192u64, 1_010_958_336u64), (32768, 3_943_170_048)] {
            let p = FitParams::new(ctx, 1, KvDtype::BF16, Runtime::Generic);
            let e = estimate(&m, p);
            let a = find(&e, "activations");
            let (lo, hi) = (a.low_bytes.unwrap(), a.high_bytes.unwrap());
            assert!(
                lo <= measured && measured <= hi,
                "{ctx}: {lo} ≤ {measured} ≤ {hi}"
            );
        }
    }

    #[test]
    fn generic_eager_attention_adds_the_score_matrix() {
        let m = llama_8b();
        let p = FitParams::new(8192, 1, KvDtype::BF16, Runtime::Generic);
        let sdpa = find(&estimate(&m, p), "activations").low_bytes.unwrap();
        let eager = find(&estimate(&m, p.flash_attn(FlashAttn::Off)), "activations")
            .low_bytes
            .unwrap();
        assert_eq!(eager - sdpa, 32 * 8192 * 8192 * 2);
    }
}
