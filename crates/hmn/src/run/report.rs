//! The report `hmn run` writes at exit: JSON (schema 1) and text.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::time::Duration;

use hypomnesis::cgroup::CgroupVersion;
use hypomnesis::sampler::SamplerReport;
use serde::Serialize;

use super::exec::Exit;
use crate::format::{bytes, sanitize};

/// How the headline peak RAM was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum PeakMethod {
    /// The kernel's peak for a transient cgroup holding the whole tree.
    Cgroup,
    /// The largest per-sample sum of the tree's RSS, floored by the largest per-process peak.
    Sampled,
}

#[derive(Debug, Serialize)]
pub struct PeakRam {
    /// The headline figure.
    pub bytes: u64,
    pub method: PeakMethod,
    /// `cgroup_v2_memory.peak`, `cgroup_v1_memory.max_usage_in_bytes`, `samples_pss` or
    /// `samples_rss`.
    pub source: &'static str,
}

#[derive(Debug, Serialize)]
pub struct DevicePeak {
    pub index: u32,
    /// Device memory held by the command's processes: the highest sample, floored by the
    /// largest single-process peak of the driver's accounting.
    pub peak_vram_bytes: u64,
    /// The highest sum of the command's processes' device memory in one sample.
    pub sampled_peak_vram_bytes: u64,
    /// The largest peak of one of the command's processes in the driver's own records (NVIDIA
    /// accounting mode); null unless `vram_accounting` is `enabled`.
    pub largest_process_peak_vram_bytes: Option<u64>,
    /// `enabled`, `disabled` (the driver's default; `nvidia-smi -am 1` turns it on) or
    /// `unavailable` (see `vram_accounting_detail`).
    pub vram_accounting: &'static str,
    pub vram_accounting_detail: Option<String>,
    /// Device-wide used memory (every process), highest sample.
    pub peak_device_used_bytes: Option<u64>,
}

/// `hmn run --json` (schema 1).
#[derive(Debug, Serialize)]
pub struct RunReport {
    pub schema: u32,
    pub command: Vec<String>,
    pub exit_code: u8,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    pub wall_time_ms: u64,
    pub interval_ms: u64,
    pub samples: u64,
    pub peak_ram: PeakRam,
    /// Largest per-sample sum of the tree's RSS.
    pub peak_rss_sum_bytes: u64,
    /// Largest sum of the tree's PSS (about once a second): shared pages counted once.
    pub peak_pss_sum_bytes: Option<u64>,
    /// Largest peak RSS of one process: `VmHWM` (read about once a second) or `ru_maxrss` of
    /// the waited-for command (what GNU `time -v` reports as maximum resident set size).
    pub largest_process_peak_rss_bytes: Option<u64>,
    /// `ru_maxrss` of the largest waited-for child.
    pub rusage_max_rss_bytes: Option<u64>,
    /// The kernel's peak for the transient cgroup (includes page cache), when one was used.
    pub cgroup_peak_bytes: Option<u64>,
    pub devices: Vec<DevicePeak>,
    /// Processes of the tree seen, with their peaks.
    pub processes: Vec<hypomnesis::sampler::ProcessPeaks>,
    /// Signals forwarded to the command.
    pub forwarded_signals: Vec<i32>,
    /// CPU time hmn's sampler used.
    pub sampler_cpu_ms: Option<f64>,
    pub warnings: Vec<String>,
}

impl RunReport {
    #[expect(
        clippy::too_many_arguments,
        reason = "one constructor gathers the run's results"
    )]
    pub fn new(
        command: &[OsString],
        exit: Exit,
        wall: Duration,
        interval: Duration,
        s: &SamplerReport,
        rusage_max_rss: Option<u64>,
        cgroup: Option<(u64, CgroupVersion)>,
        forwarded_signals: Vec<i32>,
        warnings: Vec<String>,
    ) -> RunReport {
        let largest_process = [s.max_process_peak_rss_bytes, rusage_max_rss]
            .into_iter()
            .flatten()
            .max();
        // Without a cgroup: the PSS sum (a page shared by forked processes counts once), else the
        // RSS sum (which counts it in every process); floored by the largest single-process
        // peak, which catches spikes between samples.
        let (sampled, sampled_source) = match s.peak_pss_sum_bytes {
            Some(pss) => (pss, "samples_pss"),
            None => (s.peak_rss_bytes, "samples_rss"),
        };
        let sampled = sampled.max(largest_process.unwrap_or(0));
        let peak_ram = match cgroup {
            Some((peak, v)) => PeakRam {
                bytes: peak,
                method: PeakMethod::Cgroup,
                source: match v {
                    CgroupVersion::V2 => "cgroup_v2_memory.peak",
                    _ => "cgroup_v1_memory.max_usage_in_bytes",
                },
            },
            None => PeakRam {
                bytes: sampled,
                method: PeakMethod::Sampled,
                source: sampled_source,
            },
        };
        let mut devices: BTreeMap<u32, DevicePeak> = BTreeMap::new();
        for (i, v) in &s.peak_vram_bytes {
            let largest = s.max_process_peak_vram_bytes.get(i).copied();
            let (state, detail) = accounting_state(s, *i);
            devices.insert(
                *i,
                DevicePeak {
                    index: *i,
                    peak_vram_bytes: (*v).max(largest.unwrap_or(0)),
                    sampled_peak_vram_bytes: *v,
                    largest_process_peak_vram_bytes: largest,
                    vram_accounting: state,
                    vram_accounting_detail: detail,
                    peak_device_used_bytes: s.peak_device_used_bytes.get(i).copied(),
                },
            );
        }
        RunReport {
            schema: 1,
            command: command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            exit_code: exit.code,
            signal: exit.signal,
            wall_time_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            samples: s.samples,
            peak_ram,
            peak_rss_sum_bytes: s.peak_rss_bytes,
            peak_pss_sum_bytes: s.peak_pss_sum_bytes,
            largest_process_peak_rss_bytes: largest_process,
            rusage_max_rss_bytes: rusage_max_rss,
            cgroup_peak_bytes: cgroup.map(|(p, _)| p),
            devices: devices.into_values().collect(),
            processes: s.processes.clone(),
            forwarded_signals,
            sampler_cpu_ms: s.sampler_cpu_ms,
            warnings,
        }
    }

    /// The human-readable report (stderr).
    ///
    /// (Accounting states are in the JSON only: `disabled` is the driver's default and would
    /// add a line to every report.)
    pub fn text(&self) -> String {
        let mut t = String::new();
        let cmd = sanitize(&self.command.join(" "));
        t.push_str(&format!("hmn run: {cmd}\n"));
        t.push_str(&format!(
            "  wall time     {:.2} s\n",
            self.wall_time_ms as f64 / 1000.0
        ));
        let how = match self.peak_ram.method {
            PeakMethod::Cgroup => format!(
                "kernel peak of a transient cgroup, {}; includes page cache",
                self.peak_ram.source
            ),
            PeakMethod::Sampled if self.peak_ram.source == "samples_pss" => format!(
                "largest PSS sum of the tree, read about once a second, floored by per-process peaks; {} samples every {} ms",
                self.samples, self.interval_ms
            ),
            PeakMethod::Sampled => format!(
                "largest RSS sum over {} samples every {} ms; pages shared between processes count in each",
                self.samples, self.interval_ms
            ),
        };
        t.push_str(&format!(
            "  peak RAM      {} ({how})\n",
            bytes(self.peak_ram.bytes)
        ));
        if self.peak_ram.source != "samples_rss" {
            t.push_str(&format!(
                "                {} largest RSS sum of the tree (sampled)\n",
                bytes(self.peak_rss_sum_bytes)
            ));
        }
        if let Some(m) = self.rusage_max_rss_bytes {
            t.push_str(&format!(
                "                {} largest single process (ru_maxrss)\n",
                bytes(m)
            ));
        }
        for d in &self.devices {
            let dev = d
                .peak_device_used_bytes
                .map(|u| format!("; device-wide peak {}", bytes(u)))
                .unwrap_or_default();
            t.push_str(&format!(
                "  peak VRAM     GPU {}: {} by the command{dev}\n",
                d.index,
                bytes(d.peak_vram_bytes)
            ));
            if let Some(l) = d.largest_process_peak_vram_bytes {
                t.push_str(&format!(
                    "                GPU {}: {} largest single process (driver accounting); {} largest sampled sum\n",
                    d.index,
                    bytes(l),
                    bytes(d.sampled_peak_vram_bytes)
                ));
            }
        }
        t.push_str(&format!("  samples       {}\n", self.samples));
        match self.signal {
            Some(sig) => t.push_str(&format!(
                "  exit status   {} (killed by signal {sig})\n",
                self.exit_code
            )),
            None => t.push_str(&format!("  exit status   {}\n", self.exit_code)),
        }
        for w in &self.warnings {
            t.push_str(&format!("hmn: warning: {}\n", sanitize(w)));
        }
        t
    }
}

/// Device `index`'s accounting state for the report, and why it is unavailable.
fn accounting_state(s: &SamplerReport, index: u32) -> (&'static str, Option<String>) {
    match s.vram_accounting.iter().find(|a| a.index == index) {
        None => (
            "unavailable",
            Some("this device's driver keeps no per-process peak".to_string()),
        ),
        Some(a) if a.complete() => ("enabled", None),
        Some(a) if a.enabled == Some(false) => ("disabled", None),
        Some(a) => (
            "unavailable",
            Some(a.unknown.as_ref().map_or_else(
                || "the accounting records could not be read".to_string(),
                ToString::to_string,
            )),
        ),
    }
}
