//! The sampler over real child processes (RAM) and the fake NVML (VRAM).

use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hmn_testbed::{FakeDevice, FakeNvml, FakeProcess, Used, python};
use hypomnesis::process::tree::{ProcessId, read_stat};
use hypomnesis::sampler::{Sampler, SamplerOptions, Target};
use hypomnesis::{Roots, UnknownReason};

use crate::util::Bed;

const MIB: u64 = 1 << 20;

fn id_of(child: &Child) -> ProcessId {
    read_stat(&Roots::system(), child.id()).unwrap().id()
}

/// Python: allocate `parent_mib`, fork a child that allocates `child_mib`, both hold for
/// `hold` seconds (touching every page so it is resident).
fn python_tree(parent_mib: u64, child_mib: u64, hold: f64) -> Child {
    let code = format!(
        "import os,time\nx=bytearray({parent_mib}<<20)\nif os.fork()==0:\n    y=bytearray({child_mib}<<20)\n    time.sleep({hold})\n    os._exit(0)\ntime.sleep({hold})\nos.wait()\n"
    );
    Command::new(python())
        .arg("-c")
        .arg(code)
        .stdin(Stdio::null())
        .spawn()
        .unwrap()
}

#[test]
fn the_tree_is_followed_and_its_peak_kept() {
    let bed = Bed::new().real_proc();
    let mut child = python_tree(120, 80, 1.5);
    let sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default().interval(Duration::from_millis(20)),
    );
    let seen = Arc::new(Mutex::new(0u64));
    let counter = Arc::clone(&seen);
    let handle = sampler.start(move |_| *counter.lock().unwrap() += 1);
    child.wait().unwrap();
    let report = handle.stop();
    assert!(
        report.peak_rss_bytes >= 200 * MIB,
        "{}",
        report.peak_rss_bytes
    );
    assert!(
        report.peak_rss_bytes < 400 * MIB,
        "{}",
        report.peak_rss_bytes
    );
    assert!(
        report.processes.len() >= 2,
        "parent and forked child: {:?}",
        report.processes
    );
    assert!(
        report
            .processes
            .iter()
            .all(|p| p.name.as_bytes().starts_with(b"python3")),
        "{:?}",
        report.processes
    );
    assert!(report.max_process_peak_rss_bytes.unwrap() >= 120 * MIB);
    assert_eq!(
        *seen.lock().unwrap(),
        report.samples,
        "one callback per sample"
    );
    assert_eq!(report.timeline.len() as u64, report.samples);
    assert!(report.sampler_cpu_ms.is_some());
    let last = report.timeline.last().unwrap();
    assert_eq!(last.rss_bytes, 0, "the tree has exited by the final sample");
}

#[test]
fn a_reused_pid_is_not_the_same_process() {
    let bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let mut id = id_of(&child);
    id.start_time += 1;
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Processes(vec![id]),
        SamplerOptions::default(),
    );
    let s = sampler.sample();
    assert!(s.processes.is_empty(), "{:?}", s.processes);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn vram_of_the_tree_from_nvml_with_processes_coming_and_going() {
    let mut bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[10 * MIB, 4000 * MIB, 9000 * MIB, 500 * MIB]))
        .process(
            FakeProcess::compute(0, pid, 0)
                .used_sequence(&[1024 * MIB, 3072 * MIB, 2048 * MIB])
                .visible(0, 3),
        )
        // Another process on the GPU, not in the tree: never counted.
        .process(FakeProcess::compute(0, 1, 40_000 * MIB));
    bed.install_nvml(&fake);
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default(),
    );
    let tree_vram: Vec<Option<u64>> = (0..5)
        .map(|_| sampler.sample().devices[0].tree_vram_bytes)
        .collect();
    let want = [1024 * MIB, 3072 * MIB, 2048 * MIB, 0, 0].map(Some);
    assert_eq!(tree_vram, want, "no row of the tree: a measured 0");
    let report = sampler.report();
    assert_eq!(report.peak_vram_bytes[&0], 3072 * MIB);
    assert_eq!(report.peak_device_used_bytes[&0], 9000 * MIB);
    assert_eq!(report.processes[0].peak_vram_bytes, Some(3072 * MIB));
    assert_eq!(report.processes[0].baseline_vram_bytes, Some(1024 * MIB));
    assert!(!report.processes[0].vram_is_lower_bound);
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Each device sample carries the device's unattributed memory: device-wide (the process
/// outside the target counts), exact while every figure is known, an upper bound once one is not.
#[test]
fn each_device_sample_carries_the_memory_no_listed_process_accounts_for() {
    let mut bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let mut other = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).memory_used(&[20_480 * MIB]))
        .process(FakeProcess::compute(0, pid, 8192 * MIB))
        .process(FakeProcess::compute(0, other.id(), 4096 * MIB).visible(0, 1))
        .process(
            FakeProcess::compute(0, other.id(), 0)
                .not_available()
                .visible(1, 9),
        );
    bed.install_nvml(&fake);
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default(),
    );
    let first = sampler.sample().devices[0].unattributed.clone();
    assert_eq!(
        first.bytes,
        Some(8192 * MIB),
        "20 GiB less 8 and 4: {first:?}"
    );
    assert_eq!(first.bound, Some(hypomnesis::types::Bound::Exact));
    assert_eq!(first.processes_bytes, 12_288 * MIB);
    let second = sampler.sample().devices[0].unattributed.clone();
    assert_eq!(
        (second.bytes, second.bound),
        (Some(12_288 * MIB), Some(hypomnesis::types::Bound::AtMost)),
        "an unknown row: at most, never a 0 for it: {second:?}"
    );
    for c in [&mut child, &mut other] {
        c.kill().unwrap();
        c.wait().unwrap();
    }
}

#[test]
fn vram_peaks_from_driver_accounting() {
    let mut bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let fake = FakeNvml::new()
        // Accounting on: the driver saw a 7 GiB spike the process lists never showed.
        .device(FakeDevice::h100(0).accounting())
        .process(
            FakeProcess::compute(0, pid, 0)
                .used_sequence(&[1024 * MIB, 2048 * MIB])
                .accounting_max(Used::Bytes(7168 * MIB)),
        )
        // Not in the tree: never asked about.
        .process(FakeProcess::compute(0, 1, 9000 * MIB))
        // Accounting off (the driver's default).
        .device(FakeDevice::h100(1))
        .process(FakeProcess::compute(1, pid, 512 * MIB))
        // A device that cannot tell.
        .device(FakeDevice::h100(2).error("nvmlDeviceGetAccountingMode", 3))
        // Accounting on, but the tree never used the device.
        .device(FakeDevice::h100(3).accounting());
    bed.install_nvml(&fake);
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default(),
    );
    for _ in 0..3 {
        sampler.sample();
    }
    let before = sampler.report();
    assert!(
        before.vram_accounting.is_empty(),
        "only finish() asks the driver"
    );
    let report = sampler.finish();
    assert_eq!(report.peak_vram_bytes[&0], 2048 * MIB, "sampled");
    assert_eq!(
        report.max_process_peak_vram_bytes,
        std::collections::BTreeMap::from([(0, 7168 * MIB)]),
        "devices 1 and 2 have no complete records; device 3 no matching record: unknown, not 0"
    );
    let acc = &report.vram_accounting;
    assert_eq!(acc.len(), 4);
    assert_eq!(acc[0].enabled, Some(true));
    assert_eq!(acc[0].processes.len(), 1);
    assert_eq!(acc[0].processes[0].pid, pid);
    assert_eq!(acc[0].processes[0].max_memory_bytes, Some(7168 * MIB));
    assert_eq!(acc[1].enabled, Some(false));
    assert!(acc[1].processes.is_empty());
    assert_eq!(acc[2].enabled, None);
    let why = acc[2].unknown.as_ref().unwrap();
    assert_eq!(why.reason, UnknownReason::Unsupported);
    assert_eq!(acc[3].enabled, Some(true));
    assert!(acc[3].processes.is_empty());
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn accounting_records_of_other_processes_with_the_same_pid_are_refused() {
    let mut bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let now_us = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64;
    let fake = FakeNvml::new()
        // A record left by a process that had this pid an hour ago.
        .device(FakeDevice::h100(0).accounting())
        .process(
            FakeProcess::compute(0, pid, 0)
                .visible(0, 0)
                .accounting_max(Used::Bytes(9000 * MIB))
                .accounting_start_us(now_us - 3_600_000_000),
        )
        // A record of a process that will have this pid in an hour.
        .device(FakeDevice::h100(1).accounting())
        .process(
            FakeProcess::compute(1, pid, 0)
                .visible(0, 0)
                .accounting_max(Used::Bytes(8000 * MIB))
                .accounting_start_us(now_us + 3_600_000_000),
        )
        // The child's own record, from a context it opened a moment ago.
        .device(FakeDevice::h100(2).accounting())
        .process(
            FakeProcess::compute(2, pid, 0)
                .visible(0, 0)
                .accounting_max(Used::Bytes(300 * MIB))
                .accounting_start_us(now_us),
        );
    bed.install_nvml(&fake);
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default(),
    );
    sampler.sample();
    let report = sampler.finish();
    assert_eq!(
        report.max_process_peak_vram_bytes,
        std::collections::BTreeMap::from([(2, 300 * MIB)]),
        "devices 0 and 1 hold only other processes' records: no entry (unknown, never 0)"
    );
    assert!(report.vram_accounting[0].processes.is_empty());
    assert!(report.vram_accounting[1].processes.is_empty());
    assert_eq!(report.vram_accounting[2].processes.len(), 1);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_stopped_sampler_takes_a_final_sample() {
    let bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("5").spawn().unwrap();
    let sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default()
            .interval(Duration::from_secs(3600))
            .keep_timeline(false),
    );
    let report = sampler.start(|_| {}).stop();
    assert_eq!(
        report.samples, 2,
        "one at start, one at stop, even with a long interval"
    );
    assert!(report.timeline.is_empty());
    assert!(report.peak_rss_bytes > 0);
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn a_zombie_is_no_member_and_a_tree_never_found_alive_is_not_measured() {
    let bed = Bed::new().real_proc();
    let mut child = Command::new("true").spawn().unwrap();
    let id = id_of(&child);
    // Ended, not yet reaped: a zombie, its RSS read as 0.
    while read_stat(&Roots::system(), child.id()).unwrap().state != 'Z' {
        std::thread::sleep(Duration::from_millis(5));
    }
    let mut sampler = Sampler::new(bed.probe(), Target::Tree(id), SamplerOptions::default());
    let s = sampler.sample();
    assert!(s.processes.is_empty(), "{:?}", s.processes);
    let r = sampler.report();
    assert_eq!((r.samples, r.measured_samples), (1, 0), "{r:?}");
    assert!(
        r.processes.is_empty(),
        "no peak of 0 for it: {:?}",
        r.processes
    );
    child.wait().unwrap();
}

/// The target's device memory is unknown, not 0, in a sample where none of its rows on a device
/// has a figure, and the device's peak a lower bound with the reason and the samples counted.
#[test]
fn the_targets_device_memory_is_unknown_not_zero_without_a_figure() {
    let mut bed = Bed::new().real_proc();
    let mut child = Command::new("sleep").arg("30").spawn().unwrap();
    let pid = child.id();
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, pid, 4096 * MIB).visible(0, 1))
        .process(
            FakeProcess::compute(0, pid, 0)
                .not_available()
                .visible(1, 9),
        )
        .process(FakeProcess::compute(1, pid, 0).not_available());
    bed.install_nvml(&fake);
    let mut sampler = Sampler::new(
        bed.probe(),
        Target::Tree(id_of(&child)),
        SamplerOptions::default(),
    );
    let first = sampler.sample();
    let on = |s: &hypomnesis::sampler::Sample, i: usize| {
        let d = &s.devices[i];
        (d.tree_vram_bytes, d.tree_vram_is_lower_bound)
    };
    assert_eq!(on(&first, 0), (Some(4096 * MIB), false));
    assert_eq!(on(&first, 1), (None, false), "no figure: unknown, not 0");
    // The process itself: 4 GiB known on device 0, device 1 unknown — a lower bound.
    let p = &first.processes[0];
    assert_eq!(
        (p.vram(), p.vram_is_lower_bound()),
        (Some(4096 * MIB), true)
    );
    assert!(p.vram_unknown[&1].contains("has no memory figure"), "{p:?}");
    let second = sampler.sample();
    assert_eq!(on(&second, 0), (None, false));
    // No figure anywhere: unknown, not 0 (QA: `hmn watch` printed 0 B).
    assert_eq!(second.processes[0].vram(), None);
    let per = &sampler.report().processes[0];
    assert_eq!(
        (
            per.baseline_vram_bytes,
            per.peak_vram_bytes,
            per.vram_is_lower_bound
        ),
        (Some(4096 * MIB), Some(4096 * MIB), true)
    );
    let peaks = hypomnesis::peaks::device_peaks(&sampler.report());
    assert_eq!(peaks.len(), 2, "{peaks:?}");
    assert_eq!(peaks[0].peak_vram_bytes, Some(4096 * MIB));
    assert!(peaks[0].peak_vram_is_lower_bound);
    let why = peaks[0].vram_unknown_detail.as_deref().unwrap();
    assert!(
        why.contains(&format!("pid {pid} has no memory figure"))
            && why.ends_with("(in 1 of 2 samples)"),
        "{why}"
    );
    assert_eq!(peaks[1].peak_vram_bytes, None);
    assert_eq!(peaks[1].sampled_peak_vram_bytes, None);
    assert!(
        peaks[1]
            .vram_unknown_detail
            .as_deref()
            .unwrap()
            .ends_with("(in 2 of 2 samples)")
    );
    child.kill().unwrap();
    child.wait().unwrap();
}
