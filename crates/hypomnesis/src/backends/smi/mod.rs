//! The `nvidia-smi` fallback, used when NVML cannot be loaded or initialised.
//!
//! Owns running `nvidia-smi` with a hard time limit (a hung driver must not hang `hmn`: the
//! child's whole process group is killed when the limit passes, and nothing waits past it; see
//! [`child`]) and turning its CSV into [`Device`]s and [`GpuProcess`]es with
//! `source: "nvidia-smi"`. Parsing lives in [`parse`]; upstream hypomnesis's per-id queries, for
//! the upstream-compatible API, in [`compat`].
//!
//! Limits of this source, documented rather than hidden: memory is in whole MiB, only compute
//! processes are listed (`--query-compute-apps`), and a driver older than R510 has no
//! `memory.reserved` field (it is queried, and dropped on the "not a valid field" answer).

// Platform seam: the bounded child runner (Linux: process group + waitid + poll; elsewhere:
// reader threads, and a Job object on Windows).
#[cfg(target_os = "linux")]
mod child;
#[cfg(not(target_os = "linux"))]
#[path = "child_portable.rs"]
mod child;
// The portable runner's own tests also run on Linux.
#[cfg(test)]
#[cfg(target_os = "linux")]
#[allow(dead_code)]
mod child_portable;
pub(crate) mod compat;
mod outcome;
pub(crate) mod parse;

use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use crate::backends::error::BackendError;
use crate::types::{
    Device, DeviceMemory, Field, GpuProcess, MemoryPool, PoolSource, ProcessKind, Source, Unknown,
    UnknownReason, Vendor, Warning,
};
use parse::{APP_FIELDS, Field as Reading, GPU_FIELDS, SmiApp, SmiGpu};

/// The binary looked up on `PATH` when no path is given.
pub const DEFAULT_BINARY: &str = "nvidia-smi";
/// How long `nvidia-smi` may run before it is killed, unless configured.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// Output beyond this stops the run (a sane nvidia-smi prints kilobytes).
const MAX_OUTPUT: usize = 16 << 20;

/// A configured `nvidia-smi`.
#[derive(Debug)]
pub(crate) struct Smi {
    program: Option<PathBuf>,
    timeout: Duration,
    /// Set once the binary was found missing: later queries (a sampler's ticks) do not try to
    /// spawn it again.
    missing: AtomicBool,
    /// Runs it, bounded in time.
    runner: child::Runner,
}

impl Smi {
    pub(crate) fn new(program: Option<PathBuf>, timeout: Duration) -> Smi {
        Smi {
            program,
            timeout,
            missing: AtomicBool::new(false),
            runner: child::Runner::default(),
        }
    }

    fn shown(&self) -> String {
        self.program
            .as_ref()
            .map_or_else(|| DEFAULT_BINARY.to_string(), |p| p.display().to_string())
    }

    /// Why the binary cannot be found.
    fn not_found(&self) -> BackendError {
        match self.program {
            None => BackendError::NotOnPath,
            Some(_) => BackendError::ProgramNotFound {
                program: self.shown(),
            },
        }
    }

    /// Runs `nvidia-smi ARGS`; `Ok(stdout)` on exit status 0, else the reason (the tool's own
    /// first line of output where it printed one).
    fn run(&self, args: &[String]) -> Result<String, BackendError> {
        if self.missing.load(Ordering::Relaxed) {
            return Err(self.not_found());
        }
        let program: OsString = self
            .program
            .as_ref()
            .map_or_else(|| DEFAULT_BINARY.into(), |p| p.clone().into_os_string());
        let done = self
            .runner
            .run(&program, args, self.timeout, MAX_OUTPUT)
            .map_err(|e| match e {
                child::RunError::Spawn(source) => match source.kind() {
                    std::io::ErrorKind::NotFound => {
                        self.missing.store(true, Ordering::Relaxed);
                        self.not_found()
                    }
                    std::io::ErrorKind::PermissionDenied => BackendError::NotExecutable {
                        program: self.shown(),
                    },
                    _ => BackendError::Spawn {
                        program: self.shown(),
                        source,
                    },
                },
                child::RunError::Timeout => BackendError::Timeout {
                    program: self.shown(),
                    timeout_ms: self.timeout.as_millis(),
                },
                child::RunError::TooMuchOutput => {
                    self.output_error(crate::types::error::ParseError::new(format!(
                        "more than {} MiB of output",
                        MAX_OUTPUT >> 20
                    )))
                }
                child::RunError::Wait(source) => BackendError::Wait {
                    program: self.shown(),
                    source,
                },
            })?;
        let status = done.status;
        let stdout = String::from_utf8_lossy(&done.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&done.stderr).into_owned();
        if status.success() {
            return Ok(stdout);
        }
        let first_line = stdout
            .lines()
            .chain(stderr.lines())
            .map(str::trim)
            .find(|l| !l.is_empty())
            .unwrap_or("no output")
            .to_string();
        Err(BackendError::ExitStatus {
            program: self.shown(),
            status,
            first_line,
        })
    }

    /// Unexpected output, as an error naming the program.
    fn output_error(&self, source: crate::types::error::ParseError) -> BackendError {
        BackendError::Output {
            program: self.shown(),
            source,
        }
    }

    /// The GPUs `nvidia-smi` reports.
    pub(crate) fn devices(&self) -> Result<Vec<Device>, BackendError> {
        let query = |fields: &[&str]| {
            vec![
                format!("--query-gpu={}", fields.join(",")),
                "--format=csv,noheader,nounits".to_string(),
            ]
        };
        let (out, with_reserved) = match self.run(&query(&GPU_FIELDS)) {
            Ok(out) => (out, true),
            // A driver older than R510 refuses the field.
            Err(BackendError::ExitStatus { first_line, .. })
                if first_line.contains("memory.reserved")
                    || first_line.contains("not a valid field") =>
            {
                (
                    self.run(&query(&GPU_FIELDS[..GPU_FIELDS.len() - 1]))?,
                    false,
                )
            }
            Err(e) => return Err(e),
        };
        let gpus = parse::parse_gpus(&out, with_reserved).map_err(|e| self.output_error(e))?;
        Ok(gpus.into_iter().map(to_device).collect())
    }

    /// The compute processes `nvidia-smi` reports, as rows on `devices` (matched by UUID).
    pub(crate) fn processes(
        &self,
        devices: &[Device],
        warnings: &mut Vec<Warning>,
    ) -> Result<Vec<GpuProcess>, BackendError> {
        let args = vec![
            format!("--query-compute-apps={}", APP_FIELDS.join(",")),
            "--format=csv,noheader,nounits".to_string(),
        ];
        let out = self.run(&args)?;
        let apps = parse::parse_apps(&out).map_err(|e| self.output_error(e))?;
        let mut rows = Vec::new();
        for app in apps {
            let Some(device) = devices
                .iter()
                .find(|d| d.uuid.is_some() && d.uuid.as_deref() == app.gpu_uuid.as_deref().ok())
            else {
                warnings.push(Warning::general(format!(
                    "nvidia-smi listed pid {} on a GPU it did not report ({}); skipped",
                    app.pid,
                    app.gpu_uuid.as_deref().unwrap_or("unknown UUID")
                )));
                continue;
            };
            rows.push(to_row(app, device, warnings));
        }
        Ok(rows)
    }
}

fn store<T>(value: Reading<T>, field: Field, unknown: &mut Vec<Unknown>) -> Option<T> {
    match value {
        Ok(v) => Some(v),
        Err((reason, detail)) => {
            unknown.push(Unknown::new(field, reason, detail));
            None
        }
    }
}

fn to_device(g: SmiGpu) -> Device {
    let mut d = Device::new(g.index, Vendor::Nvidia, Source::NvidiaSmi);
    let u = &mut d.unknown;
    d.name = store(g.name, Field::Name, u);
    d.uuid = store(g.uuid, Field::Uuid, u);
    d.pci_bus_id = store(g.pci_bus_id, Field::PciBusId, u);
    d.driver_version = store(g.driver_version, Field::DriverVersion, u);
    d.driver = Some("nvidia".to_string());
    u.push(Unknown::new(
        Field::ComputeMode,
        UnknownReason::Unsupported,
        "not read: the nvidia-smi fallback does not query it",
    ));
    let reserved = match g.reserved {
        Some(r) => store(r, Field::MemoryReservedBytes, u),
        None => {
            u.push(Unknown::new(
                Field::MemoryReservedBytes,
                UnknownReason::Unsupported,
                "this nvidia-smi has no memory.reserved field (driver older than R510)",
            ));
            None
        }
    };
    let placeholders = [&g.total, &g.used, &g.free].iter().all(|f| {
        matches!(
            f,
            Err((
                UnknownReason::DriverSentinel | UnknownReason::Unsupported,
                _
            ))
        )
    });
    d.memory = DeviceMemory::new(
        store(g.total, Field::MemoryTotalBytes, u),
        store(g.used, Field::MemoryUsedBytes, u),
        store(g.free, Field::MemoryFreeBytes, u),
        reserved,
    );
    // A part without a framebuffer of its own prints `[N/A]` (or `[Not Supported]`) for all
    // three; so does a GPU that fell off the bus, so the name must say which it is.
    if let Some(name) = d
        .name
        .as_deref()
        .filter(|n| placeholders && parse::is_integrated_name(n))
    {
        d.integrated = Some(true);
        d.pool = Some(MemoryPool::host_ram(
            PoolSource::ProcessSum,
            format!(
                "nvidia-smi printed placeholders for memory.total, memory.used and memory.free on \
             {name}, a part without a framebuffer of its own (it shares the host's RAM; NVIDIA \
             DGX Spark known issues: \"nvidia-smi reports memory usage not supported\")"
            ),
        ));
    }
    d
}

fn to_row(app: SmiApp, device: &Device, warnings: &mut Vec<Warning>) -> GpuProcess {
    let mut row = GpuProcess::new(
        app.pid,
        device.index,
        ProcessKind::Compute,
        Source::NvidiaSmi,
    );
    row.device_uuid.clone_from(&device.uuid);
    row.name = app.name.ok().map(crate::types::ProcessName::from);
    match (app.used, device.memory.total_bytes) {
        (Ok(used), Some(total)) if used > total => {
            warnings.push(Warning::device(
                device.index,
                format!(
                    "pid {} reported {used} bytes, more than the device's {total}; shown as unknown",
                    app.pid
                ),
            ));
            row.unknown.push(Unknown::new(
                Field::UsedBytes,
                UnknownReason::Implausible,
                format!("nvidia-smi reported {used} bytes, above the device total of {total}"),
            ));
        }
        (used, _) => row.used_bytes = store(used, Field::UsedBytes, &mut row.unknown),
    }
    row
}
