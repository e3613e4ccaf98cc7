//! Before/after reports: wrap a phase of a program and see what it did to RAM and VRAM.
//!
//! ```no_run
//! # fn main() -> Result<(), hypomnesis::Error> {
//! let phase = hypomnesis::phase::PhaseReport::start()?;
//! let weights = vec![0u8; 256 << 20];
//! let report = phase.finish()?;
//! eprint!("{}", report.format_delta("load weights"));
//! # drop(weights); Ok(())
//! # }
//! ```
//!
//! The truthful counterpart of upstream's `report` feature (`report::MemoryReport`):
//! the same figures and text (`ram_delta_mb`, `vram_delta_mb`, `format_delta`,
//! `format_before_after`; "MB" means MiB, as upstream) over [`OwnSnapshot`]s, whose unknown VRAM
//! stays unknown, plus the elapsed time of the phase. It never prints: the `write_*` methods
//! write to the writer they are given.

use std::io::{self, Write};
use std::time::{Duration, Instant};

use crate::measure::own::OwnSnapshot;
use crate::probe::Probe;
use crate::probe::shared_probe;
use crate::types::Device;
use crate::types::error::Error;

const MIB: f64 = 1_048_576.0;

impl OwnSnapshot {
    /// This process's RSS in MiB.
    pub fn ram_mb(&self) -> f64 {
        self.ram_bytes as f64 / MIB
    }

    /// This process's VRAM on the device in MiB, when known.
    pub fn vram_mb(&self) -> Option<f64> {
        self.gpu.as_ref()?.used_bytes.map(|b| b as f64 / MIB)
    }
}

/// A phase being measured: the snapshot taken at its start.
#[derive(Debug, Clone)]
#[must_use = "call finish() to get the report"]
pub struct Phase {
    before: OwnSnapshot,
    device: u32,
    started: Instant,
}

impl Phase {
    /// Takes the closing snapshot (shared probe).
    ///
    /// # Errors
    /// When this process's RSS cannot be read.
    pub fn finish(self) -> Result<PhaseReport, Error> {
        self.finish_with(shared_probe())
    }

    /// Takes the closing snapshot with an explicit probe.
    ///
    /// # Errors
    /// When this process's RSS cannot be read.
    pub fn finish_with(self, probe: &Probe) -> Result<PhaseReport, Error> {
        let after = OwnSnapshot::with_probe(probe, self.device)?;
        let mut r = PhaseReport::new(self.before, after);
        r.elapsed = Some(self.started.elapsed());
        Ok(r)
    }
}

/// Two snapshots and what changed between them.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct PhaseReport {
    /// At the start.
    pub before: OwnSnapshot,
    /// At the end.
    pub after: OwnSnapshot,
    /// Time between them, when measured by [`Phase`].
    pub elapsed: Option<Duration>,
}

impl PhaseReport {
    /// A report from two snapshots.
    pub fn new(before: OwnSnapshot, after: OwnSnapshot) -> Self {
        PhaseReport {
            before,
            after,
            elapsed: None,
        }
    }

    /// Same as [`PhaseReport::new`].
    pub fn before_after(before: OwnSnapshot, after: OwnSnapshot) -> Self {
        PhaseReport::new(before, after)
    }

    /// Starts a phase on device 0 (shared probe).
    ///
    /// # Errors
    /// When this process's RSS cannot be read.
    pub fn start() -> Result<Phase, Error> {
        PhaseReport::start_with(shared_probe(), 0)
    }

    /// Starts a phase on `device` with an explicit probe.
    ///
    /// # Errors
    /// When this process's RSS cannot be read.
    pub fn start_with(probe: &Probe, device: u32) -> Result<Phase, Error> {
        Ok(Phase {
            before: OwnSnapshot::with_probe(probe, device)?,
            device,
            started: Instant::now(),
        })
    }

    /// RAM change in MiB.
    pub fn ram_delta_mb(&self) -> f64 {
        self.after.ram_mb() - self.before.ram_mb()
    }

    /// VRAM change in MiB, when both snapshots know this process's VRAM.
    pub fn vram_delta_mb(&self) -> Option<f64> {
        Some(self.after.vram_mb()? - self.before.vram_mb()?)
    }

    /// `  {label}: RAM +N MB[  |  VRAM +N MB [per-process]]\n`.
    pub fn format_delta(&self, label: &str) -> String {
        let mut s = format!("  {label}: RAM {:+.0} MB", self.ram_delta_mb());
        if let Some(v) = self.vram_delta_mb() {
            s.push_str(&format!("  |  VRAM {v:+.0} MB{}", self.qualifier()));
        }
        s.push('\n');
        s
    }

    /// Two lines: RAM before → after (delta), and VRAM likewise with the device's total and
    /// name when known.
    pub fn format_before_after(&self, label: &str) -> String {
        let (a, b) = (self.before.ram_mb(), self.after.ram_mb());
        let mut s = format!(
            "  {label}: RAM {a:.0} MB \u{2192} {b:.0} MB ({:+.0} MB)\n",
            b - a
        );
        if let (Some(a), Some(b)) = (self.before.vram_mb(), self.after.vram_mb()) {
            let dev = self.after.gpu_device.as_ref();
            let total = dev
                .and_then(|d| d.memory.total_bytes)
                .map(|t| format!(" / {:.0} MB", t as f64 / MIB))
                .unwrap_or_default();
            let name = dev
                .and_then(|d| d.name.as_deref())
                .map(|n| format!(" [{n}]"))
                .unwrap_or_default();
            s.push_str(&format!(
                "  {label}: VRAM {a:.0} MB \u{2192} {b:.0} MB ({:+.0} MB{total}){}{name}\n",
                b - a,
                self.qualifier()
            ));
        }
        s
    }

    /// Writes [`PhaseReport::format_delta`] to `out`.
    ///
    /// # Errors
    /// When writing fails.
    pub fn write_delta(&self, label: &str, out: &mut impl Write) -> io::Result<()> {
        out.write_all(self.format_delta(label).as_bytes())
    }

    /// Writes [`PhaseReport::format_before_after`] to `out`.
    ///
    /// # Errors
    /// When writing fails.
    pub fn write_before_after(&self, label: &str, out: &mut impl Write) -> io::Result<()> {
        out.write_all(self.format_before_after(label).as_bytes())
    }

    fn qualifier(&self) -> &'static str {
        match &self.after.gpu {
            Some(g) if g.is_per_process => " [per-process]",
            Some(_) => " [device-wide]",
            None => "",
        }
    }
}

fn mb(v: Option<u64>) -> String {
    v.map_or_else(|| "?".to_string(), |b| format!("{:.0}", b as f64 / MIB))
}

fn name_suffix(d: &Device) -> String {
    d.name
        .as_deref()
        .map(|n| format!(" [{n}]"))
        .unwrap_or_default()
}

impl Device {
    /// `  GPU {index}: free {free} MB / {total} MB[ [name]]\n` (unknown figures are `?`).
    pub fn format_free(&self) -> String {
        format!(
            "  GPU {}: free {} MB / {} MB{}\n",
            self.index,
            mb(self.memory.free_bytes),
            mb(self.memory.total_bytes),
            name_suffix(self)
        )
    }

    /// `  GPU {index}: total {total} MB[ [name]]\n`.
    pub fn format_total(&self) -> String {
        format!(
            "  GPU {}: total {} MB{}\n",
            self.index,
            mb(self.memory.total_bytes),
            name_suffix(self)
        )
    }

    /// `  GPU {index}: used {used} MB[ [name]]\n`.
    pub fn format_used(&self) -> String {
        format!(
            "  GPU {}: used {} MB{}\n",
            self.index,
            mb(self.memory.used_bytes),
            name_suffix(self)
        )
    }

    /// Writes [`Device::format_free`] to `out`.
    ///
    /// # Errors
    /// When writing fails.
    pub fn write_free(&self, out: &mut impl Write) -> io::Result<()> {
        out.write_all(self.format_free().as_bytes())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::own::OwnGpuUsage;
    use crate::types::{DeviceMemory, Source, Vendor};

    fn snap(ram_mib: u64, vram_mib: Option<u64>) -> OwnSnapshot {
        let mut dev = Device::new(0, Vendor::Nvidia, Source::Nvml);
        dev.name = Some("NVIDIA H100 80GB HBM3".to_string());
        dev.memory = DeviceMemory::new(Some(81_559 << 20), None, Some(80_000 << 20), None);
        OwnSnapshot {
            ram_bytes: ram_mib << 20,
            gpu: vram_mib.map(|v| OwnGpuUsage {
                used_bytes: Some(v << 20),
                is_per_process: true,
                source: Source::Nvml,
                unknown: Vec::new(),
            }),
            gpu_device: Some(dev),
        }
    }

    #[test]
    fn deltas_and_text() {
        let r = PhaseReport::new(snap(100, Some(1000)), snap(612, Some(3048)));
        assert_eq!(r.ram_delta_mb(), 512.0);
        assert_eq!(r.vram_delta_mb(), Some(2048.0));
        assert_eq!(
            r.format_delta("load"),
            "  load: RAM +512 MB  |  VRAM +2048 MB [per-process]\n"
        );
        assert_eq!(
            r.format_before_after("load"),
            "  load: RAM 100 MB \u{2192} 612 MB (+512 MB)\n  load: VRAM 1000 MB \u{2192} 3048 MB (+2048 MB / 81559 MB) [per-process] [NVIDIA H100 80GB HBM3]\n"
        );
        let mut out = Vec::new();
        r.write_delta("load", &mut out).unwrap();
        assert_eq!(out, r.format_delta("load").as_bytes());
    }

    #[test]
    fn no_vram_no_vram_part() {
        let r = PhaseReport::new(snap(100, None), snap(90, Some(5)));
        assert_eq!(r.vram_delta_mb(), None, "needs both snapshots");
        assert_eq!(r.format_delta("x"), "  x: RAM -10 MB\n");
    }

    #[test]
    fn device_lines() {
        let d = snap(1, None).gpu_device.unwrap();
        assert_eq!(
            d.format_free(),
            "  GPU 0: free 80000 MB / 81559 MB [NVIDIA H100 80GB HBM3]\n"
        );
        assert_eq!(
            d.format_used(),
            "  GPU 0: used ? MB [NVIDIA H100 80GB HBM3]\n"
        );
    }

    #[test]
    fn a_phase_measures_this_process() {
        let _serial = crate::system::host::RSS_TEST_LOCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let sys = dir.path().join("sys");
        std::fs::create_dir_all(&sys).unwrap();
        let probe = Probe::with_options(
            crate::probe::ProbeOptions::default()
                .roots(crate::system::roots::Roots::system().with_sys(sys))
                .nvml_library(dir.path().join("none.so"))
                .use_nvidia_smi(false),
        );
        let phase = PhaseReport::start_with(&probe, 0).unwrap();
        let block = vec![1u8; 64 << 20];
        let r = phase.finish_with(&probe).unwrap();
        assert!(r.ram_delta_mb() >= 60.0, "{}", r.ram_delta_mb());
        assert!(r.elapsed.is_some());
        drop(block);
    }
}
