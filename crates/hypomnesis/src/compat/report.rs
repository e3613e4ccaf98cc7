//! Upstream's `hypomnesis::report` (feature `report`): [`MemoryReport`], two [`Snapshot`]s of
//! the calling process and the text upstream prints about them.
//!
//! "MB" in these texts means MiB, rounded to whole units; deltas are differences of the two
//! MiB values. The qualifier after a VRAM figure comes from the *after* snapshot:
//! `[per-process]` for the process's own figure, `[device-wide]` for a device's.
//!
//! `print_delta` and `print_before_after` write to stdout, as upstream's do; they are the only
//! printing in this library, compiled only with this feature. Code that wants the text
//! elsewhere calls the `format_*` methods. The truthful counterpart is
//! [`crate::phase::PhaseReport`], whose unknown VRAM stays unknown.

use crate::compat::snapshot::Snapshot;

/// Bytes per "MB".
const MIB: f64 = 1_048_576.0;

/// The calling process's memory before and after a phase of its work.
///
/// ```no_run
/// # fn main() -> hypomnesis::Result<()> {
/// use hypomnesis::{MemoryReport, Snapshot};
/// let before = Snapshot::now(0)?;
/// let buffer = vec![1u8; 64 << 20];
/// let report = MemoryReport::new(before, Snapshot::now(0)?);
/// print!("{}", report.format_delta("allocate"));
/// # drop(buffer); Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemoryReport {
    /// At the start of the phase.
    pub before: Snapshot,
    /// At its end.
    pub after: Snapshot,
}

impl MemoryReport {
    /// A report over two snapshots.
    #[must_use]
    pub const fn new(before: Snapshot, after: Snapshot) -> Self {
        MemoryReport { before, after }
    }

    /// The change in RAM, in MiB.
    #[must_use]
    pub fn ram_delta_mb(&self) -> f64 {
        self.after.ram_mb() - self.before.ram_mb()
    }

    /// The change in the GPU figure, in MiB, when both snapshots have one.
    #[must_use]
    pub fn vram_delta_mb(&self) -> Option<f64> {
        Some(self.after.vram_mb()? - self.before.vram_mb()?)
    }

    /// One line: `"  {label}: RAM {+N} MB[  |  VRAM {+N} MB {qualifier}]\n"`.
    #[must_use]
    pub fn format_delta(&self, label: &str) -> String {
        let ram = self.ram_delta_mb();
        match self.vram_delta_mb() {
            Some(vram) => format!(
                "  {label}: RAM {ram:+.0} MB  |  VRAM {vram:+.0} MB{}\n",
                self.qualifier()
            ),
            None => format!("  {label}: RAM {ram:+.0} MB\n"),
        }
    }

    /// RAM before → after (with the change), and a second line for the GPU figure when both
    /// snapshots have one, with the device's total and name from the after snapshot.
    #[must_use]
    pub fn format_before_after(&self, label: &str) -> String {
        let (before, after) = (self.before.ram_mb(), self.after.ram_mb());
        let mut text = format!(
            "  {label}: RAM {before:.0} MB \u{2192} {after:.0} MB ({:+.0} MB)\n",
            self.ram_delta_mb()
        );
        if let (Some(before), Some(after)) = (self.before.vram_mb(), self.after.vram_mb()) {
            let device = self.after.gpu_device.as_ref();
            let total = device
                .map(|d| format!(" / {:.0} MB", d.total_bytes as f64 / MIB))
                .unwrap_or_default();
            let name = device.map(|d| d.name_suffix()).unwrap_or_default();
            text.push_str(&format!(
                "  {label}: VRAM {before:.0} MB \u{2192} {after:.0} MB ({:+.0} MB{total}){}{name}\n",
                after - before,
                self.qualifier()
            ));
        }
        text
    }

    /// Prints [`MemoryReport::format_delta`] to stdout.
    #[expect(
        clippy::print_stdout,
        reason = "upstream's documented stdout printer, compiled only with the report feature"
    )]
    pub fn print_delta(&self, label: &str) {
        print!("{}", self.format_delta(label));
    }

    /// Prints [`MemoryReport::format_before_after`] to stdout.
    #[expect(
        clippy::print_stdout,
        reason = "upstream's documented stdout printer, compiled only with the report feature"
    )]
    pub fn print_before_after(&self, label: &str) {
        print!("{}", self.format_before_after(label));
    }

    /// `" [per-process]"`, `" [device-wide]"`, or nothing, from the after snapshot.
    fn qualifier(&self) -> &'static str {
        match &self.after.gpu {
            Some(g) if g.is_per_process => " [per-process]",
            Some(_) => " [device-wide]",
            None => "",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::compat::snapshot::{GpuDeviceInfo, GpuQuerySource, ProcessGpuInfo};

    const MIB_U: u64 = 1 << 20;

    fn snap(ram_mib: u64, vram_mib: Option<u64>, per_process: bool) -> Snapshot {
        Snapshot {
            ram_bytes: ram_mib * MIB_U,
            gpu: vram_mib.map(|v| ProcessGpuInfo {
                used_bytes: v * MIB_U,
                is_per_process: per_process,
                source: GpuQuerySource::Nvml,
            }),
            gpu_device: None,
        }
    }

    #[test]
    fn deltas_read_as_upstreams() {
        let r = MemoryReport::new(snap(100, Some(500), true), snap(200, Some(1000), true));
        assert_eq!(r.ram_delta_mb(), 100.0);
        assert_eq!(r.vram_delta_mb(), Some(500.0));
        assert_eq!(
            r.format_delta("alloc"),
            "  alloc: RAM +100 MB  |  VRAM +500 MB [per-process]\n"
        );
        let r = MemoryReport::new(snap(100, Some(250), true), snap(150, Some(500), false));
        assert_eq!(
            r.format_delta("step"),
            "  step: RAM +50 MB  |  VRAM +250 MB [device-wide]\n"
        );
        let r = MemoryReport::new(snap(100, None, true), snap(130, None, true));
        assert_eq!(r.format_delta("cpu"), "  cpu: RAM +30 MB\n");
        assert_eq!(r.vram_delta_mb(), None);
        let r = MemoryReport::new(snap(130, None, true), snap(100, None, true));
        assert_eq!(r.format_delta("free"), "  free: RAM -30 MB\n");
        // One side without a GPU figure: no VRAM delta, not a delta from zero.
        let r = MemoryReport::new(snap(100, None, true), snap(100, Some(64), true));
        assert_eq!(r.vram_delta_mb(), None);
        assert_eq!(r.format_delta("half"), "  half: RAM +0 MB\n");
    }

    #[test]
    fn before_after_reads_as_upstreams() {
        let mut after = snap(200, Some(1000), true);
        after.gpu_device = Some(GpuDeviceInfo {
            index: 0,
            name: Some("NVIDIA Test GPU".to_string()),
            total_bytes: 16384 * MIB_U,
            free_bytes: 15384 * MIB_U,
            used_bytes: 1000 * MIB_U,
            reserved_bytes: None,
            driver_version: None,
        });
        let r = MemoryReport::new(snap(100, Some(500), true), after);
        assert_eq!(
            r.format_before_after("model_load"),
            "  model_load: RAM 100 MB \u{2192} 200 MB (+100 MB)\n  model_load: VRAM 500 MB \u{2192} 1000 MB (+500 MB / 16384 MB) [per-process] [NVIDIA Test GPU]\n"
        );
        let r = MemoryReport::new(snap(100, None, true), snap(150, None, true));
        assert_eq!(
            r.format_before_after("cpu_only"),
            "  cpu_only: RAM 100 MB \u{2192} 150 MB (+50 MB)\n"
        );
        // No device in the after snapshot: no total, no name.
        let r = MemoryReport::new(snap(100, Some(10), false), snap(100, Some(20), false));
        assert_eq!(
            r.format_before_after("x"),
            "  x: RAM 100 MB \u{2192} 100 MB (+0 MB)\n  x: VRAM 10 MB \u{2192} 20 MB (+10 MB) [device-wide]\n"
        );
    }

    #[test]
    fn new_is_usable_in_constants() {
        const EMPTY: Snapshot = Snapshot {
            ram_bytes: 0,
            gpu: None,
            gpu_device: None,
        };
        const REPORT: MemoryReport = MemoryReport::new(EMPTY, EMPTY);
        assert_eq!(REPORT.ram_delta_mb(), 0.0);
    }
}
