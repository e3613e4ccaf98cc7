//! `hmn` and `hmn ps` over fixture /proc and /sys trees with AMD, Intel and SoC GPUs: golden
//! JSON, the text views, hidden processes seen by an unprivileged user, and a suspended device
//! whose clients are not read.
//!
//! Regenerate the golden files after an intended change with
//! `UPDATE_GOLDEN=1 cargo test -p hmn --test integration drm::` and review the diff.

use std::os::unix::fs::PermissionsExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use hmn_testbed::{FakeGpu, FakeProc};

use crate::util::{Bed, max_rss_kib};

fn fdinfo(name: &str) -> String {
    hmn_testbed::fdinfo_sample(name).unwrap()
}

/// An amdgpu card with an eraD client and a forked child sharing it, a ROCm compute process,
/// an Intel iGPU client, and a suspended xe card.
fn world() -> Bed {
    let w = Bed::new();
    w.gpu(FakeGpu::i915_igpu(0, 128))
        .gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 129))
        .gpu(FakeGpu::xe_dgpu("0000:04:00.0", 2, 130).suspended());
    let era_d = fdinfo("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0");
    w.client(
        400,
        "python3",
        &[(5, "renderD129", &era_d), (6, "card1", &era_d)],
    )
    .client(401, "python3", &[(5, "renderD129", &era_d)])
    .client(
        500,
        "gnome-shell",
        &[(9, "renderD128", &fdinfo("i915-igpu.txt"))],
    );
    w.world.sys.kfd_node(1, 48233, 0, 0x03, 0, 0).unwrap();
    w.world.sys.kfd_process(402, 48233, 6 << 30).unwrap();
    w.fixture()
        .process(&FakeProc::new(402, "rocm-train"))
        .unwrap();
    w
}

/// Compares `actual` with the golden file, or rewrites it under `UPDATE_GOLDEN=1`.
fn golden(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(name);
    let pretty =
        serde_json::to_string_pretty(&serde_json::from_str::<serde_json::Value>(actual).unwrap())
            .unwrap()
            + "\n";
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &pretty).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e} (run with UPDATE_GOLDEN=1 to create it)",
            path.display()
        )
    });
    assert_eq!(
        pretty,
        expected,
        "{} differs; rerun with UPDATE_GOLDEN=1 and review the diff",
        path.display()
    );
}

#[test]
fn golden_devices_json() {
    let w = world();
    let o = w.run(&["--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    golden("drm-devices.json", &w.normalised(&o.stdout));
}

#[test]
fn golden_ps_json() {
    let w = world();
    let o = w.run(&["ps", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    golden("drm-ps.json", &w.normalised(&o.stdout));
}

#[test]
fn text_views() {
    let w = world();
    let o = w.run(&[]);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "GPU 0 [Intel 8086:9a49]: unified with host RAM, free 23.3 GiB / 23.5 GiB (the host's \
         RAM), at least 309.8 MiB held by its DRM clients, driver i915 6.18.44"
    );
    assert_eq!(
        lines[1],
        "GPU 1 [AMD 1002:73ff]: free 1.6 GiB / 8 GiB, driver amdgpu 6.18.44"
    );
    assert_eq!(
        lines[2],
        "GPU 2 [Intel 8086:e20b]: suspended (not read, so it can stay asleep), driver xe"
    );
    assert!(lines[3].starts_with("RAM: "));

    let o = w.run(&["ps", "--sort", "pid"]);
    let out = String::from_utf8(o.stdout).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    assert!(
        lines[1].contains("400") && lines[1].contains("graphics") && lines[1].ends_with("58.7 MiB"),
        "{out}"
    );
    assert!(
        lines[2].contains("401") && lines[2].ends_with("shared w/ 400"),
        "{out}"
    );
    assert!(
        lines[3].contains("rocm-train")
            && lines[3].contains("compute")
            && lines[3].ends_with("6 GiB"),
        "{out}"
    );
    assert!(
        lines[4].contains("gnome-shell") && lines[4].ends_with("309.8 MiB"),
        "{out}"
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert_eq!(
        err,
        "hmn: 4 GPU processes found (6.4 GiB total; GPU 0: unified with host RAM)\nhmn: ps: \
         unattributed (device used less the processes listed): GPU 1 294.7 MiB (the driver's \
         own allocations)\n"
    );
}

/// A discrete xe card on a mainline kernel (no VRAM size in sysfs) and on a non-mainline one
/// (`tile0/physical_vram_size_bytes`): the device line shows the size where it exists and says
/// why not where it does not.
#[test]
fn xe_vram_size_on_both_kernels() {
    let line = |gpu: FakeGpu| {
        let w = Bed::new();
        w.gpu(gpu);
        let o = w.run(&[]);
        let out = String::from_utf8(o.stdout).unwrap();
        out.lines().next().unwrap().to_string()
    };
    let mainline = line(FakeGpu::xe_dgpu("0000:03:00.0", 1, 128));
    assert_eq!(
        mainline,
        "GPU 0 [Intel 8086:e20b]: free ? / ?, driver xe 6.18.44 — memory not reported: xe \
         exposes no VRAM size in sysfs (mainline xe only through its memory-region query ioctl; \
         tile*/physical_vram_size_bytes exists only in non-mainline builds)"
    );
    let other = line(
        FakeGpu::xe_dgpu("0000:03:00.0", 1, 128)
            .file("tile0/physical_vram_size_bytes", "12884901888"),
    );
    assert_eq!(
        other,
        "GPU 0 [Intel 8086:e20b]: free ? / 12 GiB, driver xe 6.18.44"
    );
}

#[test]
fn ps_sorts_by_upstreams_keys() {
    let w = world();
    let order = |key: &str| -> Vec<u64> {
        let o = w.run(&["ps", "--json", "--sort", key]);
        assert!(
            o.status.success(),
            "{key}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect()
    };
    // VRAM: the KFD process, the iGPU client (its memory is system memory), the amdgpu client,
    // the forked child counted on its parent's row.
    for key in ["vram", "dedicated", "committed"] {
        assert_eq!(order(key), [402, 500, 400, 401], "{key}");
    }
    // GTT-resident: 2 MiB for the amdgpu client; 0 for the iGPU row (no GTT region) and the
    // forked child; the KFD-only row has no figure and goes last, not as 0.
    assert_eq!(order("shared"), [400, 500, 401, 402]);
    assert_eq!(order("total"), [402, 500, 400, 401]);
}

#[test]
fn ps_util_takes_two_samples() {
    let w = world();
    let o = w.run(&["ps", "--util", "--interval", "50ms", "--pid", "400"]);
    assert!(o.status.success());
    let out = String::from_utf8(o.stdout).unwrap();
    assert!(out.lines().next().unwrap().ends_with("UTIL"), "{out}");
    // The fixture's counters do not move between the samples: 0 % busy, not "-".
    assert!(
        out.lines().nth(1).unwrap().ends_with("0% compute")
            || out.lines().nth(1).unwrap().ends_with("0% dma")
            || out.lines().nth(1).unwrap().ends_with("0% gfx"),
        "{out}"
    );
    let v: serde_json::Value = serde_json::from_slice(
        &w.run(&[
            "ps",
            "--json",
            "--util",
            "--interval",
            "50ms",
            "--pid",
            "400",
        ])
        .stdout,
    )
    .unwrap();
    assert_eq!(v["processes"][0]["engines"]["gfx"]["busy_percent"], 0.0);
}

#[test]
fn a_suspended_devices_clients_are_not_read() {
    let w = world();
    // If hmn opened this fdinfo it would block forever: it is a FIFO nobody writes to.
    w.world
        .proc
        .process(&FakeProc::new(700, "sleeper"))
        .unwrap();
    w.world.proc.fd(700, 3, "/dev/dri/renderD130").unwrap();
    let fifo = w.world.proc.root().join("700/fdinfo/3");
    std::fs::create_dir_all(fifo.parent().unwrap()).unwrap();
    nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o644)).unwrap();
    let mut child = w
        .cmd(&["ps", "--json"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("hmn read the fdinfo of a suspended device's client and blocked");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success());
}

#[test]
fn an_unprivileged_user_sees_a_hidden_count() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!("skipped: needs root to run hmn as another user (CI runs as root)");
        return;
    }
    let w = world();
    // Another user's process: its fd directory is not listable by `nobody`.
    w.client(
        800,
        "secret",
        &[(3, "renderD129", &fdinfo("amdgpu-eraB-real.txt"))],
    );
    std::fs::set_permissions(
        w.world.proc.root().join("800/fd"),
        std::fs::Permissions::from_mode(0o700),
    )
    .unwrap();
    // A process whose fd directory is listable but whose fdinfo is not.
    w.client(
        801,
        "half",
        &[(3, "renderD129", &fdinfo("amdgpu-eraB-real.txt"))],
    );
    std::fs::set_permissions(
        w.world.proc.root().join("801/fdinfo/3"),
        std::fs::Permissions::from_mode(0o600),
    )
    .unwrap();
    // A kernel thread and a zombie, whose fd directories are not listable either: neither can
    // hold a DRM client (no files of their own), so neither is counted as hidden.
    for (pid, state, flags) in [(802, 'S', 0x0020_8040_u64), (803, 'Z', 0x0040_4044)] {
        let dir = w.world.proc.root().join(pid.to_string());
        std::fs::create_dir_all(dir.join("fd")).unwrap();
        std::fs::write(
            dir.join("stat"),
            format!("{pid} (k{pid}) {state} 2 0 0 0 -1 {flags} 0 0 0 0 0 0 0 0 20 0 1 0 100 0 0\n"),
        )
        .unwrap();
        std::fs::set_permissions(dir.join("fd"), std::fs::Permissions::from_mode(0o700)).unwrap();
    }
    std::fs::set_permissions(w.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = {
        use std::os::unix::process::CommandExt;
        w.cmd(&["ps", "--json"])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap()
    };
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(v["hidden_processes"], 2);
    let pids: Vec<u64> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["pid"].as_u64().unwrap())
        .collect();
    assert!(!pids.contains(&800) && !pids.contains(&801), "{pids:?}");
    assert!(
        pids.contains(&400),
        "readable processes are still listed: {pids:?}"
    );
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("2 hidden — run as root to see all"), "{err}");
    let code = {
        use std::os::unix::process::CommandExt;
        w.cmd(&["ps", "--exit-status", "--pid", "800"])
            .uid(65534)
            .gid(65534)
            .status()
            .unwrap()
            .code()
    };
    assert_eq!(
        code,
        Some(2),
        "hidden processes make an empty answer undetermined"
    );
}

/// Issue 17: a hostile `/proc` costs no more memory than a sane one. Beside a real client,
/// one whose fdinfo is 1 GiB (sparse), one whose fdinfo has 10 M keys, one whose fdinfo is a
/// FIFO, and one whose command line is 200 MB: each gives a bounded answer (an unknown with
/// its reason, or the name from the start of the command line), no hang, and hmn's peak RSS
/// stays within 2 MiB of the same listing without them.
#[test]
fn hostile_proc_files_cost_no_memory() {
    let era_d = fdinfo("amdgpu-eraD.txt").replace("0000:11:00.0", "0000:03:00.0");
    let bed = |hostile: bool| {
        let w = Bed::new();
        w.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 129));
        for pid in [400, 500, 600, 700] {
            w.client(pid, "longprocessname", &[(5, "renderD129", &era_d)]);
        }
        if hostile {
            let p = |pid: u32, f: &str| w.proc().join(format!("{pid}/{f}"));
            let f = std::fs::File::create(p(500, "fdinfo/5")).unwrap();
            std::io::Write::write_all(&mut &f, era_d.as_bytes()).unwrap();
            f.set_len(1 << 30).unwrap();
            let keys = era_d.clone() + &"a:1\n".repeat(10_000_000);
            std::fs::write(p(600, "fdinfo/5"), keys).unwrap();
            std::fs::remove_file(p(700, "fdinfo/5")).unwrap();
            nix::unistd::mkfifo(&p(700, "fdinfo/5"), nix::sys::stat::Mode::S_IRWXU).unwrap();
            let f = std::fs::File::create(p(400, "cmdline")).unwrap();
            std::io::Write::write_all(&mut &f, b"/opt/bin/longprocessname-x\0").unwrap();
            f.set_len(200 << 20).unwrap();
        }
        w
    };
    let (sane, hostile) = (bed(false), bed(true));
    let (base_kib, o) = max_rss_kib(&sane, &["ps", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let (kib, o) = max_rss_kib(&hostile, &["ps", "--json"]);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let row = |pid: u64| {
        v["processes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["pid"] == pid)
            .unwrap_or_else(|| panic!("no pid {pid}: {v}"))
    };
    assert!(row(400)["used_bytes"].is_u64());
    assert_eq!(
        row(400)["name"],
        "longprocessname-x",
        "argv[0] from the start"
    );
    for (pid, reason) in [(500, "too_large"), (600, "too_large"), (700, "unreadable")] {
        let r = row(pid);
        assert!(r["used_bytes"].is_null(), "{r}");
        assert_eq!(r["unknown"][0]["reason"], reason, "{r}");
    }
    #[allow(clippy::print_stderr)]
    {
        eprintln!("hmn ps peak RSS: {base_kib} KiB sane, {kib} KiB hostile");
    }
    assert!(
        kib < base_kib + 2048,
        "peak RSS {kib} KiB with hostile files vs {base_kib} KiB without"
    );
}
