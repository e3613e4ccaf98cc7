//! What a claim needs around its reservations ([`crate::lease::Reservation`]): the time, this
//! boot's id, the reservations still live, who makes one, the lock's wait, and their release.

use std::time::Duration;

use crate::system::lease::{LockDir, Reservation};
use crate::system::roots::Roots;

/// How long a claim waits for another pick's lock (held for milliseconds).
pub(super) const LOCK_WAIT: Duration = Duration::from_secs(2);

/// Removes our reservations (the command allocated, or ended).
pub fn release(locks: &LockDir, reservations: &[(String, u64)]) {
    for (selector, token) in reservations {
        if let Ok(mut l) = locks.lock(selector, LOCK_WAIT) {
            let kept: Vec<Reservation> =
                l.read().into_iter().filter(|r| r.token != *token).collect();
            let _ = l.write(&kept);
        }
    }
}

/// Milliseconds since the Unix epoch.
pub(super) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

/// This boot's id (`<proc>/sys/kernel/random/boot_id`), or empty.
pub(super) fn boot_id(roots: &Roots) -> String {
    crate::system::fsread::read_trimmed(&roots.proc.join("sys/kernel/random/boot_id"))
        .unwrap_or_default()
        .chars()
        .filter(|c| c.is_ascii_hexdigit() || *c == '-')
        .take(64)
        .collect()
}

/// The live reservations among `records` (a lock file's), dead ones dropped.
pub(super) fn live(roots: &Roots, records: Vec<Reservation>, boot: &str) -> Vec<Reservation> {
    let now = now_ms();
    records
        .into_iter()
        .filter(|r| {
            let start = (r.pid != 0)
                .then(|| crate::system::process::tree::read_stat(roots, r.pid).ok())
                .flatten()
                .map(|s| s.start_time);
            r.is_live(now, boot, start)
        })
        .collect()
}

/// Who makes a reservation: the effective uid (Unix; 0 elsewhere, where picks are not
/// coordinated anyway).
#[cfg(unix)]
pub(super) fn own_uid() -> u32 {
    nix::unistd::geteuid().as_raw()
}

/// Who makes a reservation: 0 off Unix (no device locks there).
#[cfg(not(unix))]
pub(super) fn own_uid() -> u32 {
    0
}
