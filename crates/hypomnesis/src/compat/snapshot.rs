//! Upstream's `hypomnesis::snapshot`: the value types of the upstream-compatible API —
//! [`GpuDeviceInfo`], [`ProcessGpuInfo`], [`GpuQuerySource`], [`GpuProcessEntry`],
//! [`GpuProcessListing`] and [`Snapshot`] — with hypomnesis 0.2's fields, derives and methods,
//! and (feature `test-helpers`) the builders `GpuDeviceInfoBuilder` and
//! `GpuProcessEntryBuilder`.
//!
//! These types have no way to say "unknown": every figure is a plain `u64`. A value is therefore
//! only built from a measurement that is known; a device or row that could not be read is left
//! out or reported as an error by the functions in [`crate::gpu`] (see `docs/upstream.md`).
//! New code should prefer the truthful types ([`crate::Device`], [`crate::GpuProcess`],
//! [`crate::own::OwnSnapshot`]), whose figures are `Option`s with the reason they are unknown.
//!
//! Submodules: `values` (the value types, re-exported here), `convert` (truthful types →
//! these, crate-private), `builders` (feature `test-helpers`).

#[cfg(feature = "test-helpers")]
mod builders;
pub(crate) mod convert;
pub(crate) mod values;

#[cfg(feature = "test-helpers")]
pub use builders::{GpuDeviceInfoBuilder, GpuProcessEntryBuilder};
pub use values::{
    GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, GpuQuerySource, ProcessGpuInfo,
};

use crate::compat::error::{HypomnesisError, Result};
use crate::compat::gpu::session::Session;

/// The calling process's RAM, with its use of one GPU and that GPU's state, at one instant.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Snapshot {
    /// The process's resident set size in bytes.
    pub ram_bytes: u64,
    /// The process's GPU use ([`crate::process_gpu_info`]), `None` when it could not be read.
    pub gpu: Option<ProcessGpuInfo>,
    /// The device ([`crate::device_info`]), `None` when it could not be read.
    pub gpu_device: Option<GpuDeviceInfo>,
}

impl Snapshot {
    /// RAM of the calling process and, best effort, its use of device `device_index` and that
    /// device's state.
    ///
    /// # Errors
    /// [`HypomnesisError::Ram`] when the process's own RAM cannot be read; every GPU failure
    /// leaves `gpu` or `gpu_device` `None` instead.
    pub fn now(device_index: u32) -> Result<Self> {
        let ram_bytes = crate::compat::ram::process_rss()?;
        let session = Session::shared();
        Ok(Snapshot {
            ram_bytes,
            gpu: session.process_gpu_info(device_index).ok(),
            gpu_device: session.device_info(device_index).ok(),
        })
    }

    /// One snapshot per device [`crate::device_count`] counts, in index order (entry `k` is
    /// device `k`, with `gpu_device: None` when that device could not be read), all carrying
    /// one RAM reading. Empty when there is no GPU.
    ///
    /// # Errors
    /// [`HypomnesisError::Ram`] when the process's own RAM cannot be read;
    /// [`HypomnesisError::Nvml`] when NVML is installed but broken (GPUs may exist that cannot
    /// be counted).
    pub fn all() -> Result<Vec<Self>> {
        let ram_bytes = crate::compat::ram::process_rss()?;
        let session = Session::shared();
        let count = match session.count() {
            Ok(n) => n,
            Err(HypomnesisError::NoGpuSource) => 0,
            Err(e) => return Err(e),
        };
        Ok((0..count)
            .map(|i| Snapshot {
                ram_bytes,
                gpu: session.process_gpu_info(i).ok(),
                gpu_device: session.device_info(i).ok(),
            })
            .collect())
    }
}

/// Bytes per "MB" in upstream's reports (which are MiB).
#[cfg(feature = "report")]
const MIB: f64 = 1_048_576.0;

#[cfg(feature = "report")]
impl Snapshot {
    /// [`Snapshot::ram_bytes`] in MiB.
    #[must_use]
    pub const fn ram_mb(&self) -> f64 {
        self.ram_bytes as f64 / MIB
    }

    /// The GPU figure ([`ProcessGpuInfo::used_bytes`]) in MiB, when there is one.
    #[must_use]
    pub fn vram_mb(&self) -> Option<f64> {
        self.gpu.as_ref().map(|g| g.used_bytes as f64 / MIB)
    }
}

#[cfg(feature = "report")]
impl GpuDeviceInfo {
    /// `"  GPU {index}: free {free} MB / {total} MB[ [{name}]]\n"` (MB = MiB, rounded).
    #[must_use]
    pub fn format_free(&self) -> String {
        format!(
            "  GPU {}: free {:.0} MB / {:.0} MB{}\n",
            self.index,
            self.free_bytes as f64 / MIB,
            self.total_bytes as f64 / MIB,
            self.name_suffix()
        )
    }

    /// Prints [`GpuDeviceInfo::format_free`] to stdout (upstream's printer; the rest of this
    /// library never prints).
    #[expect(
        clippy::print_stdout,
        reason = "upstream's documented stdout printer, compiled only with the report feature"
    )]
    pub fn print_free(&self) {
        print!("{}", self.format_free());
    }

    /// `"  GPU {index}: total {total} MB[ [{name}]]\n"`.
    #[must_use]
    pub fn format_total(&self) -> String {
        format!(
            "  GPU {}: total {:.0} MB{}\n",
            self.index,
            self.total_bytes as f64 / MIB,
            self.name_suffix()
        )
    }

    /// `"  GPU {index}: used {used} MB[ [{name}]]\n"`.
    #[must_use]
    pub fn format_used(&self) -> String {
        format!(
            "  GPU {}: used {:.0} MB{}\n",
            self.index,
            self.used_bytes as f64 / MIB,
            self.name_suffix()
        )
    }

    /// `" [{name}]"`, or nothing without a name.
    pub(crate) fn name_suffix(&self) -> String {
        self.name
            .as_deref()
            .map(|n| format!(" [{n}]"))
            .unwrap_or_default()
    }
}

#[cfg(all(test, feature = "report"))]
mod tests {
    use super::*;

    const MIB_U: u64 = 1 << 20;

    fn device(index: u32, name: Option<&str>, total_mib: u64, free_mib: u64) -> GpuDeviceInfo {
        GpuDeviceInfo {
            index,
            name: name.map(str::to_string),
            total_bytes: total_mib * MIB_U,
            free_bytes: free_mib * MIB_U,
            used_bytes: (total_mib - free_mib) * MIB_U,
            reserved_bytes: None,
            driver_version: None,
        }
    }

    #[test]
    fn device_lines_are_upstreams() {
        let d = device(0, Some("NVIDIA Test GPU"), 16384, 13284);
        assert_eq!(
            d.format_free(),
            "  GPU 0: free 13284 MB / 16384 MB [NVIDIA Test GPU]\n"
        );
        assert_eq!(
            d.format_total(),
            "  GPU 0: total 16384 MB [NVIDIA Test GPU]\n"
        );
        let d = device(1, None, 8192, 4096);
        assert_eq!(d.format_free(), "  GPU 1: free 4096 MB / 8192 MB\n");
        assert_eq!(d.format_used(), "  GPU 1: used 4096 MB\n");
        let d = device(2, Some("Saturated GPU"), 4096, 0);
        assert_eq!(
            d.format_free(),
            "  GPU 2: free 0 MB / 4096 MB [Saturated GPU]\n"
        );
        let d = device(2, Some("Idle GPU"), 4096, 4096);
        assert_eq!(d.format_used(), "  GPU 2: used 0 MB [Idle GPU]\n");
    }

    #[test]
    fn megabytes_are_mebibytes_rounded() {
        let s = Snapshot {
            ram_bytes: 3 * MIB_U / 2,
            gpu: Some(ProcessGpuInfo {
                used_bytes: 512 * MIB_U,
                is_per_process: false,
                source: GpuQuerySource::NvidiaSmi,
            }),
            gpu_device: None,
        };
        assert_eq!(s.ram_mb(), 1.5);
        assert_eq!(s.vram_mb(), Some(512.0));
        let no_gpu = Snapshot { gpu: None, ..s };
        assert_eq!(no_gpu.vram_mb(), None);
        const RAM: f64 = Snapshot {
            ram_bytes: MIB_U,
            gpu: None,
            gpu_device: None,
        }
        .ram_mb();
        assert_eq!(RAM, 1.0);
        let d = device(0, None, 1, 0);
        // 0.5 MiB rounds half to even, as Rust's formatting does.
        let half = GpuDeviceInfo {
            free_bytes: MIB_U / 2,
            ..d
        };
        assert_eq!(half.format_free(), "  GPU 0: free 0 MB / 1 MB\n");
    }
}
