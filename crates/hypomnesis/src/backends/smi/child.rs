//! Running `nvidia-smi` under a hard time bound.
//!
//! Owns [`Runner`]: the child runs in its own process group; its stdout and stderr are read
//! with `poll` against the deadline (never a blocking read to EOF, so a grandchild that keeps a
//! pipe open cannot hold the caller); at the deadline the whole group is killed (a wrapper's
//! children too) and the child is reaped only if it dies within a short grace — a child stuck
//! in the kernel (an unkillable `D` state in a hung driver) is kept aside and reaped by a later
//! call or when the runner is dropped, never waited for. When the child exits on its own,
//! whatever it left in its group is killed as well (the group id stays reserved until the
//! child is reaped, so the kill cannot reach an unrelated process).
//!
//! No thread is started: one loop polls the pipes and checks the child.

use std::ffi::OsStr;
use std::fs::File;
use std::io::{self, Read as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::signal::{Signal, kill, killpg};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus, waitid};
use nix::unistd::Pid;

/// How often a running child is checked for exit while its pipes are quiet.
const CHECK_EVERY: Duration = Duration::from_millis(10);
/// After the child exits, how long its pipes may still be drained (output a killed leftover
/// had written); a pipe held open beyond that is abandoned.
const DRAIN_GRACE: Duration = Duration::from_millis(200);
/// After the group is killed, how long the child is given to die before it is set aside.
const REAP_GRACE: Duration = Duration::from_millis(200);

pub(crate) use super::outcome::{Finished, RunError};

/// Runs children under a hard time bound. See the [module docs](self).
#[derive(Debug)]
pub(crate) struct Runner {
    /// The signal sent to the group at the deadline. `None` only in tests: a child that
    /// ignores the kill, as an unkillable one would.
    kill_signal: Option<Signal>,
    /// Killed children that had not died within [`REAP_GRACE`].
    unreaped: Mutex<Vec<Child>>,
}

impl Default for Runner {
    fn default() -> Self {
        Runner {
            kill_signal: Some(Signal::SIGKILL),
            unreaped: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for Runner {
    fn drop(&mut self) {
        self.reap_leftovers();
    }
}

/// The pipe, non-blocking (so a read after `poll` never blocks).
fn nonblocking(pipe: Option<impl Into<OwnedFd>>) -> Option<File> {
    let fd: OwnedFd = pipe?.into();
    let flags = fcntl(&fd, FcntlArg::F_GETFL).ok()?;
    fcntl(
        &fd,
        FcntlArg::F_SETFL(OFlag::from_bits_retain(flags) | OFlag::O_NONBLOCK),
    )
    .ok()?;
    Some(File::from(fd))
}

/// Where a child not yet reaped by us stands, asked without reaping it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Running,
    /// Exited and not reaped: its pid, and so its group id, are still reserved.
    Exited,
    /// Not waitable any more (reaped behind our back, as with `SIGCHLD` ignored): its pid may
    /// already be another process's, so nothing may be sent to it.
    Gone,
}

fn state(pid: Pid) -> State {
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG | WaitPidFlag::WNOWAIT;
    match waitid(Id::Pid(pid), flags) {
        Ok(WaitStatus::StillAlive) => State::Running,
        Ok(_) => State::Exited,
        Err(_) => State::Gone,
    }
}

impl Runner {
    /// A runner whose "kill" at the deadline is `signal` (`None`: nothing is sent, so the
    /// child behaves as an unkillable one).
    #[cfg(test)]
    fn with_kill_signal(signal: Option<Signal>) -> Runner {
        Runner {
            kill_signal: signal,
            unreaped: Mutex::new(Vec::new()),
        }
    }

    /// Children set aside and not reaped yet.
    #[cfg(test)]
    fn unreaped(&self) -> usize {
        self.unreaped.lock().map_or(0, |v| v.len())
    }

    /// Reaps the set-aside children that have died since.
    fn reap_leftovers(&self) {
        let mut v = match self.unreaped.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        v.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
    }

    /// Sends the kill signal to the group and to the child itself (should it have left the
    /// group). Only called while the child is not reaped (running, or a zombie we hold), so
    /// neither id can have been reused.
    fn kill_all(&self, child: &Child) {
        let Ok(raw) = i32::try_from(child.id()) else {
            return;
        };
        if let Some(sig) = self.kill_signal {
            let _ = killpg(Pid::from_raw(raw), sig);
            let _ = kill(Pid::from_raw(raw), sig);
        }
    }

    /// Kills the group and reaps the child if it dies within [`REAP_GRACE`]; otherwise sets
    /// it aside.
    fn kill_and_reap(&self, mut child: Child) {
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        if state(pid) != State::Gone {
            self.kill_all(&child);
        }
        let until = Instant::now() + REAP_GRACE;
        loop {
            match child.try_wait() {
                Ok(Some(_)) | Err(_) => return,
                Ok(None) if Instant::now() >= until => break,
                Ok(None) => std::thread::sleep(Duration::from_millis(2)),
            }
        }
        match self.unreaped.lock() {
            Ok(mut v) => v.push(child),
            Err(poisoned) => poisoned.into_inner().push(child),
        }
    }

    /// Runs `program ARGS` (stdin from `/dev/null`) and returns its status and output, within
    /// `timeout` plus at most [`REAP_GRACE`] (or [`DRAIN_GRACE`]) whatever the child does.
    pub(crate) fn run(
        &self,
        program: &OsStr,
        args: &[String],
        timeout: Duration,
        max_output: usize,
    ) -> Result<Finished, RunError> {
        self.reap_leftovers();
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .map_err(RunError::Spawn)?;
        let deadline = Instant::now() + timeout;
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        let mut pipes = [
            nonblocking(child.stdout.take()),
            nonblocking(child.stderr.take()),
        ];
        let mut out: [Vec<u8>; 2] = [Vec::new(), Vec::new()];
        let mut exited: Option<(ExitStatus, Instant)> = None;
        loop {
            if exited.is_none() {
                let st = state(pid);
                if st == State::Exited {
                    // Its leftovers (a wrapper's background children) go with it.
                    self.kill_all(&child);
                }
                if st != State::Running {
                    let status = child.wait().map_err(RunError::Wait)?;
                    exited = Some((status, deadline.min(Instant::now() + DRAIN_GRACE)));
                }
            }
            let now = Instant::now();
            match exited {
                Some((status, drain_until))
                    if pipes.iter().all(Option::is_none) || now >= drain_until =>
                {
                    let [stdout, stderr] = out;
                    return Ok(Finished {
                        status,
                        stdout,
                        stderr,
                    });
                }
                None if now >= deadline => {
                    drop(pipes);
                    self.kill_and_reap(child);
                    return Err(RunError::Timeout);
                }
                _ => {}
            }
            let until = match exited {
                Some((_, drain_until)) => drain_until,
                None => deadline.min(now + CHECK_EVERY),
            };
            wait_readable(&pipes, until.saturating_duration_since(now));
            for (pipe, buf) in pipes.iter_mut().zip(out.iter_mut()) {
                if let Some(fd) = pipe {
                    if drain(fd, buf, max_output) {
                        *pipe = None;
                    }
                }
            }
            if out.iter().any(|b| b.len() > max_output) {
                drop(pipes);
                if exited.is_none() {
                    self.kill_and_reap(child);
                }
                return Err(RunError::TooMuchOutput);
            }
        }
    }
}

/// Waits until one of the open pipes is readable (or closed), at most `wait`.
fn wait_readable(pipes: &[Option<File>; 2], wait: Duration) {
    let mut fds: Vec<PollFd<'_>> = pipes
        .iter()
        .flatten()
        .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
        .collect();
    let timeout =
        PollTimeout::try_from(wait.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
    if fds.is_empty() {
        std::thread::sleep(wait);
    } else {
        // EINTR and the like: the loop checks again.
        let _ = poll(&mut fds, timeout);
    }
}

/// Reads what a non-blocking pipe holds now (up to just past `max` bytes in `buf`); true at
/// end of file or on an error.
fn drain(mut file: &File, buf: &mut Vec<u8>, max: usize) -> bool {
    let mut chunk = [0u8; 8192];
    loop {
        if buf.len() > max {
            return false;
        }
        match file.read(&mut chunk) {
            Ok(0) => return true,
            Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
            Err(_) => return true,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    /// Writes an executable shell script; returns its path.
    fn script(dir: &Path, name: &str, body: &str) -> std::path::PathBuf {
        use std::os::unix::fs::PermissionsExt;
        let p = dir.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    /// `runner.run(p)`, retried while another test thread's fork briefly holds the freshly
    /// written script open for writing (`ETXTBSY`).
    fn run(runner: &Runner, p: &Path, timeout: Duration, max: usize) -> Result<Finished, RunError> {
        for _ in 0..50 {
            match runner.run(p.as_os_str(), &[], timeout, max) {
                Err(RunError::Spawn(e)) if e.raw_os_error() == Some(nix::libc::ETXTBSY) => {
                    std::thread::sleep(Duration::from_millis(10));
                }
                other => return other,
            }
        }
        runner.run(p.as_os_str(), &[], timeout, max)
    }

    /// Whether `pid` is gone (or a zombie nobody has reaped yet), within a second.
    fn dies(pid: &str) -> bool {
        let stat = format!("/proc/{}/stat", pid.trim());
        let until = Instant::now() + Duration::from_secs(1);
        while Instant::now() < until {
            match std::fs::read_to_string(&stat) {
                Err(_) => return true,
                Ok(s) if s.rsplit(") ").next().is_some_and(|r| r.starts_with('Z')) => return true,
                Ok(_) => std::thread::sleep(Duration::from_millis(10)),
            }
        }
        false
    }

    #[test]
    fn output_and_status() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "ok", "echo out; echo err >&2; exit 3\n");
        let f = run(&Runner::default(), &p, Duration::from_secs(10), 1 << 20).unwrap();
        assert_eq!(f.status.code(), Some(3));
        assert_eq!(
            (f.stdout.as_slice(), f.stderr.as_slice()),
            (&b"out\n"[..], &b"err\n"[..])
        );
    }

    #[test]
    fn a_grandchild_holding_stdout_does_not_hold_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        let p = script(
            dir.path(),
            "bg",
            &format!(
                "echo csv\nsleep 30 &\necho $! > '{}'\nexit 0\n",
                pidfile.display()
            ),
        );
        let started = Instant::now();
        let f = run(&Runner::default(), &p, Duration::from_secs(20), 1 << 20).unwrap();
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(f.stdout, b"csv\n");
        assert!(
            dies(&std::fs::read_to_string(&pidfile).unwrap()),
            "the leftover was killed"
        );
    }

    #[test]
    fn at_the_deadline_the_whole_group_dies() {
        let dir = tempfile::tempdir().unwrap();
        let pidfile = dir.path().join("pid");
        // A wrapper whose child ignores SIGTERM.
        let p = script(
            dir.path(),
            "wrap",
            &format!(
                "sh -c 'trap \"\" TERM; echo $$ > \"{}\"; exec sleep 30' &\nwait\n",
                pidfile.display()
            ),
        );
        let started = Instant::now();
        let r = run(&Runner::default(), &p, Duration::from_millis(300), 1 << 20);
        assert!(matches!(r, Err(RunError::Timeout)), "{r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert!(
            dies(&std::fs::read_to_string(&pidfile).unwrap()),
            "the wrapper's child was killed"
        );
    }

    #[test]
    fn an_unkillable_child_is_set_aside_not_waited_for() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "stuck", "exec sleep 30\n");
        let runner = Runner::with_kill_signal(None);
        let started = Instant::now();
        let r = run(&runner, &p, Duration::from_millis(200), 1 << 20);
        assert!(matches!(r, Err(RunError::Timeout)), "{r:?}");
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
        assert_eq!(runner.unreaped(), 1);
        // Once it does die, a later call reaps it.
        if let Ok(mut v) = runner.unreaped.lock() {
            for c in v.iter_mut() {
                let _ = c.kill();
            }
        }
        let until = Instant::now() + Duration::from_secs(2);
        while runner.unreaped() > 0 && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
            runner.reap_leftovers();
        }
        assert_eq!(runner.unreaped(), 0);
    }

    #[test]
    fn output_beyond_the_limit_stops_the_child() {
        let dir = tempfile::tempdir().unwrap();
        let p = script(dir.path(), "yes", "exec yes\n");
        let started = Instant::now();
        let r = run(&Runner::default(), &p, Duration::from_secs(20), 1 << 20);
        assert!(matches!(r, Err(RunError::TooMuchOutput)), "{r:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
}
