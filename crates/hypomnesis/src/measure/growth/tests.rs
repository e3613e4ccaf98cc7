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

/// The downsampling as first written (a `Vec` per bucket, a full sort per median): the oracle
/// the faster one must equal bit for bit.
fn downsample_as_written(points: &[(f64, f64)]) -> Vec<(f64, f64)> {
    fn median_sorted(values: &mut [f64]) -> Option<f64> {
        if values.is_empty() {
            return None;
        }
        values.sort_by(f64::total_cmp);
        let m = values.len() / 2;
        Some(if values.len() % 2 == 1 {
            values[m]
        } else {
            (values[m - 1] + values[m]) / 2.0
        })
    }
    if points.len() <= MAX_POINTS {
        return points.to_vec();
    }
    let (first, last) = (points[0], points[points.len() - 1]);
    let span = (last.0 - first.0).max(f64::MIN_POSITIVE);
    let mut buckets: Vec<Vec<(f64, f64)>> = vec![Vec::new(); MAX_POINTS];
    for p in points {
        let i = (((p.0 - first.0) / span) * MAX_POINTS as f64) as usize;
        buckets[i.min(MAX_POINTS - 1)].push(*p);
    }
    buckets
        .into_iter()
        .filter(|b| !b.is_empty())
        .filter_map(|b| {
            let t = b.iter().map(|p| p.0).sum::<f64>() / b.len() as f64;
            let mut v: Vec<f64> = b.iter().map(|p| p.1).collect();
            median_sorted(&mut v).map(|m| (t, m))
        })
        .collect()
}

#[test]
fn downsampling_in_runs_equals_the_bucket_by_bucket_reading() {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for case in 0..300 {
        let n = 257 + (next() % 2800) as usize;
        let mut t = 0.0;
        let mut points: Vec<(f64, f64)> = (0..n)
            .map(|_| {
                // Irregular steps, some repeated times; values with ties and a trend.
                t += [0.0, 0.25, 1.0, 1.0, 3.5][(next() % 5) as usize];
                (t, (next() % 64) as f64 * 4096.0 + t * 1000.0)
            })
            .collect();
        if case % 10 == 0 {
            // Out of time order: the bucket-by-bucket path.
            points.swap(3, n - 2);
        }
        let (ours, theirs) = (downsample(&points), downsample_as_written(&points));
        let bits = |v: &[(f64, f64)]| -> Vec<(u64, u64)> {
            v.iter().map(|p| (p.0.to_bits(), p.1.to_bits())).collect()
        };
        assert_eq!(bits(&ours), bits(&theirs), "case {case}, {n} points");
    }
}

#[test]
fn medians_by_selection_are_the_sorted_medians() {
    for v in [
        vec![3.0],
        vec![2.0, 1.0],
        vec![5.0, 1.0, 4.0, 4.0],
        vec![9.0, -1.0, 0.0, 7.5, 7.5, 2.0, 1e12],
    ] {
        let mut sorted = v.clone();
        sorted.sort_by(f64::total_cmp);
        let m = sorted.len() / 2;
        let want = if sorted.len() % 2 == 1 {
            sorted[m]
        } else {
            (sorted[m - 1] + sorted[m]) / 2.0
        };
        assert_eq!(median(&mut v.clone()), Some(want), "{v:?}");
    }
    assert_eq!(median(&mut []), None);
}

/// The shortcut for windows whose values vary too little changes nothing: over flat, noisy,
/// leaking, stepping and sawtooth figures (raw and downsampled windows), a tracker with it
/// raises and clears the same flags at the same samples as one that fits every window.
#[test]
fn the_flat_window_shortcut_gives_the_flags_of_a_full_fit() {
    let rules = [
        GrowthRule::default(),
        GrowthRule::default().window(Duration::from_secs(600)),
    ];
    for (case, rule) in (0..10).flat_map(|c| rules.iter().map(move |r| (c, *r))) {
        let mut noise = Noise(0x9e37_79b9 + case as u64);
        let (mut fast, mut full) = (GrowthTracker::new(rule), GrowthTracker::new(rule));
        full.exact = true;
        let mut shortcuts = 0;
        for i in 0..700u32 {
            let t = f64::from(i) * 1.5;
            let base = 4.0 * GIB;
            let v = match case % 5 {
                0 => base,                                            // flat
                1 => base + noise.next() * 8.0 * MIB,                 // noise, well under the rise
                2 => base + t * 0.4 * MIB + noise.next() * 4.0 * MIB, // a leak
                3 => base + (f64::from(i / 400)) * 200.0 * MIB,       // steps
                _ => base + f64::from(i % 120) * 3.0 * MIB,           // a sawtooth
            };
            let window: Vec<(f64, f64)> = fast.points.iter().copied().collect();
            if cannot_rise(&window, &rule) {
                shortcuts += 1;
            }
            let v = v.max(0.0) as u64;
            assert_eq!(
                fast.observe(t, v),
                full.observe(t, v),
                "case {case}, sample {i}"
            );
        }
        if case % 5 < 2 {
            assert!(
                shortcuts > 200,
                "case {case}: the shortcut was taken {shortcuts} times"
            );
        }
    }
}
