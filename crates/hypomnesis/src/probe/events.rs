//! XID events while a program watches: [`XidEvents`], from [`Probe::xid_events`] — NVML's
//! event set over every NVIDIA device, waited on by a thread the caller owns (the library
//! starts none). Counts are "since the watcher started", never since boot: NVML records no
//! event from before a set was registered.
//!
//! ```no_run
//! use std::sync::{Mutex, atomic::AtomicBool};
//! let probe = hypomnesis::Probe::new();
//! let mut events = probe.xid_events();
//! let tally = Mutex::new(events.tally());
//! let stop = AtomicBool::new(false);
//! std::thread::scope(|s| {
//!     s.spawn(|| events.count_until(&stop, &tally));
//!     // … collect, read `tally` …
//!     stop.store(true, std::sync::atomic::Ordering::Relaxed); // noticed within 250 ms
//! });
//! ```

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use super::Probe;
use crate::types::{QueryError, XidEvent, XidTally, XidUncounted};

/// The longest a [`XidEvents::wait`] sleeps: a stop flag is noticed within this.
pub const XID_WAIT: Duration = Duration::from_millis(250);

enum Inner<'p> {
    #[cfg(feature = "nvml")]
    Nvml(crate::backends::nvml::health::Events<'p>),
    Unavailable(XidUncounted, std::marker::PhantomData<&'p ()>),
}

/// XID events of every NVIDIA device (see the [module docs](self)). `Send`, not `Sync`: one
/// thread waits on it. Freed (the event set) when dropped, before its probe can be.
pub struct XidEvents<'p> {
    inner: Inner<'p>,
}

impl std::fmt::Debug for XidEvents<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XidEvents")
            .field("unavailable", &self.unavailable())
            .field("unsupported", &self.unsupported())
            .finish()
    }
}

impl XidEvents<'_> {
    /// Why no event can be counted at all (no NVML, not Linux, the set could not be made).
    pub fn unavailable(&self) -> Option<&XidUncounted> {
        match &self.inner {
            #[cfg(feature = "nvml")]
            Inner::Nvml(_) => None,
            Inner::Unavailable(why, _) => Some(why),
        }
    }

    /// Devices whose events cannot be counted, with the reason.
    pub fn unsupported(&self) -> BTreeMap<u32, XidUncounted> {
        match &self.inner {
            #[cfg(feature = "nvml")]
            Inner::Nvml(e) => e.unsupported.clone(),
            Inner::Unavailable(..) => BTreeMap::new(),
        }
    }

    /// An empty tally starting now, with what cannot be counted already said.
    pub fn tally(&self) -> XidTally {
        let mut t = XidTally::new(now_ms());
        t.unavailable = self.unavailable().cloned();
        t.unknown = self.unsupported();
        t
    }

    /// Waits up to `timeout` (at most [`XID_WAIT`]) for one XID event: `Ok(None)` when none
    /// arrived (or none can).
    ///
    /// # Errors
    /// The driver's error ([`QueryError::GpuLost`]: a GPU that fell off the bus makes every
    /// wait fail).
    pub fn wait(&mut self, timeout: Duration) -> Result<Option<XidEvent>, QueryError> {
        match &mut self.inner {
            #[cfg(feature = "nvml")]
            Inner::Nvml(e) => e.wait(timeout),
            Inner::Unavailable(..) => {
                std::thread::sleep(timeout.min(XID_WAIT));
                Ok(None)
            }
        }
    }

    /// Counts events into `tally` until `stop` is set: returns within [`XID_WAIT`] of it (a
    /// second after a failed wait, which it records in `tally.last_error` and backs off from).
    /// At once when no event can be counted.
    pub fn count_until(&mut self, stop: &AtomicBool, tally: &Mutex<XidTally>) {
        self.count_until_waiting(stop, tally, XID_WAIT);
    }

    /// As [`XidEvents::count_until`], each wait lasting up to `wait` (an event ends it at
    /// once): a counter whose stop need not be noticed quickly wakes less often (`hmn top`,
    /// which exits without joining it, waits 10 s at a time).
    pub fn count_until_waiting(
        &mut self,
        stop: &AtomicBool,
        tally: &Mutex<XidTally>,
        wait: Duration,
    ) {
        match &mut self.inner {
            #[cfg(feature = "nvml")]
            Inner::Nvml(e) => e.count_until(stop, tally, wait),
            Inner::Unavailable(why, _) => {
                let _ = (stop, wait);
                if let Ok(mut t) = tally.lock() {
                    t.unavailable = Some(why.clone());
                }
            }
        }
    }
}

impl Probe {
    /// XID events of every NVIDIA device ([`XidEvents`]). Without NVML (or off Linux) every
    /// wait times out and [`XidEvents::unavailable`] says why.
    pub fn xid_events(&self) -> XidEvents<'_> {
        let unavailable = |why: XidUncounted| XidEvents {
            inner: Inner::Unavailable(why, std::marker::PhantomData),
        };
        match self.nvml_slot() {
            #[cfg(feature = "nvml")]
            Ok(nvml) => match nvml.events() {
                Ok(e) => XidEvents {
                    inner: Inner::Nvml(e),
                },
                Err(why) => unavailable(why),
            },
            #[cfg(not(feature = "nvml"))]
            Ok(never) => match *never {},
            Err(e) => unavailable(e.xid_uncounted()),
        }
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}
