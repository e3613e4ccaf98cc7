//! The stop flag of hmn's long-running commands (`watch`, `record`, `top`): set by Ctrl+C,
//! SIGTERM and, on Unix, SIGHUP (a closed terminal or a job scheduler ends them like Ctrl+C:
//! with their summary, their file renamed into place), and [`sleep_or_stop`], a wait it cuts
//! short; and [`on_stop`], the same signals and SIGQUIT handed to a thread of their own
//! (`top`). Platform seam: Windows has no SIGHUP.

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

/// Sleeps `interval` in short steps; true when a stop was requested.
pub fn sleep_or_stop(interval: std::time::Duration, stop: &AtomicBool) -> bool {
    let deadline = std::time::Instant::now() + interval;
    while std::time::Instant::now() < deadline {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            return true;
        }
        std::thread::sleep(
            (deadline - std::time::Instant::now()).min(std::time::Duration::from_millis(50)),
        );
    }
    stop.load(std::sync::atomic::Ordering::Relaxed)
}

/// Runs `on_stop` on a thread of its own at the first stop signal — SIGINT, SIGTERM and, on
/// Unix, SIGHUP and SIGQUIT (whose default action, a core dump, would leave a terminal in raw
/// mode) — whatever the other threads are doing. For a command that must end within a bound
/// even when its main thread is stuck (`top`: `on_stop` tells the UI, then forces the exit).
/// Windows, which has no signal iterator: the stop flag of [`stop_flag`], looked at every
/// 100 ms.
///
/// # Errors
/// When a handler or the thread cannot be installed.
#[cfg(feature = "top")]
pub fn on_stop(on_stop: impl FnOnce(i32) + Send + 'static) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
        std::thread::Builder::new()
            .name("hmn-signals".to_string())
            .spawn(move || {
                if let Some(sig) = signals.forever().next() {
                    on_stop(sig);
                }
            })?;
    }
    #[cfg(not(unix))]
    {
        use std::sync::atomic::Ordering;
        let stop = stop_flag()?;
        std::thread::Builder::new()
            .name("hmn-signals".to_string())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(std::time::Duration::from_millis(100));
                }
                on_stop(signal_hook::consts::SIGTERM);
            })?;
    }
    Ok(())
}
