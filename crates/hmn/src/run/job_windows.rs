//! The command of `hmn run` and `hmn spill` on Windows: started directly, with inherited
//! standard streams. Windows has no process groups to separate, no terminal to hand over and no
//! `exec`, so there is no `hmn __exec` step (see `job.rs` for the POSIX side): `hmn run` starts the
//! command suspended inside a kill-on-close Job object instead, which keeps its whole tree
//! together from its first instruction and ends it with hmn. `argv[0]` is the program's path
//! (Windows passes one command line; the name the user typed is not kept apart). There are no
//! transient cgroups.

use std::process::{Child, Command, ExitStatus, Stdio};

pub use super::launch::Launch;

/// The command with inherited standard streams (Windows: the program's path is its
/// `argv[0]`; there is no cgroup to join).
fn command(launch: &Launch<'_>) -> Command {
    let mut cmd = Command::new(launch.path);
    cmd.args(launch.args)
        .stdin(Stdio::inherit())
        .stdout(Stdio::inherit())
        .stderr(Stdio::inherit());
    launch.apply_env(&mut cmd);
    cmd
}

/// The running command.
#[derive(Debug)]
pub struct Job {
    child: Child,
}

impl Job {
    /// Starts the command.
    ///
    /// # Errors
    /// When it cannot be started.
    pub fn spawn(launch: &Launch<'_>) -> std::io::Result<Job> {
        Ok(Job {
            child: command(launch).spawn()?,
        })
    }

    /// Starts the command inside a new kill-on-close Job object (`hmn run`): created suspended,
    /// assigned, then resumed ([`hypomnesis::process::job::Job::spawn_into`]), so nothing it
    /// starts escapes the job. Without a job (it cannot be made, or the command cannot join),
    /// the command still runs and the reason is pushed to `warnings`.
    ///
    /// # Errors
    /// When the command cannot be started.
    pub fn spawn_in_job(
        launch: &Launch<'_>,
        warnings: &mut Vec<String>,
    ) -> std::io::Result<(Job, Option<hypomnesis::process::job::Job>)> {
        let job = match hypomnesis::process::job::Job::kill_on_close() {
            Ok(j) => j,
            Err(e) => {
                warnings.push(format!("no Job object, so peak RAM is sampled ({e})"));
                return Ok((Job::spawn(launch)?, None));
            }
        };
        let (child, refused) = job.spawn_into(&mut command(launch), 0)?;
        let job = match refused {
            None => Some(job),
            Some(e) => {
                warnings.push(format!(
                    "the command could not join a Job object, so peak RAM is sampled ({e})"
                ));
                None
            }
        };
        Ok((Job { child }, job))
    }

    /// The command's pid.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The command's status if it has ended.
    ///
    /// # Errors
    /// When it cannot be waited for.
    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// Waits for the command to end.
    ///
    /// # Errors
    /// When it cannot be waited for.
    pub fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait()
    }

    /// As Unix's: the child is the command itself (no helper step), so it runs once started.
    pub fn wait_exec(&mut self) {}

    /// Windows keeps no `ru_maxrss` of waited-for children (the Job object's peak is used
    /// instead).
    pub fn max_rss_bytes(&mut self) -> Option<u64> {
        None
    }
}
