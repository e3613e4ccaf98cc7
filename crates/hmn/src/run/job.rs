//! The command of `hmn run` and `hmn spill` as a job of its own.
//!
//! - **Its own process group.** A signal another process sends to hmn's process group
//!   (`kill -TERM -PGID`, `timeout`, a shell's `kill %1`) reaches hmn only, which forwards it
//!   once ([`super::exec::SignalForwarder`]); in a shared group the command would get it twice,
//!   from the sender and from hmn.
//! - **The terminal, when hmn has it.** When hmn is the foreground job of a terminal, the
//!   command's group takes the terminal's foreground (as a shell gives it to a job), so Ctrl+C,
//!   Ctrl+\ and terminal reads reach the command directly, once, and hmn keeps running to write
//!   its report. When the command is stopped by the terminal (Ctrl+Z, a read from the
//!   background), hmn takes the terminal back and stops its own group, so the shell sees the job
//!   stop; when the shell continues hmn (`fg`, `bg`), hmn gives the terminal back if it is in
//!   the foreground and continues the command's group. The terminal is hmn's again when the
//!   command has ended.
//! - **Nothing of it outlives hmn.** On Linux hmn's child is the guard, `hmn __exec --guard`
//!   (`run::guard`, Linux): it starts the command, joins the transient cgroup, stays its parent
//!   and subreaper, passes its signals, stops and exit status through, and kills the command's
//!   whole tree (its process group, the cgroup, every descendant) if hmn dies — `SIGKILL` of
//!   hmn, `timeout -k`, a CI runner's `kill -9 -PGID`. The command's own first step is `hmn
//!   __exec` (without `--guard`), which asks the kernel to kill it if its parent dies
//!   (`PR_SET_PDEATHSIG`, `SIGKILL`), takes the terminal, joins the cgroup at the last moment
//!   (so that its own image is charged outside it), then executes the command with its
//!   own `argv[0]` (the name it was given, not the path it was found at). Elsewhere (macOS)
//!   there is no guard: hmn's child is that step, with no parent-death signal either. The
//!   `__exec` step writes its pid only into a cgroup's own `cgroup.procs`
//!   ([`cgroup_procs_file`]).
//! - **The command measured, not hmn's helpers.** The guard and the step are hmn's own image:
//!   through a pipe ([`super::helper`]) the step says when it executes the command (hmn samples
//!   from then on: [`Job::wait_exec`]) and the guard the peak of what it reaped, so that
//!   `ru_maxrss` is the command's or unknown ([`Job::max_rss_bytes`]).

use std::os::unix::process::{CommandExt as _, ExitStatusExt as _};
use std::process::{Command, ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, WaitStatus, waitpid};
use nix::unistd::{Pid, getpgrp, getppid, setpgid};

use crate::args::ExecArgs;

use super::helper::Told;
pub use super::launch::Launch;
use super::tty::{foreground_of, foreground_tty, give_terminal};

/// The longest [`Job::wait_exec`] waits for the command to be executed (it takes milliseconds;
/// a helper that is slower, stopped or gone is not waited for longer).
const EXEC_WAIT: Duration = Duration::from_secs(2);

/// How often that wait looks at the child: a stop (Ctrl+Z before the command ran) is passed on
/// as [`Job::wait`] would, and an ended child ends the wait.
const EXEC_WAIT_SLICE: Duration = Duration::from_millis(50);

/// The running command. See the [module docs](self).
#[derive(Debug)]
pub struct Job {
    pid: Pid,
    /// The child is the guard (`run::guard`, Linux), not the command itself.
    guarded: bool,
    /// The terminal (a standard fd) whose foreground hmn held when it started the command.
    tty: Option<i32>,
    done: Option<ExitStatus>,
    /// What the helpers tell hmn (none when the command was started directly).
    told: Option<Told>,
}

impl Job {
    /// Starts the command through `hmn __exec` (see the [module docs](self)); directly, in its
    /// own process group still, when hmn's own binary cannot be found.
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn spawn(launch: &Launch<'_>) -> std::io::Result<Job> {
        let tty = foreground_tty();
        let exe = std::env::current_exe().ok();
        // Platform seam: the guard needs a subreaper and a parent-death signal (Linux).
        let guarded = cfg!(target_os = "linux") && exe.is_some();
        let exe_used = exe.is_some();
        let mut cmd = match exe {
            Some(me) => {
                let mut cmd = Command::new(me);
                cmd.arg("__exec")
                    .arg("--parent")
                    .arg(std::process::id().to_string());
                if guarded {
                    cmd.arg("--guard");
                }
                if let Some(procs) = launch.cgroup_procs {
                    cmd.arg("--cgroup-procs").arg(procs);
                }
                if let Some(fd) = tty {
                    cmd.arg("--tty").arg(fd.to_string());
                }
                cmd.arg("--")
                    .arg(launch.path)
                    .arg(launch.argv0)
                    .args(launch.args);
                cmd
            }
            None => {
                let mut cmd = Command::new(launch.path);
                cmd.arg0(launch.argv0).args(launch.args);
                cmd
            }
        };
        launch.apply_env(&mut cmd);
        let (told, writers) = if exe_used {
            let (t, w) = Told::pipes_for(&mut cmd, guarded)?;
            (Some(t), w)
        } else {
            (None, Vec::new())
        };
        let child = cmd
            .process_group(0)
            .stdin(Stdio::inherit())
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()?;
        // The helpers hold the write ends now: each pipe ends with them.
        drop(writers);
        let pid = Pid::from_raw(i32::try_from(child.id()).unwrap_or(i32::MAX));
        // As a shell does, from both sides: whichever runs first, the group and the terminal
        // are the command's before it can touch either (an error means the child already did).
        let _ = setpgid(pid, pid);
        // Guarded, the terminal goes to the command's group, which the guard makes (both
        // sides of that are the guard's and the command's).
        if let (Some(fd), false) = (tty, guarded) {
            give_terminal(fd, pid);
        }
        // The child is waited for here, by pid (`std`'s handle cannot report stops).
        drop(child);
        Ok(Job {
            pid,
            guarded,
            tty,
            done: None,
            told,
        })
    }

    /// Waits until hmn's step has executed the command (see [`super::helper`]), at most
    /// [`EXEC_WAIT`]; a stop of the child meanwhile is handled as [`Job::wait`] does. Sampling
    /// starts after it, so no sample is of hmn's own image. At once when the command was
    /// started directly.
    pub fn wait_exec(&mut self) {
        let Some(mut told) = self.told.take() else {
            return;
        };
        told.wait_exec(EXEC_WAIT, EXEC_WAIT_SLICE, || {
            matches!(self.try_wait(), Ok(None))
        });
        self.told = Some(told);
    }

    /// The largest `ru_maxrss` of the command's processes, in bytes, once the command has
    /// ended — without hmn's helpers: `None` when it cannot be told from their own images
    /// ([`super::helper::Told::command_max_rss`]), and when the command was started directly
    /// (the child's figure then holds hmn's image as it was at the fork).
    pub fn max_rss_bytes(&mut self) -> Option<u64> {
        let own = super::exec::children_max_rss_bytes();
        self.told.as_mut()?.command_max_rss(own)
    }

    /// The child's pid: the guard's when [`Job::guarded`], else the command's.
    pub fn id(&self) -> u32 {
        u32::try_from(self.pid.as_raw()).unwrap_or(0)
    }

    /// Whether the child is the guard (`run::guard`, Linux): the command is then its child, and
    /// what the command runs is the guard's descendants.
    pub fn guarded(&self) -> bool {
        self.guarded
    }

    /// The command's status if it has ended; a stop is handled (see the [module docs](self)).
    ///
    /// # Errors
    /// When it cannot be waited for.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.wait_with(WaitPidFlag::WNOHANG | WaitPidFlag::WUNTRACED)
    }

    /// Waits for the command to end, handling stops on the way.
    ///
    /// # Errors
    /// When it cannot be waited for.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        loop {
            if let Some(status) = self.wait_with(WaitPidFlag::WUNTRACED)? {
                return Ok(status);
            }
        }
    }

    fn wait_with(&mut self, flags: WaitPidFlag) -> std::io::Result<Option<ExitStatus>> {
        if let Some(done) = self.done {
            return Ok(Some(done));
        }
        let status = match waitpid(self.pid, Some(flags)) {
            Ok(WaitStatus::Exited(_, code)) => ExitStatus::from_raw((code & 0xff) << 8),
            Ok(WaitStatus::Signaled(_, sig, core)) => {
                ExitStatus::from_raw(sig as i32 | if core { 0x80 } else { 0 })
            }
            Ok(WaitStatus::Stopped(_, sig)) => {
                self.stopped(sig);
                return Ok(None);
            }
            Ok(_) | Err(nix::errno::Errno::EINTR) => return Ok(None),
            Err(e) => return Err(std::io::Error::from(e)),
        };
        self.done = Some(status);
        self.restore_terminal();
        Ok(Some(status))
    }

    /// The command was stopped. By job control (`SIGTSTP`, `SIGTTIN`, `SIGTTOU`): hmn stops
    /// its own group the same way, so its shell sees the job stop, then continues the command
    /// when it is continued itself. By `SIGSTOP` (someone's deliberate choice): it stays
    /// stopped until they continue it.
    fn stopped(&self, sig: Signal) {
        if !matches!(sig, Signal::SIGTSTP | Signal::SIGTTIN | Signal::SIGTTOU) {
            return;
        }
        let own = getpgrp();
        if let Some(fd) = self.tty {
            if foreground_of(fd) == Some(self.pid) {
                give_terminal(fd, own);
            }
        }
        // Returns once hmn has been continued (or at once if its group is orphaned, where the
        // kernel does not stop it).
        let _ = kill(Pid::from_raw(0), sig);
        if let Some(fd) = self.tty {
            if foreground_of(fd) == Some(own) {
                give_terminal(fd, self.pid);
            }
        }
        let _ = kill(Pid::from_raw(-self.pid.as_raw()), Signal::SIGCONT);
    }

    /// The terminal back to hmn's group once the command has ended.
    fn restore_terminal(&self) {
        if let Some(fd) = self.tty {
            if foreground_of(fd) == Some(self.pid) {
                give_terminal(fd, getpgrp());
            }
        }
    }
}

/// `hmn __exec [--guard] [--parent PID] [--cgroup-procs FILE] [--tty FD] -- PATH ARGV0
/// ARGS…`: the guard (`run::guard`, Linux), or the command's first step (see the
/// [module docs](self)), then `exec`. FILE must be a cgroup's `cgroup.procs`, or nothing runs
/// (one line, exit 2); if writing it fails the command still runs (hmn notices the cgroup
/// stayed empty).
pub fn exec_helper(a: &ExecArgs) -> std::process::ExitCode {
    let procs = match &a.cgroup_procs {
        Some(path) => match cgroup_procs_file(path) {
            Ok(f) => Some(f),
            Err(e) => {
                let _ =
                    crate::output::note(&format!("__exec: --cgroup-procs {}: {e}", path.display()));
                return std::process::ExitCode::from(2);
            }
        },
        None => None,
    };
    #[cfg(target_os = "linux")]
    if let (true, Some(parent)) = (a.guard, a.parent) {
        return super::guard::run(a, parent, procs);
    }
    if let Some(parent) = a.parent {
        // Platform seam: macOS has no parent-death signal; there the command of a hmn killed
        // outright (SIGKILL) keeps running, as it would under a shell.
        #[cfg(target_os = "linux")]
        let _ = nix::sys::prctl::set_pdeathsig(Signal::SIGKILL);
        // hmn died before the request took effect: nothing is left to run the command for.
        if u32::try_from(getppid().as_raw()).ok() != Some(parent) {
            return std::process::ExitCode::from(125);
        }
    }
    if let Some(fd) = a.tty.filter(|fd| (0..=2).contains(fd)) {
        give_terminal(fd, getpgrp());
    }
    let [path, argv0, rest @ ..] = a.command.as_slice() else {
        return std::process::ExitCode::from(2);
    };
    let mut cmd = Command::new(path);
    cmd.arg0(argv0).args(rest);
    if let Some(f) = procs {
        join_at_exec(&mut cmd, f);
    }
    super::helper::tell_exec(&mut cmd, path);
    let e = cmd.exec();
    let err = super::exec::SpawnError::from_io(argv0, &e);
    let _ = crate::output::note(&format!("run: {err}"));
    std::process::ExitCode::from(err.exit_code())
}

/// The step joins the cgroup (`procs`, its checked `cgroup.procs`) as the last thing before
/// `execve` but one (the line to hmn, [`super::helper::tell_exec`]): what hmn's own image
/// allocated before stays charged where the step was born (outside the group: the guard joins
/// after starting it), and the command's memory is the group's from its first page. A failed
/// write leaves the command outside the group: its memory is then missing from the group's
/// peak, which the largest process's peak floors.
fn join_at_exec(cmd: &mut Command, procs: std::fs::File) {
    use std::os::fd::AsRawFd as _;
    let pid = std::process::id().to_string().into_bytes();
    // SAFETY: the hook only calls `write` with a buffer prepared before.
    unsafe {
        cmd.pre_exec(move || {
            let _ = nix::libc::write(procs.as_raw_fd(), pid.as_ptr().cast(), pid.len());
            Ok(())
        });
    }
}

/// Opens FILE for `--cgroup-procs` only if it is a cgroup's `cgroup.procs`: so named, on a
/// cgroup filesystem (`statfs`: cgroup v2 or v1), a regular file reached without a symlink;
/// opened for writing in place (never created or truncated). A pid written anywhere else could
/// be a limit, a setting or someone's file.
///
/// # Errors
/// Why FILE is not one, in words.
pub fn cgroup_procs_file(path: &std::path::Path) -> Result<std::fs::File, String> {
    if path.file_name() != Some(std::ffi::OsStr::new("cgroup.procs")) {
        return Err("not a cgroup.procs file".to_string());
    }
    // Platform seam: cgroups are Linux-only.
    #[cfg(target_os = "linux")]
    {
        use nix::sys::statfs::{CGROUP_SUPER_MAGIC, CGROUP2_SUPER_MAGIC, FsType, fstatfs, statfs};
        use std::os::unix::fs::OpenOptionsExt as _;
        let cgroupfs = |t: FsType| t == CGROUP2_SUPER_MAGIC || t == CGROUP_SUPER_MAGIC;
        // Looked at before it is opened too: opening a device or a FIFO is not harmless.
        let before = statfs(path).map_err(|e| std::io::Error::from(e).to_string())?;
        if !cgroupfs(before.filesystem_type()) {
            return Err("not on a cgroup filesystem".to_string());
        }
        let f = std::fs::OpenOptions::new()
            .write(true)
            .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
            .open(path)
            .map_err(|e| e.to_string())?;
        let fs = fstatfs(&f).map_err(|e| std::io::Error::from(e).to_string())?;
        if !cgroupfs(fs.filesystem_type()) || !f.metadata().is_ok_and(|m| m.is_file()) {
            return Err("not on a cgroup filesystem".to_string());
        }
        Ok(f)
    }
    #[cfg(not(target_os = "linux"))]
    Err("cgroups are Linux-only".to_string())
}
