//! Own-RSS cost: `process_rss()` against the platform's floor call — on Linux bare reads of
//! `/proc/self/statm` (open + read, and a pread on an already open file, the floor), on Windows
//! a bare `GetProcessMemoryInfo(GetCurrentProcess())` — and against `sysinfo` refreshing this
//! one process. Ratios are computed by `bench/ratios.py`.

// Test and bench harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use sysinfo::{Pid, ProcessRefreshKind, ProcessesToUpdate, System};

fn rss(c: &mut Criterion) {
    let mut g = c.benchmark_group("own_rss");
    #[cfg(target_os = "linux")]
    {
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
    }
    // Windows' floor: the one call the library makes, with nothing around it.
    #[cfg(windows)]
    g.bench_function("bare_get_process_memory_info", |b| {
        use windows::Win32::System::ProcessStatus::{
            GetProcessMemoryInfo, PROCESS_MEMORY_COUNTERS,
        };
        use windows::Win32::System::Threading::GetCurrentProcess;
        b.iter(|| {
            let mut c = PROCESS_MEMORY_COUNTERS {
                cb: std::mem::size_of::<PROCESS_MEMORY_COUNTERS>() as u32,
                ..Default::default()
            };
            // SAFETY: a live PROCESS_MEMORY_COUNTERS whose `cb` states its size, and the
            // current-process pseudo-handle.
            unsafe { GetProcessMemoryInfo(GetCurrentProcess(), &raw mut c, c.cb) }.unwrap();
            black_box(c.WorkingSetSize)
        })
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
