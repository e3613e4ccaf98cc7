//! The snapshot: everything `hmn top` draws for one instant, as one serde value, made of the
//! library's own types — the host's [`HostMemory`], each [`Device`] and each [`GpuProcess`] as
//! `hmn --json` writes them — and what `top` adds per sample: when it was taken, each process's
//! parent, start time, RSS and command line, the parents of GPU processes (for the tree view),
//! what the cap left out. `hmn record` writes one per line (JSON Lines) and `hmn top --replay`
//! reads them back into the same view, so a recording shows exactly what the live view showed.
//! The format is documented in `docs/top.md` (format `hmn-top`, version 2; version-1 lines are
//! read through `top::recording_v1`).
//!
//! A snapshot is bounded ([`Limits`], [`Bound`]): at most `max_processes` rows (largest VRAM
//! first; the line says how many were left out), command lines, names, warnings and lists cut
//! to fixed lengths.

use hypomnesis::workload::WorkloadInfo;
use hypomnesis::{Device, GpuProcess, HostMemory, MigState, ProcessName, Unknown, Vendor};
use serde::{Deserialize, Serialize};

/// The `format` field of every line.
pub const FORMAT: &str = "hmn-top";
/// The version this build writes and the newest it reads.
pub const VERSION: u32 = 2;

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
/// Warnings kept per snapshot (and `unknown` entries per record).
pub const WARNINGS_MAX: usize = 16;
/// Ancestor records kept per snapshot (the tree view's parents that hold no GPU memory).
pub const ANCESTORS_MAX: usize = 512;
/// Entries kept per list of a record: DRM clients, shared-with pids.
pub const LIST_MAX: usize = 64;
/// Parts kept per device: MIG devices of a GPU (NVIDIA's GPUs have at most 7), memory regions.
pub const PARTS_MAX: usize = 16;
/// `unknown` entries kept per MIG device.
pub const MIG_UNKNOWN_MAX: usize = 4;
/// Engine classes kept per row, and bytes of each class's name.
pub const ENGINES_MAX: usize = 32;

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
    pub host: Option<HostMemory>,
    /// Why `host` is null.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_error: Option<String>,
    /// Every device, in index order (`hmn devices --json`'s records).
    pub devices: Vec<Device>,
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

/// One process's use of one device: the library's row (`hmn ps --json`'s, flattened into this
/// object) and what `top` reads from `/proc` beside it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProcessRow {
    /// The row as the library gives it (name, owner and workload read once per process).
    #[serde(flatten)]
    pub gpu: GpuProcess,
    /// Start time (clock ticks after boot): with `pid`, the process's identity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// The parent's pid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ppid: Option<u32>,
    /// Host resident set size.
    #[serde(default)]
    pub rss_bytes: Option<u64>,
    /// The command line, arguments separated by spaces (cut at [`CMDLINE_MAX`] bytes).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
}

/// A parent shown in the tree view that holds no GPU memory itself.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ancestor {
    pub pid: u32,
    pub ppid: Option<u32>,
    /// Start time (clock ticks after boot): with `pid`, the identity a signal is checked
    /// against; absent when its `stat` could not be read (no signal is sent then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_time: Option<u64>,
    /// Its name as shown (escaped for a terminal, cut at [`TEXT_MAX`] bytes).
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

/// The longest start of `name` whose escaped form (as shown) fits in `max` bytes; a character
/// or an escape is never cut in two.
pub fn cut_name(name: ProcessName, max: usize) -> ProcessName {
    if name.escaped().len() <= max {
        return name;
    }
    let (mut end, mut shown) = (0, 0);
    for chunk in name.as_bytes().utf8_chunks() {
        for c in chunk.valid().chars() {
            let w = ProcessName::escape_str(c.encode_utf8(&mut [0; 4])).len();
            if shown + w > max {
                return ProcessName::from(&name.as_bytes()[..end]);
            }
            (shown, end) = (shown + w, end + c.len_utf8());
        }
        for _ in chunk.invalid() {
            if shown + 4 > max {
                return ProcessName::from(&name.as_bytes()[..end]);
            }
            (shown, end) = (shown + 4, end + 1);
        }
    }
    name
}

fn cut_opt(s: &mut Option<String>, max: usize) {
    if let Some(v) = s.take() {
        *s = Some(cut(v, max));
    }
}

/// Keeps what one record of a snapshot may hold: its free text cut at [`TEXT_MAX`] bytes, its
/// lists at [`LIST_MAX`] entries, its `unknown` entries at [`WARNINGS_MAX`].
pub trait Bound {
    #[must_use]
    fn bounded(self) -> Self;
}

fn bound_unknown(u: &mut Vec<Unknown>, max: usize) {
    u.truncate(max);
    for e in u {
        e.detail = cut(std::mem::take(&mut e.detail), TEXT_MAX);
    }
}

fn bound_mig(m: &mut MigState) {
    m.instances.truncate(PARTS_MAX);
    for i in &mut m.instances {
        for s in [
            &mut i.parent_uuid,
            &mut i.uuid,
            &mut i.name,
            &mut i.profile,
            &mut i.gpu_instance_profile,
        ] {
            cut_opt(s, TEXT_MAX);
        }
        bound_unknown(&mut i.unknown, MIG_UNKNOWN_MAX);
    }
    bound_unknown(&mut m.unknown, WARNINGS_MAX);
}

impl Bound for Device {
    fn bounded(mut self) -> Device {
        if let Vendor::Other(driver) = &mut self.vendor {
            *driver = cut(std::mem::take(driver), TEXT_MAX);
        }
        for s in [
            &mut self.name,
            &mut self.uuid,
            &mut self.driver,
            &mut self.driver_version,
            &mut self.pci_id,
            &mut self.error,
        ] {
            cut_opt(s, TEXT_MAX);
        }
        self.regions = std::mem::take(&mut self.regions)
            .into_iter()
            .take(PARTS_MAX)
            .map(|(k, r)| (cut(k, TEXT_MAX), r))
            .collect();
        if let Some(m) = self.mig.as_mut() {
            bound_mig(m);
        }
        bound_unknown(&mut self.unknown, WARNINGS_MAX);
        self
    }
}

impl Bound for WorkloadInfo {
    fn bounded(mut self) -> WorkloadInfo {
        for s in [
            &mut self.container_id,
            &mut self.pod_uid,
            &mut self.slurm_step,
            &mut self.unit,
            &mut self.namespace,
            &mut self.pod_name,
            &mut self.container_name,
        ] {
            cut_opt(s, TEXT_MAX);
        }
        self.cgroup = cut(std::mem::take(&mut self.cgroup), TEXT_MAX);
        self
    }
}

impl Bound for GpuProcess {
    fn bounded(mut self) -> GpuProcess {
        self.name = self.name.map(|n| cut_name(n, TEXT_MAX));
        for s in [&mut self.user, &mut self.device_uuid, &mut self.mig_uuid] {
            cut_opt(s, TEXT_MAX);
        }
        self.engines = std::mem::take(&mut self.engines)
            .into_iter()
            .take(ENGINES_MAX)
            .map(|(k, v)| (cut(k, ENGINES_MAX), v))
            .collect();
        self.drm_clients.truncate(LIST_MAX);
        self.shared_with.truncate(LIST_MAX);
        self.workload = self.workload.map(Bound::bounded);
        bound_unknown(&mut self.unknown, WARNINGS_MAX);
        self
    }
}

impl ProcessRow {
    /// A row from the library's (bounded), before the host figures are added.
    pub fn from_gpu(p: GpuProcess) -> ProcessRow {
        ProcessRow {
            gpu: p.bounded(),
            start_time: None,
            ppid: None,
            rss_bytes: None,
            cmdline: None,
        }
    }

    /// Engine use by class, percent, in name order: a DRM row's engine classes, or an NVIDIA
    /// row's SM, encoder and decoder use from NVML's per-process samples (the memory
    /// controller is not an engine: `ps --util` shows it).
    pub fn engines(&self) -> Vec<(&str, f64)> {
        match &self.gpu.utilization {
            Some(u) => vec![
                ("decoder", f64::from(u.decoder_percent)),
                ("encoder", f64::from(u.encoder_percent)),
                ("sm", f64::from(u.sm_percent)),
            ],
            None => {
                let e = self.gpu.engines.iter();
                e.map(|(k, v)| (k.as_str(), v.busy_percent)).collect()
            }
        }
    }

    /// The busiest engine class, if any was measured (the last in name order on a tie).
    pub fn busiest_engine(&self) -> Option<(&str, f64)> {
        self.engines()
            .into_iter()
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// The name as shown (escaped), or `?`.
    pub fn name_or_unknown(&self) -> String {
        self.gpu.name_or_unknown()
    }

    /// The user name, else the numeric uid, else `?`.
    pub fn user_cell(&self) -> String {
        match (&self.gpu.user, self.gpu.uid) {
            (Some(u), _) => u.clone(),
            (None, Some(uid)) => uid.to_string(),
            (None, None) => "?".to_string(),
        }
    }

    /// The WORKLOAD label (`hmn ps`'s), when the cgroup names one.
    pub fn workload_label(&self) -> Option<String> {
        self.gpu.workload.as_ref().map(WorkloadInfo::label)
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
            let (a, b) = (&a.gpu, &b.gpu);
            b.used_bytes
                .cmp(&a.used_bytes)
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
    pub fn device(&self, index: u32) -> Option<&Device> {
        self.devices.iter().find(|d| d.index == index)
    }

    /// A row's MIG device and instance, `1g.10gb GI 1 CI 0` (as `hmn ps`'s MIG column), when
    /// the row runs in one.
    pub fn mig_cell(&self, r: &ProcessRow) -> Option<String> {
        r.gpu.mig_index?;
        Some(crate::ps::mig_cell_of(&r.gpu, &self.devices))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::test_helpers::GpuProcessBuilder;

    #[test]
    fn cut_respects_characters() {
        assert_eq!(cut("abcdef".into(), 3), "abc");
        assert_eq!(cut("ab€".into(), 3), "ab", "never half a character");
        assert_eq!(cut("ab".into(), 3), "ab");
    }

    #[test]
    fn cut_names_keep_whole_characters_and_escapes() {
        let n = |b: &[u8]| ProcessName::from_bytes(b.to_vec());
        assert_eq!(cut_name(n(b"python3"), 3).escaped(), "pyt");
        assert_eq!(cut_name(n("ab€".as_bytes()), 3).escaped(), "ab");
        assert_eq!(
            cut_name(n(b"a\xffb"), 4).escaped(),
            "a",
            "never half an escape"
        );
        assert_eq!(cut_name(n(b"a\xffb"), 5).escaped(), "a\\xff");
        assert_eq!(cut_name(n(b"a\x1bb"), 6).escaped(), "a\\x1bb");
        let long = n(&[b'x'; 1000]);
        assert_eq!(cut_name(long, TEXT_MAX).len(), TEXT_MAX);
    }

    fn row(pid: u32, vram: Option<u64>) -> ProcessRow {
        let mut r = ProcessRow::from_gpu(GpuProcessBuilder::new(pid, 0).used_bytes(vram).build());
        r.cmdline = Some("x".repeat(10));
        r
    }

    #[test]
    fn an_nvidia_row_shows_its_sm_encoder_and_decoder_use() {
        let mut g = GpuProcessBuilder::new(9, 0).build();
        g.utilization = Some(hypomnesis::ProcessUtilization::new(37, 12, 5, 0, true, 0));
        let r = ProcessRow::from_gpu(g.clone());
        assert_eq!(r.busiest_engine(), Some(("sm", 37.0)));
        assert_eq!(
            r.engines().len(),
            3,
            "the memory controller is not an engine"
        );
        g.utilization = None;
        assert!(ProcessRow::from_gpu(g).busiest_engine().is_none());
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
        let pids: Vec<u32> = s.processes.iter().map(|p| p.gpu.pid).collect();
        assert_eq!(pids, [3, 1]);
        assert_eq!((s.processes_total, s.processes_omitted), (4, 2));
        assert_eq!(s.warnings.len(), WARNINGS_MAX);
        assert!(s.warnings.iter().all(|w| w.len() == TEXT_MAX));
    }

    #[test]
    fn records_are_bounded() {
        let mut g = GpuProcessBuilder::new(1, 0).build();
        g.user = Some("u".repeat(1000));
        g.drm_clients = (0..1000).collect();
        for i in 0..100 {
            g.engines.insert(
                format!("e{i:0>3}{}", "x".repeat(40)),
                hypomnesis::EngineUsage::default(),
            );
        }
        let mut w = WorkloadInfo::new(hypomnesis::workload::WorkloadKind::Pod, "/kubepods");
        w.namespace = Some("n".repeat(1000));
        w.pod_name = Some("p".repeat(1000));
        w.container_name = Some("c".repeat(1000));
        g.workload = Some(w);
        let r = ProcessRow::from_gpu(g).gpu;
        let w = r.workload.as_ref().unwrap();
        for name in [&w.namespace, &w.pod_name, &w.container_name] {
            assert_eq!(name.as_ref().map(String::len), Some(TEXT_MAX));
        }
        assert_eq!(r.user.map(|u| u.len()), Some(TEXT_MAX));
        assert_eq!(r.drm_clients.len(), LIST_MAX);
        assert_eq!(r.engines.len(), ENGINES_MAX);
        assert!(r.engines.keys().all(|k| k.len() == ENGINES_MAX));
    }

    #[test]
    fn unknown_values_stay_null_in_json() {
        let s = serde_json::to_value(row(7, None)).unwrap();
        assert_eq!(s["used_bytes"], serde_json::Value::Null);
        assert_eq!(s["rss_bytes"], serde_json::Value::Null);
        let back: ProcessRow = serde_json::from_value(s).unwrap();
        assert_eq!(back, row(7, None));
    }
}
