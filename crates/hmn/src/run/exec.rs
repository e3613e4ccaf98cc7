//! Running the command, for `hmn run` and `hmn spill`: finding it on `PATH` (so "not found" is
//! 127 and "not executable" 126, as shells do), forwarding signals, and the exit status (a
//! shell's, or upstream `hmn spill`'s). Starting it as a job of its own: [`super::job`].
//!
//! Platform seam: the POSIX items below are `cfg(unix)`; their Windows counterparts (PATHEXT
//! resolution, exit codes, Ctrl+C) are in `exec/windows.rs` with the same names.

#[cfg(unix)]
use std::ffi::OsStr;
#[cfg(unix)]
use std::ffi::OsString;
#[cfg(unix)]
use std::os::unix::fs::PermissionsExt;
#[cfg(unix)]
use std::os::unix::process::ExitStatusExt;
#[cfg(unix)]
use std::path::{Path, PathBuf};
#[cfg(unix)]
use std::process::ExitStatus;
#[cfg(unix)]
use std::sync::atomic::{AtomicU32, Ordering};
#[cfg(unix)]
use std::sync::{Arc, Mutex};
#[cfg(unix)]
use std::thread::JoinHandle;

#[cfg(unix)]
use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
#[cfg(unix)]
use signal_hook::iterator::exfiltrator::WithOrigin;
#[cfg(unix)]
use signal_hook::iterator::{Handle, SignalsInfo};
#[cfg(unix)]
use signal_hook::low_level::siginfo::Cause;

mod status;
#[cfg(windows)]
mod windows;
pub use status::{Exit, SpawnError};
#[cfg(windows)]
pub use windows::{SignalForwarder, exit_code, resolve};

#[cfg(unix)]
fn executable(path: &Path) -> Result<(), String> {
    let md = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if md.is_dir() {
        return Err("is a directory".to_string());
    }
    if md.permissions().mode() & 0o111 == 0 {
        return Err("permission denied (not executable)".to_string());
    }
    Ok(())
}

/// Finds the program as the shell would: a name with a `/` as is, else the first executable
/// match on `PATH`.
#[cfg(unix)]
pub fn resolve(program: &OsStr) -> Result<PathBuf, SpawnError> {
    let err = |not_found, detail: String| SpawnError {
        program: program.to_string_lossy().into_owned(),
        not_found,
        detail,
    };
    // An empty name is no command (a shell: "command not found", 127); joined to a `PATH`
    // entry it would name the directory itself.
    if program.is_empty() {
        return Err(err(true, "command not found".to_string()));
    }
    let p = Path::new(program);
    if program.as_encoded_bytes().contains(&b'/') {
        if !p.exists() {
            return Err(err(true, "no such file or directory".to_string()));
        }
        return executable(p)
            .map(|()| p.to_path_buf())
            .map_err(|d| err(false, d));
    }
    let path =
        std::env::var_os("PATH").unwrap_or_else(|| OsString::from("/usr/local/bin:/usr/bin:/bin"));
    let mut denied = None;
    for dir in std::env::split_paths(&path) {
        let candidate = dir.join(p);
        if candidate.exists() {
            match executable(&candidate) {
                Ok(()) => return Ok(candidate),
                Err(d) => denied = denied.or(Some(d)),
            }
        }
    }
    match denied {
        Some(d) => Err(err(false, d)),
        None => Err(err(true, "command not found".to_string())),
    }
}

#[cfg(unix)]
pub fn exit_code(status: ExitStatus) -> Exit {
    match (status.code(), status.signal()) {
        (Some(c), _) => Exit {
            code: u8::try_from(c & 0xff).unwrap_or(1),
            signal: None,
        },
        (None, Some(sig)) => Exit {
            code: u8::try_from(128 + sig).unwrap_or(255),
            signal: Some(sig),
        },
        (None, None) => Exit {
            code: 1,
            signal: None,
        },
    }
}

/// Peak RSS of the largest waited-for child (the kernel's `ru_maxrss`, what GNU `time`
/// reports), in bytes.
#[cfg(unix)]
pub fn children_max_rss_bytes() -> Option<u64> {
    use nix::sys::resource::{UsageWho, getrusage};
    let kib = getrusage(UsageWho::RUSAGE_CHILDREN).ok()?.max_rss();
    u64::try_from(kib).ok().map(|k| k * 1024)
}

/// Forwards SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to hmn by another process (`kill`, a job
/// scheduler, a signal to hmn's process group) to the command, once: the command is in a
/// process group of its own ([`super::job`]), so a signal to hmn's group does not reach it
/// directly as well. Signals the kernel sends (a terminal's Ctrl+C reaches the command's group,
/// which holds the terminal) are not forwarded; hmn only survives them so it can write the
/// report.
#[cfg(unix)]
pub struct SignalForwarder {
    handle: Handle,
    child: Arc<AtomicU32>,
    forwarded: Arc<Mutex<Vec<i32>>>,
    thread: Option<JoinHandle<()>>,
}

#[cfg(unix)]
impl SignalForwarder {
    pub fn install() -> std::io::Result<SignalForwarder> {
        let mut signals = SignalsInfo::<WithOrigin>::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
        let handle = signals.handle();
        let child = Arc::new(AtomicU32::new(0));
        let forwarded = Arc::new(Mutex::new(Vec::new()));
        let (c, f) = (Arc::clone(&child), Arc::clone(&forwarded));
        let thread = std::thread::Builder::new()
            .name("hmn-signals".to_string())
            .spawn(move || {
                for origin in signals.forever() {
                    let pid = c.load(Ordering::SeqCst);
                    if pid == 0 || !matches!(origin.cause, Cause::Sent(_)) {
                        continue;
                    }
                    let (Ok(raw), Ok(sig)) = (
                        i32::try_from(pid),
                        nix::sys::signal::Signal::try_from(origin.signal),
                    ) else {
                        continue;
                    };
                    if nix::sys::signal::kill(nix::unistd::Pid::from_raw(raw), sig).is_ok() {
                        if let Ok(mut v) = f.lock() {
                            v.push(origin.signal);
                        }
                    }
                }
            })?;
        Ok(SignalForwarder {
            handle,
            child,
            forwarded,
            thread: Some(thread),
        })
    }

    pub fn forward_to(&self, pid: u32) {
        self.child.store(pid, Ordering::SeqCst);
    }

    /// Stops forwarding; returns the signals that were forwarded.
    pub fn finish(mut self) -> Vec<i32> {
        self.child.store(0, Ordering::SeqCst);
        self.handle.close();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        self.forwarded.lock().map(|v| v.clone()).unwrap_or_default()
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    #[test]
    fn resolution_like_a_shell() {
        assert!(resolve(OsStr::new("sh")).is_ok());
        let e = resolve(OsStr::new("surely-not-a-command-hmn")).unwrap_err();
        assert_eq!(e.exit_code(), 127);
        let e = resolve(OsStr::new("/nonexistent/x")).unwrap_err();
        assert_eq!(e.exit_code(), 127);
        let dir = tempfile::tempdir().unwrap();
        let plain = dir.path().join("data.txt");
        std::fs::write(&plain, "not a program").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
        let e = resolve(plain.as_os_str()).unwrap_err();
        assert_eq!(e.exit_code(), 126, "exists but is not executable");
        let e = resolve(dir.path().as_os_str()).unwrap_err();
        assert_eq!(e.exit_code(), 126, "a directory");
        let e = resolve(OsStr::new("")).unwrap_err();
        assert_eq!(e.exit_code(), 127, "an empty name");
        assert_eq!(e.to_string(), ": command not found");
    }

    #[test]
    fn exit_codes_like_a_shell() {
        assert_eq!(exit_code(ExitStatus::from_raw(3 << 8)).code, 3);
        assert_eq!(exit_code(ExitStatus::from_raw(255 << 8)).code, 255);
        let killed = exit_code(ExitStatus::from_raw(9));
        assert_eq!((killed.code, killed.signal), (137, Some(9)));
    }

    #[test]
    fn upstream_spill_codes() {
        let code = |raw| exit_code(ExitStatus::from_raw(raw)).upstream_code();
        assert_eq!(code(0), 0);
        assert_eq!(code(3 << 8), 3);
        assert_eq!(code(255 << 8), 255);
        assert_eq!(code(9), 1, "killed by SIGKILL");
        assert_eq!(code(15), 1, "killed by SIGTERM");
    }
}
