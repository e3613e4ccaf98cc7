//! One process's `stat`, read: `<proc>/<pid>/stat` under a proc root, or the platform's own
//! calls for the system roots on Windows and macOS (platform seam). Public as
//! `hypomnesis::process::tree::read_stat`.

use super::stat::{Stat, parse_stat_bytes};
use crate::system::fsread;
use crate::system::roots::Roots;
use crate::types::error::Error;

/// Reads and parses `<proc>/<pid>/stat`.
///
/// # Errors
/// [`Error::NotFound`] when the process is gone; [`Error::Parse`] on a malformed file.
pub fn read_stat(roots: &Roots, pid: u32) -> Result<Stat, Error> {
    #[cfg(any(windows, target_os = "macos"))]
    if roots.is_system() {
        return super::native::read_stat(pid);
    }
    fsread::read_pid_bytes(roots, pid, "stat", parse_stat_bytes)
}
