//! The Windows side of [`super`]: finding the command (`PATH` × `PATHEXT`, as `cmd.exe`
//! does), its exit code, and surviving Ctrl+C while it runs.
//!
//! - **Exit codes.** A Windows exit code is 32 bits; `hmn` can exit with 0–255 only. A code in
//!   0–255 passes through unchanged; any other (an `NTSTATUS` such as `0xC0000005`, access
//!   violation, or a code above 255) becomes **1**, as upstream `hmn spill` maps it, and the
//!   report states the original code. There are no signals: `signal` is always `None`.
//! - **Ctrl+C / Ctrl+Break.** The command shares `hmn`'s console, so the console delivers the
//!   event to it directly (as a Unix terminal does through the process group); `hmn` installs
//!   a console control handler (the `ctrlc` crate, `SetConsoleCtrlHandler`) that keeps it
//!   alive so it can write the report once the command ends. Nothing is sent a second time,
//!   so the report's forwarded list stays empty.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::atomic::{AtomicBool, Ordering};

use super::status::{Exit, SpawnError};

/// The extensions tried for a bare name, from `PATHEXT` (default `.COM;.EXE;.BAT;.CMD`).
fn extensions() -> Vec<OsString> {
    let raw = std::env::var_os("PATHEXT").unwrap_or_else(|| OsString::from(".COM;.EXE;.BAT;.CMD"));
    raw.to_string_lossy()
        .split(';')
        .filter(|e| !e.is_empty())
        .map(OsString::from)
        .collect()
}

/// The candidates for `p` in one directory: as given when it has an extension, then with each
/// `PATHEXT` extension.
fn candidates(dir: &Path, p: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if p.extension().is_some() {
        out.push(dir.join(p));
    }
    for ext in extensions() {
        let mut name = p.as_os_str().to_os_string();
        name.push(&ext);
        out.push(dir.join(name));
    }
    out
}

/// Finds the program as `cmd.exe` would: a path (with `\\`, `/` or a drive) as is, else the
/// first match in the current directory's absence, on `PATH`, trying `PATHEXT`.
pub fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let err = |not_found, detail: &str| SpawnError {
        program: program.to_string_lossy().into_owned(),
        not_found,
        detail: detail.to_string(),
    };
    // An empty name is no command (joined to a directory it would name the directory).
    if program.is_empty() {
        return Err(err(true, "command not found"));
    }
    let p = Path::new(program);
    let is_file = |c: &Path| std::fs::metadata(c).is_ok_and(|m| m.is_file());
    let is_path = p.components().count() > 1 || p.is_absolute();
    if is_path {
        let dir = p.parent().unwrap_or(Path::new(""));
        let name = Path::new(p.file_name().unwrap_or_default());
        if p.is_dir() {
            return Err(err(false, "is a directory"));
        }
        return candidates(dir, name)
            .into_iter()
            .find(|c| is_file(c))
            .ok_or_else(|| err(true, "no such file or directory"));
    }
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .flat_map(|dir| candidates(&dir, p))
        .find(|c| is_file(c))
        .ok_or_else(|| err(true, "command not found"))
}

/// The command's exit code (see the module docs for codes outside 0–255).
pub fn exit_code(status: ExitStatus) -> Exit {
    match status.code() {
        Some(c) => Exit {
            code: u8::try_from(c).unwrap_or(1),
            signal: None,
        },
        None => Exit {
            code: 1,
            signal: None,
        },
    }
}

/// Set while a command runs: Ctrl+C and Ctrl+Break then leave `hmn` alive.
static RUNNING: AtomicBool = AtomicBool::new(false);

/// Keeps `hmn` alive through Ctrl+C while the command runs (module docs).
pub struct SignalForwarder {}

impl SignalForwarder {
    /// Installs the console control handler (once per process).
    ///
    /// # Errors
    /// The handler could not be installed.
    pub fn install() -> std::io::Result<SignalForwarder> {
        static INSTALLED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
        INSTALLED
            .get_or_init(|| {
                ctrlc::set_handler(|| {
                    if !RUNNING.load(Ordering::SeqCst) {
                        std::process::exit(130);
                    }
                })
                .map_err(|e| e.to_string())
            })
            .clone()
            .map_err(std::io::Error::other)?;
        RUNNING.store(true, Ordering::SeqCst);
        Ok(SignalForwarder {})
    }

    /// Nothing to record: the console reaches the command itself.
    pub fn forward_to(&self, _pid: u32) {}

    /// Stops surviving Ctrl+C; nothing was forwarded (module docs).
    pub fn finish(self) -> Vec<i32> {
        RUNNING.store(false, Ordering::SeqCst);
        Vec::new()
    }
}
