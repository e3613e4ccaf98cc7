//! `hmn doctor` on fixtures (no GPU; NVML with a driver/library version mismatch), and for real
//! as an unprivileged user (`runuser -u nobody`, which needs root: CI runs as root).

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use hmn_testbed::FakeNvml;
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const IDS: [&str; 15] = [
    "nvml",
    "nvidia-smi",
    "accounting",
    "persistence",
    "device-nodes",
    "hidepid",
    "ptrace",
    "kernel",
    "suspended",
    "cgroup",
    "container",
    "memory-pool",
    "memory-health",
    "unattributed",
    "compute-mode",
];

fn ids(v: &Value) -> Vec<&str> {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap())
        .collect()
}

/// `hmn doctor ARGS` on `bed` without making a cgroup (`HMN_NO_CGROUP`).
pub fn doctor(bed: &Bed, args: &[&str]) -> std::process::Output {
    let mut all = vec!["doctor"];
    all.extend_from_slice(args);
    bed.cmd(&all).env("HMN_NO_CGROUP", "1").output().unwrap()
}

fn status<'a>(v: &'a Value, id: &str) -> &'a Value {
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap()
}

#[test]
fn one_line_per_check_and_json() {
    let bed = Bed::new();
    let o = doctor(&bed, &[]);
    let out = stdout(&o);
    let statuses: Vec<&str> = out
        .lines()
        .filter(|l| !l.starts_with(' '))
        .map(|l| l.split_whitespace().next().unwrap())
        .collect();
    assert_eq!(statuses.len(), IDS.len(), "{out}");
    assert!(
        statuses.iter().all(|s| ["ok", "warn", "fail"].contains(s)),
        "{out}"
    );
    let worst = if statuses.contains(&"fail") {
        2
    } else {
        i32::from(statuses.contains(&"warn"))
    };
    assert_eq!(o.status.code(), Some(worst), "{out}{}", stderr(&o));
    // Every line that is not ok has its remedy under it.
    let lines: Vec<&str> = out.lines().collect();
    for (i, l) in lines.iter().enumerate() {
        if l.starts_with("warn") || l.starts_with("fail") {
            assert!(
                lines
                    .get(i + 1)
                    .is_some_and(|n| n.trim_start().starts_with("fix: ")),
                "{out}"
            );
        }
    }
    let o = doctor(&bed, &["--json"]);
    let v = json(&o);
    assert_eq!(v["schema"], 1);
    assert_eq!(ids(&v), IDS);
    assert_eq!(
        status(&v, "nvml")["status"],
        "ok",
        "no NVML, no NVIDIA GPU: {v}"
    );
    assert!(
        status(&v, "cgroup")["saw"]
            .as_str()
            .unwrap()
            .contains("HMN_NO_CGROUP")
    );
}

#[test]
fn a_version_mismatch_fails_with_both_versions() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).version_mismatch());
    bed.fixture()
        .file(
            "driver/nvidia/version",
            "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B03-4-3)  Tue Sep 23 09:00:00 UTC 2025\n",
        )
        .unwrap();
    let o = doctor(&bed, &[]);
    assert_eq!(o.status.code(), Some(2), "{}", stdout(&o));
    let out = stdout(&o);
    let nvml = out
        .lines()
        .find(|l| l.starts_with("fail  nvml"))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(
        nvml.ends_with(
            "nvmlInit failed: driver/library version mismatch (18): library 12.550.54.15, kernel module 580.95.05"
        ),
        "{nvml}"
    );
    assert!(
        out.contains("fix: the installed NVIDIA library does not match"),
        "{out}"
    );
    let v = json(&doctor(&bed, &["--json"]));
    assert_eq!(v["status"], "fail");
    assert_eq!(status(&v, "nvml")["status"], "fail");
}

#[test]
fn as_an_unprivileged_user_for_real() {
    if !nix::unistd::geteuid().is_root() {
        eprintln!(
            "\n*** SKIPPED doctor::as_an_unprivileged_user_for_real: runuser needs root (CI runs \
             as root) ***\n"
        );
        return;
    }
    // A copy of the binary that user `nobody` can reach and run.
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
    let bin = dir.path().join("hmn");
    std::fs::copy(env!("CARGO_BIN_EXE_hmn"), &bin).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    let o = Command::new("runuser")
        .args(["-u", "nobody", "--", "env", "-i"])
        .arg(format!(
            "HMN_NVML_LIB={}",
            dir.path().join("no-nvml.so").display()
        ))
        .arg(format!(
            "HMN_NVIDIA_SMI={}",
            dir.path().join("no-smi").display()
        ))
        .arg(&bin)
        .args(["doctor", "--json"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    let v: Value = serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("{e}: {} {}", stdout(&o), stderr(&o)));
    assert_eq!(ids(&v), IDS);
    let code = o.status.code().unwrap();
    assert!(
        (1..=2).contains(&code),
        "nobody cannot make a cgroup: at least a warning ({v})"
    );
    let ptrace = status(&v, "ptrace")["saw"].as_str().unwrap();
    assert!(
        ptrace.starts_with("euid 65534; CAP_SYS_PTRACE no"),
        "{ptrace}"
    );
    assert_eq!(status(&v, "cgroup")["status"], "warn", "{v}");
    assert!(
        status(&v, "cgroup")["remedy"]
            .as_str()
            .unwrap()
            .contains("as root")
    );
    assert_eq!(v["status"], if code == 2 { "fail" } else { "warn" });
}

#[test]
fn in_a_user_namespace_root_is_said_to_be_namespaced() {
    // `unshare -r`: a user namespace whose uid 0 is the caller (needs util-linux, and a kernel
    // that lets this user make one).
    let probe = Command::new("unshare")
        .args(["--user", "--map-root-user", "true"])
        .output();
    if !probe.is_ok_and(|o| o.status.success()) {
        eprintln!("\n*** SKIPPED: no user namespace can be made here (unshare -r) ***\n");
        return;
    }
    let bed = Bed::new().real_proc();
    let o = bed
        .env
        .command("unshare")
        .args(["--user", "--map-root-user", env!("CARGO_BIN_EXE_hmn")])
        .args(["doctor", "--json"])
        .output()
        .unwrap();
    let v = json(&o);
    let saw = status(&v, "ptrace")["saw"].as_str().unwrap();
    assert!(
        saw.contains("outside this user namespace)")
            && saw.contains("CAP_SYS_PTRACE yes (namespaced)"),
        "{saw}"
    );
}

/// A GPU set to `prohibited` warns with the command that changes it; an exclusive one is said.
#[test]
fn a_prohibited_gpu_warns_with_the_command_that_changes_it() {
    use hmn_testbed::FakeDevice;
    let fake = FakeNvml::new()
        .device(FakeDevice::h100(0).compute_mode(Some(3)))
        .device(FakeDevice::h100(1).compute_mode(Some(2)));
    let bed = Bed::with_nvml(&fake);
    let o = doctor(&bed, &["--json"]);
    let v = json(&o);
    let c = status(&v, "compute-mode");
    assert_eq!(c["status"], "warn", "{c}");
    assert_eq!(
        c["saw"],
        "GPU 0: exclusive_process (one process's context at a time; hmn pick skips it while \
         held); GPU 1: prohibited (no CUDA context can be made there)"
    );
    assert!(
        c["remedy"]
            .as_str()
            .unwrap()
            .contains("sudo nvidia-smi -i 1 -c DEFAULT"),
        "{c}"
    );
}
