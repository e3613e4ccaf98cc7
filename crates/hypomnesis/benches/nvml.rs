//! Device-query cost on the fake NVML (`libnvidia-ml.so.1` on Linux, `nvml.dll` on Windows): a
//! long-lived `Probe` (NVML loaded and initialised once) against upstream's way, load + init +
//! query + shutdown on every call, and against the floor: the bare NVML calls of one device
//! query (handle, memory info) through nvml-wrapper on an initialised library, and the same
//! NVML calls a device query makes, bare. Ratios are computed by `bench/ratios.py`.

// Test and bench harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use hmn_testbed::{FakeNvml, FakeProcess};
use hypomnesis::{Probe, ProbeOptions};

fn device_query(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let lib = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .install(dir.path())
        .unwrap();
    let opts = ProbeOptions::default()
        .nvml_library(&lib)
        .use_nvidia_smi(false);
    let mut g = c.benchmark_group("device_query");
    let probe = Probe::with_options(opts.clone());
    probe.device(0).unwrap();
    g.bench_function("long_lived_probe", |b| {
        b.iter(|| black_box(probe.device(0).unwrap()))
    });
    let raw = nvml_wrapper::Nvml::builder()
        .lib_path(lib.as_os_str())
        .init()
        .unwrap();
    g.bench_function("bare_nvml_memory_info", |b| {
        b.iter(|| {
            let d = raw.device_by_index(0).unwrap();
            black_box(d.memory_info().unwrap())
        })
    });
    // The same NVML calls a device query makes, bare: what our layer adds (conversions,
    // reasons for unknowns, the MIG check) is the gap between this and `long_lived_probe`.
    g.bench_function("bare_nvml_same_calls", |b| {
        use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
        b.iter(|| {
            let n = raw.device_count().unwrap();
            let d = raw.device_by_index(0).unwrap();
            black_box((
                n,
                d.name().ok(),
                d.uuid().ok(),
                d.pci_info().ok(),
                d.memory_info().ok(),
                d.utilization_rates().ok(),
                d.temperature(TemperatureSensor::Gpu).ok(),
                d.power_usage().ok(),
                d.total_energy_consumption().ok(),
            ));
            for clock in [Clock::Graphics, Clock::SM, Clock::Memory] {
                black_box(d.clock_info(clock).ok());
            }
            for clock in [Clock::Graphics, Clock::Memory] {
                black_box(d.max_clock_info(clock).ok());
            }
            black_box(d.mig_mode().ok())
        })
    });
    g.bench_function("init_per_call", |b| {
        b.iter(|| {
            // A fresh probe loads and initialises NVML; dropping it shuts NVML down and
            // unloads the library, as upstream hypomnesis did on every call.
            let p = Probe::with_options(opts.clone());
            black_box(p.device(0).unwrap())
        })
    });
    g.finish();
}

criterion_group!(benches, device_query);
criterion_main!(benches);
