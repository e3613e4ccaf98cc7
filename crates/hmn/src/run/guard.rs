//! `hmn __exec --guard` (Linux): the process that stays between hmn and the command, so that a
//! killed hmn leaves nothing of the command's tree running.
//!
//! hmn starts the guard in a process group of its own ([`super::job::Job::spawn`]); the guard
//! starts the command through the plain `hmn __exec` ([`super::job::exec_helper`], which joins
//! the transient cgroup just before it executes the command) in a process group of the
//! command's own, joins the cgroup itself, and from then on only waits and relays:
//!
//! - **Subreaper.** The guard is the command's parent and its child subreaper
//!   (`PR_SET_CHILD_SUBREAPER`): a process of the tree whose parent ends — a double fork, a
//!   daemon that `setsid`s out of the command's group and session — becomes the guard's child,
//!   not init's. Every process of the tree stays a descendant of the guard.
//! - **hmn dies.** The guard's parent-death signal is `SIGPWR`, which it never relays, and at
//!   every wake-up it compares its parent with hmn's pid: the kernel sends the parent-death
//!   signal each time the guard is re-parented, to another of hmn's threads first when hmn's
//!   thread that started it ends before the others (as under `SIGKILL`), so only the parent
//!   says that hmn is gone. Once it is, the guard sends `SIGKILL` to the command's process group,
//!   to the transient cgroup (`cgroup.kill`, cgroup v2, after moving itself out of the group),
//!   then to its own children, again and again — a killed child's orphans become the guard's
//!   children — until it has none; then to whatever the cgroup still holds (cgroup v1 has no
//!   `cgroup.kill`). A child of the guard is killed by pid without a race: nobody else can
//!   reap it, so its pid cannot name another process. Then the guard exits.
//! - **Pass-through.** Signals sent to the guard (hmn forwards `SIGINT`, `SIGTERM`, `SIGHUP`,
//!   `SIGQUIT`; also `SIGUSR1`, `SIGUSR2`, `SIGALRM`, `SIGWINCH`) go to the command. When the
//!   command stops for job control (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`), the guard takes the
//!   terminal back from the command's group and stops itself with the same signal, so hmn sees
//!   its child stop as before; continued, it gives the terminal back and continues the
//!   command's group. When the command ends the guard ends the same way: its exit code, or the
//!   signal that killed it (raised again, without a core file of the guard's own).
//! - **Not measured.** hmn samples the guard's descendants, not the guard
//!   (`Target::Descendants`), and the guard is in the cgroup only as an idle process whose
//!   memory was charged before it joined. The `ru_maxrss` hmn reports is the guard's children's,
//!   which the guard writes to hmn's pipe when the command has ended ([`super::helper`]): hmn's
//!   own children's figure would hold the guard's image.
//!
//! What escapes: a process the tree asks another service to start (`systemd-run`, a daemon
//! reached over a socket, a container runtime) is no descendant of the guard; and if the guard
//! itself is killed outright (`SIGKILL` to its pid), the command dies by its own parent-death
//! signal but the command's children are orphaned to init, as every child was before the guard
//! (the cgroup still holds them, and the next `hmn run` moves them out of it). A normal end of
//! the command kills nothing: processes it left running outlive the run, as before.

use std::io::Write as _;
use std::path::Path;
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use nix::libc::SIGPWR;
use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getppid, setpgid};
use signal_hook::consts::{
    SIGALRM, SIGCHLD, SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGWINCH,
};
use signal_hook::iterator::Signals;

use super::tty::{foreground_of, give_terminal};
use crate::args::ExecArgs;

/// The signals the guard passes on to the command.
const RELAYED: [i32; 8] = [
    SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM, SIGWINCH,
];

/// How long the guard keeps killing what is left of the tree once hmn is gone.
const KILL_FOR: Duration = Duration::from_secs(10);

/// Rounds of killing what the cgroup still holds (a member that forks meanwhile leaves a
/// child for the next round).
const CGROUP_ROUNDS: usize = 8;

/// The guard (see the [module docs](self)): joins the cgroup (`procs`, already checked), starts
/// the command, relays, and ends as the command ended — or kills its tree once hmn (`parent`)
/// is gone.
pub fn run(a: &ExecArgs, parent: u32, procs: Option<std::fs::File>) -> ExitCode {
    // Handlers first: hmn's death must not end the guard before it has cleaned up.
    let mut signals = match Signals::new(RELAYED.iter().chain(&[SIGCHLD, SIGPWR])) {
        Ok(s) => s,
        Err(e) => {
            let _ = crate::output::note(&format!("run: cannot install signal handlers: {e}"));
            return ExitCode::from(126);
        }
    };
    let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGPWR);
    // A name of its own: `killall hmn` and `pkill -x hmn`, which match the name exactly, end
    // hmn but not the guard, which then ends the command's tree (`pkill hmn`, a pattern,
    // matches both: docs/security.md).
    let _ = nix::sys::prctl::set_name(c"hmn-guard");
    // hmn died before the request took effect: nothing is left to run the command for.
    if !parent_is(parent) {
        return ExitCode::from(125);
    }
    let _ = nix::sys::prctl::set_child_subreaper(true);
    let [path, argv0, rest @ ..] = a.command.as_slice() else {
        return ExitCode::from(2);
    };
    // The guard's own pipe to hmn, and the exec pipe it passes on to the step.
    let mut pipes = (None, None);
    let spawned = std::env::current_exe().and_then(|me| {
        let mut cmd = Command::new(me);
        pipes = super::helper::guard_pipes(&mut cmd);
        cmd.arg("__exec")
            .arg("--parent")
            .arg(std::process::id().to_string());
        if let Some(fd) = a.tty {
            cmd.arg("--tty").arg(fd.to_string());
        }
        // The step joins the group just before it executes the command (`job::exec_helper`):
        // its own image, hmn's, is charged outside it.
        if let Some(p) = &a.cgroup_procs {
            cmd.arg("--cgroup-procs").arg(p);
        }
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0)
            .arg("--")
            .arg(path)
            .arg(argv0)
            .args(rest)
            .spawn()
    });
    let child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let err = super::exec::SpawnError::from_io(argv0, &e);
            let _ = crate::output::note(&format!("run: {err}"));
            return ExitCode::from(err.exit_code());
        }
    };
    let (report, exec) = pipes;
    super::helper::guard_started(exec);
    let command = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
    if let Some(mut f) = procs {
        // Joined once the step has started outside the group (hmn checks that the group holds
        // the guard): idle, its memory charged before.
        let _ = f.write_all(std::process::id().to_string().as_bytes());
    }
    // As a shell does, from both sides (the command's `__exec` does the same).
    let _ = setpgid(command, command);
    if let Some(fd) = a.tty {
        give_terminal(fd, command);
    }
    // Waited for here, by pid, with the tree's orphans (`std`'s handle cannot report stops).
    drop(child);
    let cgroup = a.cgroup_procs.as_deref().and_then(Path::parent);
    for sig in signals.forever() {
        if !parent_is(parent) {
            kill_tree(command, cgroup);
            return ExitCode::from(137);
        }
        if sig == SIGPWR {
            continue; // hmn's thread that started the guard ended, not hmn
        }
        if sig != SIGCHLD {
            if let Ok(s) = Signal::try_from(sig) {
                let _ = kill(command, s);
            }
            continue;
        }
        if let Some(code) = reap(command, a.tty, report) {
            return code;
        }
    }
    ExitCode::from(1)
}

/// Whether hmn (`parent`) is still the guard's parent.
fn parent_is(parent: u32) -> bool {
    u32::try_from(getppid().as_raw()).ok() == Some(parent)
}

/// Reaps every child that has changed state: the tree's orphans quietly; the command's stop is
/// passed on, its end returned as the guard's own (after the peak of what was reaped is
/// written to hmn's pipe, `report`).
fn reap(command: Pid, tty: Option<i32>, report: Option<std::os::fd::RawFd>) -> Option<ExitCode> {
    loop {
        match waitpid(
            Pid::from_raw(-1),
            Some(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED),
        ) {
            Ok(WaitStatus::Exited(p, code)) if p == command => {
                super::helper::tell_rusage(report);
                hand_back(tty, command);
                return Some(ExitCode::from(u8::try_from(code & 0xff).unwrap_or(1)));
            }
            Ok(WaitStatus::Signaled(p, sig, _)) if p == command => {
                super::helper::tell_rusage(report);
                hand_back(tty, command);
                return Some(die_of(sig));
            }
            Ok(WaitStatus::Stopped(p, sig)) if p == command => stop_with(command, sig, tty),
            Ok(WaitStatus::StillAlive) | Err(_) => return None,
            Ok(_) => {} // an orphan of the tree, reaped; or its stop, none of hmn's business
        }
    }
}

/// The terminal back to the guard's group when the command's group holds it, so hmn finds
/// it where it gave it.
fn hand_back(tty: Option<i32>, command: Pid) {
    if let Some(fd) = tty {
        if foreground_of(fd) == Some(command) {
            give_terminal(fd, getpgrp());
        }
    }
}

/// The command stopped. For job control, the guard stops the same way (hmn sees it and stops
/// its own job, see `job::Job`); once continued, it continues the command's group. `SIGSTOP`
/// (someone's deliberate choice) is left to whoever sent it.
fn stop_with(command: Pid, sig: Signal, tty: Option<i32>) {
    if !matches!(sig, Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
        return;
    }
    hand_back(tty, command);
    // Returns once the guard is continued (at once if its group is orphaned: hmn is gone).
    let _ = nix::sys::signal::raise(sig);
    if let Some(fd) = tty {
        if foreground_of(fd) == Some(getpgrp()) {
            give_terminal(fd, command);
        }
    }
    let _ = kill(Pid::from_raw(-command.as_raw()), Signal::SIGCONT);
}

/// Ends the guard by the signal that ended the command, without a core file of its own.
fn die_of(sig: Signal) -> ExitCode {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_CORE) {
        let _ = setrlimit(Resource::RLIMIT_CORE, 0, hard);
    }
    let _ = signal_hook::low_level::emulate_default_handler(sig as i32);
    ExitCode::from(u8::try_from(128 + sig as i32).unwrap_or(255))
}

/// hmn is gone: kills the command's process group, the cgroup, and every descendant (see the
/// [module docs](self)).
fn kill_tree(command: Pid, cgroup: Option<&Path>) {
    let me = std::process::id();
    let _ = kill(Pid::from_raw(-command.as_raw()), Signal::SIGKILL);
    if let Some(dir) = cgroup {
        cgroup_kill(dir, me);
    }
    let deadline = Instant::now() + KILL_FOR;
    loop {
        reap_all();
        let children = children_of(me);
        if children.is_empty() || Instant::now() > deadline {
            break;
        }
        for c in children {
            let _ = kill(Pid::from_raw(c), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if let Some(dir) = cgroup {
        for _ in 0..CGROUP_ROUNDS {
            let left: Vec<i32> = members(dir)
                .into_iter()
                .filter(|p| u32::try_from(*p).ok() != Some(me))
                .collect();
            if left.is_empty() {
                break;
            }
            for p in left {
                let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
            }
            std::thread::sleep(Duration::from_millis(10));
            reap_all();
        }
    }
}

/// Reaps every child that has ended, without waiting.
fn reap_all() {
    while matches!(
        waitpid(Pid::from_raw(-1), Some(WaitPidFlag::WNOHANG)),
        Ok(s) if s != WaitStatus::StillAlive
    ) {}
}

/// cgroup v2's `cgroup.kill`: every member at once, forks included. The guard moves itself to
/// the parent group first, or it would be killed with them.
fn cgroup_kill(dir: &Path, me: u32) {
    let file = dir.join("cgroup.kill");
    let Some(parent) = dir.parent() else { return };
    if !file.exists() {
        return;
    }
    let out = parent.join("cgroup.procs");
    if crate::outfile::write_kernel_file(&out, me.to_string().as_bytes()).is_ok() {
        let _ = crate::outfile::write_kernel_file(&file, b"1");
    }
}

/// The pids in a cgroup's `cgroup.procs` (none when unreadable).
fn members(dir: &Path) -> Vec<i32> {
    std::fs::read_to_string(dir.join("cgroup.procs"))
        .map(|t| {
            t.split_ascii_whitespace()
                .filter_map(|p| p.parse().ok())
                .collect()
        })
        .unwrap_or_default()
}

/// The guard's children: `/proc/self/task/<pid>/children` (the guard is one thread), else a
/// scan of every process's parent.
fn children_of(me: u32) -> Vec<i32> {
    if let Ok(t) = std::fs::read_to_string(format!("/proc/self/task/{me}/children")) {
        return t
            .split_ascii_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
    }
    let roots = hypomnesis::Roots::system();
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            hypomnesis::process::tree::read_stat(&roots, *pid).is_ok_and(|st| st.ppid == me)
        })
        .filter_map(|pid| i32::try_from(pid).ok())
        .collect()
}
