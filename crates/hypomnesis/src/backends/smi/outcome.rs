//! What a bounded run of a child gives, whichever runner ran it (`child.rs` on Linux,
//! `child_portable.rs` elsewhere): [`Finished`] or [`RunError`].

use std::io;
use std::process::ExitStatus;

/// What a finished child left.
#[derive(Debug)]
pub(crate) struct Finished {
    pub status: ExitStatus,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
}

/// Why a run gave no [`Finished`].
#[derive(Debug)]
pub(crate) enum RunError {
    /// The program could not be started.
    Spawn(io::Error),
    /// It did not finish before the deadline; it was killed (its process group on Linux, its
    /// Job object on Windows).
    Timeout,
    /// It wrote more than the output limit; it was killed the same way.
    TooMuchOutput,
    /// Waiting for it failed.
    Wait(io::Error),
}
