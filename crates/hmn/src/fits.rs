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
//! (`FitParams::defaults`, `FitParams::validate`, `Runtime::for_target`), and the plan —
//! where the estimate is judged, each device's budget and verdict, the layer split, the chosen
//! device and the overall verdict (`estimate::plan`), the devices `--device all` judges (a GPU
//! in MIG mode as its MIG devices: `plan::judged_devices`) and when a model goes to the CPU
//! for want of a GPU (`plan::judged_on_cpu`). This module gathers the devices; `text` and
//! `json` format.

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
use hypomnesis::estimate::plan::{Asked, judged_devices, judged_on_cpu};
use hypomnesis::estimate::{Estimate, Fit, FitParams, NoAnswer, Runtime, Target, estimate, plan};
use hypomnesis::{Device, Probe, Warning};

use crate::args::{DeviceSel, FitsArgs, GlobalArgs};
use crate::format::sanitize;
use model::{Input, Outcome};

/// Reads `SIZE|PATH|hf:ORG/REPO|URL`: an existing path is a model; then a Hub spec or an
/// `https://` URL (headers by range requests); otherwise it must be a size.
fn resolve(arg: &OsStr) -> anyhow::Result<Input> {
    let path = Path::new(arg);
    if path.exists() {
        return Ok(Input::Model(Box::new(open(path)?)));
    }
    let text = arg.to_string_lossy();
    if let Some(m) = crate::remote::model(&text)? {
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
        if !cpu && a.device != Some(DeviceSel::All) && a.free.len() < 2 {
            bail!(
                "--tensor-split spreads llama.cpp's layers over several GPUs: use it with \
                 --device all, or --free with a size per GPU"
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
        if matches!(input, Input::Model(_)) || outcome.plan.fits.len() > 1 {
            for f in &outcome.plan.fits {
                writeln!(out, "{}", text::device_line(f, params, &est))?;
            }
            for n in &outcome.notes {
                writeln!(out, "note: {}", sanitize(n))?;
            }
        }
        crate::output::warnings(&outcome.warnings)?;
    }
    out.flush().context("writing to stdout")?;
    match (outcome.plan.fit, &outcome.error) {
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
    let asked = match &a.device {
        None => Asked::Default,
        Some(DeviceSel::All) => Asked::Every,
        Some(DeviceSel::One(_)) => Asked::Named,
        Some(DeviceSel::Cpu) => Asked::Cpu,
    };
    let mut g = Gathered {
        devices: Vec::new(),
        warnings: Vec::new(),
        error: None,
        cpu: asked == Asked::Cpu,
        cpu_note: None,
    };
    if !a.free.is_empty() || g.cpu {
        return g;
    }
    let all = a.device == Some(DeviceSel::All)
        || (a.device.is_none() && a.tensor_parallel_size.is_some_and(|n| n > 1));
    let (devices, warnings, error, no_gpu) = if all {
        let list = probe.devices();
        let (err, no_gpu) = mig::none_found(&list);
        // A GPU in MIG mode judged as its MIG devices (the library's rule).
        let (devices, mut warnings) = judged_devices(&list.devices);
        warnings.extend(list.warnings);
        (devices, warnings, err, no_gpu)
    } else {
        let sel = match &a.device {
            Some(DeviceSel::One(s)) => s.clone(),
            _ => hypomnesis::select::DeviceSelector::Index(0),
        };
        let Some(index) = crate::select::plain_index(cli, &sel) else {
            let (devices, warnings, error, no_gpu) = mig::one(probe, cli, &sel);
            if judged_on_cpu(asked, no_gpu, model) {
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
            Err(hypomnesis::Error::NoGpu { .. }) => {
                let (err, no_gpu) = mig::none_found(&probe.devices());
                (Vec::new(), Vec::new(), err, no_gpu)
            }
            Err(e) => (
                Vec::new(),
                Vec::new(),
                Some(format!("fits failed to query device {index}: {e}")),
                false,
            ),
        }
    };
    // No GPU at all and a model to judge, no device named: CPU only (the library's rule).
    if judged_on_cpu(asked, no_gpu, model) {
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

/// Judges the estimate where the library's plan puts it ([`plan()`]): this reads the host's
/// available RAM when the plan needs it and adds what gathering the devices found.
fn judge_all(
    probe: &Probe,
    a: &FitsArgs,
    model: Option<&OpenedModel>,
    params: Option<FitParams>,
    est: &Estimate,
    g: &mut Gathered,
) -> anyhow::Result<Outcome> {
    let target = if let [free] = a.free.as_slice() {
        Target::Given(*free)
    } else if !a.free.is_empty() {
        Target::GivenEach(&a.free)
    } else if g.cpu {
        Target::Cpu
    } else {
        Target::Devices {
            devices: &g.devices,
            every: a.device == Some(DeviceSel::All),
        }
    };
    let host_available = target
        .needs_host_available(est)
        .then(|| probe.host_memory().ok().map(|h| h.memory_available_bytes))
        .flatten();
    let model = model.zip(params).map(|(m, p)| (&m.spec, p));
    let plan = plan(target, model, est, host_available);
    match &plan.error {
        Some(e @ NoAnswer::HostUnknown) => bail!("{e}"),
        // One --free figure per GPU.
        Some(NoAnswer::TooFewDevices { needed, found }) if !a.free.is_empty() => bail!(
            "--tensor-parallel-size {needed} needs {needed} GPUs; --free gives {found} (one figure per GPU: --free SIZE,SIZE,…)"
        ),
        // Without a reason for having no devices (no GPU, a selector that names none).
        Some(NoAnswer::TooFewDevices { needed, found }) if g.error.is_none() => bail!(
            "--tensor-parallel-size {needed} needs {needed} GPUs; {found} found (vLLM uses the first {needed} visible devices)"
        ),
        _ => {}
    }
    let error = g
        .error
        .take()
        .or_else(|| plan.error.as_ref().map(ToString::to_string));
    let notes = g
        .cpu_note
        .take()
        .into_iter()
        .chain(plan.notes.clone())
        .collect();
    Ok(Outcome {
        plan,
        warnings: std::mem::take(&mut g.warnings),
        error,
        notes,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
