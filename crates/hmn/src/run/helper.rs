//! What hmn's own helpers, `hmn __exec` (the guard, Linux, and the command's first step), tell
//! hmn about the command's start and its peak, so that `hmn run` measures the command and not
//! them.
//!
//! Until the first step has executed the command, the process hmn would sample under the
//! command's pid is that step — hmn's own image, several MiB, named `hmn`; and the kernel keeps
//! a process's `ru_maxrss` across `exec`, so the command's `ru_maxrss` is at least the step's
//! image (and hmn's own `RUSAGE_CHILDREN` also holds the guard's). Two pipes to hmn:
//!
//! - **The exec pipe** ([`EXEC_FD_ENV`]), whose write end only the step holds (the guard closes
//!   its copy once the step has started), close-on-exec: its end comes when the kernel has
//!   replaced the step's memory with the command's (`exec` closes such descriptors after it
//!   has switched the process's memory), or when the step has ended. hmn starts sampling then
//!   ([`Told::wait_exec`]): no sample is of the step. Before its `execve` the step writes
//!   `exec PEAK` on it (a `pre_exec` hook, after everything else is prepared), `PEAK` being its
//!   own `ru_maxrss` then, and takes the name `exec` will give the process (`comm`), so that not
//!   even the instant between the two shows `hmn`.
//! - **The guard's pipe** ([`GUARD_FD_ENV`], Linux): when the command has ended the guard writes
//!   `rusage PEAK`, the `ru_maxrss` of the children it reaped (the command and the orphans of
//!   its tree): the guard's own image is not in it.
//!
//! The command's `ru_maxrss` is then `rusage` (or, without a guard, hmn's own children's); it is
//! the command's only when it is clearly above the step's `exec` figure, and unknown otherwise
//! ([`Told::command_max_rss`]): a command smaller than hmn's step has no `ru_maxrss` of its own
//! to report, and its peak comes from the samples and the cgroup.
//!
//! The write ends reach the helpers as file descriptors whose numbers are in those variables
//! (an internal interface); the command never holds either, nor sees the variables. A number
//! that does not name a pipe is not written to.

use std::io::Read as _;
use std::os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, RawFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, FdFlag, fcntl};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

/// The variable that names the exec pipe's write end to the step (and to the guard, which
/// passes it on).
pub const EXEC_FD_ENV: &str = "HMN_EXEC_FD";

/// The variable that names the guard's pipe's write end to the guard.
pub const GUARD_FD_ENV: &str = "HMN_EXEC_GUARD_FD";

/// The most hmn reads from a pipe: a few short lines are all the helpers write.
const MAX_TOLD: usize = 4096;

/// One pipe's read end and the lines that came through it.
#[derive(Debug)]
struct Lines {
    reader: std::io::PipeReader,
    buf: Vec<u8>,
    eof: bool,
}

impl Lines {
    fn new(reader: std::io::PipeReader) -> Lines {
        Lines {
            reader,
            buf: Vec::new(),
            eof: false,
        }
    }

    /// Reads what was written, waiting up to `wait` for the first of it; the `WHAT VALUE`
    /// lines completed go to `line`. Whether anything came (bytes, or the pipe's end).
    fn read_for(&mut self, wait: Duration, mut line: impl FnMut(&str, u64)) -> bool {
        if self.eof {
            return false;
        }
        let mut fds = [PollFd::new(self.reader.as_fd(), PollFlags::POLLIN)];
        let timeout = PollTimeout::try_from(wait).unwrap_or(PollTimeout::MAX);
        match poll(&mut fds, timeout) {
            Ok(n) if n > 0 => {}
            Ok(_) | Err(nix::errno::Errno::EINTR) => return false,
            Err(_) => {
                self.eof = true;
                return true;
            }
        }
        let mut chunk = [0u8; 512];
        match self.reader.read(&mut chunk) {
            Ok(n) if n > 0 && self.buf.len() + n <= MAX_TOLD => {
                self.buf.extend_from_slice(&chunk[..n]);
            }
            // The end, an error, or more than the helpers write: nothing more is read.
            _ => self.eof = true,
        }
        while let Some(end) = self.buf.iter().position(|b| *b == b'\n') {
            let text: Vec<u8> = self.buf.drain(..=end).collect();
            let text = String::from_utf8_lossy(&text);
            let mut words = text.split_ascii_whitespace();
            if let (Some(what), Some(Ok(value))) = (words.next(), words.next().map(str::parse)) {
                line(what, value);
            }
        }
        true
    }

    /// Reads what is there without waiting, to the pipe's end if it has come.
    fn drain(&mut self, mut line: impl FnMut(&str, u64)) {
        while self.read_for(Duration::ZERO, &mut line) {}
    }
}

/// hmn's ends of the pipes, and what came through them.
#[derive(Debug)]
pub struct Told {
    exec: Lines,
    guard: Option<Lines>,
    /// The step's `ru_maxrss` just before it executed the command (raw, as `getrusage` gives
    /// it).
    exec_peak: Option<u64>,
    /// The guard's reaped children's `ru_maxrss` (raw).
    tree_peak: Option<u64>,
}

impl Told {
    /// The pipes whose write ends `cmd` (an `hmn __exec`; with `guarded`, the guard) inherits,
    /// named by [`EXEC_FD_ENV`] and [`GUARD_FD_ENV`]. The caller drops the returned write ends
    /// once `cmd` has started, so that each pipe ends with the helpers that hold it.
    ///
    /// # Errors
    /// When a pipe cannot be made.
    pub fn pipes_for(
        cmd: &mut Command,
        guarded: bool,
    ) -> std::io::Result<(Told, Vec<std::io::PipeWriter>)> {
        // Every end close-on-exec: only `cmd`'s child, below, keeps the write ends.
        let (exec, exec_w) = std::io::pipe()?;
        cmd.env(EXEC_FD_ENV, exec_w.as_raw_fd().to_string());
        let mut fds = vec![exec_w.as_raw_fd()];
        let mut writers = vec![exec_w];
        let guard = if guarded {
            let (r, w) = std::io::pipe()?;
            cmd.env(GUARD_FD_ENV, w.as_raw_fd().to_string());
            fds.push(w.as_raw_fd());
            writers.push(w);
            Some(Lines::new(r))
        } else {
            cmd.env_remove(GUARD_FD_ENV);
            None
        };
        // SAFETY: the hook only calls `fcntl`, which is async-signal-safe, on descriptors that
        // are open (the writers outlive the spawn).
        unsafe {
            cmd.pre_exec(move || {
                for fd in &fds {
                    fcntl(
                        BorrowedFd::borrow_raw(*fd),
                        FcntlArg::F_SETFD(FdFlag::empty()),
                    )?;
                }
                Ok(())
            });
        }
        Ok((
            Told {
                exec: Lines::new(exec),
                guard,
                exec_peak: None,
                tree_peak: None,
            },
            writers,
        ))
    }

    /// Waits, at most `timeout` and in slices of `slice` (between which `between` is called:
    /// the caller's chance to notice a stop or the end of its child — `false` ends the wait),
    /// until the exec pipe has ended: the step has executed the command (its memory is the
    /// command's), or it has ended. Whether it has.
    pub fn wait_exec(
        &mut self,
        timeout: Duration,
        slice: Duration,
        mut between: impl FnMut() -> bool,
    ) -> bool {
        let deadline = Instant::now() + timeout;
        while !self.exec.eof {
            let now = Instant::now();
            if now >= deadline {
                break;
            }
            let peak = &mut self.exec_peak;
            self.exec
                .read_for(slice.min(deadline - now), |what, value| {
                    if what == "exec" {
                        *peak = Some(value);
                    }
                });
            if !self.exec.eof && !between() {
                break;
            }
        }
        self.exec.eof
    }

    /// The largest `ru_maxrss` of the command's processes in bytes, once they have ended:
    /// the guard's figure when there is a guard (hmn's own children's figure holds the guard's
    /// image), else `own_children` (hmn's `RUSAGE_CHILDREN`); `None` when it is not clearly
    /// above the step's own (it may be nothing but the step's image) or either is unknown.
    pub fn command_max_rss(&mut self, own_children: Option<u64>) -> Option<u64> {
        // The helpers have ended: what they wrote is there (read without waiting: a helper
        // that still held a pipe must not hold hmn).
        let peak = &mut self.exec_peak;
        self.exec.drain(|what, value| {
            if what == "exec" {
                *peak = Some(value);
            }
        });
        let kib = |raw: u64| raw.saturating_mul(1024);
        let tree = match &mut self.guard {
            Some(g) => {
                let tree = &mut self.tree_peak;
                g.drain(|what, value| {
                    if what == "rusage" {
                        *tree = Some(value);
                    }
                });
                self.tree_peak.map(kib)
            }
            None => own_children,
        };
        beyond(tree, self.exec_peak.map(kib)?, counter_slack())
    }
}

/// `tree`, when it is more than `slack` above `step` (see [`counter_slack`]).
fn beyond(tree: Option<u64>, step: u64, slack: u64) -> Option<u64> {
    tree.filter(|t| *t > step.saturating_add(slack))
}

/// How far the kernel's `ru_maxrss` of the step, taken at its `execve`, may lie above the
/// figure the step read a moment before: the kernel counts a process's pages per CPU and adds a
/// CPU's count to the total only once it reaches a batch (`max(32, 2 × CPUs)` pages), so pages
/// the step already had may show up in between (one batch, 128 KiB, was seen on 2 CPUs). Four
/// batches: 512 KiB on 2 CPUs, 2 MiB on 64.
fn counter_slack() -> u64 {
    use nix::unistd::{SysconfVar, sysconf};
    let var = |v| {
        sysconf(v)
            .ok()
            .flatten()
            .and_then(|n| u64::try_from(n).ok())
    };
    // Online CPUs (Linux's batch; nix names the variable there only), else the usable ones.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let online = var(SysconfVar::_NPROCESSORS_ONLN);
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let online = std::thread::available_parallelism()
        .ok()
        .map(|n| n.get() as u64);
    let cpus = online.unwrap_or(1).max(1);
    let page = var(SysconfVar::PAGE_SIZE).unwrap_or(4096).max(4096);
    4 * (2 * cpus).max(32) * page
}

/// The write end named by `var` in this helper's environment, if it names an open pipe.
pub fn inherited(var: &str) -> Option<RawFd> {
    let fd: RawFd = std::env::var(var).ok()?.parse().ok()?;
    if fd < 3 {
        return None;
    }
    // SAFETY: only looked at; a closed number is an error, not undefined behaviour.
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    let st = nix::sys::stat::fstat(b).ok()?;
    let fifo = nix::sys::stat::SFlag::from_bits_truncate(st.st_mode)
        & nix::sys::stat::SFlag::S_IFMT
        == nix::sys::stat::SFlag::S_IFIFO;
    fifo.then_some(fd)
}

/// Marks `fd` close-on-exec; whether it could.
fn close_on_exec(fd: RawFd) -> bool {
    // SAFETY: `fd` is open (`inherited`).
    let b = unsafe { BorrowedFd::borrow_raw(fd) };
    fcntl(b, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC)).is_ok()
}

/// The guard, before it starts the step: its own pipe kept from the step (close-on-exec, the
/// variable removed); the exec pipe passed on. Returns the guard's pipe and the exec pipe.
#[cfg(target_os = "linux")]
pub fn guard_pipes(step: &mut Command) -> (Option<RawFd>, Option<RawFd>) {
    step.env_remove(GUARD_FD_ENV);
    let own = inherited(GUARD_FD_ENV).filter(|fd| close_on_exec(*fd));
    (own, inherited(EXEC_FD_ENV))
}

/// The guard, once the step has started: its copy of the exec pipe closed, so that the pipe
/// ends when the step executes the command.
#[cfg(target_os = "linux")]
pub fn guard_started(exec: Option<RawFd>) {
    if let Some(fd) = exec {
        // SAFETY: the guard's own copy, inherited from hmn and used by nothing else.
        let _ = unsafe { nix::libc::close(fd) };
    }
}

/// The guard: `rusage PEAK` of the children it reaped, once the command has ended.
#[cfg(target_os = "linux")]
pub fn tell_rusage(fd: Option<RawFd>) {
    let Some(fd) = fd else { return };
    use nix::sys::resource::{UsageWho, getrusage};
    let Ok(ru) = getrusage(UsageWho::RUSAGE_CHILDREN) else {
        return;
    };
    let peak = u64::try_from(ru.max_rss()).unwrap_or(0);
    write_line(fd, b"rusage ", peak);
}

/// The step, before it executes `path` through `cmd`: the variables removed from the command's
/// environment, the exec pipe closed by the `exec` itself, and as the last things before
/// `execve` (a hook, allocating nothing), the name `exec` will give the process taken (Linux)
/// and `exec PEAK` written.
pub fn tell_exec(cmd: &mut Command, path: &std::ffi::OsStr) {
    cmd.env_remove(EXEC_FD_ENV).env_remove(GUARD_FD_ENV);
    let Some(fd) = inherited(EXEC_FD_ENV).filter(|fd| close_on_exec(*fd)) else {
        return;
    };
    #[cfg(target_os = "linux")]
    let comm = comm_of(path);
    #[cfg(not(target_os = "linux"))]
    let _ = path;
    // SAFETY: the hook calls `prctl`, `getrusage` and `write` only, with buffers prepared
    // before or on the stack: nothing that allocates (which would also add to the peak it
    // reports).
    unsafe {
        cmd.pre_exec(move || {
            #[cfg(target_os = "linux")]
            nix::libc::prctl(nix::libc::PR_SET_NAME, comm.as_ptr(), 0, 0, 0);
            write_line(fd, b"exec ", self_max_rss());
            Ok(())
        });
    }
}

/// The name `execve(path)` gives a process (`comm`): the last component of `path`, at most 15
/// bytes, NUL-terminated for `PR_SET_NAME`.
#[cfg(target_os = "linux")]
fn comm_of(path: &std::ffi::OsStr) -> [u8; 16] {
    let bytes = path.as_encoded_bytes();
    let base = bytes.rsplit(|b| *b == b'/').next().unwrap_or(bytes);
    let mut comm = [0u8; 16];
    for (c, b) in comm.iter_mut().zip(base.iter().take(15)) {
        *c = *b;
    }
    comm
}

/// This process's `ru_maxrss` (raw), 0 when unknown.
fn self_max_rss() -> u64 {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(0, |ru| u64::try_from(ru.max_rss()).unwrap_or(0))
}

/// Writes `WHAT VALUE\n` to `fd` in one `write` (shorter than `PIPE_BUF`: atomic), without
/// allocating.
fn write_line(fd: RawFd, what: &[u8], value: u64) {
    let mut line = [0u8; 64];
    let mut n = 0;
    for b in what.iter().take(32) {
        line[n] = *b;
        n += 1;
    }
    let mut digits = [0u8; 20];
    let mut d = 0;
    let mut v = value;
    loop {
        digits[d] = b'0' + (v % 10) as u8;
        d += 1;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        line[n] = digits[d];
        n += 1;
    }
    line[n] = b'\n';
    n += 1;
    // SAFETY: a `write` of a buffer on the stack; a failure is ignored (hmn then does not
    // know, and says nothing it cannot vouch for).
    let _ = unsafe { nix::libc::write(fd, line.as_ptr().cast(), n) };
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write as _;

    /// A `Told` over pipes of the test's own, and their write ends.
    fn told() -> (Told, std::io::PipeWriter, std::io::PipeWriter) {
        let (exec, exec_w) = std::io::pipe().unwrap();
        let (guard, guard_w) = std::io::pipe().unwrap();
        (
            Told {
                exec: Lines::new(exec),
                guard: Some(Lines::new(guard)),
                exec_peak: None,
                tree_peak: None,
            },
            exec_w,
            guard_w,
        )
    }

    #[test]
    fn the_lines_the_helpers_write_are_read_back() {
        let (mut t, exec, guard) = told();
        write_line(exec.as_raw_fd(), b"exec ", 6144);
        assert!(
            !t.wait_exec(Duration::from_millis(1), Duration::from_millis(1), || true),
            "a line is not the exec: the pipe's end is"
        );
        assert_eq!(t.exec_peak, Some(6144));
        drop(exec);
        assert!(t.wait_exec(Duration::from_secs(60), Duration::from_secs(60), || true));
        write_line(guard.as_raw_fd(), b"rusage ", 0);
        write_line(guard.as_raw_fd(), b"rusage ", u64::MAX);
        drop(guard);
        assert_eq!(t.command_max_rss(None), Some(u64::MAX));
    }

    #[test]
    fn a_peak_no_larger_than_the_step_s_own_is_unknown() {
        let (mut t, mut exec, mut guard) = told();
        exec.write_all(b"exec 6000\n").unwrap();
        guard.write_all(b"rusage 6000\n").unwrap();
        drop((exec, guard));
        assert!(t.wait_exec(Duration::from_secs(60), Duration::from_secs(60), || true));
        assert_eq!(t.command_max_rss(Some(1 << 40)), None, "the guard's figure");
        t.guard = None;
        assert_eq!(t.command_max_rss(Some(6000 * 1024)), None);
        assert_eq!(t.command_max_rss(Some(1 << 40)), Some(1 << 40));
        let step = 6000 * 1024;
        assert_eq!(
            beyond(Some(step + 512), step, 512),
            None,
            "within the slack"
        );
        assert_eq!(beyond(Some(step + 513), step, 512), Some(step + 513));
        assert_eq!(beyond(None, step, 0), None);
        assert!(counter_slack() >= 4 * 32 * 4096);
    }

    #[test]
    fn without_the_step_s_figure_nothing_is_vouched_for() {
        let (mut t, exec, guard) = told();
        drop((exec, guard));
        assert!(t.wait_exec(Duration::from_secs(60), Duration::from_secs(60), || true));
        t.guard = None;
        assert_eq!(t.command_max_rss(Some(1 << 30)), None);
    }

    #[test]
    fn the_wait_ends_at_its_timeout_or_when_told_to() {
        let (mut t, _exec, _guard) = told();
        assert!(!t.wait_exec(Duration::from_millis(1), Duration::from_millis(1), || true));
        let mut calls = 0;
        assert!(
            !t.wait_exec(Duration::from_secs(600), Duration::from_millis(1), || {
                calls += 1;
                false
            })
        );
        assert_eq!(calls, 1);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn the_name_exec_gives() {
        assert_eq!(&comm_of("/usr/bin/cat".as_ref())[..4], b"cat\0");
        assert_eq!(&comm_of("cat".as_ref())[..4], b"cat\0");
        let long = comm_of("/x/a-very-long-program-name".as_ref());
        assert_eq!(&long[..15], b"a-very-long-pro");
        assert_eq!(long[15], 0);
    }
}
