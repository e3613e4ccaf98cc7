//! The Windows backends, run for real: cross-compiled for `x86_64-pc-windows-gnu` and run under
//! Wine by `scripts/cross.sh` (`scripts/wine/runner.sh` is the cargo runner). On every other
//! target this binary is empty.
//!
//! What runs here: host RAM (`GlobalMemoryStatusEx`), a process's working set / peak / private
//! bytes (`GetProcessMemoryInfo`), the own-RSS fast path, the process table and names (Toolhelp,
//! `GetProcessTimes`, `QueryFullProcessImageNameW`), a Job object's tree peak and a command
//! started suspended inside one, NVML loaded from a DLL (the test bed's fake NVML built as
//! `nvml.dll` with mingw) by explicit path and through the `%SystemRoot%\System32` search, and
//! the `nvidia-smi.exe` fallback (the test bed's fake program), including the hard time bound. DXGI and PDH are not here: Wine has no GPU
//! counters; their logic is tested with fakes in the library's unit tests.
#![cfg(windows)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use hmn_testbed::{FakeNvml, FakeSmi};
use hypomnesis::host::{MemoryDetail, host_memory, process_memory};
use hypomnesis::process::tree::{ProcessTable, read_stat};
use hypomnesis::{Error, Field, Probe, ProbeOptions, Roots, Source};

const MIB: u64 = 1 << 20;

/// Wine (which the runner starts with `WINEPREFIX` set, and which passes the Unix environment
/// on) keeps neither `PrivateUsage` nor `PeakJobMemoryUsed`: both read 0 there, which the
/// library reports as unknown. On Windows they must be real figures.
fn under_wine() -> bool {
    std::env::var_os("WINEPREFIX").is_some()
}
const SMI_GPU: &str = "0, NVIDIA H100 80GB HBM3, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55, 00000000:1A:00.0, 550.54.15, 81559, 72908, 8111, 540\n";

fn tmp() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

/// Touches `mib` MiB so they are resident.
fn touched(mib: usize) -> Vec<u8> {
    let mut v = vec![0u8; mib << 20];
    for i in (0..v.len()).step_by(4096) {
        v[i] = 1;
    }
    v
}

#[test]
fn host_ram_from_global_memory_status() {
    let m = host_memory(&Roots::system()).unwrap();
    assert!(m.memory_total_bytes > 64 * MIB, "{m:?}");
    assert!(m.memory_available_bytes <= m.memory_total_bytes, "{m:?}");
    assert!(m.swap_total_bytes.is_some() && m.swap_free_bytes.is_some());
}

#[test]
fn own_process_memory_follows_an_allocation() {
    let me = std::process::id();
    let before = process_memory(&Roots::system(), me, MemoryDetail::WithPss).unwrap();
    let rss0 = before.rss_bytes.unwrap();
    assert!(rss0 > 0);
    assert!(before.peak_rss_bytes.unwrap() >= rss0);
    if under_wine() {
        assert!(
            before.private_bytes.is_some()
                || before
                    .unknown
                    .iter()
                    .any(|u| u.field == Field::PrivateBytes),
            "unknown, not 0"
        );
    } else {
        assert!(before.private_bytes.unwrap() > 0);
    }
    assert_eq!(before.swap_bytes, None, "unknown, not 0");
    assert_eq!(before.pss_bytes, None);
    assert!(before.unknown.iter().any(|u| u.field == Field::SwapBytes));
    assert!(before.unknown.iter().any(|u| u.field == Field::PssBytes));
    let hold = touched(96);
    let after = process_memory(&Roots::system(), me, MemoryDetail::Basic).unwrap();
    assert!(
        after.rss_bytes.unwrap() >= rss0 + 64 * MIB,
        "{rss0} -> {:?}",
        after.rss_bytes
    );
    if let (Some(b), Some(a)) = (before.private_bytes, after.private_bytes) {
        assert!(a >= b + 64 * MIB, "{b} -> {a}");
    }
    let own = Probe::new().own_rss().unwrap();
    assert!(own >= rss0 + 64 * MIB, "own RSS {own}");
    assert!(hypomnesis::process_rss().unwrap() >= rss0 + 64 * MIB);
    drop(hold);
}

#[test]
fn a_missing_process_is_not_found() {
    let e = process_memory(&Roots::system(), 0xFFFF_FFF0, MemoryDetail::Basic).unwrap_err();
    assert!(matches!(e, Error::NotFound { .. }), "{e}");
    assert!(hypomnesis::process::process_name(&Roots::system(), 0xFFFF_FFF0).is_err());
    assert_eq!(hypomnesis::process_exists(0xFFFF_FFF0), Some(false));
    assert_eq!(hypomnesis::process_exists(std::process::id()), Some(true));
    let exe = std::env::current_exe().unwrap();
    assert_eq!(
        hypomnesis::process_name(std::process::id()).as_deref(),
        exe.file_name().and_then(|n| n.to_str())
    );
}

#[test]
fn the_process_table_knows_this_process_and_its_child() {
    let me = std::process::id();
    let exe = std::env::current_exe().unwrap();
    let exe_name = exe.file_name().unwrap().to_string_lossy().into_owned();
    let st = read_stat(&Roots::system(), me).unwrap();
    assert_eq!(st.pid, me);
    assert!(st.start_time > 0 && st.rss_pages > 0, "{st:?}");
    assert_eq!(
        hypomnesis::process::process_name(&Roots::system(), me)
            .unwrap()
            .map(|n| n.to_string_lossy().into_owned()),
        Some(exe_name.clone())
    );
    // A child: this binary again, running a test that sleeps.
    let mut child = Command::new(&exe)
        .args(["--exact", "sleeper", "--ignored", "--quiet"])
        .spawn()
        .unwrap();
    let mut table = ProcessTable::new();
    let deadline = Instant::now() + Duration::from_secs(20);
    let seen = loop {
        table.refresh(&Roots::system()).unwrap();
        if let Some(c) = table.get(child.id()) {
            break c.clone();
        }
        assert!(Instant::now() < deadline, "child never listed");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(seen.ppid, me);
    assert!(table.get(me).is_some());
    let tree = hypomnesis::process::tree::tree(&Roots::system(), st.id());
    assert!(tree.iter().any(|p| p.pid == child.id()), "{tree:?}");
    child.kill().unwrap();
    child.wait().unwrap();
}

/// Helper for the tests that need a child process: sleeps (run only when named).
#[test]
#[ignore = "run as a child by other tests"]
fn sleeper() {
    std::thread::sleep(Duration::from_secs(30));
}

/// Helper: allocates 200 MiB, holds it briefly, exits (run only when named).
#[test]
#[ignore = "run as a child by other tests"]
fn allocator() {
    let v = touched(200);
    std::thread::sleep(Duration::from_millis(200));
    drop(v);
}

#[test]
fn a_job_object_holds_the_exact_tree_peak() {
    use hypomnesis::process::job::Job;
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args(["--exact", "allocator", "--ignored", "--quiet"])
        .spawn()
        .unwrap();
    let job = Job::kill_on_close().unwrap();
    job.assign(&child).unwrap();
    assert!(child.wait().unwrap().success());
    match job.peak_memory_bytes().unwrap() {
        Some(peak) => assert!((200 * MIB..4096 * MIB).contains(&peak), "peak {peak}"),
        None => assert!(under_wine(), "Windows keeps PeakJobMemoryUsed"),
    }
    assert_eq!(job.active_processes().unwrap(), 0);
}

/// Helper: exits 0 when this process is in a job from its start, 7 when not (run only when
/// named).
#[test]
#[ignore = "run as a child by other tests"]
fn in_job_reporter() {
    use windows::Win32::System::JobObjects::IsProcessInJob;
    use windows::Win32::System::Threading::GetCurrentProcess;
    let mut in_job = windows::core::BOOL(0);
    // SAFETY: the current-process pseudo-handle, no job (any job), a writable BOOL.
    unsafe { IsProcessInJob(GetCurrentProcess(), None, &raw mut in_job) }.unwrap();
    std::process::exit(if in_job.as_bool() { 0 } else { 7 });
}

#[test]
fn a_command_spawned_into_a_job_runs_in_it_from_its_start() {
    use hypomnesis::process::job::Job;
    let exe = std::env::current_exe().unwrap();
    let job = Job::kill_on_close().unwrap();
    let mut cmd = Command::new(&exe);
    cmd.args(["--exact", "in_job_reporter", "--ignored", "--quiet"]);
    let t0 = Instant::now();
    let (mut child, refused) = job.spawn_into(&mut cmd, 0).unwrap();
    assert!(refused.is_none(), "{refused:?}");
    // Resumed: it runs to its end (a child left suspended would hang here).
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(60),
            "the child never ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(status.code(), Some(0), "the child was not in the job");
    // A command that does not exist is the spawn's error, and nothing is left in the job.
    let mut missing = Command::new("Z:\\no\\such\\program.exe");
    assert!(job.spawn_into(&mut missing, 0).is_err());
    assert_eq!(job.active_processes().unwrap(), 0);
}

#[test]
fn a_job_kills_its_tree_when_closed() {
    use hypomnesis::process::job::Job;
    let exe = std::env::current_exe().unwrap();
    let mut child = Command::new(&exe)
        .args(["--exact", "sleeper", "--ignored", "--quiet"])
        .spawn()
        .unwrap();
    let job = Job::kill_on_close().unwrap();
    job.assign(&child).unwrap();
    assert_eq!(job.active_processes().unwrap(), 1);
    let t0 = Instant::now();
    drop(job);
    child.wait().unwrap();
    assert!(t0.elapsed() < Duration::from_secs(10));
}

fn nvml_in(dir: &Path, fake: &FakeNvml) -> PathBuf {
    fake.install(dir).unwrap()
}

#[test]
fn nvml_from_an_explicit_dll() {
    let dir = tmp();
    let lib = nvml_in(dir.path(), &FakeNvml::h100s(2));
    assert!(lib.ends_with("nvml.dll"));
    let p = Probe::with_options(
        ProbeOptions::default()
            .nvml_library(&lib)
            .use_nvidia_smi(false),
    );
    let list = p.devices();
    let nv: Vec<_> = list
        .devices
        .iter()
        .filter(|d| d.source == Source::Nvml)
        .collect();
    assert_eq!(nv.len(), 2, "{list:#?}");
    assert_eq!(nv[0].name.as_deref(), Some("NVIDIA H100 80GB HBM3"));
    assert_eq!(nv[0].memory.total_bytes, Some(85_520_809_984));
}

/// The default search finds the driver's `%SystemRoot%\System32\nvml.dll`. Under Wine the
/// fake is put in the prefix's own `C:\windows\system32` (Wine resets `%SystemRoot%` for every
/// process) and removed again; on Windows, System32 is the real driver's and is not touched.
#[test]
fn nvml_is_found_in_system32_first() {
    if !under_wine() {
        eprintln!("not under Wine: System32 is left alone");
        return;
    }
    let root = PathBuf::from(std::env::var_os("SystemRoot").unwrap());
    let dll = root.join("System32").join("nvml.dll");
    assert!(
        !dll.exists(),
        "a real nvml.dll in the Wine prefix: {}",
        dll.display()
    );
    let staged = tmp();
    let built = nvml_in(staged.path(), &FakeNvml::h100s(3));
    std::fs::copy(&built, &dll).unwrap();
    std::fs::copy(
        staged.path().join("fake-nvml.conf"),
        dll.with_file_name("fake-nvml.conf"),
    )
    .unwrap();
    let p = Probe::with_options(ProbeOptions::default().use_nvidia_smi(false));
    let list = p.devices();
    drop(p);
    let _ = std::fs::remove_file(dll.with_file_name("fake-nvml.conf"));
    let removed = std::fs::remove_file(&dll);
    assert_eq!(
        list.devices
            .iter()
            .filter(|d| d.source == Source::Nvml)
            .count(),
        3,
        "{list:#?}"
    );
    removed.unwrap();
}

#[test]
fn nvidia_smi_exe_answers_when_nvml_is_absent() {
    let dir = tmp();
    let smi = FakeSmi::new(SMI_GPU, "")
        .install(&dir.path().join("smi"))
        .unwrap();
    let p = Probe::with_options(
        ProbeOptions::default()
            .nvml_library(dir.path().join("no-such-nvml.dll"))
            .use_nvidia_smi(true)
            .nvidia_smi(&smi),
    );
    let list = p.devices();
    let d: Vec<_> = list
        .devices
        .iter()
        .filter(|d| d.source == Source::NvidiaSmi)
        .collect();
    assert_eq!(d.len(), 1, "{list:#?}");
    assert_eq!(d[0].memory.total_bytes, Some(81559 * MIB));
    let calls = std::fs::read_to_string(dir.path().join("smi").join("nvidia-smi.calls")).unwrap();
    assert!(calls.contains("--query-gpu="), "{calls}");
}

#[test]
fn a_hung_nvidia_smi_exe_is_killed_at_the_deadline() {
    let dir = tmp();
    let smi = FakeSmi::hang().install(&dir.path().join("smi")).unwrap();
    let p = Probe::with_options(
        ProbeOptions::default()
            .nvml_library(dir.path().join("no-such-nvml.dll"))
            .use_nvidia_smi(true)
            .nvidia_smi(&smi)
            .nvidia_smi_timeout(Duration::from_millis(500)),
    );
    let t0 = Instant::now();
    let list = p.devices();
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    assert!(list.devices.is_empty(), "{list:#?}");
    let smi = list
        .backends
        .iter()
        .find(|b| b.backend == hypomnesis::Backend::NvidiaSmi)
        .unwrap();
    let state = format!("{:?}", smi.state);
    assert!(state.contains("500"), "names the timeout: {state}");
}

/// DXGI and PDH run for real (Wine has a DXGI but no GPU counters): the backend reports a
/// state, and every DXGI device's usage is a figure or an unknown with its reason.
#[test]
fn dxgi_and_pdh_answer_without_inventing_figures() {
    let p = Probe::with_options(
        ProbeOptions::default()
            .nvml_library("no-such-nvml.dll")
            .use_nvidia_smi(false),
    );
    let list = p.devices();
    let dxgi = list
        .backends
        .iter()
        .find(|b| b.backend == hypomnesis::Backend::Dxgi)
        .expect("a DXGI status");
    eprintln!("DXGI: {:?}", dxgi.state);
    for d in list.devices.iter().filter(|d| d.source == Source::Dxgi) {
        eprintln!("{d:?}");
        assert!(d.memory.total_bytes.is_some_and(|t| t > 0));
        assert!(
            d.memory.used_bytes.is_some()
                || d.unknown.iter().any(|u| u.field == Field::MemoryUsedBytes),
            "{d:?}"
        );
    }
    let procs = p.gpu_processes();
    assert!(procs.processes.iter().all(|r| r.used_bytes.is_some()));
    // Spill: measurable only with PDH's adapter counters, which Wine does not have.
    if under_wine() {
        assert!(!hypomnesis::is_spill_measurable());
    }
}
