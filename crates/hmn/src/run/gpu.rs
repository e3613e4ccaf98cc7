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
        self.observe_held(|index| {
            s.devices
                .iter()
                .find(|d| d.index == index)
                .and_then(|d| d.tree_vram_bytes)
        });
    }

    /// [`GpuLease::observe`] over what the tree holds per device (`held(index)`; `None`: the
    /// device was not sampled, or the tree's figure there is unknown).
    fn observe_held(&mut self, held: impl Fn(u32) -> Option<u64>) {
        if self.reservations.is_empty() {
            return;
        }
        if self
            .devices
            .iter()
            .all(|(index, bytes)| held(*index).is_some_and(|h| h >= *bytes))
        {
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
    // The pick judges memory only: no telemetry asked (the command's sampler asks its own).
    let probe = Probe::with_options(opts.clone().telemetry(false));
    let within: Option<Vec<Selected>> = match gpu {
        GpuArg::Auto => {
            let list = probe.devices();
            // A backend that failed may hide the GPU to pick: an error, as for `hmn pick`.
            if let Some(failed) = list.completeness().failed_backends.first() {
                anyhow::bail!("run --gpu failed to count devices: {failed}");
            }
            crate::pick::inherited_within(&list.devices)
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::lease::{Reservation, lock_dir};
    use std::time::Duration;

    #[test]
    fn the_reservation_ends_once_the_tree_holds_most_of_the_need_on_every_device() {
        let dir = tempfile::tempdir().unwrap();
        let locks = lock_dir(Some(dir.path())).unwrap();
        let until = u64::MAX / 2;
        for (selector, token) in [("GPU-a", 7), ("GPU-b", 8)] {
            let mut l = locks.lock(selector, Duration::from_secs(1)).unwrap();
            l.write(&[Reservation::new(token, 1000, until)]).unwrap();
        }
        let tokens = |selector: &str| -> Vec<u64> {
            let mut l = locks.lock(selector, Duration::from_secs(1)).unwrap();
            l.read().iter().map(|r| r.token).collect()
        };
        let mut lease = GpuLease {
            locks: Some(lock_dir(Some(dir.path())).unwrap()),
            reservations: vec![("GPU-a".into(), 7), ("GPU-b".into(), 8)],
            devices: vec![(0, 900), (1, 900)],
        };
        // 90 % on one device only, then the other unsampled: both reservations stay.
        lease.observe_held(|i| [Some(950), Some(100)][i as usize]);
        lease.observe_held(|i| [Some(950), None][i as usize]);
        assert_eq!((tokens("GPU-a"), tokens("GPU-b")), (vec![7], vec![8]));
        // Both held: both released, and a later sample changes nothing.
        lease.observe_held(|_| Some(900));
        assert!(tokens("GPU-a").is_empty() && tokens("GPU-b").is_empty());
        assert!(lease.reservations.is_empty());
        lease.observe_held(|_| Some(0));
    }
}
