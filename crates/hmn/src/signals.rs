//! The stop flag of hmn's long-running commands (`watch`, `record`, `top`): set by Ctrl+C,
//! SIGTERM and, on Unix, SIGHUP (a closed terminal or a job scheduler ends them like Ctrl+C:
//! with their summary, their file renamed into place). Platform seam: Windows has no SIGHUP.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// A flag that becomes `true` at the first stop signal (the default action of those signals is
/// replaced: hmn ends on its own terms).
///
/// # Errors
/// When a handler cannot be installed.
pub fn stop_flag() -> std::io::Result<Arc<AtomicBool>> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    #[cfg(unix)]
    let signals = [SIGINT, SIGTERM, signal_hook::consts::SIGHUP];
    #[cfg(not(unix))]
    let signals = [SIGINT, SIGTERM];
    let stop = Arc::new(AtomicBool::new(false));
    for sig in signals {
        signal_hook::flag::register(sig, Arc::clone(&stop))?;
    }
    Ok(stop)
}
