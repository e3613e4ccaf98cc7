//! The device-query cost of `benches/nvml.rs`, as a plain program for a machine without a Rust
//! toolchain (the GPU validation run, `bench/device/run-all.sh`, carries it built): N queries
//! of device 0 on one long-lived `Probe` (NVML loaded and initialised once) against N fresh
//! probes (load + init + query + shutdown per call, as upstream hypomnesis did), and the bare
//! nvml-wrapper memory-info call on an initialised library as the floor, and nvml-wrapper's
//! init and drop timed apart (cold and warm, below). Prints one JSON object:
//! median and mean nanoseconds per call of each and the ratio of the medians (init per call
//! over long-lived). NVML is found as `hmn` finds it (`HMN_NVML_LIB`, else the system's);
//! `nvidia-smi` is never run.
//!
//! Usage: `probe_timing [LONG_LIVED_CALLS] [FRESH_CALLS] [FRESH_SECONDS_MAX]`
//! (default 2000, 50, 20: the fresh probes stop early once they have taken that long, since a
//! real driver without persistence mode can take a second per init).

// Example harness code: a failed step should stop with its message.
#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::print_stdout,
    clippy::print_stderr
)]

use std::hint::black_box;
use std::time::{Duration, Instant};

use hypomnesis::{Probe, ProbeOptions};

/// Median and mean of per-call nanoseconds.
fn stats(mut ns: Vec<u128>) -> serde_json::Value {
    ns.sort_unstable();
    let n = ns.len();
    let median = if n == 0 { 0 } else { ns[n / 2] };
    let mean = if n == 0 {
        0
    } else {
        ns.iter().sum::<u128>() / n as u128
    };
    serde_json::json!({
        "calls": n,
        "median_ns": median,
        "mean_ns": mean,
        "min_ns": ns.first().copied().unwrap_or(0),
        "max_ns": ns.last().copied().unwrap_or(0),
    })
}

fn timed<T>(f: impl FnOnce() -> T) -> (T, u128) {
    let t = Instant::now();
    let v = f();
    (v, t.elapsed().as_nanos())
}

fn arg(i: usize, default: u64) -> u64 {
    std::env::args()
        .nth(i)
        .and_then(|a| a.parse().ok())
        .unwrap_or(default)
}

/// `probe_timing oneshot drop|forget|phases`: what one short-lived command (`hmn ps`) pays.
/// `drop` and `forget` list devices and processes once and end — the probe dropped (NVML shut
/// down and unloaded) or forgotten (the process exits with NVML initialised: the kernel
/// closes the device files) — to be timed whole from outside; `phases` times each step of the
/// same work from inside and prints it.
fn oneshot(mode: &str) {
    let opts = ProbeOptions::from_env()
        .use_nvidia_smi(false)
        .use_drm(false)
        .energy(false);
    let t = Instant::now();
    let (probe, new_ns) = timed(|| Probe::with_options(opts));
    let (devices, devices_ns) = timed(|| probe.devices());
    let (procs, procs_ns) = timed(|| probe.gpu_processes());
    let again_ns = timed(|| black_box(probe.devices().devices.len())).1;
    let procs_again_ns = timed(|| black_box(probe.gpu_processes().processes.len())).1;
    black_box((&devices, &procs));
    match mode {
        "forget" => std::mem::forget(probe),
        "drop" => drop(probe),
        _ => {
            let drop_ns = timed(|| drop(probe)).1;
            println!(
                "{}",
                serde_json::json!({
                    "probe_new_ns": new_ns,
                    "first_devices_ns": devices_ns,
                    "first_processes_ns": procs_ns,
                    "second_devices_ns": again_ns,
                    "second_processes_ns": procs_again_ns,
                    "drop_ns": drop_ns,
                    "total_ns": t.elapsed().as_nanos(),
                    "devices": devices.devices.len(),
                    "processes": procs.processes.len(),
                })
            );
        }
    }
}

fn main() {
    if std::env::args().nth(1).as_deref() == Some("oneshot") {
        oneshot(std::env::args().nth(2).as_deref().unwrap_or("phases"));
        return;
    }
    let long_calls = arg(1, 2000);
    let fresh_calls = arg(2, 50);
    let fresh_max = Duration::from_secs(arg(3, 20));
    let opts = ProbeOptions::from_env()
        .use_nvidia_smi(false)
        .use_drm(false);

    let probe = Probe::with_options(opts.clone());
    let (first, first_ns) = timed(|| probe.device(0));
    let device = match &first {
        Ok(d) => serde_json::json!({ "name": d.name, "uuid": d.uuid }),
        Err(e) => {
            println!(
                "{}",
                serde_json::json!({ "error": format!("device 0: {e}"), "first_call_ns": first_ns })
            );
            std::process::exit(1);
        }
    };
    let long: Vec<u128> = (0..long_calls)
        .map(|_| timed(|| black_box(probe.device(0).is_ok())).1)
        .collect();
    drop(probe);

    let started = Instant::now();
    let mut fresh = Vec::new();
    for _ in 0..fresh_calls {
        if started.elapsed() > fresh_max {
            break;
        }
        fresh.push(
            timed(|| {
                let p = Probe::with_options(opts.clone());
                black_box(p.device(0).is_ok())
            })
            .1,
        );
    }

    let mut builder = nvml_wrapper::Nvml::builder();
    let lib = std::env::var_os(hypomnesis::probe::ENV_NVML_LIB);
    if let Some(lib) = &lib {
        builder.lib_path(lib);
    }
    let bare = match builder.init() {
        Ok(nvml) => {
            let ns: Vec<u128> = (0..long_calls)
                .map(|_| {
                    timed(|| {
                        let d = nvml.device_by_index(0).unwrap();
                        black_box(d.memory_info().is_ok())
                    })
                    .1
                })
                .collect();
            stats(ns)
        }
        Err(e) => serde_json::json!({ "error": e.to_string() }),
    };

    // Where a fresh probe's time goes: nvml-wrapper's init (load the library, resolve its
    // symbols, nvmlInit_v2, the driver version) and drop (nvmlShutdown, unload), timed apart;
    // "cold" with no other NVML instance alive, "warm" while one is (the library stays mapped
    // and NVML's init is reference-counted, so warm is the symbol lookups alone).
    let cycles = |keep: bool| {
        let kept = if keep { builder.init().ok() } else { None };
        let (mut init, mut shutdown) = (Vec::new(), Vec::new());
        for _ in 0..10 {
            let (n, ns) = timed(|| builder.init());
            init.push(ns);
            shutdown.push(timed(|| drop(n)).1);
        }
        drop(kept);
        serde_json::json!({ "init": stats(init), "drop": stats(shutdown) })
    };
    let init_cold = cycles(false);
    let init_warm = cycles(true);

    let long = stats(long);
    let fresh = stats(fresh);
    let ratio = |a: &serde_json::Value, b: &serde_json::Value| match (
        a["median_ns"].as_u64(),
        b["median_ns"].as_u64(),
    ) {
        (Some(a), Some(b)) if b > 0 => serde_json::json!(a as f64 / b as f64),
        _ => serde_json::Value::Null,
    };
    let out = serde_json::json!({
        "device": device,
        "nvml_library": lib.map(|l| l.to_string_lossy().into_owned()),
        "first_call_ns": first_ns,
        "long_lived_probe": long,
        "init_per_call": fresh,
        "bare_nvml_memory_info": bare,
        "nvml_init_cold": init_cold,
        "nvml_init_warm": init_warm,
        "ratio_init_per_call_over_long_lived": ratio(&fresh, &long),
        "ratio_long_lived_over_bare": ratio(&long, &bare),
    });
    println!("{out}");
}
