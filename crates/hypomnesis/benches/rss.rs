//! Own-RSS cost: `process_rss()` against bare reads of `/proc/self/statm` (open + read, and a
//! pread on an already open file, the floor) and
//! against `sysinfo` refreshing this one process. Ratios are computed by `bench/ratios.py`.

// Test and bench harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

fn rss(c: &mut Criterion) {
    let mut g = c.benchmark_group("own_rss");
    g.bench_function("bare_statm_read", |b| {
        b.iter(|| black_box(std::fs::read("/proc/self/statm").unwrap()))
    });
    // The true floor: one pread on a file that is already open, no parsing.
    let file = std::fs::File::open("/proc/self/statm").unwrap();
    g.bench_function("bare_pread_open_fd", |b| {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 256];
        b.iter(|| black_box(file.read_at(&mut buf, 0).unwrap()))
    });
    // Warm the shared probe so the first iteration does not pay for creating it.
    hypomnesis::process_rss().unwrap();
    g.bench_function("process_rss", |b| {
        b.iter(|| black_box(hypomnesis::process_rss().unwrap()))
    });
    let pid = Pid::from_u32(std::process::id());
    let mut sys = System::new().unwrap();
    g.bench_function("sysinfo_refresh_one", |b| {
        b.iter(|| {
            sys.refresh_processes_specifics(
                ProcessesToUpdate::Some(&[pid]),
                false,
                ProcessRefreshKind::nothing().with_memory(),
            );
            black_box(sys.process(pid).map(sysinfo::Process::memory))
        })
    });
    g.finish();
}

criterion_group!(benches, rss);
criterion_main!(benches);
