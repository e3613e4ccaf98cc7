//! DRM backend costs: parsing one fdinfo file, and a process query on this machine's `/proc`
//! with the fd index rebuilt (full scan) against one reusing the cached index. A fixture
//! `/sys` with one amdgpu card makes the backend walk `/proc`. For the 2000 × 64 fd load and
//! the comparison with a C floor, `fuser` and `lsof`, see `bench/drm_scan.sh`. And the sysfs
//! reads of one query, kept open against opened per reading, on real sysfs attributes (the
//! loopback device's counters: this machine has no DRM card; each is one `show` of a kernel
//! attribute, as a card's `mem_info_vram_used` is).

// Bench harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[path = "support/drm_probes.rs"]
mod drm_probes;

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};

fn drm(c: &mut Criterion) {
    let era_d = include_str!("../tests/fixtures/fdinfo/amdgpu-eraD.txt");
    c.bench_function("fdinfo/parse_amdgpu_eraD", |b| {
        b.iter(|| hypomnesis::fuzzing::fdinfo(black_box(era_d.as_bytes())))
    });

    let dir = tempfile::tempdir().unwrap();
    let (full, cached) = drm_probes::full_and_cached(dir.path());
    let mut g = c.benchmark_group("drm_query");
    g.bench_function("full_scan", |b| b.iter(|| black_box(full.gpu_processes())));
    g.bench_function("cached_index_tick", |b| {
        b.iter(|| black_box(cached.gpu_processes()))
    });
    g.finish();

    // A card's query reads about ten attributes (memory, busy, hwmon, runtime status).
    let stats = std::path::Path::new("/sys/class/net/lo/statistics");
    let mut paths: Vec<_> = std::fs::read_dir(stats)
        .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    paths.sort();
    paths.truncate(10);
    if paths.len() == 10 {
        let mut g = c.benchmark_group("sysfs_query_10_attributes");
        g.bench_function("opened_per_reading", |b| {
            b.iter(|| black_box(hypomnesis::fuzzing::sysfs_fresh(&paths)))
        });
        let mut kept = hypomnesis::fuzzing::SysfsKept::new();
        g.bench_function("kept_open", |b| b.iter(|| black_box(kept.read_sum(&paths))));
        g.finish();
    }
}

criterion_group!(benches, drm);
criterion_main!(benches);
