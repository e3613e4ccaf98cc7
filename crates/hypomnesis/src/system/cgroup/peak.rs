//! A transient memory cgroup for one job ([`PeakCgroup`]): created in the caller's own group
//! (v2 first, then v1), its kernel-kept peak read at the end; why one could not be made or
//! removed is a [`CgroupError`].

use std::path::{Path, PathBuf};

use super::lines::{parse_proc_cgroup, v1_memory_path, v2_path};
use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;
use crate::types::error::Error;

/// Which cgroup version a [`PeakCgroup`] uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum CgroupVersion {
    /// cgroup v2, `memory.peak`.
    V2,
    /// cgroup v1 memory controller, `memory.max_usage_in_bytes`.
    V1,
}

/// A cgroup created for one job, to read its peak memory from the kernel.
#[derive(Debug)]
pub struct PeakCgroup {
    pub(super) dir: PathBuf,
    version: CgroupVersion,
}

pub(super) fn v2_root(roots: &Roots) -> Option<PathBuf> {
    let base = roots.sys.join("fs/cgroup");
    [base.clone(), base.join("unified")]
        .into_iter()
        .find(|p| p.join("cgroup.controllers").exists())
}

impl PeakCgroup {
    /// Creates `<own cgroup>/<name>` with the memory controller, v2 first, then v1.
    ///
    /// # Errors
    /// [`CgroupError::OwnCgroup`] when `<proc>/self/cgroup` cannot be read;
    /// [`CgroupError::Refused`], with each hierarchy's reason, when neither allows it (not
    /// root, no delegation, no memory controller, a kernel without `memory.peak`).
    pub fn create(roots: &Roots, name: &str) -> Result<PeakCgroup, CgroupError> {
        let own = fsread::read_string(&roots.proc.join("self/cgroup"), Cap::PROC_CGROUP)
            .map_err(CgroupError::OwnCgroup)?;
        let lines = parse_proc_cgroup(&own);
        let v2 = match (v2_root(roots), v2_path(&lines)) {
            (Some(root), Some(path)) => {
                let parent = root.join(path.trim_start_matches('/'));
                match create_in(
                    &parent,
                    name,
                    "memory.peak",
                    Some(&parent.join("cgroup.subtree_control")),
                ) {
                    Ok(dir) => {
                        return Ok(PeakCgroup {
                            dir,
                            version: CgroupVersion::V2,
                        });
                    }
                    Err(e) => e,
                }
            }
            _ => Refusal::NoUnifiedHierarchy,
        };
        let v1 = match v1_memory_path(&lines) {
            Some(path) => {
                let parent = roots
                    .sys
                    .join("fs/cgroup/memory")
                    .join(path.trim_start_matches('/'));
                match create_in(&parent, name, "memory.max_usage_in_bytes", None) {
                    Ok(dir) => {
                        return Ok(PeakCgroup {
                            dir,
                            version: CgroupVersion::V1,
                        });
                    }
                    Err(e) => e,
                }
            }
            None => Refusal::NoMemoryController,
        };
        Err(CgroupError::Refused { v2, v1 })
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Which version it is.
    pub fn version(&self) -> CgroupVersion {
        self.version
    }

    /// The file a process writes its pid to, to enter the group.
    pub fn procs_file(&self) -> PathBuf {
        self.dir.join("cgroup.procs")
    }

    /// The kernel's peak of memory charged to the group since it was created.
    pub fn peak_bytes(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V2 => "memory.peak",
            CgroupVersion::V1 => "memory.max_usage_in_bytes",
        };
        fsread::read_u64(&self.dir.join(file)).ok()
    }

    /// Memory charged to the group now.
    pub fn current_bytes(&self) -> Option<u64> {
        let file = match self.version {
            CgroupVersion::V2 => "memory.current",
            CgroupVersion::V1 => "memory.usage_in_bytes",
        };
        fsread::read_u64(&self.dir.join(file)).ok()
    }

    /// Whether `pid` is in the group now.
    pub fn contains(&self, pid: u32) -> bool {
        fsread::read_string(&self.procs_file(), Cap::CGROUP_PROCS)
            .is_ok_and(|t| t.split_ascii_whitespace().any(|p| p.parse() == Ok(pid)))
    }

    /// Removes the group.
    ///
    /// # Errors
    /// [`CgroupError::Remove`] when it still holds processes (a daemon the job left behind) or
    /// cannot be removed.
    pub fn remove(self) -> Result<(), CgroupError> {
        std::fs::remove_dir(&self.dir).map_err(|source| CgroupError::Remove {
            dir: self.dir,
            source,
        })
    }
}

/// Why a [`PeakCgroup`] could not be created or removed. The `Display` text is one line.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CgroupError {
    /// The process's own cgroup (`<proc>/self/cgroup`) could not be read.
    #[error("cannot read the own cgroup: {0}")]
    OwnCgroup(#[source] Error),
    /// Neither hierarchy allowed a group.
    #[error("cgroup v2: {v2}; cgroup v1: {v1}")]
    Refused {
        /// Why not under cgroup v2.
        v2: Refusal,
        /// Why not under cgroup v1.
        v1: Refusal,
    },
    /// The group could not be removed (it still holds processes, or no permission).
    #[error("cannot remove {}: {source}", dir.display())]
    Remove {
        /// The group's directory.
        dir: PathBuf,
        /// The error from `rmdir`.
        source: std::io::Error,
    },
}

/// Why one cgroup hierarchy did not give a group.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No cgroup v2 hierarchy at `<sys>/fs/cgroup` (or `…/unified`), or the process is in none.
    #[error("no unified hierarchy")]
    NoUnifiedHierarchy,
    /// The process is in no cgroup v1 memory controller.
    #[error("no memory controller")]
    NoMemoryController,
    /// The process's own group is not under the sys root.
    #[error("{} does not exist", parent.display())]
    ParentMissing {
        /// Where the parent group was expected.
        parent: PathBuf,
    },
    /// The group's directory could not be made (no permission: not root, no delegation).
    #[error("cannot create {}: {source}", dir.display())]
    Create {
        /// The group's directory.
        dir: PathBuf,
        /// The error from `mkdir`.
        source: std::io::Error,
    },
    /// The group was made but has no peak file, so it was removed again.
    #[error("no {file} in {} (memory controller not enabled, or kernel too old)", dir.display())]
    NoPeakFile {
        /// The file looked for (`memory.peak`, `memory.max_usage_in_bytes`).
        file: &'static str,
        /// The group's directory.
        dir: PathBuf,
    },
}

fn create_in(
    parent: &Path,
    name: &str,
    peak_file: &'static str,
    subtree_control: Option<&Path>,
) -> Result<PathBuf, Refusal> {
    if !parent.is_dir() {
        return Err(Refusal::ParentMissing {
            parent: parent.to_path_buf(),
        });
    }
    let dir = parent.join(name);
    if let Err(source) = std::fs::create_dir(&dir) {
        return Err(Refusal::Create { dir, source });
    }
    if !dir.join(peak_file).exists() {
        if let Some(control) = subtree_control {
            // Enable the memory controller for children (fails with EBUSY if the parent holds
            // processes and is not the root). The kernel's file, written in place: never
            // created, truncated or reached through a link.
            use std::io::Write as _;
            let mut open = std::fs::OpenOptions::new();
            open.write(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::custom_flags(&mut open, nix::libc::O_NOFOLLOW);
            let _ = open.open(control).and_then(|mut f| f.write_all(b"+memory"));
        }
    }
    if dir.join(peak_file).exists() {
        return Ok(dir);
    }
    let _ = std::fs::remove_dir(&dir);
    Err(Refusal::NoPeakFile {
        file: peak_file,
        dir,
    })
}
