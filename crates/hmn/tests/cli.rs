//! The built `hmn` binary, run against the fake NVML, a fake nvidia-smi and fixture /proc trees.

use std::process::Stdio;

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess, FakeSmi};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const H100_TOTAL: u64 = 85_520_809_984;

fn three_processes() -> (FakeNvml, Vec<FakeProc>) {
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 4242, 10 << 30))
        .process(FakeProcess::graphics(0, 4242, 2 << 30))
        .process(FakeProcess::graphics(0, 1000, 300 << 20))
        .process(FakeProcess::compute(1, 5151, 70 << 30))
        .process(FakeProcess::compute(1, 6000, 0).not_available());
    let procs = vec![
        FakeProc::new(4242, "python3").uid(0),
        FakeProc::new(1000, "Xorg").uid(0),
        FakeProc::new(5151, "训练脚本").uid(4_000_123),
        FakeProc::new(6000, "vllm").uid(0),
    ];
    (fake, procs)
}

fn bed_with_processes() -> Bed {
    let (fake, procs) = three_processes();
    let bed = Bed::with_nvml(&fake);
    let fx = bed.fixture();
    for p in &procs {
        fx.process(p).unwrap();
    }
    bed
}

#[test]
fn no_gpu_prints_host_ram_and_one_reason_line() {
    let bed = Bed::new();
    let o = bed.run(&[]);
    assert!(o.status.success());
    assert_eq!(stdout(&o), "RAM: 23.3 GiB available / 23.5 GiB\n");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("hmn: no GPU found (NVML: cannot load "),
        "{err}"
    );
    assert!(err.contains("; nvidia-smi: "), "{err}");
    assert!(err.contains("no-smi/nvidia-smi not found"), "{err}");
}

#[test]
fn no_gpu_json_is_valid_and_keeps_stderr_line() {
    let bed = Bed::new();
    let o = bed.run(&["--json"]);
    assert!(o.status.success());
    let v = json(&o);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["host"]["memory_total_bytes"], 24_684_084u64 * 1024);
    assert_eq!(v["host"]["memory_available_bytes"], 24_444_784u64 * 1024);
    assert_eq!(v["devices"], Value::Array(vec![]));
    assert_eq!(v["backends"][0]["backend"], "NVML");
    assert_eq!(v["backends"][0]["state"], "absent");
    assert!(stderr(&o).starts_with("hmn: no GPU found"));
}

#[test]
fn devices_text_and_json() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(2));
    let o = bed.run(&[]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].starts_with("GPU 0 [NVIDIA H100 80GB HBM3]: free "),
        "{out}"
    );
    assert!(lines[0].contains(" / 79.6 GiB, "), "{out}");
    assert!(lines[0].contains(" reserved, driver 550.54.15"), "{out}");
    assert!(lines[1].starts_with("GPU 1 "));
    assert!(lines[2].starts_with("RAM: "));
    assert_eq!(stderr(&o), "");

    let v = json(&bed.run(&["--json"]));
    let d = &v["devices"][0];
    assert_eq!(d["index"], 0);
    assert_eq!(d["vendor"], "nvidia");
    assert_eq!(d["driver"], "nvidia");
    assert_eq!(d["source"], "nvml");
    assert_eq!(d["memory"]["total_bytes"], H100_TOTAL);
    let m = &d["memory"];
    let sum = m["used_bytes"].as_u64().unwrap()
        + m["free_bytes"].as_u64().unwrap()
        + m["reserved_bytes"].as_u64().unwrap();
    assert_eq!(sum, H100_TOTAL);
    let pci = d["pci_bus_id"].as_str().unwrap();
    assert_eq!(pci.len(), 12, "{pci}");
    assert_eq!(pci, pci.to_lowercase());
    assert!(d.get("unknown").is_none(), "{d}");
}

#[test]
fn ps_table_aligns_and_summarises() {
    let bed = bed_with_processes();
    let o = bed.run(&["ps"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    let header: Vec<&str> = lines[0].split_whitespace().collect();
    assert_eq!(header, ["PID", "USER", "NAME", "DEVICE", "KIND", "VRAM"]);
    // Largest first, unknown last.
    assert!(
        lines[1].contains("5151") && lines[1].ends_with("70 GiB"),
        "{out}"
    );
    assert!(
        lines[2].contains("4242") && lines[2].contains("compute+graphics"),
        "{out}"
    );
    assert!(lines[2].ends_with("10 GiB"), "{out}");
    assert!(
        lines[3].contains("Xorg") && lines[3].ends_with("300 MiB"),
        "{out}"
    );
    assert!(
        lines[4].contains("vllm") && lines[4].ends_with('?'),
        "{out}"
    );
    assert!(
        lines[1].contains("4000123"),
        "an unnamed uid is shown as a number: {out}"
    );
    // Display width: the CJK name occupies two columns per character, so VRAM columns align.
    use unicode_width::UnicodeWidthStr;
    let w: Vec<usize> = lines[..4].iter().map(|l| l.width()).collect();
    assert!(w.iter().all(|x| *x == w[0]), "{w:?}\n{out}");
    assert_eq!(
        stderr(&o),
        "hmn: 4 GPU processes found (80.3 GiB total; 1 with unknown usage)\n"
    );
}

#[test]
fn ps_json_contract() {
    let bed = bed_with_processes();
    let o = bed.run(&["ps", "--json"]);
    assert!(o.status.success());
    let v = json(&o);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["hidden_processes"], 0);
    let rows = v["processes"].as_array().unwrap();
    assert_eq!(rows.len(), 4);
    let r = rows.iter().find(|r| r["pid"] == 4242).unwrap();
    assert_eq!(r["name"], "python3");
    assert_eq!(r["user"], "root");
    assert_eq!(r["device_index"], 0);
    assert!(r["device_uuid"].as_str().unwrap().starts_with("GPU-"));
    assert_eq!(r["kind"], "compute+graphics");
    assert_eq!(r["used_bytes"], 10u64 << 30);
    assert_eq!(r["source"], "nvml");
    let unknown = rows.iter().find(|r| r["pid"] == 6000).unwrap();
    assert_eq!(unknown["used_bytes"], Value::Null);
    assert_eq!(unknown["unknown"][0]["reason"], "driver_sentinel");
    assert!(stderr(&o).starts_with("hmn: 4 GPU processes found"));
}

#[test]
fn ps_csv() {
    let bed = bed_with_processes();
    let o = bed.run(&["ps", "--csv", "--sort", "pid"]);
    assert!(o.status.success());
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines[0],
        "pid,user,uid,name,device_index,device_uuid,kind,used_bytes,source"
    );
    assert_eq!(lines.len(), 5);
    assert!(lines[1].starts_with("1000,root,0,Xorg,0,GPU-"), "{out}");
    assert!(lines[1].ends_with(",graphics,314572800,nvml"), "{out}");
    assert!(
        lines[4].starts_with("6000,") && lines[4].ends_with(",compute,,nvml"),
        "{out}"
    );
}

#[test]
fn ps_filters() {
    let bed = bed_with_processes();
    let pids = |args: &[&str]| -> Vec<u64> { bed.ps_pids(&[&["--sort", "pid"], args].concat()) };
    assert_eq!(pids(&["--device", "1"]), vec![5151, 6000]);
    assert_eq!(pids(&["--pid", "4242,1000"]), vec![1000, 4242]);
    assert_eq!(pids(&["--user", "root"]), vec![1000, 4242, 6000]);
    assert_eq!(pids(&["--user", "4000123"]), vec![5151]);
    assert_eq!(
        pids(&["--filter", "XOR", "--filter", "vll"]),
        vec![1000, 6000]
    );
    assert_eq!(
        pids(&["--min", "1GiB"]),
        vec![4242, 5151],
        "unknown usage cannot reach --min"
    );
    assert_eq!(pids(&["--min", "0"]), vec![1000, 4242, 5151, 6000]);
}

#[test]
fn ps_exit_status() {
    let bed = bed_with_processes();
    let code = |args: &[&str]| bed.run(args).status.code().unwrap();
    assert_eq!(code(&["ps", "--exit-status"]), 0);
    assert_eq!(code(&["ps", "--exit-status", "--pid", "1"]), 1);
    assert_eq!(
        code(&["ps", "--pid", "1"]),
        0,
        "without --exit-status an empty list is success"
    );

    let mut fake = FakeNvml::h100s(2).process(FakeProcess::compute(0, 5, 1 << 20));
    fake.devices[1]
        .errors
        .push(("nvmlDeviceGetComputeRunningProcesses_v3".to_string(), 15));
    let lost = Bed::with_nvml(&fake);
    let o = lost.run(&["ps", "--exit-status", "--pid", "77"]);
    assert_eq!(o.status.code(), Some(2), "GPU 1 unreadable: undetermined");
    assert!(
        stderr(&o).contains("hmn: warning: GPU 1: compute process list unavailable"),
        "{}",
        stderr(&o)
    );
    let o = lost.run(&["ps", "--device", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).starts_with("hmn: ps: GPU 1 could not be queried"),
        "{}",
        stderr(&o)
    );
    assert_eq!(
        lost.run(&["ps", "--exit-status", "--device", "0", "--pid", "77"])
            .status
            .code(),
        Some(1)
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let bed = bed_with_processes();
    for args in [
        &["ps", "--filter", ""][..],
        &["ps", "--min", "12 parsecs"],
        &["ps", "--device", "9"],
        &["ps", "--sort", "bogus"],
        &["--proc-root", "/definitely/not/here"],
        &["frobnicate"],
    ] {
        let o = bed.run(args);
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(o.stdout.is_empty(), "{args:?}");
        let err = stderr(&o);
        assert!(
            err.starts_with("hmn: ") && err.lines().count() == 1,
            "{args:?}: {err}"
        );
    }
    let o = bed.run(&["ps", "--device", "9"]);
    assert_eq!(stderr(&o), "hmn: ps: no GPU 9 (have 2 devices)\n");
    let o = bed.run(&["--proc-root", "/definitely/not/here"]);
    assert_eq!(
        stderr(&o),
        "hmn: --proc-root /definitely/not/here: not a directory\n"
    );
}

#[test]
fn malformed_meminfo_names_the_file() {
    let bed = Bed::new();
    std::fs::write(
        bed.proc().join("meminfo"),
        "MemTotal: many kB\nMemFree: 1 kB\n",
    )
    .unwrap();
    let o = bed.run(&[]);
    assert_eq!(o.status.code(), Some(2));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("meminfo:1: MemTotal: malformed size"), "{err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn hostile_names_are_escaped_in_text() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).process(FakeProcess::compute(0, 31337, 1 << 20)));
    bed.fixture()
        .process(&FakeProc::new(31337, "evil\x1b[2J"))
        .unwrap();
    let o = bed.run(&["ps"]);
    let out = stdout(&o);
    assert!(!out.contains('\x1b'), "{out:?}");
    assert!(out.contains("evil\\x1b[2J"), "{out}");
    let v = json(&bed.run(&["ps", "--json"]));
    assert_eq!(
        v["processes"][0]["name"], "evil\x1b[2J",
        "JSON keeps the real name"
    );
}

#[test]
fn closed_stdout_exits_quietly() {
    let bed = bed_with_processes();
    let (read, write) = nix::unistd::pipe().unwrap();
    drop(read);
    let o = bed
        .cmd(&["ps"])
        .stdout(Stdio::from(std::fs::File::from(write)))
        .stderr(Stdio::piped())
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(0));
    assert!(!stderr(&o).contains("Broken pipe"), "{}", stderr(&o));
}

#[test]
fn nvidia_smi_fallback_and_its_timeout() {
    let bed = Bed::new();
    let smi_dir = bed.dir.path().join("smi");
    let smi = FakeSmi::new(
        "0, NVIDIA A100-SXM4-40GB, GPU-11111111-2222-3333-4444-555555555555, 00000000:07:00.0, 535.104.05, 40960, 1024, 39416, 520\n",
        "4242, python3, 1000, GPU-11111111-2222-3333-4444-555555555555\n",
    )
    .install(&smi_dir)
    .unwrap();
    let o = bed
        .cmd(&["--json"])
        .env("HMN_NVIDIA_SMI", &smi)
        .output()
        .unwrap();
    assert!(o.status.success());
    let v = json(&o);
    assert_eq!(v["devices"][0]["source"], "nvidia-smi");
    assert_eq!(v["devices"][0]["memory"]["total_bytes"], 40_960u64 << 20);
    assert_eq!(v["backends"][1]["state"], "active");
    let o = bed
        .cmd(&["ps", "--json"])
        .env("HMN_NVIDIA_SMI", &smi)
        .output()
        .unwrap();
    let v = json(&o);
    assert_eq!(v["processes"][0]["source"], "nvidia-smi");
    assert_eq!(v["processes"][0]["used_bytes"], 1000u64 << 20);

    let hang = FakeSmi::hang()
        .install(&bed.dir.path().join("hang"))
        .unwrap();
    let started = std::time::Instant::now();
    let o = bed
        .cmd(&[])
        .env("HMN_NVIDIA_SMI", &hang)
        .env("HMN_NVIDIA_SMI_TIMEOUT_MS", "300")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(
        started.elapsed().as_secs() < 20,
        "a hung nvidia-smi must not hang hmn"
    );
    let err = stderr(&o);
    assert!(
        err.contains("did not answer within 300 ms and was killed"),
        "{err}"
    );
}

#[test]
fn help_and_version_do_not_probe() {
    let bed = Bed::new();
    let o = bed
        .cmd(&["--version"])
        .env("HMN_PROC_ROOT", "/nonexistent")
        .output()
        .unwrap();
    assert!(o.status.success());
    assert!(stdout(&o).starts_with("hmn "));
    let o = bed.run(&["ps", "--help"]);
    assert!(o.status.success());
    assert!(stdout(&o).contains("--exit-status"));
}

/// `hmn --version` is `hmn VERSION (COMMIT)`: the commit of this checkout (`build.rs` asks git),
/// the one `HMN_COMMIT` names when that was set, `commit unknown` without either.
#[test]
fn version_names_the_version_and_the_commit() {
    let o = Bed::new().run(&["--version"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let line = stdout(&o);
    let rest = line
        .strip_prefix(&format!("hmn {} (", env!("CARGO_PKG_VERSION")))
        .and_then(|r| r.strip_suffix(")\n"))
        .unwrap_or_else(|| panic!("not `hmn VERSION (COMMIT)`: {line:?}"));
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match std::env::var("HMN_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        Some(c) => assert_eq!(rest, c.trim()),
        None => match git(&["ls-files", "--error-unmatch", "build.rs"])
            .and(git(&["rev-parse", "HEAD"]))
        {
            // A prefix of HEAD's full hash, at least git's shortest abbreviation.
            Some(head) => assert!(
                rest.len() >= 7 && head.starts_with(rest),
                "{rest} is not HEAD {head}"
            ),
            None => assert_eq!(rest, "commit unknown"),
        },
    }
}

/// The `cli` feature of the library package builds this crate's sources (one implementation):
/// every dependency and feature of `crates/hmn` must exist there too, or
/// `cargo install --path crates/hypomnesis --features cli` breaks (it did twice when a branch
/// added a dependency here only).
#[test]
fn the_library_cli_feature_has_every_dependency_and_feature_of_hmn() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
    let (hmn, lib) = (read("hmn/Cargo.toml"), read("hypomnesis/Cargo.toml"));
    /// The lines of one `[section]`.
    fn section<'a>(toml: &'a str, name: &str) -> Vec<&'a str> {
        toml.lines()
            .skip_while(|l| l.trim() != name)
            .skip(1)
            .take_while(|l| !l.starts_with('['))
            .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
            .collect()
    }
    let key = |l: &str| l.split(['=', '.']).next().unwrap().trim().to_string();
    let lib_deps: Vec<String> = section(&lib, "[dependencies]")
        .iter()
        .map(|l| key(l))
        .collect();
    let lib_features = section(&lib, "[features]").join("\n");
    let cli = lib_features
        .split("\ncli = [")
        .nth(1)
        .and_then(|rest| rest.split(']').next())
        .unwrap()
        .to_string();
    for dep in section(&hmn, "[dependencies]").iter().map(|l| key(l)) {
        if dep == "hypomnesis" {
            continue;
        }
        assert!(
            lib_deps.contains(&dep),
            "hypomnesis has no dependency {dep}"
        );
        let optional = section(&lib, "[dependencies]")
            .iter()
            .any(|l| key(l) == dep && l.contains("optional = true"));
        assert!(
            !optional || lib_features.contains(&format!("\"dep:{dep}\"")),
            "no feature of hypomnesis enables {dep}"
        );
    }
    for feature in section(&hmn, "[features]").iter().map(|l| key(l)) {
        if feature == "default" {
            continue;
        }
        assert!(
            cli.contains(&format!("\"{feature}\"")),
            "hypomnesis's cli feature does not enable hmn's feature {feature}"
        );
    }
}

/// Figures no device can have (QA): NVML's `ULLONG_MAX` as the total and free memory, and
/// utilization, temperature and energy sentinels. Each is unknown with its reason and one
/// warning says so; `fits` never judges a model against a sentinel ("fits — 16 EiB free").
#[test]
fn figures_no_device_can_have_are_unknown_and_never_judged() {
    let mut dev = hmn_testbed::FakeDevice::h100(0);
    dev.memory_total = u64::MAX;
    dev.utilization_gpu = Some(u32::MAX);
    dev.utilization_memory = Some(300);
    dev.temperature_c = Some(u32::MAX);
    dev.energy_mj = Some(u64::MAX);
    let bed = Bed::with_nvml(&FakeNvml::new().device(dev));
    let o = bed.run(&["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert!(d["memory"]["total_bytes"].is_null(), "{d}");
    assert!(d["memory"]["free_bytes"].is_null(), "{d}");
    let t = &d["telemetry"];
    for f in [
        "utilization_percent",
        "memory_utilization_percent",
        "temperature_celsius",
        "energy_joules",
    ] {
        assert!(t[f].is_null(), "{f}: {t}");
    }
    let reasons: Vec<(String, String)> = d["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .map(|u| {
            (
                u["field"].as_str().unwrap().to_string(),
                u["reason"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    for (field, reason) in [
        ("memory.total_bytes", "driver_sentinel"),
        ("telemetry.utilization_percent", "implausible"),
        ("telemetry.temperature_celsius", "implausible"),
    ] {
        assert!(
            reasons.contains(&(field.to_string(), reason.to_string())),
            "{field}: {reasons:?}"
        );
    }
    let warned = v["warnings"].to_string();
    assert!(warned.contains("figures no device can have"), "{warned}");
    // The text view shows no 16 EiB, and fits refuses to judge against it.
    let text = stdout(&bed.run(&[]));
    assert!(!text.contains("EiB"), "{text}");
    let fits = bed.run(&["fits", "1TiB"]);
    assert_eq!(
        fits.status.code(),
        Some(2),
        "{}{}",
        stdout(&fits),
        stderr(&fits)
    );
    assert!(!stdout(&fits).contains("fits —"), "{}", stdout(&fits));
}
