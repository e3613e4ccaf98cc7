//! A confirmed signal, sent only to the process that was listed: its identity is the pid and
//! the start time the snapshot carried; a line without a start time gets no signal. On Linux
//! the process is held by a pidfd (`pidfd_open`) before its start time is compared, and the
//! signal goes through that pidfd (`pidfd_send_signal`), so a pid reused between the check and
//! the signal cannot be reached; where the kernel has no pidfd (before 5.3) or off Linux, the
//! start time is read again just before `kill(2)` (Windows: `taskkill`).

use hypomnesis::Roots;
use hypomnesis::process::tree::read_stat;

/// A signal the user may send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sig {
    Term,
    Kill,
}

impl Sig {
    pub fn name(self) -> &'static str {
        match self {
            Sig::Term => "SIGTERM",
            Sig::Kill => "SIGKILL",
        }
    }
}

/// A signal waiting for `y`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Confirm {
    pub pid: u32,
    pub start_time: Option<u64>,
    pub name: String,
    pub sig: Sig,
}

/// What became of a confirmed signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    Sent,
    /// The process belongs to another user (EPERM; Windows: access denied).
    NotPermitted,
    /// The process has already exited (ESRCH).
    Gone,
    /// Anything else, in the system's words.
    Failed(String),
}

/// The status message for a signal's outcome.
pub fn signal_result(c: &Confirm, r: Delivery) -> String {
    let (sig, pid) = (c.sig.name(), c.pid);
    match r {
        Delivery::Sent => format!("{sig} sent to {pid} ({})", c.name),
        Delivery::NotPermitted => {
            let why = if cfg!(unix) { "EPERM" } else { "access denied" };
            format!("{sig} to {pid}: not permitted ({why}): the process belongs to another user")
        }
        Delivery::Gone => format!("{sig} to {pid}: the process has already exited"),
        Delivery::Failed(e) => format!("{sig} to {pid}: {e}"),
    }
}

/// The message for a line whose identity is unknown (its `stat` could not be read).
pub fn no_identity(sig: Sig, pid: u32) -> String {
    format!(
        "{} not sent: the start time of pid {pid} is unknown, so hmn cannot tell it from a later process with the same pid",
        sig.name()
    )
}

fn reused(c: &Confirm) -> String {
    format!(
        "{} not sent: pid {} is now another process",
        c.sig.name(),
        c.pid
    )
}

/// Whether `pid` still has the start time `start`: `Err` is the message when it has not.
fn same_process(c: &Confirm, roots: &Roots, start: u64) -> Result<(), String> {
    match read_stat(roots, c.pid) {
        Ok(st) if st.start_time == start => Ok(()),
        Ok(_) => Err(reused(c)),
        Err(_) => Err(signal_result(c, Delivery::Gone)),
    }
}

/// Sends a confirmed signal, only to the process that was listed: on this system's `/proc`
/// (a proc root mounted from elsewhere names pids of another namespace), and only if its start
/// time is known and still the one shown.
pub fn send(c: &Confirm, roots: &Roots) -> String {
    if roots.proc != std::path::Path::new("/proc") {
        return format!(
            "{} not sent: signals go only to processes of this system's /proc (the proc root is {})",
            c.sig.name(),
            roots.proc.display()
        );
    }
    let Some(start) = c.start_time else {
        return no_identity(c.sig, c.pid);
    };
    #[cfg(target_os = "linux")]
    match super::pidfd::PidFd::open(c.pid) {
        Ok(fd) => {
            // From here on the fd names one process: compare it, then signal it.
            if let Err(msg) = same_process(c, roots, start) {
                return msg;
            }
            let sig = match c.sig {
                Sig::Term => libc::SIGTERM,
                Sig::Kill => libc::SIGKILL,
            };
            let outcome = match fd.signal(sig) {
                Ok(()) => Delivery::Sent,
                Err(libc::EPERM) => Delivery::NotPermitted,
                Err(libc::ESRCH) => Delivery::Gone,
                Err(e) => Delivery::Failed(std::io::Error::from_raw_os_error(e).to_string()),
            };
            return signal_result(c, outcome);
        }
        Err(super::pidfd::OpenError::Gone) => return signal_result(c, Delivery::Gone),
        Err(super::pidfd::OpenError::Unsupported) => {} // the checked fallback below
    }
    if let Err(msg) = same_process(c, roots, start) {
        return msg;
    }
    signal_result(c, deliver(c.pid, c.sig))
}

/// Platform seam: `kill(2)`.
#[cfg(unix)]
fn deliver(pid: u32, sig: Sig) -> Delivery {
    use nix::errno::Errno;
    let sig = match sig {
        Sig::Term => nix::sys::signal::Signal::SIGTERM,
        Sig::Kill => nix::sys::signal::Signal::SIGKILL,
    };
    let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
    match nix::sys::signal::kill(pid, sig) {
        Ok(()) => Delivery::Sent,
        Err(Errno::EPERM) => Delivery::NotPermitted,
        Err(Errno::ESRCH) => Delivery::Gone,
        Err(e) => Delivery::Failed(e.desc().to_string()),
    }
}

/// Platform seam: Windows has no signals. `taskkill /PID n` asks the process to close (what
/// SIGTERM asks); `/F` ends it (what SIGKILL does, `TerminateProcess`).
#[cfg(not(unix))]
fn deliver(pid: u32, sig: Sig) -> Delivery {
    let mut cmd = std::process::Command::new("taskkill");
    cmd.args(["/PID", &pid.to_string()]);
    if sig == Sig::Kill {
        cmd.arg("/F");
    }
    match cmd.output() {
        Ok(o) => taskkill_outcome(o.status.code(), &o.stdout, &o.stderr),
        Err(e) => Delivery::Failed(format!("taskkill: {e}")),
    }
}

/// What `taskkill` said, as a [`Delivery`] (pure): exit 0 sent, 128 no such process, "Access
/// is denied" another user's (or a protected) process, anything else its first line.
#[cfg_attr(unix, allow(dead_code))]
fn taskkill_outcome(code: Option<i32>, stdout: &[u8], stderr: &[u8]) -> Delivery {
    let text = String::from_utf8_lossy(if stderr.is_empty() { stdout } else { stderr });
    let line = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    match code {
        Some(0) => Delivery::Sent,
        Some(128) => Delivery::Gone,
        _ if text.to_ascii_lowercase().contains("access is denied") => Delivery::NotPermitted,
        Some(c) => Delivery::Failed(format!("taskkill exited {c}: {line}")),
        None => Delivery::Failed(format!("taskkill was killed: {line}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn confirm(pid: u32, start_time: Option<u64>) -> Confirm {
        Confirm {
            pid,
            start_time,
            name: "python3".into(),
            sig: Sig::Term,
        }
    }

    #[test]
    fn signal_outcomes_in_words() {
        let c = confirm(42, None);
        assert_eq!(
            signal_result(&c, Delivery::Sent),
            "SIGTERM sent to 42 (python3)"
        );
        assert_eq!(
            signal_result(&c, Delivery::NotPermitted),
            "SIGTERM to 42: not permitted (EPERM): the process belongs to another user"
        );
        assert_eq!(
            signal_result(&c, Delivery::Gone),
            "SIGTERM to 42: the process has already exited"
        );
    }

    #[test]
    fn taskkill_answers_in_words() {
        // Wine 8's taskkill for a pid that does not exist (exit 128), and Windows' wording for
        // a process of another user (exit 1).
        assert_eq!(
            taskkill_outcome(
                Some(128),
                b"",
                b"Error: Could not find process \"99999\".\r\n"
            ),
            Delivery::Gone
        );
        let denied = b"ERROR: The process with PID 4 could not be terminated.\r\nReason: Access is denied.\r\n";
        assert_eq!(
            taskkill_outcome(Some(1), b"", denied),
            Delivery::NotPermitted
        );
        assert_eq!(
            taskkill_outcome(
                Some(0),
                b"SUCCESS: Sent termination signal to the process with PID 42.",
                b""
            ),
            Delivery::Sent
        );
        assert_eq!(
            taskkill_outcome(Some(1), b"", b"\r\nERROR: Invalid argument/option.\r\n"),
            Delivery::Failed("taskkill exited 1: ERROR: Invalid argument/option.".into())
        );
    }

    #[test]
    fn a_reused_pid_or_a_foreign_proc_root_gets_no_signal() {
        let me = std::process::id();
        let msg = send(&confirm(me, Some(1)), &Roots::system());
        assert_eq!(
            msg,
            format!("SIGTERM not sent: pid {me} is now another process")
        );
        let msg = send(&confirm(me, None), &Roots::system().with_proc("/tmp"));
        assert!(
            msg.starts_with("SIGTERM not sent: signals go only"),
            "{msg}"
        );
    }

    #[test]
    fn a_line_without_a_start_time_gets_no_signal() {
        // A live child stands in for "whatever process has the pid now": with no start time
        // to compare, it must not be signalled.
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let msg = send(&confirm(child.id(), None), &Roots::system());
        assert_eq!(msg, no_identity(Sig::Term, child.id()));
        assert!(
            child.try_wait().unwrap().is_none(),
            "the child was signalled"
        );
        child.kill().unwrap();
        child.wait().unwrap();
    }

    #[test]
    fn a_real_child_is_signalled() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let st = read_stat(&Roots::system(), child.id()).unwrap();
        #[cfg(target_os = "linux")]
        let (before, pidfds) = (
            super::super::pidfd::SENT.with(std::cell::Cell::get),
            super::super::pidfd::PidFd::open(std::process::id()).is_ok(),
        );
        let msg = send(&confirm(child.id(), Some(st.start_time)), &Roots::system());
        assert_eq!(msg, format!("SIGTERM sent to {} (python3)", child.id()));
        // Where the kernel has pidfds (5.3+), the signal went through one, not kill(2).
        #[cfg(target_os = "linux")]
        if pidfds {
            assert_eq!(
                super::super::pidfd::SENT.with(std::cell::Cell::get),
                before + 1
            );
        }
        use std::os::unix::process::ExitStatusExt as _;
        assert_eq!(child.wait().unwrap().signal(), Some(15));
    }

    #[test]
    fn a_process_that_exited_is_reported_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let st = read_stat(&Roots::system(), child.id()).ok();
        child.wait().unwrap();
        let msg = send(
            &confirm(child.id(), Some(st.map_or(1, |s| s.start_time))),
            &Roots::system(),
        );
        assert!(
            msg.ends_with("the process has already exited") || msg.contains("now another"),
            "{msg}"
        );
    }
}
