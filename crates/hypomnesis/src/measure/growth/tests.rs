//! The growth rule against simulated windows (seeded noise, no timing): leaks that rise
//! steadily are flagged, loads that jump and stay, finished warm-ups and sawtooths are not —
//! at every point of the run, not only at its end.

use super::*;

const MIB: f64 = (1u64 << 20) as f64;
const GIB: f64 = (1u64 << 30) as f64;
/// Sample every 10 s.
const STEP: f64 = 10.0;

/// xorshift64*: a seeded, dependency-free source of noise.
struct Noise(u64);

impl Noise {
    fn next(&mut self) -> f64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        let x = self.0.wrapping_mul(0x2545_F491_4F6C_DD1D);
        (x >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Roughly normal, mean 0, standard deviation `sd` (sum of 4 uniforms).
    fn gauss(&mut self, sd: f64) -> f64 {
        let s: f64 = (0..4).map(|_| self.next()).sum::<f64>() - 2.0;
        s * sd * (3.0f64).sqrt()
    }
}

/// A scenario: the figure at time `t` seconds, `len` seconds long.
fn series(len: f64, seed: u64, f: impl Fn(f64) -> f64) -> Vec<(f64, f64)> {
    let mut noise = Noise(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let base = 2.0 * GIB;
    let mut out = Vec::new();
    let mut t = 0.0;
    while t <= len {
        out.push((t, (base + f(t) + noise.gauss(4.0 * MIB)).max(0.0)));
        t += STEP;
    }
    out
}

const HALF_HOUR: f64 = 1800.0;

/// Whether the tracker's flag is ever raised (`Some(time)`) over the run.
fn first_flag(points: &[(f64, f64)]) -> Option<f64> {
    let mut tr = GrowthTracker::new(GrowthRule::default());
    points
        .iter()
        .find(|(t, v)| tr.observe(*t, *v as u64).is_some())
        .map(|p| p.0)
}

fn at_end(points: &[(f64, f64)]) -> Assessment {
    let start = points.last().map_or(0.0, |p| p.0) - HALF_HOUR;
    let window: Vec<(f64, f64)> = points.iter().copied().filter(|p| p.0 >= start).collect();
    assess(&window, &GrowthRule::default())
}

const SEEDS: std::ops::Range<u64> = 1..25;

#[test]
fn a_linear_leak_is_flagged_with_its_slope() {
    for seed in SEEDS {
        let p = series(HALF_HOUR, seed, |t| GIB * t / 3600.0);
        let a = at_end(&p);
        assert!(a.is_growth(), "seed {seed}: {a:?}");
        let g = a.fit.unwrap();
        let per_hour = g.bytes_per_hour() / GIB;
        assert!((0.95..1.05).contains(&per_hour), "seed {seed}: {per_hour}");
        assert!(g.r_squared > 0.99, "{g:?}");
        // Flagged once the rise reaches the least rise, not before.
        let at = first_flag(&p).unwrap_or_else(|| panic!("seed {seed}: never flagged"));
        // 256 MiB at 1 GiB/h takes 15 min.
        assert!(
            (880.0..=1000.0).contains(&at),
            "seed {seed}: flagged at {at}"
        );
    }
}

#[test]
fn a_staircase_leak_is_flagged() {
    for seed in SEEDS {
        // Six steps of 1/12 GiB in 30 min (1 GiB/h on average), the first at 150 s.
        let p = series(HALF_HOUR, seed, |t| {
            ((t + 150.0) / 300.0).floor().min(6.0) * GIB / 12.0
        });
        let a = at_end(&p);
        assert!(a.is_growth(), "seed {seed}: {a:?}");
    }
}

#[test]
fn a_single_load_that_stays_is_never_flagged() {
    for seed in SEEDS {
        for at in [0.05, 0.5, 0.8] {
            let jump = at * HALF_HOUR;
            let p = series(2.0 * HALF_HOUR, seed, |t| {
                if t >= jump { 8.0 * GIB } else { 0.0 }
            });
            assert_eq!(first_flag(&p), None, "seed {seed}, jump at {at}");
        }
        // Two jumps: a model load, then its KV cache.
        let p = series(HALF_HOUR, seed, |t| {
            (if t >= 300.0 { 6.0 * GIB } else { 0.0 }) + (if t >= 1300.0 { 2.0 * GIB } else { 0.0 })
        });
        assert_eq!(first_flag(&p), None, "seed {seed}: two jumps");
        assert!(!at_end(&p).is_growth());
        // Whatever the fit's R², the spread test rejects it on its own.
        let lax = GrowthRule {
            min_r_squared: 0.0,
            ..GrowthRule::default()
        };
        assert_eq!(assess(&p, &lax).rejected, Some(Rejection::NotSpread));
    }
}

#[test]
fn a_finished_warm_up_is_not_flagged() {
    for seed in SEEDS {
        // 20 minutes of linear growth to 3 GiB, then flat.
        let p = series(HALF_HOUR, seed, |t| 3.0 * GIB * (t / 1200.0).min(1.0));
        let a = at_end(&p);
        assert_eq!(a.rejected, Some(Rejection::Stopped), "seed {seed}: {a:?}");
        // While it grows it is a leak as far as anyone can tell; once flat for long enough
        // the flag clears.
        let mut tr = GrowthTracker::new(GrowthRule::default());
        let mut last = None;
        for (t, v) in &p {
            last = tr.observe(*t, *v as u64);
        }
        let long = series(2.0 * HALF_HOUR, seed, |t| 3.0 * GIB * (t / 1200.0).min(1.0));
        let mut tr = GrowthTracker::new(GrowthRule::default());
        for (t, v) in &long {
            last = tr.observe(*t, *v as u64);
        }
        assert_eq!(last, None, "seed {seed}: cleared after the warm-up");
    }
}

#[test]
fn a_gc_sawtooth_and_noise_are_not_flagged() {
    for seed in SEEDS {
        // Rises 512 MiB over 3 minutes, collected back, again and again.
        let p = series(2.0 * HALF_HOUR, seed, |t| {
            512.0 * MIB * ((t % 180.0) / 180.0)
        });
        assert_eq!(first_flag(&p), None, "seed {seed}: sawtooth");
        let flat = series(2.0 * HALF_HOUR, seed, |_| 0.0);
        assert_eq!(first_flag(&flat), None, "seed {seed}: noise");
        assert!(!at_end(&flat).is_growth());
    }
}

#[test]
fn too_little_data_or_too_small_a_rise_is_no_verdict() {
    let short = series(300.0, 3, |t| GIB * t / 600.0);
    assert_eq!(at_end(&short).rejected, Some(Rejection::TooFew));
    assert_eq!(at_end(&short).fit, None);
    // 100 MiB/h: linear, but under the least rise over 30 min.
    let slow = series(HALF_HOUR, 3, |t| 100.0 * MIB * t / 3600.0);
    assert_eq!(at_end(&slow).rejected, Some(Rejection::TooSmall));
    // A falling figure.
    let falling = series(HALF_HOUR, 3, |t| -GIB * t / 3600.0);
    assert_eq!(at_end(&falling).rejected, Some(Rejection::NotRising));
    assert!(!assess(&[], &GrowthRule::default()).is_growth());
}

#[test]
fn the_tracker_reports_how_long_and_ignores_time_going_backwards() {
    let p = series(HALF_HOUR + 600.0, 9, |t| GIB * t / 3600.0);
    let mut tr = GrowthTracker::new(GrowthRule::default());
    let mut last = None;
    for (t, v) in &p {
        last = tr.observe(*t, *v as u64);
    }
    let f = last.unwrap();
    assert!(
        (2300.0..=2400.0).contains(&f.for_seconds),
        "grown since the first window's start: {f:?}"
    );
    assert_eq!(tr.observe(10.0, 0), Some(f), "an earlier sample is ignored");
    assert_eq!(tr.flag(), Some(f));
    // Many samples per window: the raw points are thinned, the verdict stands.
    let mut dense = GrowthTracker::new(GrowthRule::default());
    let mut t = 0.0;
    let mut flag = None;
    while t <= HALF_HOUR {
        flag = dense.observe(t, (GIB * t / 3600.0) as u64 + (1 << 30));
        t += 0.25;
    }
    assert!(flag.is_some());
    assert!(dense.points.len() <= MAX_RAW);
}

#[test]
fn a_shorter_window_scales_the_least_span() {
    let r = GrowthRule::default()
        .window(Duration::from_secs(600))
        .min_rise_bytes(1 << 20)
        .min_samples(1);
    assert_eq!(r.min_span, Duration::from_secs(200));
    assert_eq!(r.min_samples, 3);
}
