//! One process's `stat`, read: `<proc>/<pid>/stat` under a proc root, or the platform's own
//! calls for the system roots on Windows and macOS (platform seam). Public as
//! `hypomnesis::process::tree::read_stat`, and [`StatReader`] for a caller that reads the same
//! processes again and again (files kept open, one `pread` each).

use super::stat::{Stat, parse_stat_bytes};
use crate::system::fsread::{self, Cap};
use crate::system::kept::KeptByPid;
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

/// Reads processes' `stat` in rounds (one per sample), keeping each file open between rounds:
/// one `pread` per reading on procfs instead of open + read + close. A file is closed at the
/// end of the first round that did not read it ([`StatReader::end_round`]); a process that has
/// exited is never read through its kept file (its pid is opened afresh, so a reused pid reads
/// the new process). A fixture tree is read as [`read_stat`] reads it.
#[derive(Debug)]
pub struct StatReader {
    kept: KeptByPid,
    /// The system roots on Windows/macOS: the platform's own calls.
    #[cfg(any(windows, target_os = "macos"))]
    native: bool,
}

impl StatReader {
    /// A reader of `<proc>/<pid>/stat` under `roots`.
    #[must_use]
    pub fn new(roots: &Roots) -> StatReader {
        StatReader {
            kept: KeptByPid::new(roots.clone(), "stat", Cap::STAT),
            #[cfg(any(windows, target_os = "macos"))]
            native: roots.is_system(),
        }
    }

    /// As [`read_stat`].
    ///
    /// # Errors
    /// As [`read_stat`].
    pub fn read(&mut self, pid: u32) -> Result<Stat, Error> {
        #[cfg(any(windows, target_os = "macos"))]
        if self.native {
            return super::native::read_stat(pid);
        }
        let bytes = self.kept.read(pid)?;
        parse_stat_bytes(&bytes).map_err(|e| e.at(self.kept.path(pid)))
    }

    /// Ends a round: closes the files of the pids not read since the last call.
    pub fn end_round(&mut self) {
        self.kept.end_round();
    }

    /// How many `stat` files are kept open.
    #[must_use]
    pub fn kept(&self) -> usize {
        self.kept.kept()
    }
}
