//! Linux pidfds: a process held by a file descriptor (`pidfd_open(2)`, Linux 5.3), signalled
//! through it (`pidfd_send_signal(2)`): a signal sent through the fd reaches the process it
//! was opened on or none, never a later process that reused the pid. The FFI module of `top`:
//! the two system calls, through libc (nix has no wrapper for them).

use std::os::fd::AsRawFd as _;
use std::os::fd::{FromRawFd as _, OwnedFd};

/// A process held open.
#[derive(Debug)]
pub struct PidFd(OwnedFd);

/// Why no pidfd was opened.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OpenError {
    /// No process has the pid.
    Gone,
    /// This kernel (or a seccomp filter) has no `pidfd_open`, or refused it for another
    /// reason: use the checked `kill(2)`.
    Unsupported,
}

fn errno() -> i32 {
    std::io::Error::last_os_error().raw_os_error().unwrap_or(0)
}

impl PidFd {
    /// `pidfd_open(pid, 0)`.
    pub fn open(pid: u32) -> Result<PidFd, OpenError> {
        let Ok(pid) = libc::pid_t::try_from(pid) else {
            return Err(OpenError::Gone);
        };
        // SAFETY: pidfd_open takes a pid and flags by value and returns a new fd or -1; no
        // memory is passed.
        let fd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0 as libc::c_uint) };
        if fd < 0 {
            return Err(match errno() {
                libc::ESRCH => OpenError::Gone,
                _ => OpenError::Unsupported,
            });
        }
        let Ok(fd) = i32::try_from(fd) else {
            return Err(OpenError::Unsupported);
        };
        // SAFETY: `fd` was just returned by pidfd_open: an open descriptor no one else owns.
        Ok(PidFd(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// `pidfd_send_signal(fd, sig, NULL, 0)`; `Err` is the errno (`ESRCH`: the process has
    /// exited, `EPERM`: another user's).
    pub fn signal(&self, sig: i32) -> Result<(), i32> {
        #[cfg(test)]
        SENT.with(|n| n.set(n.get() + 1));
        // SAFETY: the fd is open for the life of `self`; a null siginfo is allowed (the kernel
        // fills it as kill(2) would); flags must be 0.
        let r = unsafe {
            libc::syscall(
                libc::SYS_pidfd_send_signal,
                self.0.as_raw_fd(),
                sig,
                std::ptr::null::<libc::siginfo_t>(),
                0 as libc::c_uint,
            )
        };
        if r == 0 { Ok(()) } else { Err(errno()) }
    }
}

#[cfg(test)]
thread_local! {
    /// Signals this thread sent through a pidfd (tests: which path `kill::send` took).
    pub static SENT: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pidfd_outlives_its_process_and_reaches_no_other() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let fd = PidFd::open(child.id()).unwrap();
        assert_eq!(fd.signal(libc::SIGKILL), Ok(()));
        child.wait().unwrap();
        // Reaped: whatever has the pid now, the fd's process is gone.
        assert_eq!(fd.signal(libc::SIGTERM), Err(libc::ESRCH));
        assert_eq!(PidFd::open(u32::MAX).unwrap_err(), OpenError::Gone);
    }
}
