//! DRM backend costs: parsing one fdinfo file, and a process query on this machine's `/proc`
//! with the fd index rebuilt (full scan) against one reusing the cached index. A fixture
//! `/sys` with one amdgpu card makes the backend walk `/proc`. For the 2000 × 64 fd load and
//! the comparison with a C floor, `fuser` and `lsof`, see `bench/drm_scan.sh`.

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
}

criterion_group!(benches, drm);
criterion_main!(benches);
