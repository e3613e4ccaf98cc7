//! A killed `hmn run` (or `hmn spill`) leaves nothing of the command's tree running (issue 22,
//! point 8): `timeout -s KILL` around hmn, the command's tree holding background children, an
//! orphan still in the command's process group, and one that left it with `setsid` — each
//! followed by its identity (pid and start time), not by name. And the guard that makes it so
//! is not measured as part of the command.

use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::{Bed, json, named_below, stderr};

/// A process's identity: its pid and start time (`stat` field 22), so a reused pid is not
/// taken for the process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Identity {
    pid: u32,
    start: u64,
}

/// Fields after `comm` in `/proc/<pid>/stat`: state is [0], ppid [1], pgrp [2], session [3],
/// start time [19].
fn stat_fields(pid: u32) -> Option<Vec<String>> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = t.get(t.rfind(')')? + 2..)?;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

fn identity(pid: u32) -> Identity {
    let f = stat_fields(pid).unwrap_or_else(|| panic!("pid {pid} is already gone"));
    Identity {
        pid,
        start: f[19].parse().unwrap(),
    }
}

/// Whether that very process still runs (a zombie has ended; a reused pid is another process).
fn running(id: Identity) -> bool {
    stat_fields(id.pid).is_some_and(|f| f[0] != "Z" && f[19].parse::<u64>().ok() == Some(id.start))
}

fn session_of(pid: u32) -> u32 {
    stat_fields(pid).unwrap()[3].parse().unwrap()
}

/// The command: two background children, a double-forked orphan that stays in the command's
/// process group, and a double-forked one in a session of its own (`setsid`); every pid goes to
/// `DIR/pids`, then `DIR/ready` is made.
fn tree_script(dir: &Path) -> String {
    let d = dir.display();
    format!(
        "echo $$ > {d}/pids; \
         sleep 300 & echo $! >> {d}/pids; \
         sleep 300 & echo $! >> {d}/pids; \
         (sleep 300 & echo $! >> {d}/pids); \
         setsid sh -c 'sleep 300 & echo $! >> {d}/pids'; \
         touch {d}/ready; wait"
    )
}

/// How hmn is killed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kill {
    /// `timeout -s KILL 4 hmn …` (hmn's process group).
    Timeout,
    /// `SIGKILL` to every process of hmn's tree named exactly `hmn`, as `killall -9 hmn` would
    /// (limited to this tree: other tests run hmn too).
    ByName,
}

/// Runs `hmn ARGS -- sh -c TREE`, kills hmn (`how`), and asserts that none of the tree's
/// processes runs a bounded while after.
fn killed_hmn_leaves_nothing(bed: &Bed, args: &[&str], sys_root: Option<&str>, how: Kill) {
    for f in ["pids", "ready"] {
        let _ = std::fs::remove_file(bed.path(f));
    }
    let script = tree_script(bed.dir.path());
    let mut line = match how {
        Kill::Timeout => vec!["-s", "KILL", "4", env!("CARGO_BIN_EXE_hmn")],
        Kill::ByName => vec![env!("CARGO_BIN_EXE_hmn")],
    };
    line.extend_from_slice(args);
    line.extend_from_slice(&["--", "sh", "-c", &script]);
    let mut cmd = bed.env.command(match how {
        Kill::Timeout => "timeout",
        Kill::ByName => "env",
    });
    // No pipes: a survivor holding one would hold the test, not fail it.
    cmd.args(&line).stdout(Stdio::null()).stderr(Stdio::null());
    if let Some(sys) = sys_root {
        cmd.env("HMN_SYS_ROOT", sys);
    }
    let mut timeout = cmd.spawn().unwrap();
    crate::jobs::wait_for_file(&bed.path("ready"));
    if how == Kill::ByName {
        let hmn = timeout.id();
        assert_eq!(
            named_below(hmn, "hmn-guard").len(),
            1,
            "the guard's own name"
        );
        let named = named_below(hmn, "hmn");
        assert!(named.contains(&hmn), "{named:?}");
        for pid in named {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap()),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
    let pids: Vec<u32> = std::fs::read_to_string(bed.path("pids"))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    assert_eq!(pids.len(), 5, "{args:?}: {pids:?}");
    let tree: Vec<Identity> = pids.iter().map(|p| identity(*p)).collect();
    let escaped = pids[4];
    assert_ne!(
        session_of(escaped),
        session_of(pids[0]),
        "the setsid orphan left the command's session (and process group)"
    );
    // `timeout` sends the signal to its own process group too, so it dies of it itself (as
    // hmn, `env`'s image, does by name).
    let status = timeout.wait().unwrap();
    assert_eq!(status.signal(), Some(9), "{args:?}: {status:?}");
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left: Vec<Identity> = tree.iter().copied().filter(|p| running(*p)).collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() > deadline {
            for p in &left {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(p.pid).unwrap()),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!("{args:?}: these outlived the killed hmn: {left:?} (of {tree:?})");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_killed_hmn_run_leaves_nothing_of_the_tree_running() {
    if Command::new("setsid").arg("--version").output().is_err() {
        eprintln!("\n*** SKIPPED: util-linux's setsid is not installed ***\n");
        return;
    }
    let bed = Bed::new().real_proc();
    // Without a cgroup: the guard's process group and its children (it is their subreaper).
    killed_hmn_leaves_nothing(&bed, &["run", "--no-cgroup"], None, Kill::Timeout);
    // `killall -9 hmn`: the guard has a name of its own, and survives to end the tree.
    killed_hmn_leaves_nothing(&bed, &["run", "--no-cgroup"], None, Kill::ByName);
    // With the real cgroup hierarchy, where one can be made: the cgroup's members too.
    {
        let _serial = crate::jobs::cgroup_groups();
        killed_hmn_leaves_nothing(&bed, &["run"], Some("/sys"), Kill::Timeout);
    }
    // `hmn spill` starts its command the same way.
    killed_hmn_leaves_nothing(&bed, &["spill"], None, Kill::Timeout);
}

#[test]
fn the_guard_is_not_measured_as_part_of_the_command() {
    let bed = Bed::new().real_proc();
    let o = bed.run(&[
        "run",
        "--json",
        "--no-cgroup",
        "--interval",
        "20ms",
        "--",
        "sh",
        "-c",
        "sleep 0.5",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let names: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"sh") && names.contains(&"sleep"), "{v}");
    assert!(
        !names.contains(&"hmn"),
        "only the command's tree: {names:?}"
    );
}
