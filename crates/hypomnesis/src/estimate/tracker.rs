//! [`MemoryTracker`]: bookkeeping of allocations against a limit, safe to share between
//! threads.
//!
//! The check and the increment are one atomic step (a compare-and-swap loop), so two threads
//! can never both pass the limit check and together exceed it — the check-then-act race of
//! trackers that test `used + n <= limit` and then add separately. Deallocating more than is
//! allocated saturates at zero instead of wrapping.

use std::sync::atomic::{AtomicU64, Ordering};

/// An allocation that would exceed the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("allocating {requested} bytes would exceed the limit: {used} of {limit} in use")]
#[non_exhaustive]
pub struct LimitExceeded {
    /// Bytes asked for (after the overhead factor).
    pub requested: u64,
    /// Bytes in use at the time.
    pub used: u64,
    /// The limit.
    pub limit: u64,
}

/// Tracks bytes allocated against a limit. See the [module docs](self).
#[derive(Debug)]
pub struct MemoryTracker {
    limit: u64,
    /// Allocations are charged `bytes × overhead_factor` (alignment, fragmentation).
    overhead_factor: f64,
    used: AtomicU64,
    peak: AtomicU64,
}

impl MemoryTracker {
    /// A tracker with `limit` bytes and no overhead.
    pub fn new(limit: u64) -> MemoryTracker {
        MemoryTracker {
            limit,
            overhead_factor: 1.0,
            used: AtomicU64::new(0),
            peak: AtomicU64::new(0),
        }
    }

    /// Charges every allocation `factor` times its size (values below 1, NaN and infinities
    /// are treated as 1).
    #[must_use]
    pub fn with_overhead_factor(mut self, factor: f64) -> MemoryTracker {
        self.overhead_factor = if factor.is_finite() && factor >= 1.0 {
            factor
        } else {
            1.0
        };
        self
    }

    /// What `bytes` costs after the overhead factor.
    pub fn charged(&self, bytes: u64) -> u64 {
        // The factor is applied in millionths, so 1.1 × 100 is exactly 110.
        let ppm = (self.overhead_factor * 1e6).round() as u128;
        let c = (u128::from(bytes) * ppm).div_ceil(1_000_000);
        u64::try_from(c).unwrap_or(u64::MAX)
    }

    /// The limit.
    pub fn limit(&self) -> u64 {
        self.limit
    }

    /// Bytes in use.
    pub fn used(&self) -> u64 {
        self.used.load(Ordering::Acquire)
    }

    /// The highest `used` ever reached.
    pub fn peak(&self) -> u64 {
        self.peak.load(Ordering::Acquire)
    }

    /// Bytes left under the limit.
    pub fn available(&self) -> u64 {
        self.limit.saturating_sub(self.used())
    }

    /// Whether `bytes` would fit now (a snapshot: use [`MemoryTracker::allocate`] to reserve).
    pub fn would_fit(&self, bytes: u64) -> bool {
        self.charged(bytes) <= self.available()
    }

    /// Reserves `bytes` (× overhead) if it fits under the limit, atomically.
    ///
    /// # Errors
    /// [`LimitExceeded`] when it does not fit; nothing is charged then.
    pub fn allocate(&self, bytes: u64) -> Result<(), LimitExceeded> {
        let requested = self.charged(bytes);
        let mut used = self.used.load(Ordering::Acquire);
        loop {
            let next = used
                .checked_add(requested)
                .filter(|n| *n <= self.limit)
                .ok_or(LimitExceeded {
                    requested,
                    used,
                    limit: self.limit,
                })?;
            match self
                .used
                .compare_exchange_weak(used, next, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    self.peak.fetch_max(next, Ordering::AcqRel);
                    return Ok(());
                }
                Err(actual) => used = actual,
            }
        }
    }

    /// Releases `bytes` (× overhead, as charged); never goes below zero.
    pub fn deallocate(&self, bytes: u64) {
        let charged = self.charged(bytes);
        let _ = self
            .used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| {
                Some(u.saturating_sub(charged))
            });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn limit_peak_and_saturation() {
        let t = MemoryTracker::new(100);
        t.allocate(60).unwrap();
        assert!(t.would_fit(40));
        assert!(!t.would_fit(41));
        let e = t.allocate(41).unwrap_err();
        assert_eq!((e.requested, e.used, e.limit), (41, 60, 100));
        assert_eq!(t.used(), 60, "a refused allocation charges nothing");
        t.allocate(40).unwrap();
        t.deallocate(70);
        assert_eq!(t.used(), 30);
        assert_eq!(t.peak(), 100);
        t.deallocate(1000);
        assert_eq!(t.used(), 0, "saturates, never wraps");
    }

    #[test]
    fn overhead_factor() {
        let t = MemoryTracker::new(110).with_overhead_factor(1.1);
        t.allocate(100).unwrap();
        assert_eq!(t.used(), 110);
        assert!(t.allocate(1).is_err());
        assert_eq!(
            MemoryTracker::new(1)
                .with_overhead_factor(f64::NAN)
                .charged(7),
            7
        );
        assert_eq!(
            MemoryTracker::new(1).with_overhead_factor(0.5).charged(7),
            7
        );
    }

    #[test]
    fn concurrent_allocations_never_exceed_the_limit() {
        let t = Arc::new(MemoryTracker::new(1000));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let t = Arc::clone(&t);
                std::thread::spawn(move || (0..1000).filter(|_| t.allocate(3).is_ok()).count())
            })
            .collect();
        let granted: usize = threads.into_iter().map(|h| h.join().unwrap()).sum();
        assert_eq!(granted, 333, "exactly floor(1000 / 3) allocations succeed");
        assert_eq!(t.used(), 999);
        assert!(t.peak() <= 1000);
    }
}
