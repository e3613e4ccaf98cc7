//! The command of `hmn run` as a job of its own (`run::job`): a signal sent to hmn's process
//! group reaches it once; Ctrl+C at a terminal reaches it directly and hmn still reports; its
//! `argv[0]` is the name it was given, with or without a cgroup; it does not outlive a killed
//! hmn; and its transient cgroup never outlives the run (leftover processes moved out, a killed
//! run's group removed by the next run).

// A test that cannot run here says so on stderr.
#![allow(clippy::print_stderr)]

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmn_testbed::python;
use hypomnesis::Roots;
use hypomnesis::cgroup::PeakCgroup;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::util::{Bed, json, stderr};

fn pid(p: u32) -> Pid {
    Pid::from_raw(i32::try_from(p).unwrap())
}

pub fn wait_for_file(path: &Path) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(100));
}

/// Python: counts the `signal` it receives; once ready writes `ready`, and one second after
/// the first signal writes the count to `count` and exits 0.
fn counter(dir: &Path, signal: &str) -> String {
    format!(
        r#"
import signal, time
got = []
signal.signal(signal.{signal}, lambda s, f: got.append(time.time()))
open("{dir}/ready", "w").write("1")
deadline = time.time() + 20
while time.time() < deadline and not (got and time.time() - got[0] > 1.0):
    time.sleep(0.02)
open("{dir}/count", "w").write(str(len(got)))
"#,
        dir = dir.display()
    )
}

fn count(dir: &Path) -> String {
    std::fs::read_to_string(dir.join("count")).unwrap()
}

/// `hmn ARGS` in a process group of its own (as a shell starts a job).
fn spawn_job(bed: &Bed, args: &[&str]) -> Child {
    use std::os::unix::process::CommandExt;
    bed.cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap()
}

#[test]
fn a_signal_to_hmns_process_group_reaches_the_command_once() {
    let bed = Bed::new().real_proc();
    let script = counter(bed.dir.path(), "SIGTERM");
    for cgroup in [&["--no-cgroup"][..], &[]] {
        let _ = std::fs::remove_file(bed.path("ready"));
        let mut args = vec!["run", "--json"];
        args.extend_from_slice(cgroup);
        args.extend_from_slice(&["--", python(), "-c", &script]);
        let child = spawn_job(&bed, &args);
        wait_for_file(&bed.path("ready"));
        // `timeout`, a shell's `kill %1`, a batch system: the signal goes to hmn's group.
        kill(Pid::from_raw(-pid(child.id()).as_raw()), Signal::SIGTERM).unwrap();
        let o = child.wait_with_output().unwrap();
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert_eq!(count(bed.dir.path()), "1", "{args:?}: once, not twice");
        assert_eq!(json(&o)["forwarded_signals"], serde_json::json!([15]));
    }
}

#[test]
fn ctrl_c_at_a_terminal_reaches_the_command_once_and_hmn_reports() {
    if Command::new("script").arg("--version").output().is_err() {
        eprintln!(
            "\n*** SKIPPED: util-linux's script (a terminal for the test) is not installed ***\n"
        );
        return;
    }
    let bed = Bed::new().real_proc();
    let script = counter(bed.dir.path(), "SIGINT");
    let line = format!(
        "{} run --json -- {} -c '{}'",
        env!("CARGO_BIN_EXE_hmn"),
        python(),
        script.replace('\'', "'\\''")
    );
    // `script` runs the line on a new terminal, copying its stdin to it.
    let mut child = bed
        .env
        .command("script")
        .args(["-q", "-e", "-f", "-c", &line, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    wait_for_file(&bed.path("ready"));
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(b"\x03").unwrap(); // Ctrl+C
    stdin.flush().unwrap();
    let o = child.wait_with_output().unwrap();
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert_eq!(o.status.code(), Some(0), "{out}");
    assert_eq!(count(bed.dir.path()), "1", "{out}");
    assert!(
        out.contains("\"forwarded_signals\":[]"),
        "not forwarded: {out}"
    );
    assert!(out.contains("hmn run: "), "the report: {out}");
}

/// Drives an interactive bash on a new terminal: runs `hmn run` of a 2-second command (which
/// prints `DONE-42`), presses Ctrl+Z after 0.7 s, lets 3 s pass, types `fg`, and prints what the terminal showed after
/// Ctrl+Z and after `fg`, as JSON.
const CTRL_Z: &str = r#"
import json, os, pty, select, sys, time
hmn = sys.argv[1]
pid, fd = pty.fork()
if pid == 0:
    os.execvp("bash", ["bash", "--norc", "--noprofile", "-i"])
def drain(t):
    out = b""
    end = time.time() + t
    while time.time() < end:
        if select.select([fd], [], [], 0.1)[0]:
            try:
                out += os.read(fd, 4096)
            except OSError:
                break
    return out.decode(errors="replace")
drain(1)
os.write(fd, (hmn + " run --no-cgroup -- sh -c 'sleep 2; echo DONE-$((6 * 7))'\n").encode())
time.sleep(0.7)
os.write(fd, b"\x1a")
stopped = drain(3)
os.write(fd, b"fg\n")
resumed = drain(6)
os.write(fd, b"exit\n")
print(json.dumps({"stopped": stopped, "resumed": resumed}))
"#;

#[test]
fn ctrl_z_stops_the_job_and_fg_resumes_it() {
    if Command::new("bash").arg("--version").output().is_err() {
        eprintln!("\n*** SKIPPED: no bash for an interactive shell on a terminal ***\n");
        return;
    }
    let bed = Bed::new().real_proc();
    let o = bed
        .env
        .command(python())
        .args(["-c", CTRL_Z, env!("CARGO_BIN_EXE_hmn")])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    let (stopped, resumed) = (
        v["stopped"].as_str().unwrap(),
        v["resumed"].as_str().unwrap(),
    );
    assert!(
        stopped.contains("Stopped"),
        "the shell sees the job stop: {stopped}"
    );
    assert!(
        !stopped.contains("DONE-42"),
        "the command is stopped too: {stopped}"
    );
    assert!(resumed.contains("DONE-42"), "fg resumes it: {resumed}");
    assert!(
        resumed.contains("exit status   0"),
        "and hmn reports: {resumed}"
    );
}

/// The first line of `/proc/<pid>/cmdline` of the command, as `hmn run --json ARGS -- sh …`
/// (on the real `/sys`, so with a cgroup where one can be made) sees it, and whether the run
/// used a cgroup.
fn argv0(bed: &Bed, extra: &[&str]) -> (String, bool) {
    let out = bed.path("argv0");
    let mut args = vec!["run", "--json"];
    args.extend_from_slice(extra);
    let line = format!(
        "tr '\\0' '\\n' < /proc/$$/cmdline | head -n 1 > {}",
        out.display()
    );
    args.extend_from_slice(&["--", "sh", "-c", &line]);
    let o = bed.cmd(&args).env("HMN_SYS_ROOT", "/sys").output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let cgroup = json(&o)["cgroup_peak_bytes"].is_u64();
    (
        std::fs::read_to_string(out).unwrap().trim().to_string(),
        cgroup,
    )
}

#[test]
fn argv0_is_the_name_given_with_or_without_a_cgroup() {
    let bed = Bed::new().real_proc();
    assert_eq!(argv0(&bed, &["--no-cgroup"]), ("sh".to_string(), false));
    let (name, cgroup) = argv0(&bed, &[]);
    assert_eq!(name, "sh", "the cgroup path keeps it too");
    if !cgroup {
        eprintln!("\n*** no transient cgroup here: argv[0] checked without one only ***\n");
    }
}

fn alive(p: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{p}/stat"))
        .ok()
        .and_then(|t| t.get(t.rfind(')')? + 2..).map(|r| !r.starts_with('Z')))
        .unwrap_or(false)
}

#[test]
fn the_command_does_not_outlive_a_killed_hmn() {
    let bed = Bed::new().real_proc();
    let pidfile = bed.path("pid");
    let line = format!("echo $$ > {}; exec sleep 30", pidfile.display());
    let mut child = spawn_job(&bed, &["run", "--", "sh", "-c", &line]);
    wait_for_file(&pidfile);
    let command: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(alive(command));
    kill(pid(child.id()), Signal::SIGKILL).unwrap();
    child.wait().unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while alive(command) {
        assert!(Instant::now() < deadline, "the command outlived hmn");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The cgroup `hmn run` makes its groups in (this test's own, under the real `/sys`: these
/// tests point hmn at it), or `None` (loudly) where none can be made here.
/// Held by the tests here that make or watch `hmn-run-*` groups: every `hmn run` removes the
/// groups of runs whose hmn is gone, so one test's many runs would remove another's fixture.
static CGROUP_GROUPS: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub fn cgroup_groups() -> std::sync::MutexGuard<'static, ()> {
    CGROUP_GROUPS
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn own_cgroup() -> Option<PathBuf> {
    match PeakCgroup::create(
        &Roots::system(),
        &format!("hmn-test-probe-{}", std::process::id()),
    ) {
        Ok(c) => {
            let parent = c.dir().parent().map(Path::to_path_buf);
            c.remove().unwrap();
            parent
        }
        Err(e) => {
            eprintln!("\n*** SKIPPED: no transient cgroup can be made here ({e}) ***\n");
            None
        }
    }
}

fn memory_cgroup_of(p: u32) -> String {
    std::fs::read_to_string(format!("/proc/{p}/cgroup")).unwrap()
}

#[test]
fn a_process_left_in_the_cgroup_is_moved_out_and_the_cgroup_removed() {
    let _serial = cgroup_groups();
    let Some(own) = own_cgroup() else { return };
    let bed = Bed::new().real_proc();
    let pidfile = bed.path("daemon");
    let line = format!(
        "sleep 30 > /dev/null 2>&1 & echo $! > {}",
        pidfile.display()
    );
    let child = bed
        .cmd(&["run", "--json", "--", "sh", "-c", &line])
        .env("HMN_SYS_ROOT", "/sys")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let hmn = child.id();
    let o = child.wait_with_output().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert!(v["cgroup_peak_bytes"].is_u64(), "{v}");
    let daemon: u32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let warnings = v["warnings"].to_string();
    assert!(
        warnings.contains("1 process the command left running moved out of the transient cgroup"),
        "{warnings}"
    );
    // Its group is `hmn-run-<pid>-<start>` (the start time tells a reused pid from it).
    let left: Vec<String> = std::fs::read_dir(&own)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n == &format!("hmn-run-{hmn}") || n.starts_with(&format!("hmn-run-{hmn}-")))
        .collect();
    assert!(left.is_empty(), "removed: {left:?}");
    assert!(alive(daemon), "moved, not killed");
    assert!(
        !memory_cgroup_of(daemon).contains("hmn-run-"),
        "{}",
        memory_cgroup_of(daemon)
    );
    kill(pid(daemon), Signal::SIGKILL).unwrap();
}

#[test]
fn a_command_that_ends_at_once_is_still_measured_by_its_cgroup() {
    // `true` can end before hmn sees it in the group's cgroup.procs; before the group's own
    // peak was asked, about half of such runs fell back to sampling (14 of 30, measured).
    let _serial = cgroup_groups();
    if own_cgroup().is_none() {
        return;
    }
    for _ in 0..20 {
        // The machine as it is (no test bed: its fake NVML's start-up hides the race).
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_hmn"));
        for (var, _) in std::env::vars_os() {
            if var.to_string_lossy().starts_with("HMN_") {
                cmd.env_remove(var);
            }
        }
        let o = cmd
            .args(["run", "--json", "--", "true"])
            .env("HMN_NVML_LIB", "/nonexistent/libnvidia-ml.so.1")
            .env("HMN_NVIDIA_SMI", "/nonexistent/nvidia-smi")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let v = json(&o);
        assert_eq!(v["peak_ram"]["method"], "cgroup", "{v}");
        assert!(
            v["cgroup_peak_bytes"].as_u64().is_some_and(|b| b > 0),
            "{v}"
        );
        assert_eq!(v["warnings"], serde_json::json!([]), "{v}");
    }
}

#[test]
fn a_killed_runs_cgroup_is_removed_by_the_next_run() {
    let _serial = cgroup_groups();
    let Some(own) = own_cgroup() else { return };
    // A dead pid: a process that has exited and been reaped.
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    // The killed run's daemon, left in its group.
    let mut daemon = Command::new("sleep").arg("30").spawn().unwrap();
    let bed = Bed::new().real_proc();
    // A group of an older hmn, named by a pid that is gone; then one whose pid now names
    // another process (the daemon, started long after tick 1): its hmn is gone too.
    for (name, owner) in [
        (format!("hmn-run-{dead}"), dead),
        (format!("hmn-run-{}-1", daemon.id()), daemon.id()),
    ] {
        let stale = own.join(&name);
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("cgroup.procs"), daemon.id().to_string()).unwrap();
        assert!(memory_cgroup_of(daemon.id()).contains(&name));
        let o = bed
            .cmd(&["run", "--", "true"])
            .env("HMN_SYS_ROOT", "/sys")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!(
                "(its hmn, pid {owner}, is gone); moved the 1 process left in it"
            )),
            "{name}: {err}"
        );
        assert!(!stale.exists(), "{name}: the stale group is removed");
        assert!(alive(daemon.id()), "its process is moved, not killed");
        assert!(!memory_cgroup_of(daemon.id()).contains("hmn-run-"));
    }
    daemon.kill().unwrap();
    daemon.wait().unwrap();
}

/// `hmn __exec --cgroup-procs FILE … -- /bin/sh sh -c 'exit 7'`, and FILE's content after it.
fn exec_joining(bed: &Bed, file: &Path) -> (std::process::Output, String) {
    let o = bed
        .cmd(&[
            "__exec",
            "--cgroup-procs",
            file.to_str().unwrap(),
            "--",
            "/bin/sh",
            "sh",
            "-c",
            "exit 7",
        ])
        .output()
        .unwrap();
    (o, std::fs::read_to_string(file).unwrap_or_default())
}

#[test]
fn exec_writes_its_pid_only_into_a_cgroups_procs_file() {
    let bed = Bed::new().real_proc();
    // A regular file, even one named cgroup.procs: refused, and left as it was.
    for name in ["cgroup.procs", "notes.txt"] {
        let file = bed.path(name);
        std::fs::write(&file, "as it was\n").unwrap();
        let (o, after) = exec_joining(&bed, &file);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{name}: {err}");
        assert_eq!(after, "as it was\n", "{name}: not written");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("hmn: __exec: --cgroup-procs {}: ", file.display())),
            "{err}"
        );
    }
    // On a cgroup filesystem, only a file named cgroup.procs.
    let _serial = cgroup_groups();
    let Some(own) = own_cgroup() else { return };
    let other = ["tasks", "cgroup.threads"]
        .into_iter()
        .map(|n| own.join(n))
        .find(|p| p.exists())
        .unwrap();
    let (o, _) = exec_joining(&bed, &other);
    assert_eq!(
        o.status.code(),
        Some(2),
        "{}: {}",
        other.display(),
        stderr(&o)
    );
    assert!(
        stderr(&o).contains("not a cgroup.procs file"),
        "{}",
        stderr(&o)
    );
    // The real file is still joined, and the command runs.
    let procs = own.join("cgroup.procs");
    let (o, _) = exec_joining(&bed, &procs);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
}

#[test]
fn a_killed_doctors_probe_cgroup_is_removed() {
    let _serial = cgroup_groups();
    let Some(own) = own_cgroup() else { return };
    let mut gone = Command::new("true").spawn().unwrap();
    let dead = gone.id();
    gone.wait().unwrap();
    let bed = Bed::new().real_proc();
    for args in [&["doctor"][..], &["run", "--", "true"]] {
        let stale = own.join(format!("hmn-doctor-{dead}"));
        std::fs::create_dir(&stale).unwrap();
        let o = bed.cmd(args).env("HMN_SYS_ROOT", "/sys").output().unwrap();
        if args[0] == "run" {
            assert!(o.status.success(), "{}", stderr(&o));
        }
        assert!(
            !stale.exists(),
            "{args:?} removes a killed doctor's probe group"
        );
    }
}
