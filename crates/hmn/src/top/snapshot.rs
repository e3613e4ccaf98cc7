//! The snapshot: everything `hmn top` draws for one instant, as one serde value. `hmn record`
//! writes one per line (JSON Lines) and `hmn top --replay` reads them back into the same view,
//! so a recording shows exactly what the live view showed. The format is documented in
//! `docs/top.md` (format `hmn-top`, version 1): field names follow `hmn --json` where the value
//! is the same; unknown values are `null` (never 0), with `unknown` entries saying why.
//!
//! A snapshot is bounded ([`Limits`]): at most `max_processes` rows (largest VRAM first; the
//! line says how many were left out), command lines, names and warnings cut to fixed lengths.

use std::collections::BTreeMap;

use hypomnesis::{Device, GpuProcess, HostMemory, ProcessRegions, RegionUsage, Unknown};
use serde::{Deserialize, Serialize};

/// The `format` field of every line.
pub const FORMAT: &str = "hmn-top";
/// The version this build writes and the newest it reads.
pub const VERSION: u32 = 1;

/// Caps that bound the size of one snapshot (and so of one recorded line).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Process rows kept (largest VRAM first).
    pub max_processes: usize,
}

/// Bytes of a command line kept (cut at a character boundary).
pub const CMDLINE_MAX: usize = 1024;
/// Bytes of a name, user, warning or other free text kept.
pub const TEXT_MAX: usize = 256;
/// Warnings kept per snapshot.
pub const WARNINGS_MAX: usize = 16;
/// Ancestor records kept per snapshot (the tree view's parents that hold no GPU memory).
pub const ANCESTORS_MAX: usize = 512;

/// One instant: host memory, devices, GPU processes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Always [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// When the collection finished, ms since the Unix epoch.
    pub unix_ms: u64,
    /// The collection interval in force.
    pub interval_ms: u64,
    /// How long the collection took.
    pub collect_ms: u64,
    /// Host RAM and swap; `null` when `/proc/meminfo` could not be read (`host_error` says why).
    pub host: Option<HostView>,
    /// Why `host` is null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_error: Option<String>,
    /// Every device, in index order.
    pub devices: Vec<DeviceView>,
    /// One row per (process, device), largest VRAM first, at most the cap.
    pub processes: Vec<ProcessRow>,
    /// Rows found before the cap.
    pub processes_total: u32,
    /// Rows left out by the cap (`processes_total - processes.len()`).
    pub processes_omitted: u32,
    /// Parents of listed processes that hold no GPU memory themselves (for the tree view).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ancestors: Vec<Ancestor>,
    /// Processes that may hold GPU memory but could not be inspected.
    #[serde(default)]
    pub hidden_processes: u32,
    /// Devices whose process list could not be read.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub failed_devices: Vec<u32>,
    /// Problems that did not stop the collection (at most [`WARNINGS_MAX`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// Set when no backend found a GPU: the one line that says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_gpu: Option<String>,
}

/// Host RAM and swap, bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostView {
    pub memory_total_bytes: u64,
    pub memory_available_bytes: u64,
    pub swap_total_bytes: Option<u64>,
    pub swap_free_bytes: Option<u64>,
}

/// One device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceView {
    pub index: u32,
    pub name: Option<String>,
    pub vendor: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub driver: Option<String>,
    pub source: String,
    /// `power/runtime_status` (`active`, `suspended`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_status: Option<String>,
    /// Runtime-suspended: not read (reading would wake it).
    #[serde(default)]
    pub suspended: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub integrated: Option<bool>,
    pub memory: MemoryView,
    /// Per-region totals (amdgpu `vram`, `visible_vram`, `gtt`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub regions: BTreeMap<String, RegionTotals>,
    pub telemetry: TelemetryView,
    /// The device exists but could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<UnknownView>,
}

/// Device memory, bytes (`used + free + reserved = total` on NVIDIA R510+).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryView {
    pub total_bytes: Option<u64>,
    pub used_bytes: Option<u64>,
    pub free_bytes: Option<u64>,
    pub reserved_bytes: Option<u64>,
}

/// A device region's total and used bytes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionTotals {
    pub total_bytes: Option<u64>,
    pub used_bytes: Option<u64>,
}

/// Utilization, temperature, power, clocks.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TelemetryView {
    pub utilization_percent: Option<f64>,
    pub memory_utilization_percent: Option<f64>,
    pub temperature_celsius: Option<f64>,
    pub power_watts: Option<f64>,
    pub clock_graphics_mhz: Option<u32>,
    pub clock_memory_mhz: Option<u32>,
    pub clock_graphics_max_mhz: Option<u32>,
    pub clock_memory_max_mhz: Option<u32>,
}

/// A value that is `null`, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UnknownView {
    pub field: String,
    pub reason: String,
    pub detail: String,
}

/// One process's use of one device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRow {
    pub pid: u32,
    /// Start time (clock ticks after boot): with `pid`, the process's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    pub name: Option<String>,
    pub user: Option<String>,
    pub uid: Option<u32>,
    pub device_index: u32,
    /// `compute`, `graphics` or `compute+graphics`.
    pub kind: String,
    /// Device memory used on this device.
    pub vram_bytes: Option<u64>,
    /// Host resident set size.
    pub rss_bytes: Option<u64>,
    /// Engine use per class, percent, over the last interval (DRM devices).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub engines: BTreeMap<String, f64>,
    /// Memory per region (DRM devices).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regions: Option<RegionsView>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drm_clients: Vec<u64>,
    /// Lower pids whose shared DRM clients are counted on their row, not this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub shared_with: Vec<u32>,
    /// The container, pod, Slurm job or systemd unit, from the process's cgroup
    /// (`hypomnesis::workload`, as `hmn ps`'s WORKLOAD).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workload: Option<WorkloadView>,
    /// The MIG device the row runs in (index on its GPU) and its instance, `1g.10gb GI 1 CI 0`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig_index: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mig: Option<String>,
    /// The command line, arguments separated by spaces (cut at [`CMDLINE_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
    pub source: String,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unknown: Vec<UnknownView>,
}

/// A process's memory per region on one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionsView {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vram: Option<RegionUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gtt: Option<RegionUse>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<RegionUse>,
}

/// One region's figures, bytes (`hmn --json` names).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RegionUse {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resident_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shared_bytes: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evicted_bytes: Option<u64>,
}

/// The workload a process belongs to.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkloadView {
    /// `pod`, `container`, `unit` or `other`.
    pub kind: String,
    pub name: String,
}

/// A parent shown in the tree view that holds no GPU memory itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ancestor {
    pub pid: u32,
    pub ppid: Option<u32>,
    pub name: Option<String>,
}

/// Cuts `s` to at most `max` bytes at a character boundary.
pub fn cut(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
    s
}

fn unknowns(u: &[Unknown]) -> Vec<UnknownView> {
    u.iter()
        .take(WARNINGS_MAX)
        .map(|u| UnknownView {
            field: u.field.to_string(),
            reason: u.reason.as_str().to_string(),
            detail: cut(u.detail.clone(), TEXT_MAX),
        })
        .collect()
}

impl From<&HostMemory> for HostView {
    fn from(h: &HostMemory) -> Self {
        HostView {
            memory_total_bytes: h.memory_total_bytes,
            memory_available_bytes: h.memory_available_bytes,
            swap_total_bytes: h.swap_total_bytes,
            swap_free_bytes: h.swap_free_bytes,
        }
    }
}

impl From<&Device> for DeviceView {
    fn from(d: &Device) -> Self {
        let t = &d.telemetry;
        DeviceView {
            index: d.index,
            name: d.name.clone().map(|n| cut(n, TEXT_MAX)),
            vendor: d.vendor.as_str().to_string(),
            uuid: d.uuid.clone().map(|n| cut(n, TEXT_MAX)),
            pci_bus_id: d.pci_bus_id.as_ref().map(ToString::to_string),
            driver: d.driver.clone().map(|n| cut(n, TEXT_MAX)),
            source: d.source.as_str().to_string(),
            runtime_status: d.runtime_status.as_ref().map(ToString::to_string),
            suspended: d.is_suspended(),
            integrated: d.integrated,
            memory: MemoryView {
                total_bytes: d.memory.total_bytes,
                used_bytes: d.memory.used_bytes,
                free_bytes: d.memory.free_bytes,
                reserved_bytes: d.memory.reserved_bytes,
            },
            regions: d
                .regions
                .iter()
                .map(|(k, r)| {
                    (
                        cut(k.clone(), TEXT_MAX),
                        RegionTotals {
                            total_bytes: r.total_bytes,
                            used_bytes: r.used_bytes,
                        },
                    )
                })
                .collect(),
            telemetry: TelemetryView {
                utilization_percent: t.utilization_percent,
                memory_utilization_percent: t.memory_utilization_percent,
                temperature_celsius: t.temperature_celsius,
                power_watts: t.power_watts,
                clock_graphics_mhz: t.clock_graphics_mhz,
                clock_memory_mhz: t.clock_memory_mhz,
                clock_graphics_max_mhz: t.clock_graphics_max_mhz,
                clock_memory_max_mhz: t.clock_memory_max_mhz,
            },
            error: d.error.clone().map(|e| cut(e, TEXT_MAX)),
            unknown: unknowns(&d.unknown),
        }
    }
}

fn region_use(r: Option<RegionUsage>) -> Option<RegionUse> {
    r.map(|r| RegionUse {
        total_bytes: r.total_bytes,
        resident_bytes: r.resident_bytes,
        shared_bytes: r.shared_bytes,
        evicted_bytes: r.evicted_bytes,
    })
}

fn regions_view(r: &ProcessRegions) -> RegionsView {
    RegionsView {
        vram: region_use(r.vram),
        gtt: region_use(r.gtt),
        system: region_use(r.system),
    }
}

/// A row's engine use: a DRM row's engine classes; an NVIDIA row's SM, encoder and decoder
/// use from NVML's per-process samples (the memory controller is not an engine: `ps --util`
/// shows it).
fn engines(p: &GpuProcess) -> BTreeMap<String, f64> {
    if let Some(u) = &p.utilization {
        return [
            ("sm", u.sm_percent),
            ("encoder", u.encoder_percent),
            ("decoder", u.decoder_percent),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), f64::from(v)))
        .collect();
    }
    p.engines
        .iter()
        .take(32)
        .map(|(k, v)| (cut(k.clone(), 32), v.busy_percent))
        .collect()
}

impl ProcessRow {
    /// A row from the library's, before the host figures are added.
    pub fn from_gpu(p: &GpuProcess) -> ProcessRow {
        ProcessRow {
            pid: p.pid,
            start_time: None,
            ppid: None,
            name: p.name.clone().map(|n| cut(n.escaped(), TEXT_MAX)),
            user: p.user.clone().map(|n| cut(n, TEXT_MAX)),
            uid: p.uid,
            device_index: p.device_index,
            kind: p.kind.as_str().to_string(),
            vram_bytes: p.used_bytes,
            rss_bytes: None,
            engines: engines(p),
            regions: p.regions.as_ref().map(regions_view),
            drm_clients: p.drm_clients.iter().take(64).copied().collect(),
            shared_with: p.shared_with.iter().take(64).copied().collect(),
            workload: None,
            mig_index: p.mig_index,
            mig: None,
            cmdline: None,
            source: p.source.as_str().to_string(),
            unknown: unknowns(&p.unknown),
        }
    }

    /// The busiest engine class, if any was measured.
    pub fn busiest_engine(&self) -> Option<(&str, f64)> {
        self.engines
            .iter()
            .max_by(|a, b| a.1.total_cmp(b.1))
            .map(|(k, v)| (k.as_str(), *v))
    }

    /// The name, or `?`.
    pub fn name_or_unknown(&self) -> &str {
        self.name.as_deref().unwrap_or("?")
    }

    /// The user name, else the numeric uid, else `?`.
    pub fn user_cell(&self) -> String {
        match (&self.user, self.uid) {
            (Some(u), _) => u.clone(),
            (None, Some(uid)) => uid.to_string(),
            (None, None) => "?".to_string(),
        }
    }
}

impl Snapshot {
    /// An empty snapshot taken at `unix_ms`.
    pub fn empty(unix_ms: u64, interval_ms: u64) -> Snapshot {
        Snapshot {
            format: FORMAT.to_string(),
            version: VERSION,
            unix_ms,
            interval_ms,
            collect_ms: 0,
            host: None,
            host_error: None,
            devices: Vec::new(),
            processes: Vec::new(),
            processes_total: 0,
            processes_omitted: 0,
            ancestors: Vec::new(),
            hidden_processes: 0,
            failed_devices: Vec::new(),
            warnings: Vec::new(),
            no_gpu: None,
        }
    }

    /// Keeps the `max_processes` rows with the most VRAM (unknown last; ties by device, pid),
    /// recording how many were left out, and drops ancestors no kept row needs.
    pub fn cap(&mut self, limits: Limits) {
        self.processes.sort_by(|a, b| {
            b.vram_bytes
                .cmp(&a.vram_bytes)
                .then(a.device_index.cmp(&b.device_index))
                .then(a.pid.cmp(&b.pid))
        });
        let total = self.processes.len();
        self.processes.truncate(limits.max_processes);
        self.processes_total = u32::try_from(total).unwrap_or(u32::MAX);
        self.processes_omitted = u32::try_from(total - self.processes.len()).unwrap_or(u32::MAX);
        self.ancestors.truncate(ANCESTORS_MAX);
        self.warnings.truncate(WARNINGS_MAX);
        for w in &mut self.warnings {
            *w = cut(std::mem::take(w), TEXT_MAX);
        }
    }

    /// The device with this index.
    pub fn device(&self, index: u32) -> Option<&DeviceView> {
        self.devices.iter().find(|d| d.index == index)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut("abcdef".into(), 3), "abc");
        assert_eq!(cut("ab€".into(), 3), "ab", "never half a character");
        assert_eq!(cut("ab".into(), 3), "ab");
    }

    fn row(pid: u32, vram: Option<u64>) -> ProcessRow {
        let mut r = ProcessRow::from_gpu(
            &hypomnesis::test_helpers::GpuProcessBuilder::new(pid, 0)
                .used_bytes(vram)
                .build(),
        );
        r.cmdline = Some("x".repeat(10));
        r
    }

    #[test]
    fn an_nvidia_row_shows_its_sm_encoder_and_decoder_use() {
        let mut g = hypomnesis::test_helpers::GpuProcessBuilder::new(9, 0).build();
        g.utilization = Some(hypomnesis::ProcessUtilization::new(37, 12, 5, 0, true, 0));
        let r = ProcessRow::from_gpu(&g);
        assert_eq!(r.busiest_engine(), Some(("sm", 37.0)));
        assert_eq!(r.engines.len(), 3, "the memory controller is not an engine");
        g.utilization = None;
        assert!(ProcessRow::from_gpu(&g).busiest_engine().is_none());
    }

    #[test]
    fn the_cap_keeps_the_largest_and_says_how_many_were_left_out() {
        let mut s = Snapshot::empty(1, 1000);
        s.processes = vec![
            row(1, Some(5)),
            row(2, None),
            row(3, Some(9)),
            row(4, Some(1)),
        ];
        s.warnings = vec!["w".repeat(1000); 40];
        s.cap(Limits { max_processes: 2 });
        let pids: Vec<u32> = s.processes.iter().map(|p| p.pid).collect();
        assert_eq!(pids, [3, 1]);
        assert_eq!((s.processes_total, s.processes_omitted), (4, 2));
        assert_eq!(s.warnings.len(), WARNINGS_MAX);
        assert!(s.warnings.iter().all(|w| w.len() == TEXT_MAX));
    }

    #[test]
    fn unknown_values_stay_null_in_json() {
        let s = serde_json::to_value(row(7, None)).unwrap();
        assert_eq!(s["vram_bytes"], serde_json::Value::Null);
        assert_eq!(s["rss_bytes"], serde_json::Value::Null);
        let back: ProcessRow = serde_json::from_value(s).unwrap();
        assert_eq!(back, row(7, None));
    }
}
