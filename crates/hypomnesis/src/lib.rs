//! # hypomnesis — RAM and GPU memory, measured
//!
//! Host memory of any process, GPU devices and the processes that hold GPU memory, read from the
//! cheapest truthful source, with "unknown" kept distinct from zero.
//!
//! Two layers:
//! - **the upstream API, exactly**: the crate root is the published hypomnesis 0.2 API
//!   (`device_info`, `Snapshot`, `SpillTracker`, [`HypomnesisError`], …, in the modules
//!   [`gpu`], [`ram`], [`snapshot`], [`spill`], [`error`] and, with feature `report`, `report`),
//!   so code written for the published crate compiles and runs unchanged;
//! - **the truthful API**, recommended for new code: a long-lived [`Probe`] (NVML loaded once),
//!   values that are `Option` with the reason they are unknown, DRM (AMD, Intel, …) devices and
//!   rows, samplers, peaks and estimators, in the modules named below.
//!
//! ```no_run
//! // Hold a Probe: NVML stays initialised while it lives.
//! let probe = hypomnesis::Probe::new();
//! let list = probe.gpu_processes();
//! for p in &list.processes {
//!     println!("{} {} {:?}", p.pid, p.name_or_unknown(), p.used_bytes);
//! }
//! ```
//!
//! ## Map
//! The source is one folder per layer, each importing only from layers below it (checked by
//! the workspace's tests; `ARCHITECTURE.md`, "Layers"): `types` (the vocabulary) ← `system`
//! (the I/O edge) ← `backends` (NVML, nvidia-smi, DRM, WDDM, Metal) ← `probe` ← `measure` and
//! `estimate` ← `doctor` ← `compat` (the upstream API). The public modules are re-exported here
//! at the paths below.
//!
//! | Module | Owns |
//! |---|---|
//! | [`probe`] | [`Probe`], the long-lived entry point, and [`ProbeOptions`] |
//! | [`gpu`], [`ram`], [`snapshot`], [`spill`], `report` | the upstream-compatible API (re-exported at the root): free functions over the shared probe, plain-`u64` value types, upstream's behaviour (see `docs/upstream.md`) |
//! | [`own`] | this process's own RAM and VRAM, truthfully: [`own::OwnSnapshot`], [`own::OwnGpuUsage`] |
//! | [`phase`] | [`phase::PhaseReport`]: before/after deltas of a program phase |
//! | [`types`] | [`Device`], [`GpuProcess`], [`Unknown`], [`Warning`], the list types, the contract enums ([`Backend`], [`RuntimeStatus`], …) |
//! | [`host`] | host RAM and per-process RSS / peak / swap / PSS; parsers in [`host::parse`] |
//! | [`process`] | process names and owners; process identity, trees and the incremental [`process::tree::ProcessTable`] ([`process::tree`]) |
//! | [`sampler`] | [`sampler::Sampler`]: a process tree's RAM and VRAM over time, with peaks |
//! | [`eviction`] | [`eviction::TreeEviction`]: VRAM evicted from a process tree's own DRM clients over a run (the Linux meaning of spill for one command) |
//! | [`peaks`] | the headline figures of a sampled tree (`hmn run`): [`peaks::PeakRam`] and its source, per-device peaks, the accounting state |
//! | [`growth`] | whether a process's RAM or VRAM grew steadily over a window (a leak, `hmn watch`): [`growth::assess`] under a [`growth::GrowthRule`], [`growth::GrowthTracker`] |
//! | [`accounting`] | the driver's per-process peak of device memory (NVIDIA accounting mode) |
//! | [`estimate`] | tensor sizes, KV cache, will-it-fit, [`estimate::MemoryTracker`]; model headers (feature `models`) |
//! | [`cgroup`] | `/proc/<pid>/cgroup`, and transient cgroups for exact memory peaks ([`cgroup::CgroupError`]) |
//! | [`workload`] | which workload holds a process (container, pod, Slurm job, systemd unit), from its cgroup path |
//! | [`pidns`] | PID namespaces: which one the proc root shows, whether NVML's host pids are visible, `NSpid` |
//! | [`lease`] | advisory device leases for `hmn pick` / `hmn run --gpu`: the lock directory ([`lease::lock_dir`]), a device's lock and its reservations, [`lease::LeaseError`] |
//! | [`doctor`] | `hmn doctor`: why a figure could be missing here (NVML, permissions, hidepid, cgroups, containers), each check with its remedy |
//! | [`roots`] | [`Roots`] (where `/proc` and `/sys` are) and [`SystemInfo`] |
//! | [`pci`] | [`PciBusId`], normalised PCI addresses |
//! | [`select`] | device selectors (index, `GPU-`/`MIG-` UUID, PCI bus id) and `CUDA_VISIBLE_DEVICES` in CUDA's order |
//! | [`pci_ids`] | marketing names of DRM devices from the system's `pci.ids` and `amdgpu.ids` |
//! | [`error`] | [`HypomnesisError`] (upstream), [`Error`] (truthful) and [`Result`] |
//! | `backends::nvml` | the NVML backend (feature `nvml`) |
//! | `backends::smi` | the `nvidia-smi` fallback (feature `nvidia-smi`), and upstream's per-id queries for the compatible API |
//! | `backends::drm` | AMD, Intel and other DRM GPUs: sysfs devices, fdinfo clients, KFD, spill readings |
//! | `backends::error` | why a backend is absent or a query failed (private; its text is what users see) |
//! | `system::fsread` | the I/O edge: every file read and directory listing of `/proc`, `/sys` and user files, with a size cap per kind |
//!
//! ## Features
//! - `nvml` (default): NVIDIA through NVML, loaded at run time; no link-time dependency.
//! - `nvidia-smi-fallback` (default; also spelled `nvidia-smi`): the `nvidia-smi` fallback.
//! - `dxgi`, `pdh`, `metal` (default): upstream's Windows and macOS backend features; no effect
//!   on Linux.
//! - `report`: upstream's `report` module (`MemoryReport`), `Snapshot::{ram_mb, vram_mb}` and
//!   `GpuDeviceInfo::{format_free, print_free, format_total, format_used}`; the only code in
//!   this library that prints (to stdout, as upstream's does).
//! - `cli`: builds the `hmn` binary from this package
//!   (`cargo install --path crates/hypomnesis --features cli`; the `hmn` crate's sources, with
//!   its features `serve` and `plot`, which mean nothing to the library).
//! - `debug-output`: backend traces of the compatible API on stderr, prefixed as upstream's
//!   (`[NVML debug]`, `[nvidia-smi debug]`, and `[DRM debug]` for this crate's DRM devices).
//! - `serde`: `Serialize` for the data types (field names are the `hmn --json` contract).
//! - `models`: read safetensors/GGUF headers and `config.json` for [`estimate`].
//! - `hub`: the same headers from a Hugging Face Hub (`hf:ORG/REPO`) or an `https://` URL,
//!   by HTTP range requests (`estimate::hub`; adds `ureq` over rustls).
//! - `test-helpers`: builders for the `#[non_exhaustive]` types, for downstream tests:
//!   upstream's `GpuDeviceInfo::builder()` and `GpuProcessEntry::builder()`, and this crate's
//!   `test_helpers` module.
//!
//! ## Platform support
//! Linux, Windows and macOS; one seam per concern (host memory, process memory, processes, GPU
//! backends, the `nvidia-smi` runner). A platform `cfg` appears only in the files
//! `ARCHITECTURE.md` lists under "Platforms" (the seams, and the files that select one call
//! or silence dead code elsewhere; a test checks the list against the code). The platforms'
//! own calls:
//! - Windows: `GlobalMemoryStatusEx`, `GetProcessMemoryInfo`, Toolhelp, Job objects
//!   (`process::job`), NVML from `nvml.dll`, DXGI adapters and PDH counters;
//! - macOS: `host_statistics64`, `proc_pid_rusage`, libproc, the Metal device.
//!
//! With the system [`Roots`] the platform's own calls answer; a proc/sys root named explicitly
//! is read as Linux procfs/sysfs on every platform. What each figure is per platform, and how
//! it is tested (natively, under Wine, with fakes, or compile-checked): `SUPPORT.md`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

// The layers (ARCHITECTURE.md "Layers"), with their ranks; a file imports only from its own
// layer or one of lower rank, and no circle of files: `crates/layers` checks both.
mod backends; // 2: NVML, nvidia-smi, DRM, WDDM, Metal
mod compat; // 6: the upstream-compatible API
// 5: why a figure could be missing. Platform seam inside: Linux's checks read /proc, /sys,
// cgroups and device nodes; elsewhere the checks are NVIDIA's and the platform's GPU backends.
pub mod doctor;
pub mod estimate; // 4: will it fit (a sibling of `measure`; neither imports the other)
mod measure; // 4: rules over readings taken over time
pub mod probe; // 3: the truthful entry point
mod system; // 1: the I/O edge and the operating system's facts
pub mod types; // 0: the data model and its vocabulary

#[cfg(feature = "test-helpers")]
pub mod test_helpers; // 7: builders for the `#[non_exhaustive]` types

// The layers' public modules, at the paths they have always had.
#[cfg(feature = "report")]
pub use compat::report;
pub use compat::{gpu, ram, snapshot, spill};
pub use measure::{eviction, growth, own, peaks, phase, sampler};
#[doc(inline)]
pub use probe::select;
pub use system::{cgroup, host, lease, pci_ids, pidns, process, roots, workload};
#[doc(inline)]
pub use types::{accounting, pci};

/// The library's error types: [`HypomnesisError`], upstream hypomnesis 0.2's error, returned
/// by the upstream-compatible API at the crate root; [`Error`] and [`ParseError`](error::ParseError), the errors
/// of the truthful API; and [`Result`].
///
/// [`Result`] defaults to upstream's error (`hypomnesis::Result<T>` is upstream's alias); the
/// truthful API spells `Result<T, Error>`. The `Display` text is a one-line English message
/// meant for humans; its wording is not part of the API. Match on the variants and their
/// fields instead.
pub mod error {
    pub use crate::compat::error::{HypomnesisError, Result};
    pub use crate::types::error::{Error, ParseError};
}

/// Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`; not a stable API).
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing {
    /// Parses DRM fdinfo text and runs the region model and the utilization maths over it.
    pub fn fdinfo(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let stats = crate::backends::drm::fdinfo::parse(&text);
        let regions = crate::backends::drm::model::regions_of(&stats);
        let _ = regions.used_bytes();
        let sample = crate::backends::drm::model::EngineSample {
            at_ns: 1_000_000_000,
            engines: stats.engines.clone(),
        };
        let earlier = crate::backends::drm::model::EngineSample {
            at_ns: 0,
            engines: stats.engines,
        };
        let _ = crate::backends::drm::model::busy_percent(Some(&earlier), &sample);
    }

    /// Parses nvidia-smi CSV (both queries), procfs memory files and IOKit's
    /// `PerformanceStatistics` text.
    pub fn text_parsers(data: &[u8]) {
        let text = String::from_utf8_lossy(data);
        let _ = crate::backends::smi::parse::parse_gpus(&text, true);
        let _ = crate::backends::smi::parse::parse_gpus(&text, false);
        let _ = crate::backends::smi::parse::parse_apps(&text);
        let _ = crate::system::host::parse::parse_status(&text);
        let _ = crate::system::host::parse::parse_meminfo(&text);
        let _ = crate::system::host::parse::parse_smaps_rollup(&text);
        let _ = crate::system::host::parse::statm_resident_pages(data);
        let _ = text.parse::<crate::types::pci::PciBusId>();
        if let Ok(entries) = crate::backends::iokit_stats::parse_ioreg(&text) {
            let _ = crate::backends::iokit_stats::from_entries(entries);
        }
    }

    /// Parses a safetensors JSON header and, as the same bytes, a `config.json`.
    #[cfg(feature = "models")]
    pub fn safetensors_header(data: &[u8]) {
        let _ = crate::estimate::safetensors::parse_header(data);
        let _ = crate::estimate::config::from_config_json(data);
    }

    /// Reads a GGUF header from memory and the architecture from its metadata.
    #[cfg(feature = "models")]
    pub fn gguf_header(data: &[u8]) {
        let len = data.len() as u64;
        if let Ok(h) = crate::estimate::gguf::read_header(std::io::Cursor::new(data), len) {
            let _ = h.weights_bytes();
            let _ = crate::estimate::config::from_gguf(&h).ok();
        }
    }

    /// Reads a GGUF header from memory as `hmn fits` assembles a model from it, then runs the
    /// estimator and the verdict on it for every runtime: under each runtime's defaults, at the
    /// CLI's extreme settings (`--context` 2³², `--batch`/`--ubatch` 2²⁰, `--parallel` 4096,
    /// `-ngl` 1), and beyond them. A header the parser accepts must never overflow the
    /// estimator's arithmetic (fuzz builds check overflow: an overflow is a crash).
    #[cfg(feature = "models")]
    pub fn gguf_estimate(data: &[u8]) {
        use crate::estimate::{Budget, FitParams, FlashAttn, KvDtype, LlamaApi, Runtime};
        let len = data.len() as u64;
        let Ok(h) = crate::estimate::gguf::read_header(std::io::Cursor::new(data), len) else {
            return;
        };
        let file = std::path::PathBuf::from("fuzz.gguf");
        let Ok(m) = crate::estimate::model::assemble_gguf(vec![(file, h)], Vec::new()) else {
            return;
        };
        let (model, arch) = (&m.spec, m.spec.arch.as_ref());
        for runtime in [Runtime::Generic, Runtime::LlamaCpp, Runtime::Vllm] {
            let p = FitParams::defaults(runtime, arch);
            let mut tries = vec![
                p,
                p.context(1 << 32).batch(1 << 20),
                p.context(u64::MAX).batch(u64::MAX),
            ];
            if runtime == Runtime::LlamaCpp {
                let q = p.context(1 << 32).ubatch(1 << 20).n_batch(1 << 20);
                tries.extend([
                    q.flash_attn(FlashAttn::Off).kv_dtype(KvDtype::F32),
                    q.kv_dtype(KvDtype::Q4_0).flash_attn(FlashAttn::On),
                    q.slots(4096).kv_unified(true),
                    q.llama_api(LlamaApi::Library).gpu_layers(1),
                    q.cpu_only(true),
                ]);
                let _ = crate::estimate::offload::estimate_split(model, &q, &[u64::MAX, 1 << 30]);
            }
            for q in tries {
                let _ = crate::estimate::estimate(model, q);
            }
            let _ = crate::estimate::judge(model, p, &Budget::given(80 << 30));
        }
    }

    #[cfg(all(test, feature = "models"))]
    mod tests {
        use hmn_testbed::{GgufWriter, ggml};

        fn llama() -> GgufWriter {
            GgufWriter::new()
                .str("general.architecture", "llama")
                .u32("llama.block_count", 4)
                .tensor("token_embd.weight", &[256, 32], ggml::F16)
                .tensor("blk.0.ffn_up.weight", &[256, 32], ggml::F16)
        }

        /// QA's headers (`/tmp/qa/mkgguf.py`) and one at every bound: refused, or estimated
        /// without an overflow (test builds check it).
        #[test]
        fn gguf_estimate_survives_extreme_headers() {
            let max = u64::MAX.to_le_bytes();
            let bound = (1u64 << 32).to_le_bytes();
            let at_bounds = hmn_testbed::hostile_models::at_the_bounds(llama()).raw(
                "llama.attention.sliding_window",
                10,
                &bound,
            );
            let base = || {
                llama()
                    .u32("llama.attention.head_count", 4)
                    .u32("llama.embedding_length", 256)
            };
            // The header at the bounds is read and estimated, not refused.
            let bytes = at_bounds.to_bytes();
            let h = crate::estimate::gguf::read_header(
                std::io::Cursor::new(&bytes),
                bytes.len() as u64,
            )
            .unwrap();
            assert!(crate::estimate::config::from_gguf(&h).unwrap().is_some());
            for w in [
                at_bounds,
                base().raw("llama.vocab_size", 10, &max),
                base().raw("llama.context_length", 10, &max),
                base().u32("llama.context_length", u32::MAX),
                base().u32("llama.attention.head_count_kv", 0),
                llama()
                    .u32("llama.attention.head_count", u32::MAX)
                    .u32("llama.embedding_length", u32::MAX),
            ] {
                super::gguf_estimate(&w.to_bytes());
            }
        }
    }

    /// Decimal sysfs values read as the DRM backend reads a device's figures at each query,
    /// through files kept open between readings (`benches/drm.rs` compares it with
    /// [`sysfs_fresh`]).
    #[derive(Debug)]
    pub struct SysfsKept(crate::system::kept::KeptFiles<std::path::PathBuf>);

    impl SysfsKept {
        /// An empty set of kept files.
        #[must_use]
        pub fn new() -> SysfsKept {
            SysfsKept(crate::system::kept::KeptFiles::new(
                crate::system::fsread::Cap::SYSFS,
            ))
        }

        /// The sum of the values of `paths` (unreadable ones count nothing), one round.
        pub fn read_sum(&mut self, paths: &[std::path::PathBuf]) -> u64 {
            let sum = paths
                .iter()
                .filter_map(|p| self.0.read_u64(p))
                .fold(0u64, u64::wrapping_add);
            self.0.end_round();
            sum
        }
    }

    impl Default for SysfsKept {
        fn default() -> SysfsKept {
            SysfsKept::new()
        }
    }

    /// The same sum with each file opened, read and closed (the reader before files were kept).
    #[must_use]
    pub fn sysfs_fresh(paths: &[std::path::PathBuf]) -> u64 {
        paths
            .iter()
            .filter_map(|p| crate::system::fsread::read_u64(p).ok())
            .fold(0u64, u64::wrapping_add)
    }
}

// The upstream API (hypomnesis 0.2.15), at the root as upstream has it. Items whose module
// lives in a private layer are listed here as re-exports (`doc(no_inline)`) and documented in
// their public module, as before the layers were folders.
#[doc(no_inline)]
pub use error::{HypomnesisError, Result};
#[doc(no_inline)]
pub use gpu::{
    device_count, device_info, gpu_process_listing, gpu_processes, process_exists,
    process_gpu_info, process_name,
};
#[doc(no_inline)]
pub use ram::process_rss;
#[cfg(feature = "report")]
#[doc(no_inline)]
pub use report::MemoryReport;
#[doc(no_inline)]
pub use snapshot::{
    GpuDeviceInfo, GpuProcessEntry, GpuProcessListing, GpuQuerySource, ProcessGpuInfo, Snapshot,
};
#[cfg(feature = "test-helpers")]
#[doc(no_inline)]
pub use snapshot::{GpuDeviceInfoBuilder, GpuProcessEntryBuilder};
#[cfg(feature = "test-helpers")]
#[doc(no_inline)]
pub use spill::SpillReportBuilder;
#[doc(no_inline)]
pub use spill::{
    SpillEpisode, SpillReport, SpillTracker, is_spill_measurable, snapshot_is_spilling,
};

// The truthful API.
#[doc(no_inline)]
pub use error::Error;
#[doc(no_inline)]
pub use host::{HostMemory, MemoryDetail, ProcessMemory};
#[doc(no_inline)]
pub use pci::PciBusId;
pub use probe::events::XidEvents;
pub use probe::{Probe, ProbeOptions, shared_probe};
#[doc(no_inline)]
pub use roots::{Roots, SystemInfo};
pub use types::{
    Backend, BackendCause, BackendProblem, BackendState, BackendStatus, Completeness, ComputeMode,
    Device, DeviceList, DeviceMemory, DeviceRegion, EngineClass, EngineClasses, EngineUsage,
    Engines, Field, GpuProcess, MemoryHealth, MemoryPool, MigDevice, MigMode, MigPlacement,
    MigState, PoolKind, PoolSource, ProcessKind, ProcessList, ProcessName, ProcessRegions,
    ProcessUtilization, RegionUsage, RuntimeStatus, Source, Telemetry, Unattributed, Unknown,
    UnknownReason, Vendor, VramSum, Warning, XidTally, XidUncounted,
};
