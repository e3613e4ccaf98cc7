//! `hmn fits` for people: the model line, what the estimate assumes, its warnings, the
//! component table, one line per device, and the upstream-compatible verdict line on stderr.

use std::io::Write;
use std::path::Path;

use hypomnesis::estimate::model::OpenedModel;
use hypomnesis::estimate::{
    BudgetSource, DeviceFit, Estimate, Fit, FitParams, Memory, Placement, TargetKind, Verdict,
};

use super::model::Outcome;
use crate::format::{Align, Table, bytes, opt_bytes, sanitize};

pub(super) fn write_model(
    out: &mut dyn Write,
    m: &OpenedModel,
    p: FitParams,
    est: &Estimate,
) -> anyhow::Result<()> {
    let files = match m.files.as_slice() {
        [one] => file_name(one),
        many => format!("{} files", many.len()),
    };
    let mut line = format!("model: {files} ({}", m.format);
    if let Some(n) = m.spec.tensor_count {
        line.push_str(&format!(", {n} tensor{}", if n == 1 { "" } else { "s" }));
    }
    match (&m.spec.arch, &m.arch_source) {
        (Some(x), src) => {
            line.push_str(&format!(", {} layers", x.layers.len()));
            if let Some(c) = x.max_context {
                line.push_str(&format!(", trained context {c}"));
            }
            if let Some(s) = src {
                line.push_str(&format!("; architecture from {}", file_name(Path::new(s))));
            }
        }
        (None, _) => line.push_str("; no architecture: KV cache unknown"),
    }
    line.push(')');
    writeln!(out, "{}", sanitize(&line))?;
    writeln!(
        out,
        "run: {}{}, context {} × batch {}, KV cache {}",
        p.runtime.as_str(),
        if p.cpu_only { " on the CPU" } else { "" },
        p.context,
        p.batch,
        p.kv_dtype.as_str()
    )?;
    if let Some(a) = &est.assumptions {
        for s in &a.statements {
            writeln!(out, "assumes: {}", sanitize(s))?;
        }
    }
    for w in m.warnings.iter().chain(&est.warnings) {
        writeln!(out, "warning: {}", sanitize(w))?;
    }
    writeln!(out)?;
    let mut t = Table::new(&[
        ("COMPONENT", Align::Left),
        ("LOW", Align::Right),
        ("HIGH", Align::Right),
        ("SOURCE", Align::Left),
    ]);
    for c in &est.components {
        t.row(vec![
            c.name.to_string(),
            opt_bytes(c.low_bytes),
            opt_bytes(c.high_bytes),
            c.note.clone(),
        ]);
    }
    let total_note = if est.is_complete() {
        if p.cpu_only {
            "host RAM".to_string()
        } else {
            String::new()
        }
    } else {
        format!("without {}: incomplete", est.unknown_components.join(", "))
    };
    t.row(vec![
        "total".to_string(),
        bytes(est.low_bytes),
        bytes(est.high_bytes),
        total_note,
    ]);
    if let (Some(l), Some(h)) = (est.host_low_bytes, est.host_high_bytes) {
        debug_assert!(est.components.iter().any(|c| c.memory == Memory::Host));
        t.row(vec![
            "total host RAM".to_string(),
            bytes(l),
            bytes(h),
            "judged against MemAvailable".to_string(),
        ]);
    }
    write!(out, "{}", t.render())?;
    writeln!(out)?;
    Ok(())
}

fn file_name(p: &Path) -> String {
    p.file_name().map_or_else(
        || p.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

fn device_label(f: &DeviceFit) -> String {
    match (f.kind, f.index, &f.name) {
        (TargetKind::Cpu, _, _) => "CPU".to_string(),
        (_, None, _) => "--free".to_string(),
        (TargetKind::Given, Some(i), _) => format!("--free GPU {i}"),
        (_, Some(i), Some(n)) => format!("GPU {i} [{}]", sanitize(n)),
        (_, Some(i), None) => format!("GPU {i}"),
    }
}

pub(super) fn budget_words(f: &DeviceFit, v: &Verdict) -> String {
    match v.budget_source {
        BudgetSource::HostAvailable if f.kind == TargetKind::Cpu => {
            format!("{} available (MemAvailable)", bytes(v.budget_bytes))
        }
        BudgetSource::HostAvailable => {
            format!("{} available (shared system RAM)", bytes(v.budget_bytes))
        }
        BudgetSource::GttPool => format!(
            "{} free in GTT (an APU's larger pool; at most MemAvailable)",
            bytes(v.budget_bytes)
        ),
        BudgetSource::MetalWorkingSet => format!(
            "{} free of the GPU working set (recommendedMaxWorkingSetSize less what GPU clients \
             allocated; at most available RAM)",
            bytes(v.budget_bytes)
        ),
        BudgetSource::VllmUtilization if v.budget_bytes == 0 => format!(
            "{} free, less than the {} × total vLLM reserves",
            opt_bytes(f.free_bytes),
            f.utilization
        ),
        BudgetSource::VllmUtilization => {
            format!(
                "{} usable ({} × total)",
                bytes(v.budget_bytes),
                f.utilization
            )
        }
        _ => format!("{} free", bytes(v.budget_bytes)),
    }
}

/// `GPU 0 [name]: 78.1 GiB free — fits, 60.2 GiB headroom; largest context 131072, batch 37`.
/// `est` is the estimate judged (its unknown components, for an incomplete answer).
pub(super) fn device_line(f: &DeviceFit, params: Option<FitParams>, est: &Estimate) -> String {
    let Some(v) = &f.verdict else {
        let why = f
            .error
            .as_ref()
            .map_or_else(|| "unknown".to_string(), ToString::to_string);
        return format!("{}: no verdict ({})", device_label(f), sanitize(&why));
    };
    let mut line = format!("{}: {} — ", device_label(f), budget_words(f, v));
    let memory = match v.device_fit {
        Fit::Fits => format!("fits, {} headroom", headroom(v)),
        Fit::Tight => "tight: the low end fits, the high end does not".to_string(),
        Fit::Incomplete => format!(
            "incomplete: the known parts fit, {} unknown",
            unknown_words(f.share.as_ref().unwrap_or(est))
        ),
        _ => format!("does not fit, short by {}", shortfall(v)),
    };
    // A runtime that refuses to start (its reason is the last note) does not fit, whatever
    // the memory alone says.
    if v.refusal.is_some() && v.device_fit != Fit::DoesNotFit {
        line.push_str(&format!(
            "does not fit: the runtime refuses to start (memory alone: {memory})"
        ));
    } else {
        line.push_str(&memory);
    }
    if let Some(s) = &f.share {
        line.push_str(&format!(
            " (its share: {}–{})",
            bytes(s.low_bytes),
            bytes(s.high_bytes)
        ));
    }
    if let (Some(c), Some(p)) = (v.max_context, params) {
        match (c, v.max_batch) {
            (0, _) => line.push_str("; at the high end no context fits"),
            (c, Some(b)) => line.push_str(&format!(
                "; largest context {c} (batch {}), largest batch {b} (context {})",
                p.batch, p.context
            )),
            (c, None) => line.push_str(&format!("; largest context {c}")),
        }
    }
    if let (Some(n), None) = (v.max_gpu_layers, &f.share) {
        line.push_str(&format!("; largest --gpu-layers {n}"));
    }
    if let Some(h) = &v.host {
        line.push_str(&format!(
            "; host RAM {}–{} of {} available: {}",
            bytes(h.low_bytes),
            bytes(h.high_bytes),
            bytes(h.budget_bytes),
            fit_words(h.fit)
        ));
    }
    for n in &v.notes {
        line.push_str(&format!("; {}", sanitize(n)));
    }
    line
}

/// The unknown components of `est` in words: "the KV cache", "the output buffer".
fn unknown_words(est: &Estimate) -> String {
    let words: Vec<String> = est
        .unknown_components
        .iter()
        .map(|c| match *c {
            "kv_cache" => "the KV cache".to_string(),
            "output_buffer" => "the output buffer".to_string(),
            c => c.replace('_', " "),
        })
        .collect();
    if words.is_empty() {
        "a component".to_string()
    } else {
        words.join(" and ")
    }
}

fn fit_words(f: Fit) -> &'static str {
    match f {
        Fit::Fits => "fits",
        Fit::Tight => "tight",
        Fit::Incomplete => "incomplete",
        _ => "does not fit",
    }
}

fn headroom(v: &Verdict) -> String {
    bytes(u64::try_from(v.headroom_bytes).unwrap_or(0))
}

fn shortfall(v: &Verdict) -> String {
    bytes(u64::try_from(-v.headroom_bytes).unwrap_or(u64::MAX))
}

/// The upstream-compatible one-liner on stderr.
pub(super) fn verdict_line(o: &Outcome, est: &Estimate) -> String {
    let p = &o.plan;
    let fit = p.fit.unwrap_or(Fit::DoesNotFit);
    if p.is_split() {
        let how = if p.placement == Placement::SplitLayers {
            "llama.cpp --split-mode layer"
        } else {
            "vLLM tensor parallel"
        };
        let devs: Vec<String> = p
            .fits
            .iter()
            .filter_map(|f| f.index)
            .map(|i| i.to_string())
            .collect();
        let host = p.host.as_ref().map_or(String::new(), |h| {
            format!(", host RAM {}", fit_words(h.fit))
        });
        return format!(
            "{} — split over devices {} ({how}): {}{host}",
            fit_words(fit),
            devs.join(", "),
            p.fits
                .iter()
                .map(|f| format!(
                    "{} {}",
                    f.index.map_or("?".to_string(), |i| i.to_string()),
                    f.verdict
                        .as_ref()
                        .map_or("no verdict", |v| fit_words(v.fit))
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    let Some(f) = p.chosen_fit() else {
        return String::new();
    };
    let Some(v) = &f.verdict else {
        return String::new();
    };
    let dev = match (f.kind, f.index) {
        (TargetKind::Cpu, _) => "CPU, as llama.cpp without a GPU".to_string(),
        (TargetKind::Given, Some(i)) => format!("GPU {i} as given with --free"),
        (_, Some(_)) => format!("device {}", device_label(f).trim_start_matches("GPU ")),
        (_, None) => "budget given with --free".to_string(),
    };
    let budget = budget_words(f, v);
    if let Some(r) = &v.refusal {
        return format!("does not fit — {} ({dev})", sanitize(r));
    }
    let host = match &v.host {
        Some(h) if h.fit != Fit::Fits => format!(
            "; host RAM {} for {} of {} available",
            fit_words(h.fit),
            bytes(h.high_bytes),
            bytes(h.budget_bytes)
        ),
        _ => String::new(),
    };
    match (fit, v.device_fit) {
        (Fit::Fits, _) => format!(
            "fits — {budget} >= {} requested ({} headroom; {dev})",
            bytes(est.high_bytes),
            headroom(v)
        ),
        (_, Fit::Incomplete) => format!(
            "may not fit — {budget} >= {} known, but the estimate is incomplete (no {}{}) ({dev})",
            bytes(est.high_bytes),
            est.unknown_components.join(", "),
            // The KV cache is unknown only without an architecture.
            if est.unknown_components.contains(&"kv_cache") {
                ": no architecture"
            } else {
                ""
            }
        ),
        (_, Fit::Fits) => format!(
            "does not fit — {budget} >= {} requested on the device{host} ({dev})",
            bytes(est.high_bytes)
        ),
        (_, Fit::Tight) => format!(
            "may not fit — {budget}: enough for the low end {} but not the high end {}{host} ({dev})",
            bytes(est.low_bytes),
            bytes(est.high_bytes)
        ),
        _ => format!(
            "does not fit — {budget} < {} requested (short by {}{host}; {dev})",
            bytes(est.high_bytes),
            shortfall(v)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::estimate::{Budget, NoVerdict, Runtime, Target, judge_estimate, plan};
    use hypomnesis::{Device, Source, Vendor};

    const GIB: u64 = 1 << 30;

    fn outcome(p: hypomnesis::estimate::Plan) -> Outcome {
        Outcome {
            plan: p,
            warnings: Vec::new(),
            error: None,
            notes: Vec::new(),
        }
    }

    fn gpu(free: Option<u64>, total: Option<u64>) -> Device {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        d.name = Some("NVIDIA H100 80GB HBM3".into());
        d.memory.free_bytes = free;
        d.memory.total_bytes = total;
        d
    }

    #[test]
    fn the_verdict_line_keeps_the_upstream_wording() {
        let est = Estimate::requested(14 * GIB);
        let judged = |free| {
            let d = gpu(Some(free), Some(80 * GIB));
            let target = Target::Devices {
                devices: std::slice::from_ref(&d),
                every: false,
            };
            outcome(plan(target, None, &est, None))
        };
        assert_eq!(
            verdict_line(&judged(20 * GIB), &est),
            "fits — 20 GiB free >= 14 GiB requested (6 GiB headroom; device 0 [NVIDIA H100 80GB HBM3])"
        );
        assert_eq!(
            verdict_line(&judged(10 * GIB), &est),
            "does not fit — 10 GiB free < 14 GiB requested (short by 4 GiB; device 0 [NVIDIA H100 80GB HBM3])"
        );
    }

    #[test]
    fn a_device_without_a_budget_says_why_it_has_no_verdict() {
        let d = Device::new(2, Vendor::Intel, Source::Sysfs);
        let f = DeviceFit::of_device(
            &d,
            Budget::for_device(&d, None, Runtime::Generic)
                .map(|b| judge_estimate(&Estimate::requested(1), &b))
                .map_err(NoVerdict::from),
        );
        assert_eq!(
            device_line(&f, None, &Estimate::requested(1)),
            "GPU 2: no verdict (device 2 does not report its free memory: not reported)"
        );
    }

    #[test]
    fn the_budget_is_worded_by_its_source() {
        let est = Estimate::requested(14 * GIB);
        let words = |budget: Budget, free: Option<u64>| {
            let f = DeviceFit::of_device(&gpu(free, None), Ok(judge_estimate(&est, &budget)));
            budget_words(&f, f.verdict.as_ref().unwrap())
        };
        let total = Some(80 * GIB);
        for (free, runtime, said) in [
            (20 * GIB, Runtime::Generic, "20 GiB free"),
            (79 * GIB, Runtime::Vllm, "72 GiB usable (0.9 × total)"),
            (
                20 * GIB,
                Runtime::Vllm,
                "20 GiB free, less than the 0.9 × total vLLM reserves",
            ),
        ] {
            let b = Budget::from_free(free, total, runtime);
            assert_eq!(words(b, Some(free)), said);
        }
        let given = DeviceFit::given(24 * GIB, judge_estimate(&est, &Budget::given(24 * GIB)));
        assert_eq!(
            budget_words(&given, given.verdict.as_ref().unwrap()),
            "24 GiB free"
        );
        let mut igpu = Device::new(0, Vendor::Intel, Source::Sysfs);
        igpu.integrated = Some(true);
        let shared = Budget::for_device(&igpu, Some(24 * GIB), Runtime::Generic).unwrap();
        assert_eq!(words(shared, None), "24 GiB available (shared system RAM)");
        for (source, said) in [
            (
                BudgetSource::GttPool,
                "24 GiB free in GTT (an APU's larger pool; at most MemAvailable)",
            ),
            (
                BudgetSource::MetalWorkingSet,
                "24 GiB free of the GPU working set (recommendedMaxWorkingSetSize less what GPU \
                 clients allocated; at most available RAM)",
            ),
        ] {
            let mut b = Budget::given(24 * GIB);
            b.source = source;
            assert_eq!(words(b, None), said);
        }
        let cpu = DeviceFit::cpu(24 * GIB, judge_estimate(&est, &Budget::host(24 * GIB)));
        assert_eq!(
            budget_words(&cpu, cpu.verdict.as_ref().unwrap()),
            "24 GiB available (MemAvailable)"
        );
    }
}
