//! Upstream's `hypomnesis::ram`: the calling process's resident memory.

use crate::compat::error::{HypomnesisError, Result};
use crate::probe::shared_probe;

/// The calling process's resident set size in bytes (upstream's `process_rss`).
///
/// Read from `/proc/self/statm` through the shared [`crate::Probe`] (one `pread` of a file kept
/// open); the same counter as upstream's `VmRSS` from `/proc/self/status`.
///
/// # Errors
/// [`HypomnesisError::Ram`] when the file cannot be read or parsed.
pub fn process_rss() -> Result<u64> {
    shared_probe()
        .own_rss()
        .map_err(|e| HypomnesisError::Ram(e.to_string()))
}
