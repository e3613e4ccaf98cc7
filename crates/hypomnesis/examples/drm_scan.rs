//! CPU cost of a DRM process query on this machine's real `/proc`: a full scan (every
//! process's fds walked) against a tick that reuses the cached fd index. A fixture `/sys` with
//! one amdgpu card makes the DRM backend walk `/proc`. Run by `bench/drm_scan.sh`, under load.
//!
//! Usage: `cargo run --release -p hypomnesis --example drm_scan [QUERIES]`

// Example/bench harness code: a failed step should stop with its message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout
)]

#[path = "../benches/support/drm_probes.rs"]
mod drm_probes;

use nix::sys::resource::{UsageWho, getrusage};

fn cpu_seconds() -> f64 {
    let u = getrusage(UsageWho::RUSAGE_SELF).unwrap();
    let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 / 1e6;
    t(u.user_time()) + t(u.system_time())
}

fn main() {
    let queries: u32 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    let dir = tempfile::tempdir().unwrap();
    let (full, cached) = drm_probes::full_and_cached(dir.path());

    let start = cpu_seconds();
    for _ in 0..queries {
        std::hint::black_box(full.gpu_processes());
    }
    let full_cpu = (cpu_seconds() - start) / f64::from(queries);
    let start = cpu_seconds();
    for _ in 0..queries {
        std::hint::black_box(cached.gpu_processes());
    }
    let tick_cpu = (cpu_seconds() - start) / f64::from(queries);
    println!(
        "full scan {:.2} ms CPU, cached tick {:.3} ms CPU, ratio {:.2} % (goal <= 10 %)",
        full_cpu * 1e3,
        tick_cpu * 1e3,
        tick_cpu / full_cpu * 100.0
    );
}
