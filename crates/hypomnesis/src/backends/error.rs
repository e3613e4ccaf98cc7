//! Why a GPU backend is absent, or why one of its queries failed: [`BackendError`], private to
//! the crate.
//!
//! The backends (`nvml`, `smi`) return it instead of strings or reused driver codes; the
//! [`Probe`](crate::Probe) turns it into the text users see — a backend's absence reason, a
//! warning, an unknown field's detail — so its `Display` is that text, word for word.

use std::io;
use std::process::ExitStatus;

use crate::types::BackendCause;
use crate::types::error::ParseError;

#[cfg(feature = "nvml")]
use nvml_wrapper::error::NvmlError;

/// A backend's failure. See the [module docs](self).
#[derive(Debug, thiserror::Error)]
pub(crate) enum BackendError {
    /// Turned off in the probe's options.
    #[error("disabled")]
    Disabled,
    /// Compiled out of this build.
    #[cfg(not(feature = "nvml"))]
    #[error("built without the {feature} feature")]
    NotBuilt {
        /// The cargo feature.
        feature: &'static str,
    },

    /// The dynamic loader knows no NVML library by its soname: no NVIDIA driver installed.
    #[cfg(feature = "nvml")]
    #[error("{library} not found (no NVIDIA driver installed)")]
    LibraryNotFound {
        /// The soname asked for.
        library: String,
    },
    /// An NVML library named by path could not be loaded.
    #[cfg(feature = "nvml")]
    #[error("cannot load {}", loader_text(library, message))]
    LibraryUnloadable {
        /// The path asked for.
        library: String,
        /// The loader's message (`dlerror`), which may name the file already.
        message: String,
        /// Whether the path names nothing (cause `library-missing`, else `library-unusable`).
        missing: bool,
    },
    /// The library lacks a symbol every NVML has.
    #[cfg(feature = "nvml")]
    #[error("{library} is not a usable NVML library ({symbol})")]
    NotNvml {
        /// The library loaded.
        library: String,
        /// The missing symbol (nvml-wrapper's text).
        symbol: String,
    },
    /// `nvmlInit` found no NVIDIA kernel driver.
    #[cfg(feature = "nvml")]
    #[error("the NVIDIA kernel driver is not loaded")]
    DriverNotLoaded,
    /// `nvmlInit` found no NVIDIA GPU (`NVML_ERROR_GPU_NOT_FOUND`): the driver is there, the
    /// hardware is not (a GPU image on a CPU instance).
    #[cfg(feature = "nvml")]
    #[error("the NVIDIA driver found no GPU")]
    GpuNotFound,
    /// `nvmlInit` was refused access to the driver.
    #[cfg(feature = "nvml")]
    #[error("no permission to talk to the NVIDIA driver")]
    NoPermission,
    /// `nvmlInit` failed otherwise.
    #[cfg(feature = "nvml")]
    #[error("initialisation failed: {}", crate::backends::nvml::convert::describe(.0))]
    InitFailed(NvmlError),
    /// An NVML call failed.
    #[cfg(feature = "nvml")]
    #[error("{}", crate::backends::nvml::convert::describe(.0))]
    Nvml(#[from] NvmlError),
    /// A process list whose records fit no layout NVML has used.
    #[cfg(feature = "nvml")]
    #[error("the driver wrote process records of an unrecognised layout")]
    UnrecognisedLayout,
    /// A PCI bus id that is not an address.
    #[cfg(feature = "nvml")]
    #[error("NVML returned a malformed PCI bus id {0:?}")]
    MalformedBusId(String),
    /// A number beyond its field's range.
    #[cfg(feature = "nvml")]
    #[error("NVML returned {what} {value}, out of range")]
    OutOfRange {
        /// The field (`PCI bus`, `PCI device`).
        what: &'static str,
        /// The value returned.
        value: u32,
    },

    /// `nvidia-smi` is not on `PATH`.
    #[error("not found on PATH")]
    NotOnPath,
    /// The configured `nvidia-smi` does not exist.
    #[error("{program} not found")]
    ProgramNotFound {
        /// The program as configured.
        program: String,
    },
    /// The program may not be executed.
    #[error("{program} is not executable")]
    NotExecutable {
        /// The program.
        program: String,
    },
    /// The program could not be started for another reason.
    #[error("cannot run {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The error from `spawn`.
        source: io::Error,
    },
    /// The program did not finish in time and was killed.
    #[error("{program} did not answer within {timeout_ms} ms and was killed")]
    Timeout {
        /// The program.
        program: String,
        /// The time limit.
        timeout_ms: u128,
    },
    /// Waiting for the program failed.
    #[error("waiting for {program}: {source}")]
    Wait {
        /// The program.
        program: String,
        /// The error from `wait`.
        source: io::Error,
    },
    /// The program exited with a failure.
    #[error("{program} failed ({status}): {first_line}")]
    ExitStatus {
        /// The program.
        program: String,
        /// How it exited.
        status: ExitStatus,
        /// Its first non-empty line of output (stdout, then stderr), or `no output`.
        first_line: String,
    },
    /// The program's output was not what this crate understands.
    #[error("unexpected {program} output: {source}")]
    Output {
        /// The program.
        program: String,
        /// What was wrong.
        source: ParseError,
    },
}

impl BackendError {
    /// Why XID events cannot be counted when NVML is this error.
    pub(crate) fn xid_uncounted(&self) -> crate::types::XidUncounted {
        crate::types::XidUncounted::NoNvml {
            cause: self.cause(),
            reason: self.to_string(),
        }
    }

    /// Why, as a value callers can match ([`BackendCause`]).
    pub(crate) fn cause(&self) -> BackendCause {
        match self {
            BackendError::Disabled => BackendCause::Disabled,
            #[cfg(not(feature = "nvml"))]
            BackendError::NotBuilt { .. } => BackendCause::NotBuilt,
            #[cfg(feature = "nvml")]
            BackendError::LibraryNotFound { .. } => BackendCause::LibraryMissing,
            #[cfg(feature = "nvml")]
            BackendError::LibraryUnloadable { missing: true, .. } => BackendCause::LibraryMissing,
            #[cfg(feature = "nvml")]
            BackendError::LibraryUnloadable { .. } | BackendError::NotNvml { .. } => {
                BackendCause::LibraryUnusable
            }
            #[cfg(feature = "nvml")]
            BackendError::DriverNotLoaded => BackendCause::DriverNotLoaded,
            #[cfg(feature = "nvml")]
            BackendError::GpuNotFound => BackendCause::NoDevice,
            #[cfg(feature = "nvml")]
            BackendError::NoPermission => BackendCause::PermissionDenied,
            #[cfg(feature = "nvml")]
            BackendError::InitFailed(e) | BackendError::Nvml(e) => nvml_cause(e),
            #[cfg(feature = "nvml")]
            BackendError::UnrecognisedLayout
            | BackendError::MalformedBusId(_)
            | BackendError::OutOfRange { .. } => BackendCause::BadAnswer,
            BackendError::NotOnPath | BackendError::ProgramNotFound { .. } => {
                BackendCause::LibraryMissing
            }
            BackendError::NotExecutable { .. } => BackendCause::LibraryUnusable,
            BackendError::Spawn { source, .. } | BackendError::Wait { source, .. } => {
                if source.kind() == std::io::ErrorKind::PermissionDenied {
                    BackendCause::PermissionDenied
                } else {
                    BackendCause::CallFailed
                }
            }
            BackendError::Timeout { .. } => BackendCause::Timeout,
            BackendError::ExitStatus { .. } => BackendCause::CallFailed,
            BackendError::Output { .. } => BackendCause::BadAnswer,
        }
    }

    /// Whether this failure means the backend simply is not here — disabled, not built, no
    /// library or program, the driver not loaded, no GPU found — rather than present and broken
    /// (a library/driver mismatch, refused access, a failing call), where GPUs may exist that
    /// nothing can show.
    pub(crate) fn means_absent(&self) -> bool {
        match self {
            BackendError::Disabled
            | BackendError::NotOnPath
            | BackendError::ProgramNotFound { .. } => true,
            #[cfg(not(feature = "nvml"))]
            BackendError::NotBuilt { .. } => true,
            #[cfg(feature = "nvml")]
            BackendError::LibraryNotFound { .. }
            | BackendError::LibraryUnloadable { .. }
            | BackendError::DriverNotLoaded
            | BackendError::GpuNotFound => true,
            _ => false,
        }
    }
}

/// The cause of an NVML call's failure.
#[cfg(feature = "nvml")]
fn nvml_cause(e: &NvmlError) -> BackendCause {
    match e {
        NvmlError::NoPermission => BackendCause::PermissionDenied,
        NvmlError::DriverNotLoaded => BackendCause::DriverNotLoaded,
        NvmlError::NotFound => BackendCause::NoDevice,
        NvmlError::LibRmVersionMismatch
        | NvmlError::FunctionNotFound
        | NvmlError::FailedToLoadSymbol(_) => BackendCause::VersionMismatch,
        NvmlError::Timeout => BackendCause::Timeout,
        NvmlError::LibloadingError(_) => BackendCause::LibraryUnusable,
        _ => BackendCause::CallFailed,
    }
}

/// `dlerror`'s text with the library named once: it often starts with the path already.
#[cfg(feature = "nvml")]
fn loader_text(library: &str, message: &str) -> String {
    if message.starts_with(library) {
        message.to_string()
    } else {
        format!("{library}: {message}")
    }
}

#[cfg(feature = "nvml")]
impl BackendError {
    /// The kind of reason an unknown field gets when this error left it unread.
    pub(crate) fn unknown_reason(&self) -> crate::types::UnknownReason {
        match self {
            BackendError::Nvml(e) => crate::backends::nvml::convert::reason_of(e),
            _ => crate::types::UnknownReason::DeviceError,
        }
    }
}

/// What upstream hypomnesis 0.2.15 makes of an NVML library that did not start: absent (the
/// NVIDIA part of the machine is simply not there), a count of zero, or broken (GPUs may exist
/// that nothing can show). The compatible API ([`crate::gpu`]) reports the last as
/// `HypomnesisError::Nvml` with this detail text.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(not(feature = "nvml"), allow(dead_code))]
pub(crate) enum NvmlStart {
    /// No library, a library that does not load, `NVML_ERROR_DRIVER_NOT_LOADED` (9), or NVML
    /// turned off or compiled out.
    Absent,
    /// `nvmlInit_v2` returned `NVML_ERROR_GPU_NOT_FOUND` (28): NVML counts zero devices.
    NoGpu,
    /// Any other start failure: `<call> returned <NAME> (<code>)` or `failed to resolve …`.
    Broken(String),
}

impl BackendError {
    /// Classifies why NVML is not loaded, as upstream 0.2.15 does (see [`NvmlStart`]).
    pub(crate) fn nvml_start(&self) -> NvmlStart {
        match self {
            #[cfg(feature = "nvml")]
            BackendError::GpuNotFound => NvmlStart::NoGpu,
            #[cfg(feature = "nvml")]
            BackendError::NoPermission => {
                NvmlStart::Broken(crate::backends::nvml::convert::call_failure(
                    "nvmlInit_v2",
                    &NvmlError::NoPermission,
                ))
            }
            #[cfg(feature = "nvml")]
            BackendError::InitFailed(e) => NvmlStart::Broken(
                crate::backends::nvml::convert::call_failure("nvmlInit_v2", e),
            ),
            #[cfg(feature = "nvml")]
            BackendError::NotNvml { symbol, .. } => {
                NvmlStart::Broken(format!("failed to resolve nvmlInit_v2: {symbol}"))
            }
            #[cfg(feature = "nvml")]
            BackendError::Nvml(e) => NvmlStart::Broken(
                crate::backends::nvml::convert::call_failure("nvmlInit_v2", e),
            ),
            _ => NvmlStart::Absent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_the_ones_users_see() {
        assert_eq!(BackendError::NotOnPath.to_string(), "not found on PATH");
        assert_eq!(
            BackendError::ProgramNotFound {
                program: "/opt/no-smi/nvidia-smi".into()
            }
            .to_string(),
            "/opt/no-smi/nvidia-smi not found"
        );
        assert_eq!(
            BackendError::Timeout {
                program: "nvidia-smi".into(),
                timeout_ms: 300
            }
            .to_string(),
            "nvidia-smi did not answer within 300 ms and was killed"
        );
        assert_eq!(
            BackendError::Output {
                program: "nvidia-smi".into(),
                source: ParseError::on_line(2, "3 fields, expected 9"),
            }
            .to_string(),
            "unexpected nvidia-smi output: line 2: 3 fields, expected 9"
        );
        assert_eq!(BackendError::Disabled.to_string(), "disabled");
    }

    #[cfg(feature = "nvml")]
    #[test]
    fn nvml_messages_are_the_ones_users_see() {
        let lib = || "libnvidia-ml.so.1".to_string();
        assert_eq!(
            BackendError::LibraryNotFound { library: lib() }.to_string(),
            "libnvidia-ml.so.1 not found (no NVIDIA driver installed)"
        );
        assert_eq!(
            BackendError::LibraryUnloadable {
                library: "/x/lib.so".into(),
                message: "/x/lib.so: cannot open shared object file".into(),
                missing: true,
            }
            .to_string(),
            "cannot load /x/lib.so: cannot open shared object file"
        );
        assert_eq!(
            BackendError::LibraryUnloadable {
                library: "/x/lib.so".into(),
                message: "invalid ELF header".into(),
                missing: false,
            }
            .to_string(),
            "cannot load /x/lib.so: invalid ELF header"
        );
        assert_eq!(
            BackendError::Nvml(NvmlError::NoPermission).to_string(),
            "no permission"
        );
        assert_eq!(
            BackendError::InitFailed(NvmlError::GpuLost).to_string(),
            "initialisation failed: the GPU is lost (fell off the bus or needs a reset)"
        );
        assert_eq!(
            BackendError::Nvml(NvmlError::NotSupported).unknown_reason(),
            crate::types::UnknownReason::Unsupported
        );
        assert_eq!(
            BackendError::MalformedBusId("x".into()).unknown_reason(),
            crate::types::UnknownReason::DeviceError
        );
    }

    #[cfg(feature = "nvml")]
    #[test]
    fn nvml_start_failures_are_classified_as_upstream_does() {
        assert_eq!(
            BackendError::DriverNotLoaded.nvml_start(),
            NvmlStart::Absent
        );
        assert_eq!(
            BackendError::LibraryNotFound {
                library: "libnvidia-ml.so.1".into()
            }
            .nvml_start(),
            NvmlStart::Absent
        );
        assert_eq!(BackendError::Disabled.nvml_start(), NvmlStart::Absent);
        // The loader turns init code 28 into `GpuNotFound` (nvml::NvmlBackend::load).
        assert_eq!(BackendError::GpuNotFound.nvml_start(), NvmlStart::NoGpu);
        assert_eq!(
            BackendError::InitFailed(NvmlError::LibRmVersionMismatch).nvml_start(),
            NvmlStart::Broken(
                "nvmlInit_v2 returned NVML_ERROR_LIB_RM_VERSION_MISMATCH (18)".to_string()
            )
        );
        assert_eq!(
            BackendError::NoPermission.nvml_start(),
            NvmlStart::Broken("nvmlInit_v2 returned NVML_ERROR_NO_PERMISSION (4)".to_string())
        );
        assert_eq!(
            BackendError::NotNvml {
                library: "/x.so".into(),
                symbol: "/x.so: undefined symbol: nvmlInit_v2".into()
            }
            .nvml_start(),
            NvmlStart::Broken(
                "failed to resolve nvmlInit_v2: /x.so: undefined symbol: nvmlInit_v2".to_string()
            )
        );
    }
}
