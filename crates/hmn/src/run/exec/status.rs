//! What became of starting the command, on every platform: [`SpawnError`] (it could not be
//! started) and [`Exit`] (its status as a shell reports it).

use std::ffi::OsStr;

/// Why the command could not be started.
#[derive(Debug)]
pub struct SpawnError {
    pub(super) program: String,
    pub(super) not_found: bool,
    pub(super) detail: String,
}

impl SpawnError {
    /// 127 for "not found", 126 for "found but cannot be run", as shells use.
    pub fn exit_code(&self) -> u8 {
        if self.not_found { 127 } else { 126 }
    }

    pub fn from_io(program: &OsStr, e: &std::io::Error) -> SpawnError {
        SpawnError {
            program: program.to_string_lossy().into_owned(),
            not_found: e.kind() == std::io::ErrorKind::NotFound,
            detail: e.to_string(),
        }
    }
}

impl SpawnError {
    /// Upstream `hmn spill`'s wording: `failed to spawn "PROGRAM": DETAIL`.
    pub fn upstream_message(&self) -> String {
        format!(
            "failed to spawn \"{}\": {}",
            crate::format::sanitize(&self.program),
            self.detail
        )
    }
}

impl std::fmt::Display for SpawnError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: {}",
            crate::format::sanitize(&self.program),
            self.detail
        )
    }
}

/// The command's status as a shell reports it: its exit code, or 128 + the signal that
/// killed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Exit {
    pub code: u8,
    pub signal: Option<i32>,
}

impl Exit {
    /// Upstream `hmn spill`'s exit code for this status: the command's own code (0–255)
    /// unchanged, and 1 for a command killed by a signal (a shell's 128 + N could be mistaken
    /// for a code the command chose).
    pub fn upstream_code(self) -> u8 {
        if self.signal.is_some() { 1 } else { self.code }
    }
}
