//! The terminal's foreground process group, for `hmn run`'s job control: which standard fd is
//! a terminal hmn holds the foreground of, and handing that foreground to a process group (as a
//! shell does). Used by the job (`job.rs`) and the guard (`guard.rs`, Linux).

use std::os::fd::{AsFd as _, BorrowedFd};

use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};
use nix::unistd::{Pid, getpgrp, isatty, tcgetpgrp, tcsetpgrp};

/// The standard fd (0, 1, 2) of the terminal whose foreground process group is hmn's, if any.
pub(super) fn foreground_tty() -> Option<i32> {
    [0, 1, 2].into_iter().find(|fd| {
        with_fd(*fd, |f| {
            isatty(f).unwrap_or(false) && tcgetpgrp(f).is_ok_and(|g| g == getpgrp())
        })
    })
}

/// Calls `f` with standard fd `fd` (0, 1 or 2; another number is taken as 2).
fn with_fd<R>(fd: i32, f: impl FnOnce(BorrowedFd<'_>) -> R) -> R {
    match fd {
        0 => f(std::io::stdin().as_fd()),
        1 => f(std::io::stdout().as_fd()),
        _ => f(std::io::stderr().as_fd()),
    }
}

/// The terminal's foreground process group.
pub(super) fn foreground_of(fd: i32) -> Option<Pid> {
    with_fd(fd, |f| tcgetpgrp(f).ok())
}

/// Makes `pgrp` the terminal's foreground group, with `SIGTTOU` blocked on this thread: a
/// process that is not in the foreground group may do so then (the shell's way), instead of
/// being stopped.
pub(super) fn give_terminal(fd: i32, pgrp: Pid) {
    let mut ttou = SigSet::empty();
    ttou.add(Signal::SIGTTOU);
    let mut old = SigSet::empty();
    if pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&ttou), Some(&mut old)).is_err() {
        return;
    }
    let _ = with_fd(fd, |f| tcsetpgrp(f, pgrp));
    let _ = pthread_sigmask(SigmaskHow::SIG_SETMASK, Some(&old), None);
}
