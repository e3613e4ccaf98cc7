//! The truthful API's errors (public as `hypomnesis::error::{Error, ParseError}`; upstream's
//! `HypomnesisError` is the compatible layer's, `compat::error`).
//!
//! [`Error`], the error of the truthful API ([`crate::Probe`], readers, estimators): every error
//! that concerns a file carries its path, and the kinds a caller acts on (a vanished process, a
//! permission problem, an absent backend, a device index out of range) are separate variants so
//! they can be matched without parsing text. [`ParseError`] is a parser's, before the edge
//! (`fsread`) attaches the path.
//!
//! The `Display` text is a one-line English message meant for humans; its wording is not part of
//! the API. Match on the variants and their fields instead.
//!
//! Paths and parser messages quote what files hold (a shard name, a dtype, a GGUF key): the
//! fields keep that text as it is, and [`Error`]'s and [`ParseError`]'s `Display` escape every
//! control character in it (`\xNN`, as process names are: `ProcessName::escape_str`), so no
//! escape sequence from a file reaches a terminal through a message.

use std::io;
use std::path::{Path, PathBuf};

/// Everything that can go wrong in this library.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The file or process does not exist (a process that exited is the common case; `ESRCH`
    /// is mapped here too).
    #[error("{}: not found", shown(path))]
    NotFound {
        /// The path that was read.
        path: PathBuf,
    },
    /// The file exists but may not be read by this user.
    #[error("{}: permission denied", shown(path))]
    PermissionDenied {
        /// The path that was read.
        path: PathBuf,
    },
    /// Any other I/O failure on a file.
    #[error("{}: {source}", shown(path))]
    Io {
        /// The path that was read.
        path: PathBuf,
        /// The underlying error.
        source: io::Error,
    },
    /// A file was read but its content was not in the expected format.
    #[error("{}{}: {}", shown(path), line.map(|l| format!(":{l}")).unwrap_or_default(), escape(message))]
    Parse {
        /// The path that was read (or a description of the input, such as a command line).
        path: PathBuf,
        /// The 1-based line where the problem was found, when known.
        line: Option<usize>,
        /// What was wrong.
        message: String,
    },
    /// A file is larger than the limit set for its kind; it was not read past the limit.
    #[error("{}: larger than {limit} bytes", shown(path))]
    TooLarge {
        /// The path that was read.
        path: PathBuf,
        /// The limit, in bytes.
        limit: u64,
    },
    /// Something other than a regular file (a FIFO, a device node, a socket, a directory) where
    /// a file is expected; it was not read, so it cannot block or stream without end.
    #[error("{}: not a regular file ({kind})", shown(path))]
    NotAFile {
        /// The path that was opened.
        path: PathBuf,
        /// What it is (`fifo`, `character device`, …).
        kind: &'static str,
    },
    /// A GPU backend is not available on this machine (library missing, driver not loaded).
    #[error("{backend}: {reason}")]
    BackendAbsent {
        /// The backend.
        backend: crate::types::backend::Backend,
        /// Why it is absent, as a value.
        cause: crate::types::backend::BackendCause,
        /// Why it is absent, in words.
        reason: String,
    },
    /// No GPU could be found by any backend; each backend's cause and reason is listed.
    #[error("no GPU found ({})", format_reasons(reasons))]
    NoGpu {
        /// Each backend that was tried: its cause (matchable) and reason (text).
        reasons: Vec<crate::types::backend::BackendProblem>,
    },
    /// A device index beyond the number of devices.
    #[error("device index {index} out of range (have {count} device{})", if *count == 1 { "" } else { "s" })]
    DeviceIndexOutOfRange {
        /// The index asked for.
        index: u32,
        /// How many devices there are.
        count: u32,
    },
    /// A device exists but could not be read.
    #[error("GPU {index}: {reason}")]
    DeviceUnreadable {
        /// The device index.
        index: u32,
        /// Why it could not be read.
        reason: String,
    },
    /// A call into a GPU driver library failed.
    #[error("{call} failed: {message}")]
    Driver {
        /// The function that failed (for example `nvmlDeviceGetMemoryInfo_v2`).
        call: String,
        /// The driver's message.
        message: String,
    },
    /// A subprocess (such as `nvidia-smi`) did not finish in time and was killed.
    #[error("{command} did not answer within {timeout_ms} ms and was killed")]
    Timeout {
        /// The command that was run.
        command: String,
        /// The time limit, in milliseconds.
        timeout_ms: u64,
    },
    /// The operation is not supported on this platform or by this backend.
    #[error("unsupported: {0}")]
    Unsupported(String),
}

/// Text from a file, for a message: each control character escaped.
fn escape(text: &str) -> String {
    crate::types::name::ProcessName::escape_str(text)
}

/// A path, for a message: each control character escaped.
fn shown(path: &Path) -> String {
    escape(&path.display().to_string())
}

fn format_reasons(reasons: &[crate::types::backend::BackendProblem]) -> String {
    reasons
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// `ESRCH`: a process that vanished between the open and the read of its procfs file (POSIX;
/// Windows reports a vanished path as `NotFound` already).
fn is_esrch(err: &io::Error) -> bool {
    #[cfg(unix)]
    return err.raw_os_error() == Some(nix::libc::ESRCH);
    #[cfg(not(unix))]
    return {
        let _ = err;
        false
    };
}

impl Error {
    /// Classifies an I/O error on `path` into [`Error::NotFound`], [`Error::PermissionDenied`]
    /// or [`Error::Io`].
    pub fn from_io(path: impl AsRef<Path>, err: io::Error) -> Self {
        let path = path.as_ref().to_path_buf();
        match err.kind() {
            io::ErrorKind::NotFound => Error::NotFound { path },
            io::ErrorKind::PermissionDenied => Error::PermissionDenied { path },
            _ if is_esrch(&err) => Error::NotFound { path },
            _ => Error::Io { path, source: err },
        }
    }

    /// A parse error at `path` (and `line`, 1-based, when known).
    pub fn parse(path: impl AsRef<Path>, line: Option<usize>, message: impl Into<String>) -> Self {
        Error::Parse {
            path: path.as_ref().to_path_buf(),
            line,
            message: message.into(),
        }
    }

    /// True when the error means "the thing is gone" (a vanished process, a missing file).
    pub fn is_not_found(&self) -> bool {
        matches!(self, Error::NotFound { .. })
    }

    /// True when the error is a permission problem.
    pub fn is_permission_denied(&self) -> bool {
        matches!(self, Error::PermissionDenied { .. })
    }
}

/// A parse failure inside a pure parser, before the path is known; the I/O edge attaches the
/// path with [`ParseError::at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// The 1-based line, when the parser knows it.
    pub line: Option<usize>,
    /// What was wrong.
    pub message: String,
}

impl ParseError {
    /// A parse error without a line number.
    pub fn new(message: impl Into<String>) -> Self {
        ParseError {
            line: None,
            message: message.into(),
        }
    }

    /// A parse error on a 1-based line.
    pub fn on_line(line: usize, message: impl Into<String>) -> Self {
        ParseError {
            line: Some(line),
            message: message.into(),
        }
    }

    /// Attaches the path of the input and turns this into an [`Error`].
    pub fn at(self, path: impl AsRef<Path>) -> Error {
        Error::parse(path, self.line, self.message)
    }
}

impl std::fmt::Display for ParseError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "line {l}: {}", escape(&self.message)),
            None => f.write_str(&escape(&self.message)),
        }
    }
}

impl std::error::Error for ParseError {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn io_errors_are_classified() {
        let nf = Error::from_io("/proc/1/status", io::Error::from(io::ErrorKind::NotFound));
        assert!(nf.is_not_found());
        let pd = Error::from_io("/x", io::Error::from(io::ErrorKind::PermissionDenied));
        assert!(pd.is_permission_denied());
        let srch = Error::from_io("/x", io::Error::from_raw_os_error(nix::libc::ESRCH));
        assert!(srch.is_not_found(), "ESRCH means the process vanished");
        let other = Error::from_io("/x", io::Error::from_raw_os_error(nix::libc::EIO));
        assert!(matches!(other, Error::Io { .. }));
    }

    #[test]
    fn messages_are_one_line_and_name_the_input() {
        let e = Error::parse("/proc/meminfo", Some(3), "bad number \"x\"");
        assert_eq!(e.to_string(), "/proc/meminfo:3: bad number \"x\"");
        use crate::types::backend::{Backend, BackendCause, BackendProblem};
        let e = Error::NoGpu {
            reasons: vec![
                BackendProblem::new(
                    Backend::Nvml,
                    BackendCause::LibraryMissing,
                    "library not found",
                ),
                BackendProblem::new(
                    Backend::NvidiaSmi,
                    BackendCause::LibraryMissing,
                    "not on PATH",
                ),
            ],
        };
        assert_eq!(
            e.to_string(),
            "no GPU found (NVML: library not found; nvidia-smi: not on PATH)"
        );
        let e = Error::DeviceIndexOutOfRange { index: 3, count: 1 };
        assert_eq!(e.to_string(), "device index 3 out of range (have 1 device)");
    }

    #[test]
    fn text_from_files_is_escaped_in_every_message() {
        let hostile = "\x1b]2;pwned\x07\u{9b}31m\x7f\r\n";
        let path = PathBuf::from(format!("/models/{hostile}.safetensors"));
        let errors = [
            Error::parse(&path, Some(2), format!("unknown variant `{hostile}`")),
            ParseError::new(format!("dtype {hostile}")).at(&path),
            Error::from_io(&path, io::Error::from(io::ErrorKind::NotFound)),
            Error::from_io(&path, io::Error::from(io::ErrorKind::PermissionDenied)),
            Error::from_io(&path, io::Error::from_raw_os_error(nix::libc::EIO)),
            Error::TooLarge {
                path: path.clone(),
                limit: 1,
            },
            Error::NotAFile {
                path: path.clone(),
                kind: "fifo",
            },
        ];
        for e in &errors {
            let text = e.to_string();
            assert!(
                !text.chars().any(char::is_control),
                "a control character in {text:?}"
            );
            assert!(text.contains("\\x1b]2;pwned\\x07\\x9b31m\\x7f"), "{text}");
        }
        // The fields keep the text as it was.
        match &errors[0] {
            Error::Parse {
                path: p, message, ..
            } => {
                assert_eq!(p, &path);
                assert!(message.contains(hostile));
            }
            e => panic!("{e:?}"),
        }
        let e = ParseError::on_line(1, hostile);
        assert_eq!(e.message, hostile);
        assert!(!e.to_string().chars().any(char::is_control), "{e}");
    }
}
