//! Picking a free device for a command: `hmn pick` and `hmn run --gpu auto`. Which devices
//! qualify, in which order, how concurrent picks keep from taking the same device before its
//! command has allocated, and the variables that make a command see only what was picked.
//!
//! | Rule | Where |
//! |---|---|
//! | the candidates: every readable device of the vendor asked (a GPU with MIG on stands as its MIG devices, as `fits --device all` judges them: [`super::plan::judged_as`]; with `count` > 1 MIG devices are left out: CUDA enumerates one MIG device per process), within the devices a selector or an inherited `CUDA_VISIBLE_DEVICES` allows | [`candidates`] |
//! | what can take a context at all: not a GPU whose compute mode is `prohibited`, nor an `exclusive_process` one whose context a process holds (an MPS server's is shared), whose process list could not be read, or that another pick has reserved | [`mode_refusal`], [`rank`] |
//! | what fits: effective free (what a process can allocate on the device as `fits` reckons it — an APU's larger pool, a unified GPU's share of the host's available RAM, else the device's free memory — less the live reservations of others, never an unknown figure as 0) at least the size asked; for a model, the `fits` verdict ([`plan`]) on the device as the reservations leave it | [`rank`] |
//! | the order: fitting first; the smallest effective free that fits (keeps big devices for big jobs); then the least busy; then the higher index (GPU 0 stays free for desktops) | [`rank`] |
//! | the claim: each device's lock taken in turn, its reservations re-read and re-judged under the lock, ours appended (a lease: `--lease`), released if `count` cannot be met | [`pick`] |
//! | the child's variables ([`visible`]): `CUDA_VISIBLE_DEVICES` = full UUIDs (never indices: CUDA's order is not NVML's); `ROCR_VISIBLE_DEVICES` = `GPU-<KFD unique_id>` or the index among KFD compute nodes, and `HIP_VISIBLE_DEVICES` unset; `ZE_AFFINITY_MASK` = the rank by PCI address among Intel GPUs, with `ZE_ENABLE_PCI_ID_DEVICE_ORDER=1` | [`visible::visible_env_for`] |
//!
//! The locks and reservations themselves are `hypomnesis::lease`. See `docs/pick.md`.

use std::collections::BTreeMap;
use std::time::Duration;

use super::budget::Budget;
use super::fit::{Estimate, FitParams, ModelSpec};
use super::judge::Fit;
use super::plan::{Target, judged_as, plan};
use super::pool_budget::{allocatable_free, with_allocatable_free};
use crate::probe::Probe;
use crate::probe::select::Selected;
use crate::system::lease::{LeaseError, LockDir, Reservation};
use crate::types::{ComputeMode, Device, Vendor};
pub use claim::release;
use claim::{LOCK_WAIT, boot_id, live, now_ms, own_uid};

/// How often `--wait` retries (± 20 %, so parallel waiters do not retry together).
pub const RETRY: Duration = Duration::from_secs(2);

/// What the command needs.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Need<'a> {
    /// This much free memory.
    Bytes(u64),
    /// Room for this model, as `hmn fits` judges it.
    Model {
        /// The model.
        spec: &'a ModelSpec,
        /// How it runs.
        params: &'a FitParams,
        /// Its estimate (the reservation is its high end).
        estimate: &'a Estimate,
    },
}

impl Need<'_> {
    /// The bytes a reservation holds: the size, or the estimate's high end (its device part).
    pub fn reserve_bytes(&self) -> u64 {
        match self {
            Need::Bytes(b) => *b,
            Need::Model { estimate, .. } => estimate.high_bytes,
        }
    }
}

/// Who holds a reservation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Holder {
    /// A lease only: the picked command is started by someone else (`hmn pick`).
    Lease,
    /// This process (`hmn run --gpu`): the reservation also ends when it does.
    Process {
        /// Its pid.
        pid: u32,
        /// Its start time, clock ticks since boot.
        start_ticks: u64,
    },
}

/// A pick request.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Request<'a> {
    /// What the command needs on each device.
    pub need: Need<'a>,
    /// How many devices.
    pub count: usize,
    /// Only this vendor's devices.
    pub vendor: Option<Vendor>,
    /// Only these devices (a selector, an inherited `CUDA_VISIBLE_DEVICES`).
    pub within: Option<Vec<Selected>>,
    /// How long a reservation holds at most.
    pub lease: Duration,
    /// Who holds the reservations.
    pub holder: Holder,
}

impl<'a> Request<'a> {
    /// One device with `need`, any vendor, a 60 s lease held by no process.
    pub fn new(need: Need<'a>) -> Request<'a> {
        Request {
            need,
            count: 1,
            vendor: None,
            within: None,
            lease: Duration::from_secs(60),
            holder: Holder::Lease,
        }
    }
}

/// One device that could be picked.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct Candidate {
    /// The device (a MIG device stands as its own, [`crate::MigDevice::as_device`]).
    pub device: Device,
    /// How a command names it: `GPU-…`/`MIG-…` UUID, else the PCI bus id.
    pub selector: String,
    /// The MIG device's index on its GPU.
    pub mig_index: Option<u32>,
    /// What a process can allocate there before reservations (as `fits` reckons it: an APU's
    /// larger pool, a unified GPU's share of the host's available RAM, else the device's free
    /// memory); `None` when a figure it needs is unknown ([`Candidate::why_not`] says which).
    pub free_bytes: Option<u64>,
    /// Live reservations of others on it, bytes; `None` when they could not be read (picks
    /// are not coordinated, or its lock was busy): it is then judged on free memory alone.
    pub reserved_bytes: Option<u64>,
    /// Free memory less those reservations; `None` when free memory is unknown.
    pub effective_free_bytes: Option<u64>,
    /// Whether the need fits.
    pub fits: bool,
    /// Why not, when it does not.
    pub why_not: Option<String>,
}

impl Candidate {
    fn new(device: Device, mig_index: Option<u32>) -> Option<Candidate> {
        let selector = device
            .uuid
            .clone()
            .or_else(|| device.pci_bus_id.map(|p| p.to_string()))?;
        Some(Candidate {
            device,
            selector,
            mig_index,
            free_bytes: None,
            reserved_bytes: None,
            effective_free_bytes: None,
            fits: false,
            why_not: None,
        })
    }
}

/// The candidates among `devices` for `req` (pure; see the [module docs](self)), and notes on
/// what was left out.
pub fn candidates(devices: &[Device], req: &Request<'_>) -> (Vec<Candidate>, Vec<String>) {
    let mut out = Vec::new();
    let mut notes = Vec::new();
    let allowed = |index: u32, mig: Option<u32>| {
        req.within.as_ref().is_none_or(|w| {
            w.iter()
                .any(|s| s.device_index == index && (s.mig_index.is_none() || s.mig_index == mig))
        })
    };
    for d in devices {
        if d.error.is_some() || req.vendor.as_ref().is_some_and(|v| *v != d.vendor) {
            continue;
        }
        if req.count > 1 && d.mig_enabled() {
            notes.push(format!(
                "GPU {} has MIG on: left out (CUDA shows a process one MIG device only)",
                d.index
            ));
            continue;
        }
        // A GPU in MIG mode stands as its MIG devices, as in `fits --device all`.
        let judged = match judged_as(d) {
            Ok(judged) => judged,
            Err(w) => {
                notes.push(format!("GPU {}: {}", d.index, w.message));
                continue;
            }
        };
        for j in judged {
            if !allowed(d.index, j.mig_index) {
                continue;
            }
            let mig = j.mig_index;
            match Candidate::new(j.device, mig) {
                Some(c) => out.push(c),
                None if mig.is_none() => notes.push(format!(
                    "GPU {} has neither a UUID nor a PCI address to name it by",
                    d.index
                )),
                None => {}
            }
        }
    }
    (out, notes)
}

/// Sets each candidate's effective free memory from `reserved` (by selector) — what a process
/// can allocate there as `fits` reckons it (an APU's larger pool, a unified GPU's share of the
/// host's available RAM `host_available`), less the reservations — judges the need with
/// `judge` (the device as the reservations leave it → fits, or why not) — an exclusive GPU
/// another pick has reserved does not fit at all — and sorts (pure; see the
/// [module docs](self)).
pub fn rank(
    cands: &mut [Candidate],
    reserved: &BTreeMap<String, u64>,
    host_available: Option<u64>,
    judge: &dyn Fn(&Device) -> Result<bool, JudgeError>,
) {
    for c in cands.iter_mut() {
        c.reserved_bytes = reserved.get(&c.selector).copied();
        let others = c.reserved_bytes.unwrap_or(0);
        let free = allocatable_free(&c.device, host_available);
        c.free_bytes = free.as_ref().ok().copied();
        c.effective_free_bytes = c.free_bytes.map(|f| f.saturating_sub(others));
        let refused = modes::reserved_refusal(&c.device, others);
        (c.fits, c.why_not) = match (refused, free) {
            (Some(why), _) => (false, Some(why)),
            (None, Err(why)) => (false, Some(why)),
            (None, Ok(free)) => {
                let d = with_allocatable_free(&c.device, free.saturating_sub(others));
                match judge(&d) {
                    Ok(true) => (true, None),
                    Ok(false) => (false, Some("not enough free memory".to_string())),
                    Err(why) => (false, Some(why.to_string())),
                }
            }
        };
    }
    cands.sort_by(|a, b| {
        let busy = |c: &Candidate| {
            c.device
                .telemetry
                .utilization_percent
                .map_or(u64::MAX, |u| (u * 100.0) as u64)
        };
        b.fits
            .cmp(&a.fits)
            .then(
                a.effective_free_bytes
                    .unwrap_or(u64::MAX)
                    .cmp(&b.effective_free_bytes.unwrap_or(u64::MAX)),
            )
            .then(busy(a).cmp(&busy(b)))
            .then(b.device.index.cmp(&a.device.index))
            .then(b.mig_index.cmp(&a.mig_index))
    });
}

/// Whether `need` fits on `d` (its figures as given): the size against what a process can
/// allocate there (the pool's budget where it has one, as `fits` reckons it), or the model's
/// `fits` verdict.
///
/// # Errors
/// The model's plan has no verdict on `d` ([`JudgeError::NoAnswer`], [`JudgeError::NoVerdict`]),
/// or its verdict is "incomplete" ([`JudgeError::Incomplete`]: what is known fits, so the
/// reason is the unknown component, not free memory).
pub fn judge(need: &Need<'_>, d: &Device, host_available: Option<u64>) -> Result<bool, JudgeError> {
    match need {
        Need::Bytes(b) => Ok(allocatable_free(d, host_available).is_ok_and(|f| f >= *b)),
        Need::Model {
            spec,
            params,
            estimate,
        } => {
            let devices = [d.clone()];
            let p = plan(
                Target::Devices {
                    devices: &devices,
                    every: false,
                },
                Some((spec, **params)),
                estimate,
                host_available,
            );
            match (p.fit, p.error) {
                (Some(Fit::Incomplete), _) => Err(JudgeError::Incomplete {
                    unknown: estimate
                        .unknown_components
                        .iter()
                        .map(ToString::to_string)
                        .collect(),
                }),
                (Some(f), _) => Ok(f == Fit::Fits),
                (None, Some(e)) => Err(JudgeError::NoAnswer(e)),
                (None, None) => Err(JudgeError::NoVerdict),
            }
        }
    }
}

/// A successful pick.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct Picked {
    /// The devices, best first.
    pub devices: Vec<Candidate>,
    /// Every candidate as judged (the picked ones included).
    pub considered: Vec<Candidate>,
    /// Our reservations: (selector, token).
    pub reservations: Vec<(String, u64)>,
    /// The lock directory, or why picks are not coordinated.
    pub lock: Result<std::path::PathBuf, LeaseError>,
    /// What was left out, and why.
    pub notes: Vec<String>,
}

/// Why nothing was picked.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum PickError {
    /// Not enough devices fit.
    #[error("{reason}")]
    NoneFits {
        /// In words: how many fit of how many asked.
        reason: String,
        /// Every candidate as judged.
        considered: Vec<Candidate>,
        /// What was left out, and why.
        notes: Vec<String>,
    },
}

impl PickError {
    /// Every candidate as judged.
    pub fn considered(&self) -> &[Candidate] {
        match self {
            PickError::NoneFits { considered, .. } => considered,
        }
    }

    /// What was left out, and why.
    pub fn notes(&self) -> &[String] {
        match self {
            PickError::NoneFits { notes, .. } => notes,
        }
    }
}

/// Picks `req.count` devices (see the [module docs](self)), reserving each under its lock in
/// `locks` (`Err`: why picks are not coordinated; they are then judged on free memory alone).
///
/// # Errors
/// [`PickError::NoneFits`] when fewer than `count` devices fit (what was reserved is
/// released).
pub fn pick(
    probe: &Probe,
    req: &Request<'_>,
    locks: Result<&LockDir, &LeaseError>,
) -> Result<Picked, PickError> {
    let roots = probe.roots();
    let list = probe.devices();
    let (mut cands, mut notes) = candidates(&list.devices, req);
    // The host's available RAM, where a verdict needs it: a model partly on the host, a
    // device whose memory is (partly) host RAM.
    let needs_host = matches!(req.need, Need::Model { estimate, .. } if estimate.host_high_bytes.is_some())
        || cands
            .iter()
            .any(|c| Budget::needs_host_available(&c.device));
    let host = needs_host
        .then(|| probe.host_memory().ok().map(|h| h.memory_available_bytes))
        .flatten();
    let boot = boot_id(roots);
    // A first ranking on the reservations as they stand (read under each lock, briefly).
    let mut reserved = BTreeMap::new();
    if let Ok(dir) = locks {
        for c in &cands {
            if let Ok(mut l) = dir.lock(&c.selector, LOCK_WAIT) {
                let sum = live(roots, l.read(), &boot)
                    .iter()
                    .fold(0u64, |a, r| a.saturating_add(r.need_bytes));
                reserved.insert(c.selector.clone(), sum);
            }
        }
    }
    // The GPU processes, only where an exclusive compute mode makes them matter.
    let rows = if cands
        .iter()
        .any(|c| c.device.compute_mode.is_some_and(ComputeMode::is_exclusive))
    {
        probe.gpu_processes()
    } else {
        crate::types::ProcessList::default()
    };
    let judge_fn = |d: &Device| match mode_refusal(d, &rows) {
        Some(reason) => Err(JudgeError::Refused { reason }),
        None => judge(&req.need, d, host),
    };
    rank(&mut cands, &reserved, host, &judge_fn);
    let mut picked: Vec<Candidate> = Vec::new();
    let mut tokens: Vec<(String, u64)> = Vec::new();
    let base = now_ms();
    let lease_ms = u64::try_from(req.lease.as_millis()).unwrap_or(u64::MAX);
    for (i, c) in cands.iter().enumerate() {
        if picked.len() >= req.count || !c.fits {
            continue;
        }
        let Ok(dir) = locks else {
            picked.push(c.clone());
            continue;
        };
        // A lock file that cannot be used (a link or a directory in its place, no permission,
        // a holder that keeps it): coordination is advisory, so the device is not refused for
        // it — anyone who can write the shared directory could otherwise deny every device.
        let mut l = match dir.lock(&c.selector, LOCK_WAIT) {
            Ok(l) => l,
            Err(e) => {
                notes.push(uncoordinated(c, &e));
                picked.push(c.clone());
                continue;
            }
        };
        // Re-judged under the lock: another pick may have reserved since the ranking.
        let mut records = live(roots, l.read(), &boot);
        let others = records
            .iter()
            .fold(0u64, |a, r| a.saturating_add(r.need_bytes));
        let mut again = [c.clone()];
        let one = BTreeMap::from([(c.selector.clone(), others)]);
        rank(&mut again, &one, host, &judge_fn);
        if !again[0].fits {
            continue;
        }
        let token = base ^ (u64::from(std::process::id()) << 32) ^ (i as u64);
        let mut r = Reservation::new(
            token,
            req.need.reserve_bytes(),
            base.saturating_add(lease_ms),
        );
        r.boot_id.clone_from(&boot);
        r.uid = own_uid();
        if let Holder::Process { pid, start_ticks } = req.holder {
            (r.pid, r.start_ticks) = (pid, start_ticks);
        }
        records.push(r);
        let [mut got] = again;
        got.reserved_bytes = Some(others);
        match l.write(&records) {
            Ok(()) => tokens.push((c.selector.clone(), token)),
            Err(e) => notes.push(uncoordinated(c, &e)),
        }
        picked.push(got);
    }
    let lock = locks.map(|d| d.path.clone()).map_err(Clone::clone);
    if picked.len() < req.count {
        if let Ok(dir) = locks {
            release(dir, &tokens);
        }
        let reason = match (cands.is_empty(), picked.len()) {
            (true, _) => "no device to pick from".to_string(),
            (false, 0)
                if cands
                    .iter()
                    .all(|c| mode_refusal(&c.device, &rows).is_some()) =>
            {
                "no device admits a new CUDA context (its compute mode)".to_string()
            }
            (false, 0) => "no device has room".to_string(),
            (false, n) => format!("only {n} of the {} devices asked for have room", req.count),
        };
        return Err(PickError::NoneFits {
            reason,
            considered: cands,
            notes,
        });
    }
    Ok(Picked {
        devices: picked,
        considered: cands,
        reservations: tokens,
        lock,
        notes,
    })
}

/// The note for a device picked without a reservation: its lock file could not be used.
fn uncoordinated(c: &Candidate, e: &LeaseError) -> String {
    format!(
        "GPU {}: picked without coordination (another pick may choose it too): its lock: {e}",
        c.device.index
    )
}

/// [`pick`] again every [`RETRY`] (± 20 %) until it succeeds, `wait` has passed (`None`: try
/// once) or `stop` is set.
///
/// # Errors
/// The last attempt's [`PickError`].
pub fn pick_until(
    probe: &Probe,
    req: &Request<'_>,
    locks: Result<&LockDir, &LeaseError>,
    wait: Option<Duration>,
    stop: &std::sync::atomic::AtomicBool,
) -> Result<Picked, PickError> {
    let deadline = wait.map(|w| std::time::Instant::now() + w);
    loop {
        let err = match pick(probe, req, locks) {
            Ok(p) => return Ok(p),
            Err(e) => e,
        };
        let Some(deadline) = deadline else {
            return Err(err);
        };
        // ± 20 % from the clock's nanoseconds: parallel waiters drift apart.
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let pause = RETRY.mul_f64(0.8 + 0.4 * f64::from(nanos % 1000) / 1000.0);
        let until = std::time::Instant::now() + pause;
        loop {
            let now = std::time::Instant::now();
            if stop.load(std::sync::atomic::Ordering::Relaxed) || now >= deadline {
                return Err(err);
            }
            if now >= until {
                break;
            }
            std::thread::sleep(
                (until - now)
                    .min(deadline - now)
                    .min(Duration::from_millis(50)),
            );
        }
    }
}

/// A model as a need: opened (headers only), estimated with the default runtime's defaults,
/// as `hmn fits PATH` does.
#[cfg(feature = "models")]
#[derive(Debug)]
#[non_exhaustive]
pub struct ModelNeed {
    /// The model.
    pub model: super::model::OpenedModel,
    /// Its run parameters (the default runtime's defaults).
    pub params: FitParams,
    /// Its estimate.
    pub estimate: Estimate,
}

#[cfg(feature = "models")]
impl ModelNeed {
    /// Opens and estimates the model at `path`.
    ///
    /// # Errors
    /// The model cannot be read ([`ModelNeedError::Open`]), or its default parameters are
    /// refused ([`ModelNeedError::Params`]).
    pub fn open(path: &std::path::Path) -> Result<ModelNeed, ModelNeedError> {
        ModelNeed::of(super::model::open(path)?)
    }

    /// Estimates a model already opened (from a Hub, a URL).
    ///
    /// # Errors
    /// Its default parameters are refused ([`ModelNeedError::Params`]).
    pub fn of(model: super::model::OpenedModel) -> Result<ModelNeed, ModelNeedError> {
        let arch = model.spec.arch.as_ref();
        let runtime = super::runtime::Runtime::for_target(None, false);
        let params = FitParams::defaults(runtime, arch);
        params.validate(arch)?;
        let estimate = super::fit::estimate(&model.spec, params);
        Ok(ModelNeed {
            model,
            params,
            estimate,
        })
    }

    /// The need.
    pub fn need(&self) -> Need<'_> {
        Need::Model {
            spec: &self.model.spec,
            params: &self.params,
            estimate: &self.estimate,
        }
    }
}

// Reservations: now, this boot, the live ones, who makes them.
mod claim;
// Why a device could not be judged, why a model is no need.
mod errors;
// The variables a command is started with (`visible::visible_env_for`).
mod modes;
pub mod visible;

pub use errors::JudgeError;
#[cfg(feature = "models")]
pub use errors::ModelNeedError;
pub use modes::mode_refusal;

#[cfg(test)]
mod tests;
