//! Memory no listed process accounts for: [`Unattributed`], per device — the device's used
//! memory less the sum of the processes this listing can see ([`VramSum`]), with what bounds
//! it and the causes the listing itself shows ([`Cause`]).
//!
//! | Rule | Where |
//! |---|---|
//! | the figure: device used (NVIDIA R510+: the driver's reservation already excluded) − Σ rows; on an AMD APU the pool's used (carve-out + GTT) − Σ each row's share of it ([`GpuProcess::pool_bytes`]); `null` with the reason where used, or the reservation inside it, is unknown, the process list failed, or the rows add up to more than used (`processes_exceed_used_by`: the figures disagree, so no remainder is known) | [`Unattributed::of`] |
//! | exact, or an upper bound (`at_most`) when a row's figure is unknown: the rows not summed hold some of the rest | [`Bound`] |
//! | the causes the listing shows (hidden processes, rows whose pid this `/proc` cannot show, MIG, an MPS server left out of sums, the driver's own allocations) | [`Unattributed::of`] |
//! | every device of a listing | [`ProcessList::unattributed`] |
//!
//! Which `used` a backend reports decides the rule: NVML's v2 figure (R510+) and
//! `nvidia-smi`'s exclude the driver's reservation, so the remainder is what neither the
//! driver's reservation nor a listed process explains; NVML's v1 figure (older drivers)
//! includes a reservation it does not report, so no remainder can be bounded; amdgpu's
//! `mem_info_vram_used` counts the driver's own allocations, which stay in the remainder (named
//! as a cause).

use super::device::Device;
use super::field::Field;
use super::lists::ProcessList;
use super::pool::PoolKind;
use super::process::GpuProcess;
use super::source::{Source, UnknownReason};
use super::spelling::spelled;
use super::totals::VramSum;

#[cfg(feature = "serde")]
use serde::Serialize;

spelled! {
    /// Whether an [`Unattributed`] figure is exact.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
    #[non_exhaustive]
    pub enum Bound {
        /// Every listed process's figure is known.
        Exact = "exact",
        /// Some listed process's figure is unknown: it holds part of the remainder, so the true
        /// figure is at most this.
        AtMost = "at_most",
    }
}

/// A cause of unattributed memory this listing can see.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "serde",
    derive(Serialize),
    serde(tag = "cause", rename_all = "snake_case")
)]
#[non_exhaustive]
pub enum Cause {
    /// Processes whose DRM clients could not be read (another user's, without privileges):
    /// their memory is in the remainder.
    HiddenProcesses {
        /// How many.
        count: u32,
    },
    /// Rows NVML lists whose host pid this `/proc` cannot show (hmn in a container's own PID
    /// namespace): counted, but not named.
    OtherPidNamespace {
        /// How many rows.
        rows: usize,
    },
    /// MIG is on: processes are listed per MIG device, and each GPU instance holds memory of
    /// its own no process is charged for.
    Mig,
    /// An MPS server is left out of the sum (its figure may include its clients'): its own
    /// memory is in the remainder.
    MpsServer,
    /// Rows whose figure is unknown (the remainder is then an upper bound).
    UnknownRows {
        /// How many.
        rows: usize,
    },
    /// The driver's own allocations (amdgpu counts them in `used` and does not report them
    /// apart; NVIDIA's per-context overhead outside the processes' figures).
    Driver,
}

impl Cause {
    /// The cause in a few words, for a terminal.
    pub fn describe(&self) -> String {
        match self {
            Cause::HiddenProcesses { count } => format!(
                "{count} process{} hidden from this user",
                if *count == 1 { "" } else { "es" }
            ),
            Cause::OtherPidNamespace { rows } => format!(
                "{rows} row{} this /proc cannot name (another PID namespace)",
                if *rows == 1 { "" } else { "s" }
            ),
            Cause::Mig => "MIG instances' own memory".to_string(),
            Cause::MpsServer => "the MPS server's own memory".to_string(),
            Cause::UnknownRows { rows } => format!(
                "{rows} row{} with unknown usage",
                if *rows == 1 { "" } else { "s" }
            ),
            Cause::Driver => "the driver's own allocations".to_string(),
        }
    }
}

/// Memory on one device that no listed process accounts for.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct Unattributed {
    /// The device's index.
    pub device_index: u32,
    /// Bytes: the device's used memory less the listed processes' sum; `None` when it cannot
    /// be bounded (`reason` says why).
    pub bytes: Option<u64>,
    /// Whether `bytes` is exact or an upper bound; `None` with `bytes`.
    pub bound: Option<Bound>,
    /// The processes' sum that was taken off (their known figures).
    pub processes_bytes: u64,
    /// Why `bytes` is unknown.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub reason: Option<String>,
    /// The listed processes' sum is larger than the device's used figure by this much (the
    /// driver's per-process figures and its device figure disagree); `bytes` is then `None`.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub processes_exceed_used_by: Option<u64>,
    /// Causes this listing shows.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Vec::is_empty"))]
    pub causes: Vec<Cause>,
}

impl Unattributed {
    fn unknown(device_index: u32, processes_bytes: u64, reason: impl Into<String>) -> Self {
        Unattributed {
            device_index,
            bytes: None,
            bound: None,
            processes_bytes,
            reason: Some(reason.into()),
            processes_exceed_used_by: None,
            causes: Vec::new(),
        }
    }

    /// The rule (`types::unattributed`) for `device` and its `rows`; `failed`: the
    /// device's process list could not be read; `hidden`: processes the listing could not
    /// inspect (DRM devices only: NVML lists every process).
    pub fn of<'a>(
        device: &Device,
        rows: impl IntoIterator<Item = &'a GpuProcess>,
        failed: bool,
        hidden: u32,
    ) -> Unattributed {
        let rows: Vec<&GpuProcess> = rows.into_iter().collect();
        // An AMD APU's pool is its carve-out plus GTT: the device's and each row's figures are
        // of the pool (a model in GTT is the process's, not memory nobody holds).
        let kind = device.pool_kind();
        let apu = kind == Some(PoolKind::CarveOutPlusGtt);
        let sum = VramSum::of_pools(rows.iter().copied(), |_| kind);
        let index = device.index;
        if failed || device.error.is_some() {
            return Unattributed::unknown(
                index,
                sum.known_bytes,
                "the device's process list could not be read",
            );
        }
        let memory_unknown = |field: Field| {
            device
                .unknown
                .iter()
                .find(|u| u.field == field)
                .map(|u| u.detail.clone())
        };
        let used = if apu {
            device.pool_used_bytes()
        } else {
            device.memory.used_bytes
        };
        let Some(used) = used else {
            let field = if apu {
                Field::PoolUsedBytes
            } else {
                Field::MemoryUsedBytes
            };
            let why = memory_unknown(field).unwrap_or_else(|| "no used figure".to_string());
            return Unattributed::unknown(
                index,
                sum.known_bytes,
                format!("the device's used memory is unknown: {why}"),
            );
        };
        let nvidia = matches!(device.source, Source::Nvml | Source::NvidiaSmi);
        if nvidia && device.memory.reserved_bytes.is_none() {
            return Unattributed::unknown(
                index,
                sum.known_bytes,
                "the device's used figure includes the driver's reservation, which this driver \
                 does not report (older than R510)",
            );
        }
        if !nvidia && device.source != Source::Sysfs {
            return Unattributed::unknown(
                index,
                sum.known_bytes,
                format!(
                    "not defined for {} devices (their used figure is not the processes' sum)",
                    device.source.as_str()
                ),
            );
        }
        let mut causes = Vec::new();
        if hidden > 0 && device.source == Source::Sysfs {
            causes.push(Cause::HiddenProcesses { count: hidden });
        }
        let unnamed = rows
            .iter()
            .filter(|r| {
                r.unknown
                    .iter()
                    .any(|u| u.reason == UnknownReason::OtherPidNamespace)
            })
            .count();
        if unnamed > 0 {
            causes.push(Cause::OtherPidNamespace { rows: unnamed });
        }
        if device.mig_enabled() {
            causes.push(Cause::Mig);
        }
        if sum.mps_servers_left_out > 0 {
            causes.push(Cause::MpsServer);
        }
        if sum.unknown_rows > 0 {
            causes.push(Cause::UnknownRows {
                rows: sum.unknown_rows,
            });
        }
        causes.push(Cause::Driver);
        if let Some(exceed) = sum.known_bytes.checked_sub(used).filter(|e| *e > 0) {
            // The figures disagree (read at different instants, or counted differently): what
            // nobody holds is not known to be 0.
            let mut u = Unattributed::unknown(
                index,
                sum.known_bytes,
                "the processes' figures add up to more than the device's used memory",
            );
            u.processes_exceed_used_by = Some(exceed);
            return u;
        }
        Unattributed {
            device_index: index,
            bytes: Some(used.saturating_sub(sum.known_bytes)),
            bound: Some(if sum.is_lower_bound() {
                Bound::AtMost
            } else {
                Bound::Exact
            }),
            processes_bytes: sum.known_bytes,
            reason: None,
            processes_exceed_used_by: None,
            causes,
        }
    }
}

impl ProcessList {
    /// [`Unattributed::of`] for every listed device, in index order.
    pub fn unattributed(&self) -> Vec<Unattributed> {
        self.devices
            .iter()
            .map(|d| self.unattributed_on(d))
            .collect()
    }

    /// [`Unattributed::of`] for `device` (one of this list's devices) and its rows.
    pub fn unattributed_on(&self, device: &Device) -> Unattributed {
        Unattributed::of(
            device,
            self.processes
                .iter()
                .filter(|p| p.device_index == device.index),
            self.failed_devices.contains(&device.index),
            self.hidden_processes,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::kind::ProcessKind;
    use crate::types::nvidia::{MigMode, MigState};
    use crate::types::source::{Unknown, Vendor};
    use crate::types::usage::DeviceMemory;

    const GIB: u64 = 1 << 30;

    fn nvml(used: Option<u64>, reserved: Option<u64>) -> Device {
        let mut d = Device::new(0, Vendor::Nvidia, Source::Nvml);
        d.memory = DeviceMemory::new(Some(80 * GIB), used, Some(GIB), reserved);
        d
    }

    fn row(pid: u32, used: Option<u64>) -> GpuProcess {
        let mut p = GpuProcess::new(pid, 0, ProcessKind::Compute, Source::Nvml);
        p.used_bytes = used;
        p
    }

    #[test]
    fn used_less_the_processes_is_exact_when_every_row_is_known() {
        let d = nvml(Some(10 * GIB), Some(GIB / 2));
        let rows = [row(1, Some(6 * GIB)), row(2, Some(3 * GIB))];
        let u = Unattributed::of(&d, &rows, false, 0);
        assert_eq!(u.bytes, Some(GIB), "reserved is already out of used (v2)");
        assert_eq!(u.bound, Some(Bound::Exact));
        assert_eq!(u.processes_bytes, 9 * GIB);
        assert_eq!(u.causes, [Cause::Driver]);
        let none: [GpuProcess; 0] = [];
        assert_eq!(Unattributed::of(&d, &none, false, 0).bytes, Some(10 * GIB));
    }

    #[test]
    fn an_unknown_row_makes_it_an_upper_bound_never_a_zero() {
        let d = nvml(Some(10 * GIB), Some(0));
        let rows = [row(1, Some(6 * GIB)), row(2, None)];
        let u = Unattributed::of(&d, &rows, false, 0);
        assert_eq!(u.bytes, Some(4 * GIB));
        assert_eq!(u.bound, Some(Bound::AtMost));
        assert!(u.causes.contains(&Cause::UnknownRows { rows: 1 }));
    }

    #[test]
    fn it_cannot_be_bounded_without_used_the_reservation_or_the_list() {
        let mut d = nvml(None, Some(0));
        d.unknown.push(Unknown::new(
            Field::MemoryUsedBytes,
            UnknownReason::PermissionDenied,
            "MIG enabled: needs privileges",
        ));
        let u = Unattributed::of(&d, &[row(1, Some(GIB))], false, 0);
        assert_eq!((u.bytes, u.bound), (None, None));
        assert!(u.reason.unwrap().contains("MIG enabled"));
        // A pre-R510 driver: used includes a reservation it does not report.
        let u = Unattributed::of(&nvml(Some(GIB), None), &[row(1, Some(1))], false, 0);
        assert!(u.reason.unwrap().contains("R510"), "v1 semantics");
        // The process list failed.
        let u = Unattributed::of(&nvml(Some(GIB), Some(0)), &[row(1, Some(1))], true, 0);
        assert!(u.reason.unwrap().contains("process list"));
        // A DXGI adapter: not defined.
        let mut w = Device::new(0, Vendor::Nvidia, Source::Dxgi);
        w.memory.used_bytes = Some(GIB);
        assert!(Unattributed::of(&w, &[], false, 0).bytes.is_none());
    }

    #[test]
    fn causes_the_listing_shows() {
        let mut d = nvml(Some(10 * GIB), Some(0));
        d.mig = Some(MigState::new(MigMode::Enabled, MigMode::Enabled));
        let mut server = row(1, Some(5 * GIB));
        server.may_include_clients = true;
        let mut unnamed = row(2, Some(GIB));
        unnamed.unknown.push(Unknown::new(
            Field::Name,
            UnknownReason::OtherPidNamespace,
            "not visible",
        ));
        let u = Unattributed::of(&d, &[server, unnamed], false, 7);
        assert_eq!(u.bytes, Some(9 * GIB), "the server is not subtracted");
        assert_eq!(
            u.causes,
            [
                Cause::OtherPidNamespace { rows: 1 },
                Cause::Mig,
                Cause::MpsServer,
                Cause::Driver
            ],
            "hidden processes are a DRM cause only"
        );
        let mut amd = Device::new(1, Vendor::Amd, Source::Sysfs);
        amd.memory.used_bytes = Some(2 * GIB);
        let mut r = row(3, Some(3 * GIB));
        r.device_index = 1;
        let u = Unattributed::of(&amd, std::slice::from_ref(&r), false, 2);
        assert_eq!(u.bytes, None, "the figures disagree: not an exact 0");
        assert_eq!(u.processes_exceed_used_by, Some(GIB));
        assert!(u.reason.as_deref().unwrap().contains("more than"), "{u:?}");
        amd.memory.used_bytes = Some(4 * GIB);
        let u = Unattributed::of(&amd, &[r], false, 2);
        assert_eq!((u.bytes, u.processes_exceed_used_by), (Some(GIB), None));
        assert_eq!(u.causes[0], Cause::HiddenProcesses { count: 2 });
        assert_eq!(u.causes[0].describe(), "2 processes hidden from this user");
    }

    #[test]
    fn a_listing_gives_one_figure_per_device() {
        let mut second = nvml(Some(GIB), Some(0));
        second.index = 1;
        let mut on_second = row(9, Some(GIB / 4));
        on_second.device_index = 1;
        let list = ProcessList {
            devices: vec![nvml(Some(2 * GIB), Some(0)), second],
            processes: vec![row(1, Some(GIB)), on_second],
            ..ProcessList::default()
        };
        let all = list.unattributed();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].bytes, Some(GIB));
        assert_eq!(all[1].bytes, Some(GIB - GIB / 4));
    }
}
