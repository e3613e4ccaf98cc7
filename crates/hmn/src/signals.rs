//! The stop flag of hmn's long-running commands (`watch`, `pick --wait`): set by Ctrl+C,
//! SIGTERM and, on Unix, SIGHUP (a closed terminal or a job scheduler ends them like Ctrl+C:
//! with their summary); [`Stop`], that flag with a wait the signal cuts short (`watch`);
//! [`on_stop`], the same signals and SIGQUIT handed to a thread of their own (`top`); and
//! [`on_each_stop`], every one of them, SIGQUIT included, handed to a callback (`record`, whose
//! main thread waits on one channel for a sample, the stop or its deadline). Platform seam:
//! Windows has no SIGHUP, SIGQUIT nor signal iterator.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

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

/// The stop flag with a bell: [`Stop::sleep`] wakes at the stop signal itself rather than
/// looking at the flag every few milliseconds. Unix: a thread of its own waits for the
/// signals and rings; Windows (no signal iterator): the sleep looks every 50 ms.
pub struct Stop {
    flag: Arc<AtomicBool>,
    bell: Arc<(Mutex<()>, Condvar)>,
}

/// [`stop_flag`] with a bell ([`Stop`]).
///
/// # Errors
/// When a handler or the thread cannot be installed.
pub fn stop() -> std::io::Result<Stop> {
    let stop = Stop {
        flag: stop_flag()?,
        bell: Arc::new((Mutex::new(()), Condvar::new())),
    };
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP])?;
        let bell = Arc::clone(&stop.bell);
        std::thread::Builder::new()
            .name("hmn-stop".to_string())
            .spawn(move || {
                // The flag's own handler has run by now; every later signal rings again.
                for _ in signals.forever() {
                    ring(&bell);
                }
            })?;
    }
    Ok(stop)
}

#[cfg(any(unix, test))]
fn ring(bell: &(Mutex<()>, Condvar)) {
    // Taken so that a sleeper between its look at the flag and its wait cannot miss it.
    let _held = bell.0.lock().unwrap_or_else(PoisonError::into_inner);
    bell.1.notify_all();
}

impl Stop {
    /// Asks for the stop as a signal would (tests).
    #[cfg(test)]
    fn request(&self) {
        self.flag.store(true, Ordering::Relaxed);
        ring(&self.bell);
    }

    /// Sleeps up to `interval`; `true` (at once) when a stop was requested.
    pub fn sleep(&self, interval: Duration) -> bool {
        let deadline = Instant::now() + interval;
        let (lock, bell) = &*self.bell;
        let mut held = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.flag.load(Ordering::Relaxed) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            let step = deadline - now;
            #[cfg(not(unix))]
            let step = step.min(Duration::from_millis(50));
            held = bell
                .wait_timeout(held, step)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// Runs `on_stop` on a thread of its own at the first stop signal — SIGINT, SIGTERM and, on
/// Unix, SIGHUP and SIGQUIT (whose default action, a core dump, would leave a terminal in raw
/// mode) — whatever the other threads are doing. For a command that must end within a bound
/// even when its main thread is stuck (`top`: `on_stop` tells the UI, then forces the exit).
/// [`on_each_stop`] with the later signals caught and left alone.
/// Windows, which has no signal iterator: the stop flag of [`stop_flag`], looked at every
/// 100 ms.
///
/// # Errors
/// When a handler or the thread cannot be installed.
#[cfg(feature = "top")]
pub fn on_stop(on_stop: impl FnOnce(i32) + Send + 'static) -> std::io::Result<()> {
    let mut once = Some(on_stop);
    on_each_stop(move |sig| {
        if let Some(f) = once.take() {
            f(sig);
        }
    })
}

/// Calls `on_signal` with the signal's number, on a thread of its own, at every stop signal —
/// SIGINT, SIGTERM and, on Unix, SIGHUP and SIGQUIT (whose default actions, an end without a
/// word or a core dump, would leave a recording under its temporary name) — for as long as the
/// process runs: the handlers stay, so a second Ctrl+C while the first is being handled is
/// one more call, not the default action. For a command whose main thread waits for its own
/// events and must end on time whatever its other threads do (`record`: the callback sends the
/// stop on the channel the samples arrive on). Windows, which has no signal iterator: the stop
/// flag of [`stop_flag`], looked at every 100 ms, one call.
///
/// # Errors
/// When a handler or the thread cannot be installed.
pub fn on_each_stop(mut on_signal: impl FnMut(i32) + Send + 'static) -> std::io::Result<()> {
    #[cfg(unix)]
    {
        use signal_hook::consts::{SIGHUP, SIGINT, SIGQUIT, SIGTERM};
        let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM, SIGHUP, SIGQUIT])?;
        std::thread::Builder::new()
            .name("hmn-signals".to_string())
            .spawn(move || {
                for sig in signals.forever() {
                    on_signal(sig);
                }
            })?;
    }
    #[cfg(not(unix))]
    {
        let stop = stop_flag()?;
        std::thread::Builder::new()
            .name("hmn-signals".to_string())
            .spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                }
                on_signal(signal_hook::consts::SIGTERM);
            })?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stop_ends_a_long_sleep_and_a_short_one_runs_out() {
        let stop = Stop {
            flag: Arc::new(AtomicBool::new(false)),
            bell: Arc::new((Mutex::new(()), Condvar::new())),
        };
        assert!(
            !stop.sleep(Duration::from_millis(1)),
            "no stop: the time runs out"
        );
        std::thread::scope(|s| {
            s.spawn(|| {
                std::thread::sleep(Duration::from_millis(50));
                stop.request();
            });
            let t = Instant::now();
            assert!(stop.sleep(Duration::from_secs(600)));
            assert!(t.elapsed() < Duration::from_secs(60), "{:?}", t.elapsed());
        });
        assert!(
            stop.sleep(Duration::from_secs(600)),
            "once stopped, at once"
        );
    }
}
