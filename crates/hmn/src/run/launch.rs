//! What `hmn run` and `hmn spill` start: one [`Launch`] for both platforms' job runners
//! (`job.rs`, `job_windows.rs`, which re-export it).

use std::path::Path;

/// What to start: the program found on `PATH` (Windows: with `PATHEXT`), the name it was
/// given (its `argv[0]`), its arguments, the cgroup to join first (Linux only), and variables
/// to set (`Some`) or remove (`None`) in its environment (`--gpu`).
pub struct Launch<'a> {
    pub path: &'a Path,
    /// Windows passes one command line: the program's path stands as `argv[0]`.
    #[cfg_attr(windows, allow(dead_code))]
    pub argv0: &'a std::ffi::OsStr,
    pub args: &'a [std::ffi::OsString],
    #[cfg_attr(windows, allow(dead_code))]
    pub cgroup_procs: Option<&'a Path>,
    pub env: &'a [(String, Option<String>)],
}

impl Launch<'_> {
    /// Sets and removes [`Launch::env`] on `cmd`.
    pub fn apply_env(&self, cmd: &mut std::process::Command) {
        for (k, v) in self.env {
            match v {
                Some(v) => cmd.env(k, v),
                None => cmd.env_remove(k),
            };
        }
    }
}
