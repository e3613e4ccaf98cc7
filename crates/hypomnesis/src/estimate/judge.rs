//! The verdict: an estimate against a budget (and, for llama.cpp on a GPU, its host part against
//! the host's available RAM), the runtime's own refusals, and the largest context, batch and
//! `--gpu-layers` that fit.
//!
//! **fits** only when the high end fits; **tight** when only the low end does; **incomplete**
//! when what is known fits but a component is unknown (a weights-only estimate is never a plain
//! "fits"); **does not fit** otherwise, or when the runtime refuses to start (vLLM: a context
//! beyond the derived `max_model_len`, its reservation not free, one request's KV not fitting).

use super::arch::ModelSpec;
use super::budget::{Budget, BudgetSource};
use super::fit::estimate;
use super::offload::Offload;
use super::params::FitParams;
use super::parts::Estimate;
use super::runtime::Runtime;
use super::vllm;
use crate::types::spelling::spelled;

#[cfg(feature = "serde")]
use serde::Serialize;

const GIB: f64 = (1u64 << 30) as f64;

spelled! {
    /// The answer.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum Fit {
        /// Even the high end of the band fits.
        Fits = "fits",
        /// The low end fits, the high end does not.
        Tight = "tight",
        /// What is known fits, but a component could not be estimated (no architecture): not
        /// a verdict of "fits".
        Incomplete = "incomplete",
        /// Not even the low end fits, or the runtime refuses to start.
        DoesNotFit = "does_not_fit",
    }
}

impl Fit {
    /// The worse of two answers (does not fit > incomplete > tight > fits): a model split over
    /// several memories fits only where every part does.
    #[must_use]
    pub fn worst(self, other: Fit) -> Fit {
        self.max(other)
    }

    fn of(low: u64, high: u64, budget: u64, complete: bool) -> Fit {
        if low > budget {
            Fit::DoesNotFit
        } else if !complete {
            Fit::Incomplete
        } else if high <= budget {
            Fit::Fits
        } else {
            Fit::Tight
        }
    }
}

/// The host part of a llama.cpp run on a GPU against the host's available RAM.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct HostVerdict {
    /// `MemAvailable`.
    pub budget_bytes: u64,
    /// The host part's low end.
    pub low_bytes: u64,
    /// Its high end.
    pub high_bytes: u64,
    /// The answer for the host part.
    pub fit: Fit,
    /// `budget − high`.
    pub headroom_bytes: i128,
}

/// The estimate against one budget.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Verdict {
    /// What the runtime may use ([`Budget::bytes`]): free memory, or for vLLM
    /// `gpu_memory_utilization × total`.
    pub budget_bytes: u64,
    /// Where the budget comes from ([`Budget::source`]). Not serialised: `hmn fits --json`
    /// prints it beside the verdict, as the device's `budget_source`.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub budget_source: BudgetSource,
    /// The answer, every part together (device, host, the runtime's refusals).
    pub fit: Fit,
    /// `budget − high` (negative: the shortfall).
    pub headroom_bytes: i128,
    /// The largest context (at the given batch) whose high end fits; `None` without an
    /// architecture.
    pub max_context: Option<u64>,
    /// The largest batch (at the given context) whose high end fits.
    pub max_batch: Option<u64>,
    /// Runtime-specific notes ([`Budget::notes`], the refusal).
    pub notes: Vec<String>,
    /// The device part alone.
    pub device_fit: Fit,
    /// The host part (llama.cpp on a GPU), when the host's available RAM was given.
    pub host: Option<HostVerdict>,
    /// Why the runtime refuses to start, when it does (the verdict is then "does not fit").
    pub refusal: Option<String>,
    /// llama.cpp: the largest `--gpu-layers` whose device part fits (of `n_layer + 1`).
    pub max_gpu_layers: Option<u64>,
}

/// Compares a finished estimate with `budget`: the verdict and headroom, without the largest
/// context or batch (which need the model; see [`judge`]).
pub fn judge_estimate(est: &Estimate, budget: &Budget) -> Verdict {
    let b = budget.bytes;
    let fit = Fit::of(est.low_bytes, est.high_bytes, b, est.is_complete());
    // vLLM refuses to start when its reservation is not free (the budget is then 0).
    let refusal = (budget.source == BudgetSource::VllmUtilization && b == 0)
        .then(|| budget.notes.first().cloned())
        .flatten();
    Verdict {
        budget_bytes: b,
        budget_source: budget.source,
        fit: if refusal.is_some() {
            Fit::DoesNotFit
        } else {
            fit
        },
        headroom_bytes: i128::from(b) - i128::from(est.high_bytes),
        max_context: None,
        max_batch: None,
        notes: budget.notes.clone(),
        device_fit: fit,
        host: None,
        refusal,
        max_gpu_layers: None,
    }
}

/// The host part of `est` (llama.cpp on a GPU) against `host` (the host's available RAM);
/// `None` when the estimate has no host part.
pub fn host_verdict(est: &Estimate, host: &Budget) -> Option<HostVerdict> {
    let (Some(low), Some(high)) = (est.host_low_bytes, est.host_high_bytes) else {
        return None;
    };
    Some(HostVerdict {
        budget_bytes: host.bytes,
        low_bytes: low,
        high_bytes: high,
        fit: Fit::of(low, high, host.bytes, true),
        headroom_bytes: i128::from(host.bytes) - i128::from(high),
    })
}

/// Adds the host part of `est` judged against `host` ([`host_verdict`]); the verdict becomes
/// the worse of the two. When the device itself lives in host RAM (an integrated GPU judged
/// against `MemAvailable`, an APU's GTT, Apple's working set:
/// [`BudgetSource::is_host_memory`]), the host part gets what the device part leaves of it.
pub fn judge_host(verdict: &mut Verdict, est: &Estimate, host: &Budget) {
    let shared;
    let host = if verdict.budget_source.is_host_memory() {
        shared = Budget::host(host.bytes.saturating_sub(est.high_bytes));
        &shared
    } else {
        host
    };
    if let Some(h) = host_verdict(est, host) {
        verdict.fit = verdict.fit.worst(h.fit);
        verdict.host = Some(h);
    }
}

/// The largest `x` in `1..=cap` with `ok(x)`, assuming `ok` is monotone; 0 when none.
fn largest(cap: u64, ok: impl Fn(u64) -> bool) -> u64 {
    if !ok(1) {
        return 0;
    }
    let (mut lo, mut hi) = (1u64, cap.max(1));
    if ok(hi) {
        return hi;
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if ok(mid) { lo = mid } else { hi = mid }
    }
    lo
}

/// Compares the estimate for `p` with `budget` (chosen for `p.runtime`: see
/// [`Budget::for_device`], [`Budget::from_free`]): [`judge_estimate`], plus the largest
/// context (at the given batch; capped at the trained context, or at 2²⁰ tokens without one,
/// and never below `p.context`) and the largest batch (at the given context, capped at 4096
/// sequences) whose high end fits, when the architecture is known; for llama.cpp on a GPU the
/// largest `--gpu-layers` ([`largest_gpu_layers`]); for vLLM its refusals.
pub fn judge(model: &ModelSpec, p: FitParams, budget: &Budget) -> Verdict {
    judge_with_host(model, p, budget, None)
}

/// [`judge`], with the host part judged against `host` when given ([`judge_host`]).
pub fn judge_with_host(
    model: &ModelSpec,
    p: FitParams,
    budget: &Budget,
    host: Option<&Budget>,
) -> Verdict {
    let est = estimate(model, p);
    let mut verdict = judge_estimate(&est, budget);
    if let Some(h) = host {
        judge_host(&mut verdict, &est, h);
    }
    let b = budget.bytes;
    if let Some(arch) = &model.arch {
        let high = |context: u64, batch: u64| {
            estimate(
                model,
                FitParams {
                    context,
                    batch,
                    ..p
                },
            )
            .high_bytes
        };
        let cap = context_cap(arch, &p);
        verdict.max_context = Some(largest(cap, |c| high(c, p.batch) <= b));
        // With -np the slots are the sequences and -c their context: there is no batch knob.
        verdict.max_batch = p
            .slots
            .is_none()
            .then(|| largest(4096, |x| high(p.context, x) <= b));
        if p.runtime == Runtime::LlamaCpp && !p.cpu_only {
            verdict.max_gpu_layers = Some(largest_gpu_layers(model, p, budget));
        }
        if p.runtime == Runtime::Vllm {
            vllm_refusals(&mut verdict, arch, &p, &est);
        }
    }
    verdict
}

/// The longest context the largest-context search tries: the trained context, or 2²⁰ tokens
/// without one — never below `p.context` (a runtime that runs beyond the trained context with
/// a warning), except for vLLM, which refuses a context beyond its derived `max_model_len`
/// ([`vllm::context_refusal`]): its largest context is at most what it accepts.
fn context_cap(arch: &super::arch::Architecture, p: &FitParams) -> u64 {
    match (p.runtime, arch.max_context) {
        (Runtime::Vllm, Some(derived)) => derived,
        (_, trained) => trained.unwrap_or(1 << 20).max(p.context),
    }
}

/// vLLM's startup refusals beyond the budget's own: a context beyond the derived length (no
/// batch starts at it: the largest batch is 0), and one request's KV not fitting what is left.
fn vllm_refusals(v: &mut Verdict, arch: &super::arch::Architecture, p: &FitParams, est: &Estimate) {
    if v.refusal.is_some() {
        return;
    }
    if let Some(r) = vllm::context_refusal(arch, p.context) {
        v.refusal = Some(r.clone());
        v.notes.push(r);
        v.fit = Fit::DoesNotFit;
        if v.max_batch.is_some() {
            v.max_batch = Some(0);
        }
        return;
    }
    if v.device_fit == Fit::Fits {
        return;
    }
    let kv = est
        .components
        .iter()
        .find(|c| c.name == "kv_cache")
        .and_then(|c| c.high_bytes)
        .unwrap_or(0);
    let rest = |high: bool| {
        if high {
            est.high_bytes.saturating_sub(kv)
        } else {
            est.low_bytes.saturating_sub(kv)
        }
    };
    let left = |high: bool| i128::from(v.budget_bytes) - i128::from(rest(high));
    let max_len = v.max_context.unwrap_or(0);
    let line = if left(false) <= 0 {
        "vLLM refuses to start: no memory left for the KV cache blocks after the weights, activations and overheads".to_string()
    } else {
        format!(
            "vLLM {} to start: one request of max_model_len {} needs {:.2} GiB of KV cache, more than the {:.2}–{:.2} GiB left for it; estimated maximum model length {max_len}",
            if v.device_fit == Fit::DoesNotFit {
                "refuses"
            } else {
                "may refuse"
            },
            p.context,
            kv as f64 / GIB,
            left(true).max(0) as f64 / GIB,
            left(false) as f64 / GIB,
        )
    };
    if v.device_fit == Fit::DoesNotFit {
        v.refusal = Some(line.clone());
    }
    v.notes.push(line);
}

/// llama.cpp: the largest `-ngl` in `0..=n_layer + 1` whose device part (high end) fits
/// `budget`; 0 when not even the compute buffer alone does (more layers only add).
pub fn largest_gpu_layers(model: &ModelSpec, p: FitParams, budget: &Budget) -> u64 {
    let n = model.arch.as_ref().map_or(0, |a| a.layers.len() as u64);
    let fits = |ngl: u64| estimate(model, p.gpu_layers(ngl)).high_bytes <= budget.bytes;
    if !fits(0) {
        return 0;
    }
    let top = Offload::new(n, None).on_gpu;
    // largest() searches 1..=cap; shift by one to include 0.
    largest(top.saturating_add(1), |x| fits(x - 1)).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::kv::{Architecture, KvDtype, Layer, LayerKind};
    use crate::estimate::test_models::llama_8b;

    #[test]
    fn verdicts_and_largest_context() {
        let m = llama_8b();
        let p = FitParams::new(8192, 1, KvDtype::BF16, Runtime::Generic);
        let v = judge(
            &m,
            p,
            &Budget::from_free(80 << 30, Some(80 << 30), p.runtime),
        );
        assert_eq!(v.fit, Fit::Fits);
        assert!(v.headroom_bytes > 0);
        let c = v.max_context.unwrap();
        assert!(c >= 8192);
        // The largest context fits and one more token does not (at the band's high end).
        let at = |ctx| estimate(&m, FitParams { context: ctx, ..p }).high_bytes;
        assert!(c == 131_072 || (at(c) <= 80 << 30 && at(c + 1) > 80 << 30));
        let small = judge(
            &m,
            p,
            &Budget::from_free(10 << 30, Some(24 << 30), p.runtime),
        );
        assert_eq!(small.fit, Fit::DoesNotFit);
        assert_eq!(small.max_context, Some(0));
        assert!(small.headroom_bytes < 0);
    }

    #[test]
    fn vllm_needs_its_reservation_free() {
        let m = llama_8b();
        let p = FitParams::new(4096, 1, KvDtype::BF16, Runtime::Vllm);
        let busy = judge(
            &m,
            p,
            &Budget::from_free(60 << 30, Some(80 << 30), p.runtime),
        );
        assert_eq!(busy.budget_bytes, 0);
        assert_eq!(busy.fit, Fit::DoesNotFit);
        assert!(busy.notes[0].contains("refuse to start"));
        assert_eq!(busy.refusal.as_deref(), Some(busy.notes[0].as_str()));
        let idle = judge(
            &m,
            p,
            &Budget::from_free(79 << 30, Some(80 << 30), p.runtime),
        );
        assert_eq!(idle.budget_bytes, (80u64 << 30) * 9 / 10);
        assert_eq!(idle.fit, Fit::Fits);
        // The verdict carries its budget's source and notes.
        assert_eq!(idle.budget_source, BudgetSource::VllmUtilization);
        assert_eq!(busy.budget_source, BudgetSource::VllmUtilization);
        assert!(idle.notes.is_empty() && idle.refusal.is_none());
    }

    #[test]
    fn vllm_refuses_a_context_beyond_the_derived_length() {
        let m = llama_8b();
        let p = FitParams::new(262_144, 1, KvDtype::BF16, Runtime::Vllm);
        let v = judge(&m, p, &Budget::given(1 << 50));
        assert_eq!(v.device_fit, Fit::Fits, "memory is not the problem");
        assert_eq!(v.fit, Fit::DoesNotFit);
        assert!(
            v.refusal
                .unwrap()
                .contains("greater than the derived max_model_len 131072")
        );
        // QA (defect 3): the largest context was the refused one, 140000 > 131072.
        assert_eq!(v.max_context, Some(131_072), "what vLLM accepts");
        assert_eq!(v.max_batch, Some(0), "no batch starts at a refused context");
        let p = FitParams::new(140_000, 1, KvDtype::BF16, Runtime::Vllm);
        let v = judge(&m, p, &Budget::given(80 << 30));
        assert_eq!((v.fit, v.max_context), (Fit::DoesNotFit, Some(131_072)));
        // Other runtimes run beyond the trained context (with a warning): never capped below it.
        let g = FitParams::new(262_144, 1, KvDtype::BF16, Runtime::Generic);
        assert_eq!(
            judge(&m, g, &Budget::given(1 << 50)).max_context,
            Some(262_144)
        );
    }

    #[test]
    fn vllm_says_when_one_request_does_not_fit() {
        let m = llama_8b();
        let p = FitParams::new(131_072, 1, KvDtype::BF16, Runtime::Vllm);
        // 15 GiB weights + 16 GiB KV + overheads in 24 GiB.
        let v = judge(&m, p, &Budget::given(24 << 30));
        assert_eq!(v.fit, Fit::DoesNotFit);
        let r = v.refusal.unwrap();
        assert!(
            r.contains("needs 16.00 GiB of KV cache")
                && r.contains("estimated maximum model length"),
            "{r}"
        );
    }

    #[test]
    fn the_verdict_says_which_budget_it_was_judged_against() {
        let e = Estimate::requested(14 << 30);
        let free = judge_estimate(
            &e,
            &Budget::from_free(20 << 30, Some(80 << 30), Runtime::Generic),
        );
        assert_eq!(
            (free.budget_bytes, free.budget_source),
            (20 << 30, BudgetSource::Free)
        );
        let given = judge(
            &llama_8b(),
            FitParams::defaults(Runtime::Generic, None),
            &Budget::given(30 << 30),
        );
        assert_eq!(
            (given.budget_bytes, given.budget_source),
            (30 << 30, BudgetSource::Given)
        );
        let refused = Budget::from_free(1 << 30, Some(80 << 30), Runtime::Vllm);
        let v = judge_estimate(&e, &refused);
        assert_eq!(v.fit, Fit::DoesNotFit);
        assert_eq!(v.notes, refused.notes);
    }

    #[test]
    fn a_weights_only_estimate_is_never_a_plain_fit() {
        let m = ModelSpec::new(14 << 30, None);
        let p = FitParams::new(4096, 1, KvDtype::F16, Runtime::Generic);
        let v = judge(&m, p, &Budget::given(80 << 30));
        assert_eq!(v.fit, Fit::Incomplete);
        assert_eq!(v.max_context, None);
        assert_eq!(judge(&m, p, &Budget::given(10 << 30)).fit, Fit::DoesNotFit);
    }

    #[test]
    fn a_requested_size_is_judged_as_given() {
        let e = Estimate::requested(14 << 30);
        assert_eq!(judge_estimate(&e, &Budget::given(16 << 30)).fit, Fit::Fits);
        assert_eq!(
            judge_estimate(&e, &Budget::given(16 << 30)).headroom_bytes,
            2 << 30
        );
        assert_eq!(judge_estimate(&e, &Budget::given(14 << 30)).fit, Fit::Fits);
        let short = judge_estimate(&e, &Budget::given((14 << 30) - 1));
        assert_eq!(short.fit, Fit::DoesNotFit);
        assert_eq!(short.headroom_bytes, -1);
    }

    #[test]
    fn an_integrated_gpu_shares_its_ram_with_the_host_part() {
        let mut a = Architecture::new(vec![Layer::new(LayerKind::Full, 8, 128, 128); 4]);
        a.hidden_size = Some(4096);
        a.attention_heads = Some(32);
        a.vocab_size = Some(32_000);
        let m = ModelSpec::new(1 << 30, Some(a));
        let p = FitParams::new(4096, 1, KvDtype::F16, Runtime::LlamaCpp);
        let est = estimate(&m, p);
        let host = est.host_high_bytes.unwrap();
        // Exactly the device part + the host part available: fits when separate, and when
        // shared the host part gets only what the device leaves.
        let pool = est.high_bytes + host;
        let mut alone = judge_estimate(&est, &Budget::given(pool));
        judge_host(&mut alone, &est, &Budget::host(host));
        assert_eq!(alone.fit, Fit::Fits);
        let mut shared = judge_estimate(&est, &Budget::host(pool));
        judge_host(&mut shared, &est, &Budget::host(pool));
        assert_eq!(shared.host.as_ref().unwrap().budget_bytes, host);
        assert_eq!(shared.fit, Fit::Fits);
        let mut tight = judge_estimate(&est, &Budget::host(pool - 1));
        judge_host(&mut tight, &est, &Budget::host(pool - 1));
        assert_eq!(tight.fit, Fit::Tight, "the host part's low end still fits");
        let below = est.high_bytes + est.host_low_bytes.unwrap() - 1;
        let mut short = judge_estimate(&est, &Budget::host(below));
        judge_host(&mut short, &est, &Budget::host(below));
        assert_eq!(short.fit, Fit::DoesNotFit);
    }

    #[test]
    fn largest_search() {
        assert_eq!(largest(100, |x| x <= 37), 37);
        assert_eq!(largest(100, |_| true), 100);
        assert_eq!(largest(100, |_| false), 0);
        assert_eq!(largest(1, |x| x <= 1), 1);
        assert_eq!(Fit::Fits.worst(Fit::Tight), Fit::Tight);
        assert_eq!(Fit::Incomplete.worst(Fit::DoesNotFit), Fit::DoesNotFit);
    }
}
