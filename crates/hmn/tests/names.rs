//! Processes whose name is not UTF-8 (a real process, executed through a link whose file name
//! is not UTF-8, so the kernel's `comm` is those bytes): listed by `ps` with their owner,
//! followed by `watch PID`, and measured by `run`; shown escaped in text and CSV, and in JSON as
//! the lossy `name` with the exact bytes in `name_bytes_hex`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::process::{Child, Command};

use hmn_testbed::{FakeNvml, FakeProcess, python};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const GIB: u64 = 1 << 30;
const NAME: &[u8] = b"gpu\xff\xfejob";
const NAME_HEX: &str = "677075fffe6a6f62";
const NAME_LOSSY: &str = "gpu\u{fffd}\u{fffd}job";
const NAME_ESCAPED: &str = "gpu\\xff\\xfejob";

/// A link named [`NAME`] to `target`, in a fresh directory of `bed`.
fn renamed(bed: &Bed, target: &str) -> PathBuf {
    let dir = bed.path("renamed-bin");
    std::fs::create_dir_all(&dir).unwrap();
    let link = dir.join(OsStr::from_bytes(NAME));
    let target = which(target);
    std::os::unix::fs::symlink(target, &link).unwrap();
    link
}

fn which(program: &str) -> PathBuf {
    if program.starts_with('/') {
        return PathBuf::from(program);
    }
    std::env::split_paths(&std::env::var_os("PATH").unwrap())
        .map(|d| d.join(program))
        .find(|p| p.exists())
        .unwrap()
}

/// `sleep 30` run as [`NAME`], killed and reaped on drop.
struct Renamed(Child);

impl Renamed {
    fn start(bed: &Bed) -> Renamed {
        let child = Command::new(renamed(bed, "sleep"))
            .arg("30")
            .spawn()
            .unwrap();
        // Wait until the exec has renamed it.
        let comm = format!("/proc/{}/comm", child.id());
        for _ in 0..200 {
            if std::fs::read(&comm).is_ok_and(|c| c.starts_with(NAME)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Renamed(child)
    }
}

impl Drop for Renamed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn ps_lists_it_with_its_owner_and_escapes_its_name() {
    let scratch = Bed::new();
    let proc = Renamed::start(&scratch);
    let pid = proc.0.id();
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, pid, 3 * GIB));
    let bed = Bed::with_nvml(&fake).real_proc();
    let pid_arg = pid.to_string();

    let v = json(&bed.run(&["ps", "--json", "--pid", &pid_arg]));
    let row = &v["processes"][0];
    assert_eq!(row["pid"], pid);
    assert_eq!(row["name"], NAME_LOSSY);
    assert_eq!(row["name_bytes_hex"], NAME_HEX);
    assert_eq!(row["user"], "root", "the owner is read despite the name");
    assert_eq!(row["used_bytes"], 3 * GIB);

    let o = bed.run(&["ps", "--pid", &pid_arg]);
    assert!(o.status.success(), "{}", stderr(&o));
    let text = stdout(&o);
    let line = text.lines().nth(1).unwrap();
    assert!(
        line.contains(NAME_ESCAPED) && line.contains("root"),
        "{text}"
    );

    let csv = stdout(&bed.run(&["ps", "--csv", "--pid", &pid_arg]));
    let record = csv.lines().nth(1).unwrap();
    assert!(
        record.starts_with(&format!("{pid},root,0,{NAME_ESCAPED},0,")),
        "{csv}"
    );
    assert!(csv.is_ascii(), "no raw bytes in CSV: {csv:?}");
}

#[test]
fn watch_follows_it() {
    let bed = Bed::new().real_proc();
    let proc = Renamed::start(&bed);
    let pid = proc.0.id().to_string();
    let o = bed.run(&[
        "watch",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "250ms",
        &pid,
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let records: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let samples: Vec<&Value> = records.iter().filter(|r| r["kind"] == "sample").collect();
    assert!(!samples.is_empty(), "{records:?}");
    for s in &samples {
        assert_eq!(s["name"], NAME_LOSSY);
        assert_eq!(s["name_bytes_hex"], NAME_HEX);
        assert!(s["rss_bytes"].as_u64().unwrap() > 0);
    }
    let summary = records.last().unwrap();
    assert_eq!(summary["per_pid"][0]["name_bytes_hex"], NAME_HEX);

    let o = bed.run(&["watch", "--interval", "100ms", "--duration", "150ms", &pid]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(NAME_ESCAPED), "{}", stdout(&o));
    assert!(stderr(&o).contains(NAME_ESCAPED), "{}", stderr(&o));
}

#[test]
fn run_counts_its_memory() {
    let bed = Bed::new().real_proc();
    let py = renamed(&bed, python());
    // A shell (the root) runs the renamed Python as a child, which holds 100 MiB resident.
    let code = "import time\nx = bytearray(100 << 20)\nfor i in range(0, len(x), 4096): x[i] = 1\ntime.sleep(1.0)\n";
    // The link's path is not UTF-8: it reaches the shell through the environment.
    let o = bed
        .cmd(&[
            "run",
            "--json",
            "--no-cgroup",
            "--interval",
            "50ms",
            "--",
            "sh",
            "-c",
            "\"$PY\" -c \"$1\"; true",
            "sh",
            code,
        ])
        .env("PY", &py)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let child = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name_bytes_hex"] == NAME_HEX)
        .unwrap_or_else(|| panic!("the renamed child is in the tree: {v}"));
    assert_eq!(child["name"], NAME_LOSSY);
    assert!(
        child["peak_rss_bytes"].as_u64().unwrap() >= 100 << 20,
        "{child}"
    );
    assert!(
        v["peak_rss_sum_bytes"].as_u64().unwrap() >= 100 << 20,
        "{v}"
    );
    assert!(
        stderr(&o).lines().all(|l| !l.contains('\u{fffd}')),
        "text is escaped, not lossy"
    );
}
