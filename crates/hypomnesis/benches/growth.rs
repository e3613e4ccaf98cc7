//! The growth tracker's cost per sample with a full 30-minute window (1,800 samples at 1 s): a
//! figure that stays flat (the usual case: the shortcut for windows that cannot rise enough)
//! against a leaking one (a full fit: downsampling, least squares, quarters), and the fit alone
//! (`assess`) as the baseline. `hmn top` feeds two trackers per listed process every sample.

// Bench harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hypomnesis::growth::{GrowthRule, GrowthTracker, assess};

/// A tracker holding a full window of `value(i)` at 1 s steps, and the next sample's time.
fn filled(value: impl Fn(u64) -> u64) -> (GrowthTracker, f64, Vec<(f64, f64)>) {
    let mut tr = GrowthTracker::new(GrowthRule::default());
    let mut window = Vec::new();
    for i in 0..1800u64 {
        tr.observe(i as f64, value(i));
        window.push((i as f64, value(i) as f64));
    }
    (tr, 1800.0, window)
}

fn growth(c: &mut Criterion) {
    let mut g = c.benchmark_group("growth_observe_30min_window");
    let flat = |i: u64| (4u64 << 30) + (i % 7) * 4096;
    let leak = |i: u64| (4u64 << 30) + i * (1 << 20);
    for (name, value) in [("flat", &flat as &dyn Fn(u64) -> u64), ("leaking", &leak)] {
        let (mut tr, mut t, _) = filled(value);
        g.bench_function(name, |b| {
            b.iter(|| {
                t += 1.0;
                black_box(tr.observe(t, value(t as u64)))
            })
        });
    }
    // The baseline: one full fit of the same window, as every sample cost before the shortcut.
    let (_, _, window) = filled(flat);
    let rule = GrowthRule::default();
    g.bench_function("assess_full_window", |b| {
        b.iter(|| black_box(assess(black_box(&window), &rule)))
    });
    g.finish();
}

criterion_group!(benches, growth);
criterion_main!(benches);
