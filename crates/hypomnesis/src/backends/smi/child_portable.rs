//! Running `nvidia-smi` under a hard time bound where there is no `waitid`/process-group
//! runner (Windows, macOS; the Linux runner is `child.rs`).
//!
//! Owns [`Runner`] for those platforms: stdout and stderr are read by two short-lived threads
//! (never by the caller, so a pipe held open by a grandchild cannot hold it), the child is
//! polled for exit against the deadline, and at the deadline the child is killed and nothing
//! waits past a short grace. On Windows the child is first put in a Job object
//! ([`crate::process::job::Job`]) that is terminated at the deadline, so its whole tree dies;
//! on macOS the child alone is killed (documented in SUPPORT.md).

use std::ffi::OsStr;
use std::io;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// How often a running child is checked for exit.
const CHECK_EVERY: Duration = Duration::from_millis(5);
/// After the child exits, how long its pipes may still be drained.
const DRAIN_GRACE: Duration = Duration::from_millis(200);

pub(crate) use super::outcome::{Finished, RunError};

/// Runs children under a hard time bound. See the [module docs](self).
#[derive(Debug, Default)]
pub(crate) struct Runner {}

/// One pipe read to its end (or to just past `max`) on its own thread.
fn reader(pipe: Option<impl io::Read + Send + 'static>, max: usize) -> mpsc::Receiver<Vec<u8>> {
    let (tx, rx) = mpsc::channel();
    if let Some(mut pipe) = pipe {
        std::thread::spawn(move || {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 8192];
            while buf.len() <= max {
                match pipe.read(&mut chunk) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => buf.extend_from_slice(chunk.get(..n).unwrap_or_default()),
                }
            }
            let _ = tx.send(buf);
        });
    } else {
        let _ = tx.send(Vec::new());
    }
    rx
}

/// The child's tree, bound to the run: a Job object on Windows, the child alone elsewhere.
struct Bound {
    #[cfg(windows)]
    job: Option<crate::system::process::job::Job>,
}

impl Bound {
    fn new(child: &Child) -> Bound {
        #[cfg(windows)]
        return Bound {
            job: crate::system::process::job::Job::kill_on_close()
                .ok()
                .filter(|j| j.assign(child).is_ok()),
        };
        #[cfg(not(windows))]
        return {
            let _ = child;
            Bound {}
        };
    }

    fn kill(&self, child: &mut Child) {
        #[cfg(windows)]
        if let Some(job) = &self.job {
            job.terminate(1);
        }
        let _ = child.kill();
        let until = Instant::now() + DRAIN_GRACE;
        while matches!(child.try_wait(), Ok(None)) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(2));
        }
    }
}

impl Runner {
    /// Runs `program ARGS` (stdin null) and returns its status and output, within `timeout`
    /// plus at most [`DRAIN_GRACE`] whatever the child does.
    pub(crate) fn run(
        &self,
        program: &OsStr,
        args: &[String],
        timeout: Duration,
        max_output: usize,
    ) -> Result<Finished, RunError> {
        let mut child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(RunError::Spawn)?;
        let bound = Bound::new(&child);
        let deadline = Instant::now() + timeout;
        let out_rx = reader(child.stdout.take(), max_output);
        let err_rx = reader(child.stderr.take(), max_output);
        let status = loop {
            match child.try_wait() {
                Ok(Some(status)) => break status,
                Ok(None) if Instant::now() >= deadline => {
                    bound.kill(&mut child);
                    return Err(RunError::Timeout);
                }
                Ok(None) => std::thread::sleep(CHECK_EVERY),
                Err(e) => {
                    bound.kill(&mut child);
                    return Err(RunError::Wait(e));
                }
            }
        };
        // Leftovers of the tree go with it (Windows: closing the job kills what is left).
        #[cfg(windows)]
        drop(bound.job);
        let until = deadline.min(Instant::now() + DRAIN_GRACE);
        let take = |rx: &mpsc::Receiver<Vec<u8>>| {
            rx.recv_timeout(until.saturating_duration_since(Instant::now()))
                .unwrap_or_default()
        };
        let stdout = take(&out_rx);
        let stderr = take(&err_rx);
        if stdout.len() > max_output || stderr.len() > max_output {
            return Err(RunError::TooMuchOutput);
        }
        Ok(Finished {
            status,
            stdout,
            stderr,
        })
    }
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    fn sh(body: &str) -> Result<Finished, RunError> {
        Runner::default().run(
            OsStr::new("/bin/sh"),
            &["-c".to_string(), body.to_string()],
            Duration::from_millis(500),
            1024,
        )
    }

    #[test]
    fn output_status_timeout_and_limit() {
        let done = sh("echo out; echo err >&2; exit 3").unwrap();
        assert_eq!(done.status.code(), Some(3));
        assert_eq!(done.stdout, b"out\n");
        assert_eq!(done.stderr, b"err\n");
        let t0 = Instant::now();
        assert!(matches!(sh("sleep 5"), Err(RunError::Timeout)));
        assert!(t0.elapsed() < Duration::from_secs(3));
        assert!(matches!(
            sh("head -c 5000 /dev/zero"),
            Err(RunError::TooMuchOutput)
        ));
    }
}
