//! The words for memory no process accounts for and for XID events, shared by `ps`, `top`,
//! `serve` and `watch`, the thread that counts XID events while one of them runs, and the clock
//! their stamps are read from ([`now_ms`], `top`'s too). The rules are the library's
//! ([`Unattributed`], [`XidTally`]); this only says them and starts the counter.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hypomnesis::types::{Bound, xid_meaning};
use hypomnesis::{Probe, ProbeOptions, Unattributed, XidTally, XidUncounted};

use crate::format::{bytes, sanitize};

/// One device's unattributed figure: `GPU 0 1.2 GiB`, `GPU 0 at most 1.2 GiB`, `GPU 0
/// unknown (why)`, with the causes the listing shows.
pub fn unattributed_cell(u: &Unattributed) -> String {
    let figure = unattributed_figure(u);
    let causes: Vec<String> = u.causes.iter().map(|c| c.describe()).collect();
    if causes.is_empty() || u.bytes == Some(0) {
        format!("GPU {} {figure}", u.device_index)
    } else {
        format!("GPU {} {figure} ({})", u.device_index, causes.join(", "))
    }
}

/// The figure alone: `1.2 GiB`, `at most 1.2 GiB` (a row's figure is unknown), `unknown (why)`.
pub fn unattributed_figure(u: &Unattributed) -> String {
    match (u.bytes, u.bound) {
        (Some(b), Some(Bound::AtMost)) => format!("at most {}", bytes(b)),
        (Some(b), _) => bytes(b),
        (None, _) => format!(
            "unknown ({})",
            sanitize(u.reason.as_deref().unwrap_or("no reason given"))
        ),
    }
}

/// The line naming memory no listed process accounts for, on the devices where it is known and
/// not zero (JSON carries every device, an unknown figure with its reason).
pub fn unattributed_line(all: &[Unattributed]) -> Option<String> {
    let shown: Vec<String> = all
        .iter()
        .filter(|u| u.bytes.is_some_and(|b| b > 0))
        .map(unattributed_cell)
        .collect();
    (!shown.is_empty()).then(|| {
        format!(
            "unattributed (device used less the processes listed): {}",
            shown.join("; ")
        )
    })
}

/// `XID 79 (GPU has fallen off the bus)`, or `XID 5` for one outside hmn's table.
pub fn xid_words(xid: u64) -> String {
    match xid_meaning(xid).0 {
        "" => format!("XID {xid}"),
        meaning => format!("XID {xid} ({meaning})"),
    }
}

/// A shared tally the counter thread writes and a command reads.
pub type SharedTally = Arc<Mutex<XidTally>>;

/// How long the XID thread waits for an event at a time (an event ends the wait at once): it
/// wakes every 10 s, not every 250 ms as a counter that must stop quickly does — no command
/// joins it (`serve`, `top` and `watch` end without waiting for it).
pub const XID_WAIT: Duration = Duration::from_secs(10);

/// Starts the thread that counts XID events from now on (NVML keeps no record of earlier
/// ones), on a probe of its own, until `stop(&owner)` is set (noticed within [`XID_WAIT`]).
/// Until the thread has made its event set the tally is unavailable
/// ([`XidUncounted::Starting`]), never a count of 0.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn_xid_counter<T: Send + Sync + 'static>(
    opts: ProbeOptions,
    owner: Arc<T>,
    stop: fn(&T) -> &AtomicBool,
) -> std::io::Result<SharedTally> {
    let tally = Arc::new(Mutex::new(starting()));
    let shared = Arc::clone(&tally);
    std::thread::Builder::new()
        .name("hmn-xid".into())
        .spawn(move || {
            let probe = Probe::with_options(opts);
            let mut events = probe.xid_events();
            if let Ok(mut t) = shared.lock() {
                *t = events.tally();
            }
            events.count_until_waiting(stop(&owner), &shared, XID_WAIT);
        })?;
    Ok(tally)
}

/// The tally before the thread has its event set: nothing known, not a count of 0.
fn starting() -> XidTally {
    let mut t = XidTally::new(now_ms());
    t.unavailable = Some(XidUncounted::Starting);
    t
}

/// The events a tally gained since the last look: per device and XID, how many.
#[derive(Debug, Default)]
pub struct NewXids {
    seen: BTreeMap<u32, BTreeMap<u64, u64>>,
}

impl NewXids {
    /// `(device, xid, new events)` counted since the previous call, in device then XID order.
    pub fn since_last(&mut self, tally: &XidTally) -> Vec<(u32, u64, u64)> {
        let mut out = Vec::new();
        for (device, counts) in &tally.counts {
            let seen = self.seen.entry(*device).or_default();
            for (xid, n) in counts {
                let before = seen.insert(*xid, *n).unwrap_or(0);
                if *n > before {
                    out.push((*device, *xid, n - before));
                }
            }
        }
        out
    }
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::types::XidEvent;

    #[test]
    fn new_xids_are_the_difference_since_the_last_look() {
        let mut t = XidTally::new(0);
        let mut seen = NewXids::default();
        assert!(seen.since_last(&t).is_empty());
        t.add(XidEvent::new(0, 79, 1));
        t.add(XidEvent::new(1, 48, 2));
        t.add(XidEvent::new(1, 48, 3));
        assert_eq!(seen.since_last(&t), [(0, 79, 1), (1, 48, 2)]);
        assert!(seen.since_last(&t).is_empty(), "nothing new: nothing said");
        t.add(XidEvent::new(1, 48, 4));
        t.add(XidEvent::new(1, 13, 5));
        assert_eq!(seen.since_last(&t), [(1, 13, 1), (1, 48, 1)]);
    }

    #[test]
    fn a_counter_that_has_not_started_knows_no_count() {
        let t = starting();
        assert_eq!(t.total_on(0), None, "not 0");
        assert_eq!(t.unavailable, Some(XidUncounted::Starting));
        assert_eq!(
            t.count_on(0).map_err(ToString::to_string),
            Err("the XID counter is starting".to_string())
        );
    }

    #[test]
    fn xids_are_named_where_hmn_knows_them() {
        assert_eq!(xid_words(79), "XID 79 (GPU has fallen off the bus)");
        assert_eq!(xid_words(4242), "XID 4242");
    }
}
