//! `hmn run --gpu auto|DEVICE`: the pick made before the command starts (`crate::pick`), the
//! variables the command gets, and the end of the reservation — at the first of: the command's
//! tree holds most of what it needs on every picked device, the command ends, or `--lease`
//! passes (the lease's own expiry, written in the lock file). See `docs/pick.md`.

use std::process::ExitCode;

use hypomnesis::estimate::pick::release;
use hypomnesis::lease::LockDir;
use hypomnesis::sampler::Sample;
use hypomnesis::select::Selected;
use hypomnesis::{Probe, ProbeOptions};

use crate::args::{GlobalArgs, GpuArg, RunArgs};
use crate::pick::{NeedInput, RunPick, for_run, need_input};

/// Variables to set (`Some`) or remove (`None`) for the command.
pub type ChildEnv = Vec<(String, Option<String>)>;

/// The share of its need a device must hold before its reservation ends.
const HELD_SHARE: f64 = 0.9;

/// Our reservations while the command allocates.
pub struct GpuLease {
    locks: Option<LockDir>,
    reservations: Vec<(String, u64)>,
    /// (device index, bytes the tree must hold there before the reservation ends).
    devices: Vec<(u32, u64)>,
}

impl GpuLease {
    /// Ends the reservations once the tree holds `min(need, 90 %)` on every picked device
    /// (a sample of the command's tree).
    pub fn observe(&mut self, s: &Sample) {
        if self.reservations.is_empty() {
            return;
        }
        let held = self.devices.iter().all(|(index, bytes)| {
            s.devices
                .iter()
                .any(|d| d.index == *index && d.tree_vram_bytes >= *bytes)
        });
        if held {
            self.release();
        }
    }

    /// Removes what is left of the reservations (the command ended).
    pub fn release(&mut self) {
        if let Some(l) = &self.locks {
            release(l, &self.reservations);
        }
        self.reservations.clear();
    }
}

impl Drop for GpuLease {
    fn drop(&mut self) {
        self.release();
    }
}

/// What the command needs on its device: `--need`, or nothing for a named device.
fn need_of(args: &RunArgs, gpu: &GpuArg) -> anyhow::Result<NeedInput> {
    match (&args.need, gpu) {
        (Some(n), _) => need_input(n),
        (None, GpuArg::Device(_)) => Ok(NeedInput::Size(0)),
        (None, GpuArg::Auto) => {
            anyhow::bail!("run --gpu auto: needs --need SIZE|MODEL (how much the command needs)")
        }
    }
}

/// Picks for `--gpu` (nothing without it): `Ok(Err(code))` when no device has room — the
/// command does not start and hmn exits with `code`.
///
/// # Errors
/// Bad input (a `--need` that is neither a size nor a model, a `--gpu` that names no device),
/// one line.
pub fn prepare(
    opts: &ProbeOptions,
    g: &GlobalArgs,
    args: &RunArgs,
) -> anyhow::Result<Result<Option<(GpuLease, ChildEnv)>, ExitCode>> {
    let Some(gpu) = &args.gpu else {
        return Ok(Ok(None));
    };
    let need = need_of(args, gpu)?;
    let probe = Probe::with_options(opts.clone());
    let within: Option<Vec<Selected>> = match gpu {
        GpuArg::Auto => crate::pick::inherited_within(&probe.devices().devices),
        GpuArg::Device(sel) => {
            let list = probe.devices();
            Some(crate::select::resolve(
                "run --gpu",
                g,
                &list.devices,
                || list.absent_reasons(),
                std::slice::from_ref(sel),
            )?)
        }
    };
    let RunPick { picked, env, locks } = match for_run(&probe, &need, within, args.wait, args.lease)
    {
        Ok(p) => p,
        Err(e) => {
            crate::output::note(&crate::output::chain(&e))?;
            return Ok(Err(ExitCode::from(1)));
        }
    };
    let threshold = ((need.need().reserve_bytes() as f64) * HELD_SHARE) as u64;
    let lease = GpuLease {
        locks,
        reservations: picked.reservations,
        devices: picked
            .devices
            .iter()
            .map(|c| (c.device.index, threshold))
            .collect(),
    };
    Ok(Ok(Some((lease, env))))
}
