//! Replay: plays a [`Recording`] into the view at its recorded pace (times a speed), with
//! pause and seek.

use std::time::{Duration, Instant};

use super::app::{App, HISTORY, Mode};
use super::recording::Recording;

/// The longest wait between two samples, whatever gap the recording has (a machine that
/// slept), at speed 1.
const MAX_GAP: Duration = Duration::from_secs(5);

/// A recording being played.
#[derive(Debug)]
pub struct Player {
    pub rec: Recording,
    pub pos: usize,
    pub speed: f64,
    pub paused: bool,
    next_at: Instant,
}

impl Player {
    pub fn new(rec: Recording, now: Instant) -> Player {
        let mut p = Player {
            rec,
            pos: 0,
            speed: 1.0,
            paused: false,
            next_at: now,
        };
        p.schedule(now);
        p
    }

    fn schedule(&mut self, now: Instant) {
        let e = &self.rec.entries;
        let gap = match (e.get(self.pos), e.get(self.pos + 1)) {
            (Some(a), Some(b)) => Duration::from_millis(b.unix_ms.saturating_sub(a.unix_ms)),
            _ => MAX_GAP,
        };
        let wait = gap.min(MAX_GAP).div_f64(self.speed.max(0.01));
        self.next_at = now + wait.max(Duration::from_millis(10));
    }

    /// How long until the next step (for the event loop's timeout); `None` while paused or at
    /// the end (nothing to do until a key).
    pub fn due(&self, now: Instant) -> Option<Duration> {
        (!self.paused && !self.at_end()).then(|| self.next_at.saturating_duration_since(now))
    }

    /// Whether the last sample is shown.
    pub fn at_end(&self) -> bool {
        self.pos + 1 >= self.rec.len()
    }

    /// Advances when a step is due; true when the position changed.
    pub fn tick(&mut self, now: Instant) -> bool {
        if self.paused || self.at_end() || now < self.next_at {
            return false;
        }
        self.pos += 1;
        self.schedule(now);
        true
    }

    /// Moves by `delta_ms` of recorded time.
    pub fn seek(&mut self, delta_ms: i64, now: Instant) {
        let at = self.rec.entries[self.pos].unix_ms;
        let target = at.saturating_add_signed(delta_ms);
        self.pos = if delta_ms >= 0 {
            // The first sample at or after the target (at least one step forward).
            let i = self.rec.entries.partition_point(|e| e.unix_ms < target);
            i.max(self.pos + 1).min(self.rec.len() - 1)
        } else {
            self.rec
                .at_or_before(target)
                .min(self.pos.saturating_sub(1))
        };
        self.schedule(now);
    }

    /// To the first or the last sample.
    pub fn seek_end(&mut self, end: bool, now: Instant) {
        self.pos = if end { self.rec.len() - 1 } else { 0 };
        self.schedule(now);
    }

    /// Sets the speed.
    pub fn set_speed(&mut self, speed: f64, now: Instant) {
        self.speed = speed;
        self.schedule(now);
    }

    /// Shows the current sample (and the history before it) in `app`.
    pub fn show(&mut self, app: &mut App) {
        match self.rec.get(self.pos) {
            Ok(s) => {
                let from = (self.pos + 1).saturating_sub(HISTORY);
                let history: Vec<_> = self.rec.entries[from..=self.pos]
                    .iter()
                    .map(|e| e.devices.clone())
                    .collect();
                app.show(s, &history);
            }
            Err(e) => app.say(e),
        }
        if let Mode::Replay {
            position,
            len,
            speed,
            paused,
            ..
        } = &mut app.mode
        {
            *position = self.pos;
            *len = self.rec.len();
            *speed = self.speed;
            *paused = self.paused;
        }
        if self.at_end() && !self.paused {
            app.say("end of the recording (b: back to the start)");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::recording::write_line;
    use crate::top::snapshot::Snapshot;

    fn player(times: &[u64]) -> (tempfile::TempDir, Player) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("r.jsonl");
        let mut v = Vec::new();
        for t in times {
            write_line(&mut v, &Snapshot::empty(*t, 1000)).unwrap();
        }
        std::fs::write(&p, v).unwrap();
        let rec = Recording::open(&p).unwrap();
        (d, Player::new(rec, Instant::now()))
    }

    #[test]
    fn plays_at_the_recorded_pace_times_the_speed() {
        let (_d, mut p) = player(&[0, 1000, 2000, 60_000]);
        let t0 = Instant::now();
        assert!(!p.tick(t0));
        assert!(p.tick(t0 + Duration::from_millis(1001)));
        assert_eq!(p.pos, 1);
        p.set_speed(4.0, t0);
        assert!(!p.tick(t0 + Duration::from_millis(200)));
        assert!(p.tick(t0 + Duration::from_millis(260)));
        // A 58 s gap waits at most 5 s (at speed 1).
        p.set_speed(1.0, t0);
        assert!(p.tick(t0 + Duration::from_millis(5010)));
        assert!(p.at_end());
        assert!(!p.tick(t0 + Duration::from_secs(60)), "stays at the end");
    }

    #[test]
    fn seeks_by_recorded_time_and_pauses() {
        let (_d, mut p) = player(&[0, 1000, 2000, 30_000, 31_000]);
        let now = Instant::now();
        p.seek(10_000, now);
        assert_eq!(p.pos, 3);
        p.seek(-10_000, now);
        assert_eq!(p.pos, 2);
        p.seek(-10_000, now);
        assert_eq!(p.pos, 0);
        p.seek_end(true, now);
        assert_eq!(p.pos, 4);
        p.seek(10_000, now);
        assert_eq!(p.pos, 4, "clamped");
        p.seek_end(false, now);
        p.paused = true;
        assert!(!p.tick(now + Duration::from_secs(10)));
    }
}
