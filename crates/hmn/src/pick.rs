//! `hmn pick --need SIZE|MODEL|hf:ORG/REPO`: the device(s) with room for a command, best fit first, each
//! reserved against concurrent picks for `--lease`; and the same pick for `hmn run --gpu`.
//! Every rule is the library's (`hypomnesis::estimate::pick`: candidates, order, claims under
//! `hypomnesis::lease`, the child's variables); this module reads the environment
//! (`HMN_LOCK_DIR`, an inherited `CUDA_VISIBLE_DEVICES`) and formats. See `docs/pick.md`.

use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use hypomnesis::estimate::pick::visible::visible_env_for;
use hypomnesis::estimate::pick::{Candidate, Holder, ModelNeed, Need, Picked, Request, pick_until};
use hypomnesis::lease::{ENV_LOCK_DIR, LeaseError, LockDir, lock_dir};
use hypomnesis::select::Selected;
use hypomnesis::{Device, Probe, Vendor};
use serde::Serialize;

use crate::args::{GlobalArgs, PickArgs, VendorArg, parse_size};
use crate::format::{bytes, opt_bytes, sanitize};
use crate::output;

/// What `--need` named.
#[derive(Debug)]
pub enum NeedInput {
    /// A size.
    Size(u64),
    /// A model, opened and estimated.
    Model(Box<ModelNeed>),
}

impl NeedInput {
    /// The library's need.
    pub fn need(&self) -> Need<'_> {
        match self {
            NeedInput::Size(b) => Need::Bytes(*b),
            NeedInput::Model(m) => m.need(),
        }
    }

    /// `24 GiB`, or `<model> (≈ 24 GiB)`.
    pub fn describe(&self) -> String {
        match self {
            NeedInput::Size(b) => bytes(*b),
            NeedInput::Model(m) => format!(
                "the model ({} at the high end)",
                bytes(m.estimate.high_bytes)
            ),
        }
    }
}

/// Reads `--need`: an existing path is a model; then a Hub spec or URL (`hf:ORG/REPO`, as
/// `hmn fits` takes it); otherwise it must be a size.
///
/// # Errors
/// An unreadable model, or neither a path nor a size.
pub fn need_input(arg: &OsStr) -> anyhow::Result<NeedInput> {
    let path = Path::new(arg);
    if path.exists() {
        return match ModelNeed::open(path) {
            Ok(m) => Ok(NeedInput::Model(Box::new(m))),
            Err(e) => bail!(
                "--need {}: {}",
                sanitize(&path.display().to_string()),
                sanitize(&e.to_string())
            ),
        };
    }
    let text = arg.to_string_lossy();
    // The Hub's errors name the spec already.
    let remote = crate::remote::model(&text)
        .map_err(|e| anyhow::anyhow!("--need: {}", sanitize(&format!("{e:#}"))))?;
    if let Some(m) = remote {
        return match ModelNeed::of(m) {
            Ok(m) => Ok(NeedInput::Model(Box::new(m))),
            Err(e) => bail!("--need {}: {}", sanitize(&text), sanitize(&e.to_string())),
        };
    }
    match parse_size(&text) {
        Ok(n) => Ok(NeedInput::Size(n)),
        Err(e) if text.trim().starts_with(|c: char| c.is_ascii_digit()) => bail!("--need: {e}"),
        Err(_) => bail!(
            "--need {}: no such file or directory (and not a size such as 24GiB)",
            sanitize(&text)
        ),
    }
}

/// The lock directory (`HMN_LOCK_DIR`, else the first usable default), or why picks are not
/// coordinated.
pub fn locks() -> Result<LockDir, LeaseError> {
    let explicit = std::env::var_os(ENV_LOCK_DIR);
    lock_dir(explicit.as_deref().map(Path::new))
}

/// The devices an inherited `CUDA_VISIBLE_DEVICES` allows: the NVIDIA devices it names, and
/// every other device (`None` when it is unset).
pub fn inherited_within(devices: &[Device]) -> Option<Vec<Selected>> {
    let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok()?;
    let view = hypomnesis::select::cuda_view(
        Some(&visible),
        std::env::var("CUDA_DEVICE_ORDER").ok().as_deref(),
        devices,
    );
    let mut within = view.devices;
    within.extend(
        devices
            .iter()
            .filter(|d| d.vendor != Vendor::Nvidia)
            .map(|d| Selected::device(d.index)),
    );
    Some(within)
}

/// `--vendor`'s vendor.
pub fn vendor(v: Option<VendorArg>) -> Option<Vendor> {
    v.map(|v| match v {
        VendorArg::Nvidia => Vendor::Nvidia,
        VendorArg::Amd => Vendor::Amd,
        VendorArg::Intel => Vendor::Intel,
    })
}

/// `GPU 1 [NVIDIA H100 80GB HBM3]` or `GPU 0 MIG 1g.10gb [name]`.
pub fn device_label(c: &Candidate) -> String {
    let name = sanitize(c.device.name_or_unknown());
    match c.mig_index {
        Some(m) => format!("GPU {} MIG device {m} [{name}]", c.device.index),
        None => format!("GPU {} [{name}]", c.device.index),
    }
}

/// One candidate's line: free memory, others' reservations, and why it does not fit.
pub fn candidate_line(c: &Candidate) -> String {
    let mut line = format!("{}: {} free", device_label(c), opt_bytes(c.free_bytes));
    if let Some(r) = c.reserved_bytes.filter(|r| *r > 0) {
        line.push_str(&format!(", {} reserved by other picks", bytes(r)));
    }
    if let Some(why) = &c.why_not {
        line.push_str(&format!(" — {}", sanitize(why)));
    }
    line
}

/// A candidate in JSON.
#[derive(Serialize)]
struct CandidateJson<'a> {
    selector: &'a str,
    device_index: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    mig_index: Option<u32>,
    name: Option<&'a str>,
    vendor: &'a str,
    free_bytes: Option<u64>,
    reserved_bytes: Option<u64>,
    effective_free_bytes: Option<u64>,
    fits: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    why_not: Option<&'a str>,
}

impl<'a> CandidateJson<'a> {
    fn of(c: &'a Candidate) -> Self {
        CandidateJson {
            selector: &c.selector,
            device_index: c.device.index,
            mig_index: c.mig_index,
            name: c.device.name.as_deref(),
            vendor: c.device.vendor.as_str(),
            free_bytes: c.free_bytes,
            reserved_bytes: c.reserved_bytes,
            effective_free_bytes: c.effective_free_bytes,
            fits: c.fits,
            why_not: c.why_not.as_deref(),
        }
    }
}

/// `hmn pick --json` (schema 1).
#[derive(Serialize)]
struct PickJson<'a> {
    schema: u32,
    need_bytes: u64,
    picked: Vec<CandidateJson<'a>>,
    env: std::collections::BTreeMap<&'a str, Option<&'a str>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    env_reason: Option<String>,
    lock: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    lock_reason: Option<String>,
    lease_seconds: f64,
    considered: Vec<CandidateJson<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    reason: Option<String>,
    notes: &'a [String],
}

/// The stop flag of a waiting pick (Ctrl+C, SIGTERM end the wait); none to install when it
/// does not wait.
fn stop_when_waiting(
    wait: Option<std::time::Duration>,
) -> std::io::Result<std::sync::Arc<std::sync::atomic::AtomicBool>> {
    match wait {
        Some(_) => crate::signals::stop_flag(),
        None => Ok(std::sync::Arc::default()),
    }
}

/// The stderr line when picks are not coordinated.
pub fn uncoordinated_note(cmd: &str, why: &LeaseError) -> String {
    format!(
        "{cmd}: picks are not coordinated (no lock directory: {}); set {ENV_LOCK_DIR} to a \
         directory every user can write",
        sanitize(&why.to_string())
    )
}

pub fn run(
    probe: &Probe,
    g: &GlobalArgs,
    args: &PickArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let need = need_input(&args.need)?;
    let list = probe.devices();
    let complete = list.completeness();
    if let Some(failed) = complete.failed_backends.first() {
        bail!("pick failed to count devices: {failed}");
    }
    let mut req = Request::new(need.need());
    req.count = args.count as usize;
    req.vendor = vendor(args.vendor);
    req.within = inherited_within(&list.devices);
    req.lease = args.lease;
    req.holder = Holder::Lease;
    let locks = locks();
    if let Err(why) = &locks {
        output::note(&uncoordinated_note("pick", why))?;
    }
    let stop = stop_when_waiting(args.wait)?;
    let result = pick_until(probe, &req, locks.as_ref(), args.wait, &stop);
    let env = match &result {
        Ok(p) => visible_env_for(probe, p),
        Err(_) => Ok(Vec::new()),
    };
    let (picked, considered, notes, reason): (&[Candidate], &[Candidate], &[String], _) =
        match &result {
            Ok(p) => (&p.devices, &p.considered, &p.notes, None),
            Err(e) => (&[], e.considered(), e.notes(), Some(e.to_string())),
        };
    if g.json {
        let env_map = env
            .as_ref()
            .map(|e| e.iter().map(|(k, v)| (k.as_str(), v.as_deref())).collect())
            .unwrap_or_default();
        output::json_line(
            out,
            &PickJson {
                schema: 1,
                need_bytes: req.need.reserve_bytes(),
                picked: picked.iter().map(CandidateJson::of).collect(),
                env: env_map,
                env_reason: env.as_ref().err().map(ToString::to_string),
                lock: locks.as_ref().ok().map(|d| d.path.display().to_string()),
                lock_reason: locks.as_ref().err().map(ToString::to_string),
                lease_seconds: args.lease.as_secs_f64(),
                considered: considered.iter().map(CandidateJson::of).collect(),
                reason: reason.clone(),
                notes,
            },
        )?;
    } else {
        for c in picked {
            writeln!(out, "{}", c.selector)?;
        }
    }
    out.flush()?;
    for n in notes {
        output::note(&format!("pick: {}", sanitize(n)))?;
    }
    match (&result, env) {
        (Ok(p), env) => {
            for c in &p.devices {
                output::note(&format!(
                    "pick: {}: {} for {:.0} s",
                    candidate_line(c),
                    match &p.lock {
                        Ok(_) => format!("{} reserved", need.describe()),
                        Err(_) => "not reserved".to_string(),
                    },
                    args.lease.as_secs_f64()
                ))?;
            }
            if let Err(why) = env {
                output::note(&format!("pick: {}", sanitize(&why.to_string())))?;
            }
            Ok(ExitCode::SUCCESS)
        }
        (Err(e), _) => {
            output::note(&format!(
                "pick: {} for {}",
                sanitize(&e.to_string()),
                need.describe()
            ))?;
            for c in considered {
                output::note(&format!("pick:   {}", candidate_line(c)))?;
            }
            if considered.is_empty() && list.devices.is_empty() {
                output::note(&output::no_gpu_line(&list.absent_reasons()))?;
            }
            Ok(ExitCode::from(1))
        }
    }
}

/// The pick of `hmn run --gpu`: devices, their variables, our reservations.
pub struct RunPick {
    /// What was picked.
    pub picked: Picked,
    /// The command's variables.
    pub env: Vec<(String, Option<String>)>,
    /// Where the reservations are (to release them), when coordinated.
    pub locks: Option<LockDir>,
}

/// Picks for `hmn run --gpu` (auto, or within one device), reserving for this process.
///
/// # Errors
/// A device that cannot be named to its runtime, or no device with room (after `wait`), as
/// one `run: …` line.
pub fn for_run(
    probe: &Probe,
    need: &NeedInput,
    within: Option<Vec<Selected>>,
    wait: Option<std::time::Duration>,
    lease: std::time::Duration,
) -> anyhow::Result<RunPick> {
    let me = hypomnesis::process::tree::read_stat(probe.roots(), std::process::id()).ok();
    let mut req = Request::new(need.need());
    req.within = within;
    req.lease = lease;
    req.holder = me.map_or(Holder::Lease, |s| Holder::Process {
        pid: s.pid,
        start_ticks: s.start_time,
    });
    let locks = locks();
    if let Err(why) = &locks {
        output::note(&uncoordinated_note("run", why))?;
    }
    let stop = stop_when_waiting(wait)?;
    let picked = match pick_until(probe, &req, locks.as_ref(), wait, &stop) {
        Ok(p) => p,
        Err(e) => {
            let lines: Vec<String> = e.considered().iter().map(candidate_line).collect();
            // A named device without --need needs nothing: no "for 0 B".
            let what = match need {
                NeedInput::Size(0) => String::new(),
                other => format!(" for {}", other.describe()),
            };
            bail!(
                "run --gpu: {}{what}{}{}",
                sanitize(&e.to_string()),
                if lines.is_empty() { "" } else { ": " },
                lines.join("; ")
            );
        }
    };
    let env = match visible_env_for(probe, &picked) {
        Ok(e) => e,
        Err(why) => {
            if let Ok(l) = &locks {
                hypomnesis::estimate::pick::release(l, &picked.reservations);
            }
            bail!("run --gpu: {}", sanitize(&why.to_string()));
        }
    };
    for c in &picked.devices {
        output::note(&format!("run: on {}", candidate_line(c)))?;
    }
    Ok(RunPick {
        picked,
        env,
        locks: locks.ok(),
    })
}
