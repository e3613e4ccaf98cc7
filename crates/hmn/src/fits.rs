//! `hmn fits SIZE|PATH`: will this model fit? The library's estimate (components with a
//! low/high band, its assumptions and warnings) against the live free memory of one device, of
//! every device (with the split the runtime would use), or of the host (CPU only).
//!
//! `SIZE` is compared with free memory as it is (upstream parity). `PATH` is read through
//! `hypomnesis::estimate::model::open` (headers only). Exit status: 0 when the high end of the
//! band fits everywhere the model is placed, 1 when it does not, only the low end does, the
//! estimate is incomplete or the runtime refuses to start, 2 on an error (unreadable model,
//! settings the runtime does not have, no GPU for a SIZE, a device that cannot be read).
//!
//! Every rule is the library's: the per-runtime defaults and their validation
//! (`FitParams::defaults`, `FitParams::validate`, `Runtime::for_target`), the budget and its
//! source (`Budget::for_device_with`, `Budget::given`, `Budget::host`), the verdicts (`judge`,
//! `judge_with_host`, `judge_estimate`, `Fit::worst`) and the layer split
//! (`offload::estimate_split`). This module gathers the devices; `text` and `json` format.

mod json;
mod mig;
mod model;
mod text;

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::{Context as _, bail};
use hypomnesis::estimate::model::{OpenedModel, open};
use hypomnesis::estimate::offload::estimate_split;
use hypomnesis::estimate::{
    Budget, Estimate, Fit, FitParams, NoBudget, Runtime, Verdict, estimate, host_verdict,
    judge_estimate, judge_with_host,
};
use hypomnesis::{Device, Probe, Warning};

use crate::args::{DeviceSel, FitsArgs, GlobalArgs};
use crate::format::sanitize;
use model::{DeviceFit, Input, Outcome, Plan};

/// Reads `SIZE|PATH|hf:ORG/REPO|URL`: an existing path is a model; then a Hub spec or an
/// `https://` URL (headers by range requests); otherwise it must be a size.
fn resolve(arg: &OsStr) -> anyhow::Result<Input> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(Input::Model(Box::new(open(path)?)));
    }
    let text = arg.to_string_lossy();
    if let Some(m) = remote(&text)? {
        return Ok(Input::Model(Box::new(m)));
    }
    match crate::args::parse_size(&text) {
        Ok(n) => Ok(Input::Size(n)),
        Err(e) if text.chars().next().is_some_and(|c| c.is_ascii_digit()) => bail!("{e}"),
        Err(_) => bail!(
            "{}: no such file or directory (and not a size such as 14GiB)",
            sanitize(&text)
        ),
    }
}

/// A model on a Hub or at a URL (`HF_ENDPOINT`, `HF_TOKEN`, `HMN_HUB_TIMEOUT`); `None` for
/// anything else.
#[cfg(feature = "hub")]
fn remote(text: &str) -> anyhow::Result<Option<OpenedModel>> {
    use hypomnesis::estimate::hub;
    let Some(r) = hub::Remote::parse(text)? else {
        return Ok(None);
    };
    Ok(Some(hub::open(&r, &hub::HubOptions::from_env())?.model))
}

#[cfg(not(feature = "hub"))]
fn remote(text: &str) -> anyhow::Result<Option<OpenedModel>> {
    if ["hf:", "https://", "http://"]
        .iter()
        .any(|p| text.starts_with(p))
    {
        bail!(
            "{}: this hmn was built without the `hub` feature (models from a Hub or a URL)",
            sanitize(text)
        );
    }
    Ok(None)
}

/// Whether any estimate setting was given (they need a model).
fn any_model_flag(a: &FitsArgs) -> bool {
    a.context.is_some()
        || a.batch.is_some()
        || a.kv_dtype.is_some()
        || a.runtime.is_some()
        || a.flash_attn.is_some()
        || a.parallel.is_some()
        || a.kv_unified
        || a.swa_full
        || a.ubatch.is_some()
        || a.gpu_layers.is_some()
        || a.llama_api.is_some()
        || a.n_batch.is_some()
        || a.tensor_split.is_some()
        || a.max_model_len.is_some()
        || a.gpu_memory_utilization.is_some()
        || a.tensor_parallel_size.is_some()
        || a.max_num_batched_tokens.is_some()
}

/// The run parameters for a model (validated by the library); `None` for a size.
fn params(
    a: &FitsArgs,
    model: Option<&OpenedModel>,
    cpu: bool,
) -> anyhow::Result<Option<FitParams>> {
    let Some(model) = model else {
        if any_model_flag(a) {
            bail!(
                "--context, --batch, --kv-dtype, --runtime and the runtime settings need a model \
                 file or directory; a SIZE is compared with free memory as it is"
            );
        }
        return Ok(None);
    };
    let arch = model.spec.arch.as_ref();
    let runtime = Runtime::for_target(a.runtime, cpu);
    // The library's per-runtime defaults, each overridden by its flag.
    let mut p = FitParams::defaults(runtime, arch).cpu_only(cpu);
    if let Some(api) = a.llama_api {
        // Before --flash-attn: `library` turns an unset flash attention off.
        p = p.llama_api(api);
    }
    if let Some(n) = a.n_batch {
        p = p.n_batch(n);
    }
    if let Some(t) = a.tensor_split {
        if !cpu && a.device != Some(DeviceSel::All) {
            bail!(
                "--tensor-split spreads llama.cpp's layers over several GPUs: use it with --device all"
            );
        }
        p = p.tensor_split(t);
    }
    if let Some(c) = a.context.or(a.max_model_len) {
        p = p.context(c);
    }
    if let Some(b) = a.batch {
        p = p.batch(b);
    }
    if let Some(k) = a.kv_dtype {
        p = p.kv_dtype(k);
    }
    if let Some(f) = a.flash_attn {
        p = p.flash_attn(f);
    }
    if let Some(n) = a.parallel {
        p = p.slots(n);
    }
    if a.kv_unified {
        p = p.kv_unified(true);
    }
    if a.swa_full {
        p = p.swa_full(true);
    }
    if let Some(u) = a.ubatch {
        p = p.ubatch(u);
    }
    if let Some(n) = a.gpu_layers {
        p = p.gpu_layers(n);
    }
    if let Some(u) = a.gpu_memory_utilization {
        p = p.gpu_memory_utilization(u);
    }
    if let Some(n) = a.tensor_parallel_size {
        p = p.tensor_parallel(n);
    }
    if let Some(n) = a.max_num_batched_tokens {
        p = p.max_num_batched_tokens(n);
    }
    if a.max_model_len.is_some() && runtime != Runtime::Vllm {
        bail!(
            "--max-model-len is a vLLM setting; use --context for --runtime {}",
            runtime.as_str()
        );
    }
    p.validate(arch)?;
    Ok(Some(p))
}

pub fn run(
    probe: &Probe,
    g: &GlobalArgs,
    a: &FitsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let input = resolve(&a.model)?;
    let model = match &input {
        Input::Model(m) => Some(m.as_ref()),
        Input::Size(_) => None,
    };
    // The devices first: without a GPU, a model is judged as llama.cpp on the CPU.
    let mut gathered = gather(probe, g, a, model.is_some());
    let cpu = gathered.cpu;
    let params = params(a, model, cpu)?;
    let est = match (model, params) {
        (Some(m), Some(p)) => estimate(&m.spec, p),
        _ => Estimate::requested(match input {
            Input::Size(n) => n,
            Input::Model(_) => 0,
        }),
    };
    let outcome = judge_all(probe, a, model, params, &est, &mut gathered)?;

    if g.json {
        json::write(out, &input, a, params, &est, &outcome)?;
    } else {
        if let (Input::Model(m), Some(p)) = (&input, params) {
            text::write_model(out, m, p, &est)?;
        }
        if matches!(input, Input::Model(_)) || outcome.fits.len() > 1 {
            for f in &outcome.fits {
                writeln!(out, "{}", text::device_line(f, params))?;
            }
            for n in &outcome.notes {
                writeln!(out, "note: {}", sanitize(n))?;
            }
        }
        crate::output::warnings(&outcome.warnings)?;
    }
    out.flush().context("writing to stdout")?;
    match (outcome.fit, &outcome.error) {
        (Some(fit), _) => {
            crate::output::note(&text::verdict_line(&outcome, &est))?;
            Ok(if fit == Fit::Fits {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        (None, Some(e)) => bail!("{e}"),
        (None, None) => bail!("no device to compare with"),
    }
}

/// The devices (or the host, or a given budget) to judge.
struct Gathered {
    devices: Vec<Device>,
    warnings: Vec<Warning>,
    error: Option<String>,
    cpu: bool,
    /// Why the run is CPU-only without `--device cpu`.
    cpu_note: Option<String>,
}

fn gather(probe: &Probe, cli: &GlobalArgs, a: &FitsArgs, model: bool) -> Gathered {
    let mut g = Gathered {
        devices: Vec::new(),
        warnings: Vec::new(),
        error: None,
        cpu: a.device == Some(DeviceSel::Cpu),
        cpu_note: None,
    };
    if a.free.is_some() || g.cpu {
        return g;
    }
    let all = a.device == Some(DeviceSel::All)
        || (a.device.is_none() && a.tensor_parallel_size.is_some_and(|n| n > 1));
    let (devices, warnings, error, no_gpu) = if all {
        let list = probe.devices();
        let empty = list.devices.is_empty();
        let err = empty.then(|| crate::output::no_gpu_line(&list.absent_reasons()));
        let (devices, mut warnings) = mig::expand(list.devices);
        warnings.extend(list.warnings);
        (devices, warnings, err, empty)
    } else {
        let sel = match &a.device {
            Some(DeviceSel::One(s)) => s.clone(),
            _ => hypomnesis::select::DeviceSelector::Index(0),
        };
        let Some(index) = crate::select::plain_index(cli, &sel) else {
            let (devices, warnings, error, no_gpu) = mig::one(probe, cli, &sel);
            if no_gpu && model && a.device.is_none() {
                g.cpu = true;
                g.cpu_note = error
                    .map(|e| format!("{e}: judged as llama.cpp without a GPU, against host RAM"));
                return g;
            }
            g.devices = devices;
            g.warnings = warnings;
            g.error = error;
            return g;
        };
        match probe.device(index) {
            Ok(d) => {
                let w = mig::parent_note(&d);
                (vec![d], w, None, false)
            }
            Err(e @ hypomnesis::Error::NoGpu { .. }) => {
                (Vec::new(), Vec::new(), Some(e.to_string()), true)
            }
            Err(e) => (
                Vec::new(),
                Vec::new(),
                Some(format!("fits failed to query device {index}: {e}")),
                false,
            ),
        }
    };
    // No GPU at all and a model to judge (not an explicit index): CPU only.
    if no_gpu && model && !matches!(a.device, Some(DeviceSel::One(_))) {
        g.cpu = true;
        g.cpu_note =
            error.map(|e| format!("{e}: judged as llama.cpp without a GPU, against host RAM"));
        g.warnings = warnings;
        return g;
    }
    g.devices = devices;
    g.warnings = warnings;
    g.error = error;
    g
}

/// Judges the estimate where the plan puts it.
fn judge_all(
    probe: &Probe,
    a: &FitsArgs,
    model: Option<&OpenedModel>,
    params: Option<FitParams>,
    est: &Estimate,
    g: &mut Gathered,
) -> anyhow::Result<Outcome> {
    let host_available = || probe.host_memory().ok().map(|h| h.memory_available_bytes);
    let needs_host = est.host_high_bytes.is_some();
    let mut o = Outcome {
        plan: Plan::Device,
        fits: Vec::new(),
        chosen: None,
        fit: None,
        host: None,
        warnings: std::mem::take(&mut g.warnings),
        error: g.error.take(),
        notes: g.cpu_note.take().into_iter().collect(),
    };
    let verdict = |budget: &Budget, host: Option<&Budget>| match (model, params) {
        (Some(m), Some(p)) => judge_with_host(&m.spec, p, budget, host),
        _ => judge_estimate(est, budget),
    };
    if let Some(free) = a.free {
        o.plan = Plan::Given;
        let host = needs_host.then(host_available).flatten().map(Budget::host);
        let v = verdict(&Budget::given(free), host.as_ref());
        o.fits
            .push(DeviceFit::new(None, None, Some(free), None, Ok(v)));
        o.chosen = Some(0);
    } else if g.cpu {
        o.plan = Plan::Cpu;
        let Some(avail) = host_available() else {
            bail!("CPU-only estimate: the host's available RAM (MemAvailable) cannot be read");
        };
        let v = verdict(&Budget::host(avail), None);
        let mut f = DeviceFit::new(None, Some("CPU".to_string()), Some(avail), None, Ok(v));
        f.kind = "cpu";
        o.fits.push(f);
        o.chosen = Some(0);
    } else {
        let host_avail = (needs_host || g.devices.iter().any(Budget::needs_host_available))
            .then(host_available)
            .flatten();
        let host = needs_host.then_some(host_avail).flatten().map(Budget::host);
        if needs_host && host.is_none() {
            o.notes
                .push("host RAM not judged: MemAvailable could not be read".to_string());
        }
        let runtime = params.map(|p| p.runtime).unwrap_or_default();
        let util = params.map(|p| p.utilization()).unwrap_or_default();
        let budget_of = |d: &Device| Budget::for_device_with(d, host_avail, runtime, util);
        let tp = params.map_or(1, |p| p.tensor_parallel);
        match (model, params) {
            (Some(m), Some(p))
                if runtime == Runtime::LlamaCpp
                    && g.devices.len() > 1
                    && a.device == Some(DeviceSel::All) =>
            {
                o.plan = Plan::SplitLayers;
                let free: Vec<u64> = g
                    .devices
                    .iter()
                    .map(|d| d.memory.free_bytes.unwrap_or(0))
                    .collect();
                for (d, share) in g.devices.iter().zip(estimate_split(&m.spec, &p, &free)) {
                    let mut f = device_fit(d, budget_of(d).map(|b| judge_estimate(&share, &b)));
                    f.share = Some(share);
                    o.fits.push(f);
                }
                o.host = host.as_ref().and_then(|h| host_verdict(est, h));
            }
            (Some(_), Some(_)) if tp > 1 => {
                o.plan = Plan::TensorParallel;
                if g.devices.len() < tp as usize && o.error.is_none() {
                    bail!(
                        "--tensor-parallel-size {tp} needs {tp} GPUs; {} found (vLLM uses the first {tp} visible devices)",
                        g.devices.len()
                    );
                }
                for d in g.devices.iter().take(tp as usize) {
                    o.fits
                        .push(device_fit(d, budget_of(d).map(|b| verdict(&b, None))));
                }
                o.notes.push(format!("vLLM uses the first {tp} visible GPUs (set CUDA_VISIBLE_DEVICES to choose them); each rank is judged on its own"));
            }
            _ => {
                if a.device == Some(DeviceSel::All) {
                    o.plan = Plan::BestDevice;
                    match (model, runtime) {
                        (Some(_), Runtime::Generic) => o.notes.push(
                            "generic: the model on one device, the one with the most headroom (transformers' device_map split is not modelled)".to_string(),
                        ),
                        (Some(_), Runtime::Vllm) => o.notes.push(
                            "vLLM at tensor parallel 1 runs on the first visible GPU: the verdict is for the one with the most headroom (choose it with CUDA_VISIBLE_DEVICES)".to_string(),
                        ),
                        _ => {}
                    }
                }
                for d in &g.devices {
                    o.fits.push(device_fit(
                        d,
                        budget_of(d).map(|b| verdict(&b, host.as_ref())),
                    ));
                }
                o.chosen = best(&o.fits);
            }
        }
    }
    o.fit = match o.plan {
        Plan::SplitLayers | Plan::TensorParallel => o
            .fits
            .iter()
            .map(|f| f.verdict.as_ref().map(|v| v.fit))
            .collect::<Option<Vec<Fit>>>()
            .and_then(|v| v.into_iter().reduce(Fit::worst))
            .map(|f| o.host.as_ref().map_or(f, |h| f.worst(h.fit))),
        _ => o
            .chosen
            .and_then(|c| o.fits.get(c)?.verdict.as_ref().map(|v| v.fit)),
    };
    let util = params.map(|p| p.utilization()).unwrap_or_default();
    for f in &mut o.fits {
        f.util = util;
    }
    if o.host.is_none() {
        o.host = o
            .chosen
            .and_then(|c| o.fits.get(c)?.verdict.as_ref()?.host.clone());
    }
    if o.fit.is_none() && o.error.is_none() {
        o.error = match o.fits.as_slice() {
            [one] => one.error.clone(),
            _ => Some(
                o.fits
                    .iter()
                    .find_map(|f| f.error.clone())
                    .unwrap_or_else(|| "no device reported its free memory".to_string()),
            ),
        };
    }
    Ok(o)
}

fn device_fit(d: &Device, judged: Result<Verdict, NoBudget>) -> DeviceFit {
    let mut f = DeviceFit::new(
        Some(d.index),
        d.name.clone(),
        d.memory.free_bytes,
        d.memory.total_bytes,
        judged,
    );
    f.mig_uuid = d.uuid.clone().filter(|u| u.starts_with("MIG-"));
    f
}

/// The device with a verdict and the most headroom (fits before the rest).
fn best(fits: &[DeviceFit]) -> Option<usize> {
    fits.iter()
        .enumerate()
        .filter(|(_, f)| f.verdict.is_some())
        .max_by_key(|(_, f)| {
            f.verdict
                .as_ref()
                .map(|v| (std::cmp::Reverse(v.fit), v.headroom_bytes))
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::estimate::Runtime;

    #[test]
    fn a_size_or_a_path() {
        assert!(matches!(
            resolve(OsStr::new("14GiB")).unwrap(),
            Input::Size(n) if n == 14 << 30
        ));
        let e = resolve(OsStr::new("14 parsecs")).err().unwrap().to_string();
        assert!(e.contains("invalid size"), "{e}");
        let e = resolve(OsStr::new("/nonexistent/model.gguf"))
            .err()
            .unwrap()
            .to_string();
        assert!(e.contains("no such file"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let e = resolve(dir.path().as_os_str()).err().unwrap().to_string();
        assert!(e.contains("no .safetensors or .gguf"), "{e}");
    }

    #[test]
    fn a_device_without_a_budget_has_no_verdict_and_says_why() {
        let d = Device::new(2, hypomnesis::Vendor::Intel, hypomnesis::Source::Sysfs);
        let f = device_fit(
            &d,
            Budget::for_device(&d, None, Runtime::Generic)
                .map(|b| judge_estimate(&Estimate::requested(1), &b)),
        );
        assert!(f.verdict.is_none() && f.budget_source.is_none());
        assert_eq!(
            f.error.as_deref(),
            Some("device 2 does not report its free memory: not reported")
        );
        assert_eq!(
            text::device_line(&f, None),
            "GPU 2: no verdict (device 2 does not report its free memory: not reported)"
        );
    }

    #[test]
    fn the_best_device_fits_before_it_has_headroom() {
        let fit = |free: u64, need: u64| {
            DeviceFit::new(
                Some(0),
                None,
                Some(free),
                None,
                Ok(judge_estimate(
                    &Estimate::requested(need),
                    &Budget::given(free),
                )),
            )
        };
        let fits = [fit(10, 20), fit(30, 20), fit(100, 20)];
        assert_eq!(best(&fits), Some(2));
        assert_eq!(best(&[fit(10, 20), fit(5, 20)]), Some(0));
    }
}
