//! Memory health, XID events and unattributed memory against the fake NVML (through the real
//! dlopen path) and amdgpu RAS fixtures (composed from the kernel's format strings).

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use hmn_testbed::{Driver, FakeDevice, FakeEvent, FakeGpu, FakeHealth, FakeNvml, FakeProcess};
use hypomnesis::types::{Bound, QueryError, Severity};
use hypomnesis::{BackendCause, Field, MemoryHealth, Probe, UnknownReason, XidTally, XidUncounted};

use crate::util::Bed;

fn health_of(bed: &Bed, index: usize) -> MemoryHealth {
    let p = Probe::with_options(bed.options().health(true));
    p.devices().devices[index].health.clone().unwrap()
}

#[test]
fn defaults_are_unsupported_and_not_read_unless_asked() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1));
    assert_eq!(
        bed.probe().devices().devices[0].health,
        None,
        "not read by default"
    );
    let h = health_of(&bed, 0);
    assert!(!h.any_reading(), "{h:?}");
    assert!(h.is_clean(), "nothing read is no finding");
    let ecc = h
        .unknown
        .iter()
        .find(|u| u.field == Field::HealthEcc)
        .unwrap();
    assert_eq!(ecc.reason, UnknownReason::Unsupported);
    assert!(
        h.unknown
            .iter()
            .any(|u| u.field == Field::HealthEccErrorsUncorrectedVolatile
                && u.detail.contains("not supported")),
        "{h:?}"
    );
    assert!(
        h.unknown
            .iter()
            .any(|u| u.field == Field::HealthRemappedRows && u.detail.contains("neither")),
        "both schemes unsupported is said once: {h:?}"
    );
}

#[test]
fn ecc_counts_and_remapped_rows_on_a_hopper() {
    let sick = FakeDevice::h100(1).health(FakeHealth {
        ecc_mode: Some(true),
        ecc_counts: [vec![5], vec![0, 2], vec![9], vec![2]],
        remapped_rows: Some([1, 2, 1, 0]),
        ..FakeHealth::default()
    });
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc())
        .device(sick);
    let bed = Bed::with_nvml(&fake);
    let ok = health_of(&bed, 0);
    assert!(ok.is_clean() && ok.counters_meaningful(), "{ok:?}");
    assert_eq!(ok.ecc_errors.uncorrected_volatile, Some(0));
    assert!(!ok.remapped_rows.unwrap().pending);
    // One probe, read twice: the second read sees the sequence's next value.
    let probe = Probe::with_options(bed.options().health(true));
    let h = probe.devices().devices[1].health.clone().unwrap();
    assert_eq!(h.ecc_errors.corrected_volatile, Some(5));
    assert_eq!(h.ecc_errors.uncorrected_volatile, Some(0), "first call");
    let r = h.remapped_rows.unwrap();
    assert_eq!(
        (r.correctable, r.uncorrectable, r.pending, r.failure),
        (1, 2, true, false)
    );
    // 2 uncorrectable errors since the driver loaded now: a failure.
    let h = probe.devices().devices[1].health.clone().unwrap();
    let f = h.findings();
    assert_eq!(f[0].severity, Severity::Fail, "{f:?}");
    assert!(f[0].what.contains("2 uncorrectable ECC errors"), "{f:?}");
    assert!(f.iter().any(|x| x.what.contains("pending")), "{f:?}");
}

#[test]
fn ecc_off_leaves_counts_unknown_and_mig_hides_remapped_rows() {
    let mut off = FakeDevice::h100(0).healthy_ecc();
    off.health.ecc_mode = Some(false);
    off.health.ecc_pending = Some(true);
    let mut mig = FakeDevice::h100(1).healthy_ecc();
    mig.extras.mig_mode = Some(true);
    let bed = Bed::with_nvml(&FakeNvml::new().device(off).device(mig));
    let h = health_of(&bed, 0);
    let ecc = h.ecc.unwrap();
    assert_eq!((ecc.current, ecc.pending), (false, true));
    assert_eq!(h.ecc_errors.corrected_aggregate, None);
    assert!(
        h.unknown.iter().any(
            |u| u.field == Field::HealthEccErrorsCorrectedAggregate && u.detail == "ECC is off"
        )
    );
    let h = health_of(&bed, 1);
    assert_eq!(h.remapped_rows, None);
    assert!(
        h.unknown
            .iter()
            .any(|u| u.field == Field::HealthRemappedRows && u.detail.contains("MIG")),
        "{h:?}"
    );
}

#[test]
fn retired_pages_on_older_gpus() {
    let dev = FakeDevice::h100(0).health(FakeHealth {
        retired: [Some(2), Some(1)],
        retired_pending: Some(true),
        ..FakeHealth::default()
    });
    let bed = Bed::with_nvml(&FakeNvml::new().device(dev));
    let h = health_of(&bed, 0);
    let p = h.retired_pages.unwrap();
    assert_eq!(
        (p.single_bit, p.double_bit, p.pending),
        (Some(2), Some(1), Some(true))
    );
    assert!(
        h.findings()
            .iter()
            .any(|f| f.remedy == hypomnesis::types::REMEDY_RESET)
    );
    // A pre-MIG driver has no remapped-rows symbol: the same answer.
    let bed = Bed::with_nvml(&FakeNvml::new().driver(Driver::PreMig).device(
        FakeDevice::h100(0).health(FakeHealth {
            remapped_rows: Some([9, 9, 1, 1]),
            retired: [Some(0), Some(0)],
            ..FakeHealth::default()
        }),
    ));
    let h = health_of(&bed, 0);
    assert_eq!(h.remapped_rows, None);
    assert_eq!(h.retired_pages.unwrap().single_bit, Some(0));
    assert!(
        h.unknown
            .iter()
            .any(|u| u.field == Field::HealthRetiredPagesPending),
        "{h:?}"
    );
}

/// Runs the counting loop on a scoped thread until `until` holds or 10 s pass, then stops it
/// and returns the tally and how long the stop took.
fn count(probe: &Probe, until: impl Fn(&XidTally) -> bool) -> (XidTally, Duration) {
    let mut events = probe.xid_events();
    let tally = Mutex::new(events.tally());
    let stop = AtomicBool::new(false);
    let mut stopped_in = Duration::ZERO;
    std::thread::scope(|s| {
        let h = s.spawn(|| events.count_until(&stop, &tally));
        let deadline = Instant::now() + Duration::from_secs(10);
        while !until(&tally.lock().unwrap()) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        let t = Instant::now();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        stopped_in = t.elapsed();
    });
    (tally.into_inner().unwrap(), stopped_in)
}

#[test]
fn xid_events_are_counted_per_device_and_the_wait_stops_promptly() {
    let mut gi = FakeEvent::xid(1, 94);
    gi.after_waits = 2;
    gi.gpu_instance_id = Some(3);
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc())
        .device(FakeDevice::h100(1).healthy_ecc())
        .device(FakeDevice::h100(2))
        .event(FakeEvent::xid(0, 79))
        .event(FakeEvent::xid(0, 48))
        .event(gi);
    let bed = Bed::with_nvml(&fake);
    let probe = bed.probe();
    let (t, stopped_in) = count(&probe, |t| {
        t.total_on(0) == Some(2) && t.total_on(1) == Some(1)
    });
    assert_eq!(t.total_on(0), Some(2), "{t:?}");
    assert_eq!(t.counts[&0][&79], 1);
    assert_eq!(t.memory_events_on(0), 1, "48 is memory, 79 is not");
    assert_eq!(t.last[&1].xid, 94);
    assert_eq!(t.last[&1].gpu_instance_id, Some(3));
    assert_eq!(t.last[&1].compute_instance_id, None, "0xFFFFFFFF is none");
    assert_eq!(
        t.total_on(2),
        None,
        "device 2 supports no events: unknown, not 0"
    );
    assert!(
        matches!(
            t.unknown[&2],
            XidUncounted::NoXidEvents
                | XidUncounted::Refused {
                    error: QueryError::NotSupported,
                    ..
                }
        ),
        "{t:?}"
    );
    assert!(stopped_in < Duration::from_secs(2), "{stopped_in:?}");
}

#[test]
fn a_failing_wait_backs_off_and_still_stops() {
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).healthy_ecc())
        .error("nvmlEventSetWait_v2", 15);
    let bed = Bed::with_nvml(&fake);
    let probe = bed.probe();
    let (t, stopped_in) = count(&probe, |t| t.last_error.is_some());
    assert!(t.last_error.unwrap().contains("lost"));
    assert!(stopped_in < Duration::from_secs(2), "{stopped_in:?}");
    // One wait says why, as a value.
    let mut events = probe.xid_events();
    assert!(
        matches!(
            events.wait(Duration::from_millis(10)),
            Err(hypomnesis::types::QueryError::GpuLost)
        ),
        "{events:?}"
    );
}

#[test]
fn no_nvml_means_no_events_with_the_reason() {
    let bed = Bed::new();
    let probe = bed.probe();
    let events = probe.xid_events();
    assert!(
        matches!(
            events.unavailable(),
            Some(XidUncounted::NoNvml {
                cause: BackendCause::LibraryMissing | BackendCause::LibraryUnusable,
                ..
            })
        ),
        "{events:?}"
    );
    assert!(
        events
            .unavailable()
            .unwrap()
            .to_string()
            .starts_with("no NVML: ")
    );
    let (t, _) = count(&probe, |_| true);
    assert!(t.unavailable.is_some());
    assert_eq!(t.total_on(0), None);
}

#[test]
fn amdgpu_ras_counts_and_bad_pages() {
    let bed = Bed::new();
    bed.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128).ras(
        "ue: 0\nce: 3\nde: 1",
        Some("0x0003a8f1 : 0x00001000 : R\n0x0003a8f2 : 0x00001000 : P"),
    ));
    bed.gpu(FakeGpu::amdgpu("0000:04:00.0", 2, 129).ras("Query currently inaccessible", None));
    bed.gpu(FakeGpu::amdgpu("0000:05:00.0", 3, 130));
    let list = Probe::with_options(bed.options().health(true)).devices();
    let h = list.devices[0].health.clone().unwrap();
    let umc = h.ras.iter().find(|r| r.block == "umc").unwrap();
    assert_eq!(
        (umc.uncorrectable, umc.correctable, umc.deferred),
        (0, 3, Some(1))
    );
    assert_eq!(
        h.ras.iter().find(|r| r.block == "gfx").unwrap().deferred,
        None
    );
    let b = h.bad_pages.unwrap();
    assert_eq!((b.reserved, b.pending, b.failed), (1, 1, 0));
    assert_eq!(h.findings().len(), 1, "the pending page: {h:?}");
    let h = list.devices[1].health.clone().unwrap();
    assert!(
        h.unknown.iter().any(|u| u.field == Field::HealthRas
            && u.detail.starts_with("umc: ")
            && u.detail.contains("inaccessible")),
        "{h:?}"
    );
    let h = list.devices[2].health.clone().unwrap();
    assert!(!h.any_reading());
    let ras = h
        .unknown
        .iter()
        .find(|u| u.field == Field::HealthRas)
        .unwrap();
    assert!(ras.detail.contains("no ras/"), "{h:?}");
    // NVIDIA's ECC readings are null on every amdgpu device, and one entry says why.
    for d in &list.devices {
        let h = d.health.as_ref().unwrap();
        assert_eq!(h.ecc, None);
        assert!(!h.ecc_errors.any_known());
        let ecc: Vec<_> = h
            .unknown
            .iter()
            .filter(|u| u.field == Field::HealthEcc)
            .collect();
        assert_eq!(ecc.len(), 1, "{h:?}");
        assert_eq!(ecc[0].reason, UnknownReason::Unsupported);
    }
}

#[test]
fn unattributed_memory_per_device() {
    // Device 0: 4 MiB used by the device, processes 0 (a fresh H100 in the fake). Device 1:
    // used 20 GiB, processes 12 GiB and one unknown.
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0))
        .device(FakeDevice::h100(1).memory_used(&[20 << 30]))
        .process(FakeProcess::compute(1, 4242, 10 << 30))
        .process(FakeProcess::compute(1, 4343, 2 << 30))
        .process(FakeProcess::compute(1, 4444, 0).not_available());
    let bed = Bed::with_nvml(&fake);
    let list = bed.probe().gpu_processes();
    let u = list.unattributed();
    assert_eq!(u[0].bytes, Some(4 << 20));
    assert_eq!(u[0].bound, Some(Bound::Exact));
    assert_eq!(u[1].bytes, Some(8 << 30));
    assert_eq!(u[1].bound, Some(Bound::AtMost));
    assert_eq!(u[1].processes_bytes, 12 << 30);
    // A legacy driver: used includes a reservation it does not report.
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).driver(Driver::Legacy));
    let u = bed.probe().gpu_processes().unattributed();
    assert_eq!(u[0].bytes, None);
    assert!(u[0].reason.as_deref().unwrap().contains("R510"));
}
