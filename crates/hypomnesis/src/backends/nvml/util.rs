//! Per-process utilization from `nvmlDeviceGetProcessUtilization`: the pure rules that turn
//! the driver's samples into one [`ProcessUtilization`] per row, and the per-device timestamp
//! the next query starts from.
//!
//! The driver keeps a buffer of samples, one per process that used the GPU in a sample period,
//! each stamped with a CPU timestamp in µs. A query asks for the samples newer than a
//! timestamp: the first on a device asks for the last second, each later one for what came
//! after the newest sample already taken, so a figure covers the time since the previous query
//! (NVML's own window is its sample period; nvtop and nvitop read it the same way).
//!
//! Samples above 100 % are dropped (some drivers return inconsistent ones, nvtop#110), as are
//! samples not newer than the start of the window; the newest valid sample per pid wins. A
//! listed process without a sample used nothing: 0 %, marked `sampled: false` — but only when
//! the device answered. NOT_SUPPORTED, a missing symbol or MIG give `None` with the reason.

use std::collections::BTreeMap;

use crate::types::{Field, GpuProcess, ProcessUtilization, Unknown, UnknownReason};

/// The window of a device's first query: the last second.
pub(crate) const FIRST_WINDOW_US: u64 = 1_000_000;

/// One `nvmlProcessUtilizationSample_t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawSample {
    pub pid: u32,
    pub timestamp_us: u64,
    pub sm: u32,
    pub memory: u32,
    pub encoder: u32,
    pub decoder: u32,
}

impl RawSample {
    /// A driver sample that cannot be true (a unit more than 100 % busy).
    fn implausible(&self) -> bool {
        [self.sm, self.memory, self.encoder, self.decoder]
            .iter()
            .any(|v| *v > 100)
    }
}

/// What a device's utilization query gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// The device answered: these samples (possibly none) for the window from `since_us`.
    Samples {
        since_us: u64,
        samples: Vec<RawSample>,
    },
    /// No figure: why (the same for every row of the device).
    Unknown(Unknown),
}

/// The timestamp a device's next query starts from: the newest valid sample taken, else the
/// previous start (`None` on a device never queried, or whose queries found nothing: the next
/// one asks for the last second again).
pub(crate) fn next_since(
    previous: Option<u64>,
    since_us: u64,
    samples: &[RawSample],
) -> Option<u64> {
    samples
        .iter()
        .filter(|s| !s.implausible() && s.timestamp_us > since_us)
        .map(|s| s.timestamp_us)
        .max()
        .map(|newest| previous.map_or(newest, |p| p.max(newest)))
        .or(previous)
}

/// The window start for a query at `now_us`.
pub(crate) fn window_start(previous: Option<u64>, now_us: u64) -> u64 {
    previous.unwrap_or_else(|| now_us.saturating_sub(FIRST_WINDOW_US))
}

/// Sets each row's `utilization` from the outcome (rows of one device).
pub(crate) fn attach(rows: &mut [GpuProcess], outcome: &Outcome) {
    match outcome {
        Outcome::Unknown(u) => {
            for row in rows.iter_mut() {
                row.utilization = None;
                row.unknown.push(u.clone());
            }
        }
        Outcome::Samples { since_us, samples } => {
            // Newest valid sample per pid; pids with only implausible ones are remembered.
            let mut best: BTreeMap<u32, RawSample> = BTreeMap::new();
            let mut bad: Vec<u32> = Vec::new();
            for s in samples.iter().filter(|s| s.timestamp_us > *since_us) {
                if s.implausible() {
                    bad.push(s.pid);
                    continue;
                }
                match best.get(&s.pid) {
                    Some(b) if b.timestamp_us >= s.timestamp_us => {}
                    _ => {
                        best.insert(s.pid, *s);
                    }
                }
            }
            for row in rows.iter_mut() {
                row.utilization = match best.get(&row.pid) {
                    Some(s) => Some(ProcessUtilization::new(
                        s.sm, s.memory, s.encoder, s.decoder, true, *since_us,
                    )),
                    None if bad.contains(&row.pid) => {
                        row.unknown.push(Unknown::new(
                            Field::Utilization,
                            UnknownReason::Implausible,
                            "the driver's only sample for this process was above 100 %",
                        ));
                        None
                    }
                    None => Some(ProcessUtilization::idle(*since_us)),
                };
            }
        }
    }
}

/// The reason rows of a GPU in MIG mode have no utilization.
pub(crate) fn mig_unknown() -> Unknown {
    Unknown::new(
        Field::Utilization,
        UnknownReason::Unsupported,
        "NVML does not give per-process utilization on MIG-enabled GPUs",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{ProcessKind, Source};

    fn s(pid: u32, ts: u64, sm: u32) -> RawSample {
        RawSample {
            pid,
            timestamp_us: ts,
            sm,
            memory: sm / 2,
            encoder: 0,
            decoder: 1,
        }
    }

    fn rows(pids: &[u32]) -> Vec<GpuProcess> {
        pids.iter()
            .map(|p| GpuProcess::new(*p, 0, ProcessKind::Compute, Source::Nvml))
            .collect()
    }

    #[test]
    fn the_newest_valid_sample_wins_and_silence_is_zero() {
        let mut r = rows(&[1, 2, 3]);
        let samples = vec![
            s(1, 150, 40),
            s(1, 180, 60),
            s(1, 170, 90),
            s(3, 90, 77),  // older than the window: ignored
            s(9, 160, 50), // not a listed process
        ];
        attach(
            &mut r,
            &Outcome::Samples {
                since_us: 100,
                samples,
            },
        );
        let u = r[0].utilization.unwrap();
        assert_eq!(
            (u.sm_percent, u.memory_percent, u.decoder_percent),
            (60, 30, 1)
        );
        assert!(u.sampled);
        assert_eq!(u.since_unix_us, 100);
        assert_eq!(r[1].utilization, Some(ProcessUtilization::idle(100)));
        assert_eq!(r[2].utilization, Some(ProcessUtilization::idle(100)));
    }

    #[test]
    fn an_implausible_sample_is_unknown_not_a_number() {
        let mut r = rows(&[1, 2]);
        attach(
            &mut r,
            &Outcome::Samples {
                since_us: 0,
                samples: vec![s(1, 10, 150), s(2, 10, 150), s(2, 5, 20)],
            },
        );
        assert_eq!(r[0].utilization, None);
        assert_eq!(r[0].unknown[0].reason, UnknownReason::Implausible);
        // A valid (older) sample of the same pid is used instead.
        assert_eq!(r[1].utilization.map(|u| u.sm_percent), Some(20));
    }

    #[test]
    fn an_unknown_outcome_marks_every_row() {
        let mut r = rows(&[1, 2]);
        attach(&mut r, &Outcome::Unknown(mig_unknown()));
        assert!(r.iter().all(|p| p.utilization.is_none()
            && p.unknown[0].field == Field::Utilization
            && p.unknown[0].reason == UnknownReason::Unsupported));
    }

    #[test]
    fn the_window_advances_to_the_newest_valid_sample() {
        assert_eq!(window_start(None, 5_000_000), 4_000_000);
        assert_eq!(window_start(Some(7), 5_000_000), 7);
        let samples = [s(1, 300, 10), s(2, 900, 101), s(3, 250, 5)];
        assert_eq!(
            next_since(None, 100, &samples),
            Some(300),
            "the 101 % one is ignored"
        );
        assert_eq!(
            next_since(Some(400), 100, &samples),
            Some(400),
            "never backwards"
        );
        assert_eq!(next_since(Some(50), 100, &[]), Some(50));
        assert_eq!(next_since(None, 100, &[]), None);
    }
}
