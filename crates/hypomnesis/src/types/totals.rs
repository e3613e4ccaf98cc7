//! What a listing adds up to, and whether it can have missed anything: the VRAM sum over GPU
//! processes ([`VramSum`], an MPS server counted once, unknown kept apart from zero) and a
//! listing's [`Completeness`] (failed backends, failed devices, hidden processes).
//!
//! | Rule | Where |
//! |---|---|
//! | which rows a sum counts (an MPS server that may include its clients' memory is left out) | [`GpuProcess::counts_in_sums`] |
//! | the VRAM sum of rows, a lower bound when a row's figure is unknown | [`VramSum::of`], [`ProcessList::vram_sum`] |
//! | the same sum with each row's share of its device's pool (an AMD APU's VRAM + GTT) | [`VramSum::of_pools`] |
//! | whether a process listing can have left processes unseen, and whether it failed (upstream's exit 2) | [`ProcessList::completeness`] |
//! | whether a device listing failed: a broken backend, or devices counted none of which could be read | [`DeviceList::completeness`] |

use super::lists::{DeviceList, ProcessList, failed_reasons};
use super::pool::PoolKind;
use super::process::GpuProcess;

impl GpuProcess {
    /// Whether sums over rows count this row's figure: every row but an MPS server whose figure
    /// may include its clients' memory ([`GpuProcess::may_include_clients`]) — its clients are
    /// counted on their own rows, so adding it would count their memory twice.
    pub fn counts_in_sums(&self) -> bool {
        !self.may_include_clients
    }
}

/// A sum of GPU processes' device memory ([`GpuProcess::used_bytes`]) that keeps unknown apart
/// from zero: a row whose figure is unknown is counted in `unknown_rows`, never summed as 0, so
/// `known_bytes` is a **lower bound** whenever `unknown_rows > 0` ([`VramSum::bytes`] is the
/// exact total only when no row is unknown). An MPS server that may include its clients'
/// memory is left out ([`GpuProcess::counts_in_sums`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VramSum {
    /// The sum of the counted rows' known figures: the total when `unknown_rows` is 0, a lower
    /// bound otherwise.
    pub known_bytes: u64,
    /// Rows summed into `known_bytes`.
    pub counted_rows: usize,
    /// Rows whose figure is unknown: not in `known_bytes`.
    pub unknown_rows: usize,
    /// MPS servers left out (their figure may include their clients').
    pub mps_servers_left_out: usize,
}

impl VramSum {
    /// The sum over `rows`.
    pub fn of<'a>(rows: impl IntoIterator<Item = &'a GpuProcess>) -> VramSum {
        let mut sum = VramSum::default();
        for row in rows {
            sum.add(row);
        }
        sum
    }

    /// The sum over `rows`, each counting what it holds of its device's pool
    /// ([`GpuProcess::pool_bytes`]: VRAM plus GTT on an AMD APU), where `kind` gives a device
    /// index's pool kind.
    pub fn of_pools<'a>(
        rows: impl IntoIterator<Item = &'a GpuProcess>,
        kind: impl Fn(u32) -> Option<PoolKind>,
    ) -> VramSum {
        let mut sum = VramSum::default();
        for row in rows {
            sum.add_in_pool(row, kind(row.device_index));
        }
        sum
    }

    /// Adds one row.
    pub fn add(&mut self, row: &GpuProcess) {
        self.add_figure(row, row.used_bytes);
    }

    /// Adds one row's share of its device's pool, the pool being of `kind`
    /// ([`GpuProcess::pool_bytes`]: VRAM plus GTT on an AMD APU, else `used_bytes`).
    pub fn add_in_pool(&mut self, row: &GpuProcess, kind: Option<PoolKind>) {
        self.add_figure(row, row.pool_bytes(kind));
    }

    /// Adds one row's `figure` (its used bytes, or its share of its device's pool).
    fn add_figure(&mut self, row: &GpuProcess, figure: Option<u64>) {
        match figure {
            None => self.unknown_rows += 1,
            Some(_) if !row.counts_in_sums() => self.mps_servers_left_out += 1,
            Some(b) => {
                self.known_bytes = self.known_bytes.saturating_add(b);
                self.counted_rows += 1;
            }
        }
    }

    /// The exact total; `None` when a row's figure is unknown (`known_bytes` is then a lower
    /// bound).
    pub fn bytes(&self) -> Option<u64> {
        (self.unknown_rows == 0).then_some(self.known_bytes)
    }

    /// Whether `known_bytes` is only a lower bound (a row's figure is unknown).
    pub fn is_lower_bound(&self) -> bool {
        self.unknown_rows > 0
    }
}

/// Whether a listing can have left GPU processes (or devices) unseen, and why.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Completeness {
    /// Each backend that failed with no fallback in its place
    /// ([`failed_reasons`]): an NVML that cannot start or count. GPUs may exist that the
    /// listing cannot show.
    pub failed_backends: Vec<crate::types::backend::BackendProblem>,
    /// The devices asked about that could not be read: whose process list failed
    /// ([`ProcessList::failed_devices`]), or, for a device listing, that refused every query
    /// ([`Device::error`](crate::Device::error)).
    pub failed_devices: Vec<u32>,
    /// Nothing could be read: every device asked about failed, or a failed backend left no
    /// device to ask.
    pub nothing_read: bool,
    /// Processes that may hold GPU memory but could not be inspected
    /// ([`ProcessList::hidden_processes`]; 0 for a device listing).
    pub hidden_processes: u32,
}

impl Completeness {
    /// Whether the listing failed, whatever it shows (upstream's exit status 2): a backend
    /// that is here but broken, or nothing could be read.
    pub fn is_failure(&self) -> bool {
        !self.failed_backends.is_empty() || self.nothing_read
    }

    /// Whether processes may be unseen: a failure, a failed device asked about, or a hidden
    /// process. An empty listing then says nothing about what runs on the GPUs.
    pub fn may_miss_processes(&self) -> bool {
        self.is_failure() || !self.failed_devices.is_empty() || self.hidden_processes > 0
    }
}

impl ProcessList {
    /// The VRAM sum of every row ([`VramSum::of`]).
    pub fn vram_sum(&self) -> VramSum {
        VramSum::of(&self.processes)
    }

    /// The VRAM sum of device `index`'s rows.
    pub fn vram_sum_on(&self, index: u32) -> VramSum {
        VramSum::of(self.processes.iter().filter(|p| p.device_index == index))
    }

    /// How complete this listing is for `devices` (`None`: every device): the failed
    /// backends, the failed devices among them, whether none of them could be read, and the
    /// hidden processes. NVML that cannot start or count, or failing devices, leave processes
    /// unseen.
    pub fn completeness(&self, devices: Option<&[u32]>) -> Completeness {
        let asked = |i: &u32| devices.is_none_or(|d| d.contains(i));
        let failed_backends = failed_reasons(&self.backends);
        let tried: Vec<u32> = self.devices.iter().map(|d| d.index).filter(asked).collect();
        let nothing_read = if tried.is_empty() {
            !failed_backends.is_empty()
        } else {
            tried.iter().all(|i| self.failed_devices.contains(i))
        };
        Completeness {
            failed_devices: self.failed_devices.iter().copied().filter(asked).collect(),
            failed_backends,
            nothing_read,
            hidden_processes: self.hidden_processes,
        }
    }
}

impl DeviceList {
    /// How complete this device listing is: the failed backends, the devices that refused
    /// every query, and whether none could be read (devices counted, none readable; or a
    /// failed backend and no device). No GPU at all (no library, driver not loaded, none found)
    /// is complete.
    pub fn completeness(&self) -> Completeness {
        let failed_backends = failed_reasons(&self.backends);
        let failed_devices: Vec<u32> = self
            .devices
            .iter()
            .filter(|d| d.error.is_some())
            .map(|d| d.index)
            .collect();
        let nothing_read = if self.devices.is_empty() {
            !failed_backends.is_empty()
        } else {
            failed_devices.len() == self.devices.len()
        };
        Completeness {
            failed_backends,
            failed_devices,
            nothing_read,
            hidden_processes: 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::backend::{Backend, BackendCause, BackendState, BackendStatus};
    use crate::types::device::Device;
    use crate::types::kind::ProcessKind;
    use crate::types::source::{Source, Vendor};

    fn row(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
        let mut p = GpuProcess::new(pid, device, ProcessKind::Compute, Source::Nvml);
        p.used_bytes = used;
        p
    }

    fn broken_nvml() -> BackendStatus {
        BackendStatus::new(
            Backend::Nvml,
            BackendState::failed(
                BackendCause::VersionMismatch,
                "nvmlInit returned ERROR_LIB_RM_VERSION_MISMATCH (18)",
            ),
        )
    }

    #[test]
    fn an_mps_server_is_counted_once_and_unknown_is_not_zero() {
        let mut server = row(1, 0, Some(900));
        server.may_include_clients = true;
        let rows = [
            server,
            row(2, 0, Some(500)),
            row(3, 0, Some(400)),
            row(4, 1, None),
        ];
        let sum = VramSum::of(&rows);
        assert_eq!(sum.known_bytes, 900, "the clients, not the server again");
        assert_eq!(
            (sum.counted_rows, sum.mps_servers_left_out, sum.unknown_rows),
            (2, 1, 1)
        );
        assert!(sum.is_lower_bound());
        assert_eq!(sum.bytes(), None, "a row unknown: no exact total");
        let on_0 = VramSum::of(rows.iter().filter(|p| p.device_index == 0));
        assert_eq!((on_0.bytes(), on_0.is_lower_bound()), (Some(900), false));
        assert_eq!(VramSum::default().bytes(), Some(0), "no rows: nothing held");

        let list = ProcessList {
            processes: rows.to_vec(),
            ..ProcessList::default()
        };
        assert_eq!(list.vram_sum(), sum);
        assert_eq!(list.vram_sum_on(0), on_0);
        assert_eq!(list.vram_sum_on(1).unknown_rows, 1);
    }

    #[test]
    fn a_pool_sum_counts_an_apus_gtt_with_the_same_rules() {
        use crate::types::pool::PoolKind;
        use crate::types::usage::{ProcessRegions, RegionUsage};
        let mut apu_row = row(1, 1, Some(5));
        apu_row.source = Source::Fdinfo;
        let resident = |b: u64| RegionUsage {
            resident_bytes: Some(b),
            ..RegionUsage::default()
        };
        apu_row.regions = Some(ProcessRegions {
            vram: Some(resident(5)),
            gtt: Some(resident(100)),
            ..ProcessRegions::default()
        });
        let mut server = row(2, 0, Some(900));
        server.may_include_clients = true;
        let rows = [apu_row, server, row(3, 0, Some(7)), row(4, 0, None)];
        let apu = |i: u32| (i == 1).then_some(PoolKind::CarveOutPlusGtt);
        let sum = VramSum::of_pools(&rows, apu);
        assert_eq!(sum.known_bytes, 5 + 100 + 7, "the APU row's GTT counted");
        assert_eq!(
            (sum.counted_rows, sum.mps_servers_left_out, sum.unknown_rows),
            (2, 1, 1)
        );
        // No pool known anywhere: the plain sum.
        assert_eq!(VramSum::of_pools(&rows, |_| None), VramSum::of(&rows));
        assert_eq!(VramSum::of(&rows).known_bytes, 12);
    }

    #[test]
    fn a_process_listing_is_complete_only_when_nothing_is_hidden_or_failed() {
        let mut list = ProcessList {
            devices: vec![
                Device::new(0, Vendor::Nvidia, Source::Nvml),
                Device::new(1, Vendor::Nvidia, Source::Nvml),
            ],
            ..ProcessList::default()
        };
        let c = list.completeness(None);
        assert!(!c.is_failure() && !c.may_miss_processes(), "{c:?}");

        list.hidden_processes = 2;
        assert!(list.completeness(None).may_miss_processes());
        assert!(
            !list.completeness(None).is_failure(),
            "hidden is not a failure"
        );
        list.hidden_processes = 0;

        // Device 1's process list failed: only a listing of device 1 (or all) misses it.
        list.failed_devices = vec![1];
        assert_eq!(list.completeness(None).failed_devices, [1]);
        assert!(list.completeness(None).may_miss_processes());
        assert!(!list.completeness(Some(&[0])).may_miss_processes());
        let one = list.completeness(Some(&[1]));
        assert!(
            one.nothing_read && one.is_failure(),
            "every device asked failed"
        );
        assert!(!list.completeness(None).nothing_read);

        // NVML here but broken: a failure whatever was listed; with no device, nothing read.
        let broken = ProcessList {
            backends: vec![broken_nvml()],
            ..ProcessList::default()
        };
        let c = broken.completeness(None);
        assert!(c.is_failure() && c.nothing_read);
        assert_eq!(c.failed_backends[0].backend, Backend::Nvml);
    }

    #[test]
    fn a_device_listing_fails_when_none_can_be_read_or_a_backend_broke() {
        let mut lost = Device::new(1, Vendor::Nvidia, Source::Nvml);
        lost.error = Some("GPU is lost".into());
        let mut list = DeviceList {
            devices: vec![Device::new(0, Vendor::Nvidia, Source::Nvml), lost.clone()],
            ..DeviceList::default()
        };
        let c = list.completeness();
        assert_eq!(c.failed_devices, [1]);
        assert!(!c.is_failure(), "one readable device stands");
        list.devices.remove(0);
        assert!(list.completeness().is_failure(), "none readable");
        assert!(
            !DeviceList::default().completeness().is_failure(),
            "no GPU at all is an answer"
        );
        let broken = DeviceList {
            backends: vec![broken_nvml()],
            ..DeviceList::default()
        };
        assert!(broken.completeness().is_failure());
    }
}
