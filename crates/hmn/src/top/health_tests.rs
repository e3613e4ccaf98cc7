//! Rendering tests of issue 24's figures in `top`: a device's unattributed memory, memory
//! health (the fake NVML's ECC, remapped rows and XID knobs; an amdgpu RAS fixture tree), XID
//! events counted since start, and steady-growth flags on process rows.

// Test helpers: a failed step stops the test with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hmn_testbed::{
    FakeDevice, FakeEvent, FakeGpu, FakeHealth, FakeNvml, FakeProc, FakeProcess, Sandbox,
};
use hypomnesis::XidTally;
use hypomnesis::types::XidEvent;
use ratatui::crossterm::event::KeyCode;

use super::tests::{collector, live, opts, press, text};
use crate::health::now_ms;

const GIB: u64 = 1 << 30;

/// GPU 0: ECC on with two uncorrectable errors and a pending remap, exclusive-process compute
/// mode, 20 GiB used, python3 (12 GiB); GPU 1: no health readings at all (every one NOT_SUPPORTED), a worker (1 GiB).
fn sick_bed() -> Sandbox {
    let fake = FakeNvml::new()
        .device(
            FakeDevice::h100(0)
                .memory_used(&[20 * GIB])
                .compute_mode(Some(3))
                .health(FakeHealth {
                    ecc_mode: Some(true),
                    ecc_counts: [vec![5], vec![2], vec![9], vec![2]],
                    remapped_rows: Some([1, 2, 1, 0]),
                    events_supported: Some(0xff9f),
                    ..FakeHealth::default()
                }),
        )
        .device(FakeDevice::h100_bare(1))
        .process(FakeProcess::compute(0, 4242, 12 * GIB))
        .process(FakeProcess::compute(1, 4243, GIB))
        .event(FakeEvent::xid(0, 79));
    let bed = Sandbox::with_nvml(&fake);
    let f = bed.fixture();
    f.process(&FakeProc::new(4242, "python3")).unwrap();
    f.process(&FakeProc::new(4243, "worker")).unwrap();
    f.stat(4242, "python3", 1, 1000).unwrap();
    f.stat(4243, "worker", 1, 1000).unwrap();
    bed
}

#[test]
fn the_detail_pane_shows_health_unattributed_memory_and_xid_counts() {
    let bed = sick_bed();
    let mut c = collector(&bed, 100);
    let mut app = live();
    let snap = c.sample(Duration::from_secs(1));
    let mut tally = XidTally::new(now_ms());
    tally.add(XidEvent::new(0, 79, now_ms()));
    app.xid = Some(Arc::new(Mutex::new(tally)));
    app.push(snap);
    app.now_ms = now_ms();
    let s = text(&mut app, 128, 70);
    let gpu0 = s.lines().find(|l| l.contains("GPU0 ")).unwrap();
    assert!(gpu0.contains("memory health: fail"), "{s}");
    assert!(
        !s.lines()
            .find(|l| l.contains("GPU1 "))
            .unwrap()
            .contains("memory health"),
        "no finding on GPU 1: {s}"
    );
    // 20 GiB used, python3's 12 GiB listed: 8 GiB no process accounts for.
    assert!(s.contains("unattributed 8 GiB"), "{s}");
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 128, 70);
    for want in [
        "unattributed: GPU 0 8 GiB",
        "compute mode exclusive_process",
        "ECC on",
        "ECC errors: corrected 5 volatile / 9 aggregate; uncorrected 2 / 2",
        "remapped rows: 1 correctable, 2 uncorrectable, pending yes, failure no",
        "memory health: fail: 2 uncorrectable ECC errors",
        "memory health: warn: a row remapping is pending; reset the GPU",
        "XID events since ",
        ": 1; last XID 79 (",
    ] {
        assert!(s.contains(want), "{want:?} missing:\n{s}");
    }
    // GPU 1 reads nothing: unknown with the reason, never a 0.
    press(&mut app, KeyCode::Down);
    let s = text(&mut app, 128, 70);
    assert!(s.contains("health.ecc ? ("), "{s}");
    assert!(!s.contains("compute mode"), "the default goes unsaid: {s}");
    assert!(
        !s.contains("ECC errors:"),
        "no count where none was read: {s}"
    );
    assert!(s.contains("XID events since ") && s.contains(": 0"), "{s}");
    // Events that cannot be counted say why; a replay has none.
    let mut none = XidTally::new(now_ms());
    none.unavailable = Some(hypomnesis::XidUncounted::NotLinux);
    app.xid = Some(Arc::new(Mutex::new(none)));
    assert!(
        text(&mut app, 128, 70).contains("XID events: unavailable: NVML events are Linux-only")
    );
    app.xid = None;
    assert!(text(&mut app, 128, 70).contains("XID events: not counted (a replay)"));
}

#[test]
fn the_xid_thread_counts_the_fake_nvmls_event() {
    let bed = sick_bed();
    let control = super::collect::Control::new(Duration::from_secs(1));
    let tally = super::health::spawn_xid(opts(&bed), Arc::clone(&control)).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while tally.lock().unwrap().total_on(0) != Some(1) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    control
        .stop
        .store(true, std::sync::atomic::Ordering::Relaxed);
    let t = tally.lock().unwrap().clone();
    assert_eq!(t.total_on(0), Some(1), "{t:?}");
    assert_eq!(t.last.get(&0).map(|e| e.xid), Some(79));
}

#[test]
fn health_is_read_at_its_own_cadence_and_recorded_additively() {
    let bed = sick_bed();
    let mut c = collector(&bed, 100);
    let first = c.sample(Duration::from_secs(1));
    let h = first.devices[0]
        .health
        .clone()
        .expect("read at the first sample");
    assert_eq!(h.ecc_errors.uncorrected_volatile, Some(2));
    // The next samples carry the same reading (no new driver calls until the period ends).
    let again = c.sample(Duration::from_secs(1));
    assert_eq!(again.devices[0].health, Some(h));
    // A recording line carries it, and reads back.
    let line = serde_json::to_string(&again).unwrap();
    assert!(line.contains("\"remapped_rows\""), "{line}");
    let back: super::snapshot::Snapshot = serde_json::from_str(&line).unwrap();
    assert_eq!(back.devices[0].health, again.devices[0].health);
}

#[test]
fn amdgpu_ras_blocks_and_bad_pages_reach_the_detail_pane() {
    let bed = Sandbox::new();
    bed.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 129).ras(
        "ue: 3\nce: 7\n",
        Some("0x00000001 : 0x00001000 : R\n0x00000002 : 0x00001000 : P\n"),
    ));
    let era_d = hmn_testbed::fdinfo_sample("amdgpu-eraD.txt")
        .unwrap()
        .replace("0000:11:00.0", "0000:03:00.0");
    bed.client(400, "blender", &[(5, "renderD129", &era_d)]);
    let mut c = collector(&bed, 100);
    let mut app = live();
    app.push(c.sample(Duration::from_secs(1)));
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 128, 70);
    for want in [
        "RAS umc: 3 uncorrectable, 7 correctable",
        "RAS gfx: 0 uncorrectable, 0 correctable",
        "bad pages: 1 reserved, 1 pending, 0 failed",
        "memory health: fail",
    ] {
        assert!(s.contains(want), "{want:?} missing:\n{s}");
    }
}

#[test]
fn a_steady_rise_is_flagged_and_a_model_load_is_not() {
    let bed = sick_bed();
    let mut c = collector(&bed, 100);
    let base = c.sample(Duration::from_secs(1));
    let mut app = live();
    let t0 = now_ms();
    // 40 samples 30 s apart (20 min): python3 grows by 64 MiB each; the worker loads 9 GiB
    // once, at the fifth, and stays flat.
    for i in 0..40u64 {
        let mut s = base.clone();
        s.unix_ms = t0 + i * 30_000;
        for r in &mut s.processes {
            r.gpu.used_bytes = Some(match r.gpu.pid {
                4242 => GIB + i * (64 << 20),
                _ if i < 5 => GIB,
                _ => 10 * GIB,
            });
        }
        app.push(s);
    }
    app.now_ms = t0 + 39 * 30_000;
    let s = text(&mut app, 128, 70);
    let grower = s.lines().find(|l| l.contains(" 4242 ")).unwrap();
    assert!(grower.contains("↑ python3"), "{s}");
    let loaded = s.lines().find(|l| l.contains(" 4243 ")).unwrap();
    assert!(!loaded.contains('↑'), "one jump is not growth: {s}");
    press(&mut app, KeyCode::Enter);
    let s = text(&mut app, 128, 70);
    assert!(s.contains("VRAM grows steadily: ↑ 7.5 GiB/h for "), "{s}");
    assert!(s.contains("R² 1.00, 40 samples"), "{s}");
    // A seek back in time starts the trends over.
    let mut back = base.clone();
    back.unix_ms = t0;
    app.push(back);
    assert!(!text(&mut app, 128, 70).contains('↑'));
}
