//! A fake `nvidia-smi`: a shell script that prints recorded CSV for `--query-gpu` and
//! `--query-compute-apps`, logs its arguments, and can hang, fail, or misbehave as a hostile
//! wrapper would (leave a child holding its stdout, have a child that ignores SIGTERM) on
//! demand.

use std::path::{Path, PathBuf};

/// How the fake behaves.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SmiBehaviour {
    /// Print the recorded CSV.
    #[default]
    Normal,
    /// Never answer (`exec sleep 30`), like a hung driver.
    Hang,
    /// Print `stdout` and exit with `code`, like a driver that is not loaded.
    Fail {
        /// What it prints.
        stdout: String,
        /// Its exit status.
        code: i32,
    },
    /// An nvidia-smi older than R510: a `--query-gpu` naming `memory.reserved` fails.
    NoReservedField,
    /// Answers as [`SmiBehaviour::Normal`] and exits, leaving a background child (`sleep 30`)
    /// that holds its stdout open; the child's pid is written to `DIR/leftover.pid`.
    LeavesChildHoldingStdout,
    /// A wrapper that never answers: it starts a child that ignores SIGTERM (`sleep 30`) and
    /// waits for it; the child's pid is written to `DIR/leftover.pid`.
    ChildIgnoresTerm,
}

/// A fake `nvidia-smi`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeSmi {
    /// Output of `--query-gpu=… --format=csv,noheader,nounits`.
    pub gpu_csv: String,
    /// Output of `--query-compute-apps=… --format=csv,noheader,nounits`.
    pub apps_csv: String,
    /// How it behaves.
    pub behaviour: SmiBehaviour,
    /// When set, a query naming `--id=N` with `N` at or above this count fails as a real
    /// `nvidia-smi` does for a GPU it does not have ("No devices were found", exit 6). The
    /// CSV printed for the ids it has is the same for each.
    pub devices: Option<u32>,
}

impl FakeSmi {
    /// A fake that prints these two outputs.
    pub fn new(gpu_csv: &str, apps_csv: &str) -> Self {
        FakeSmi {
            gpu_csv: gpu_csv.to_string(),
            apps_csv: apps_csv.to_string(),
            behaviour: SmiBehaviour::Normal,
            devices: None,
        }
    }

    /// Answers `--id=N` only for `N < n` (see the field).
    #[must_use]
    pub fn devices(mut self, n: u32) -> Self {
        self.devices = Some(n);
        self
    }

    /// A fake that hangs.
    pub fn hang() -> Self {
        FakeSmi {
            behaviour: SmiBehaviour::Hang,
            ..FakeSmi::default()
        }
    }

    /// A fake with this behaviour and these two outputs.
    pub fn behaving(mut self, behaviour: SmiBehaviour) -> Self {
        self.behaviour = behaviour;
        self
    }

    /// A fake that prints `stdout` and exits with `code`.
    pub fn fail(stdout: &str, code: i32) -> Self {
        FakeSmi {
            behaviour: SmiBehaviour::Fail {
                stdout: stdout.to_string(),
                code,
            },
            ..FakeSmi::default()
        }
    }

    /// Windows: copies the built `nvidia-smi.exe` (`fake-smi/main.rs`) into `dir` with its data
    /// files; returns the program's path. The behaviours that need a POSIX shell
    /// (`LeavesChildHoldingStdout`, `ChildIgnoresTerm`) answer as `Normal` here.
    ///
    /// # Errors
    /// When `dir` cannot be written.
    #[cfg(windows)]
    pub fn install(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        crate::write_atomic(&dir.join("gpus.csv"), self.gpu_csv.as_bytes())?;
        crate::write_atomic(&dir.join("apps.csv"), self.apps_csv.as_bytes())?;
        let behaviour = match &self.behaviour {
            SmiBehaviour::Hang => "hang".to_string(),
            SmiBehaviour::Fail { stdout, code } => {
                crate::write_atomic(&dir.join("fail.txt"), stdout.as_bytes())?;
                format!("fail {code}")
            }
            SmiBehaviour::NoReservedField => "no-reserved".to_string(),
            _ => "normal".to_string(),
        };
        crate::write_atomic(&dir.join("behaviour"), behaviour.as_bytes())?;
        if let Some(n) = self.devices {
            crate::write_atomic(&dir.join("devices"), n.to_string().as_bytes())?;
        }
        let path = dir.join("nvidia-smi.exe");
        std::fs::copy(env!("HMN_FAKE_SMI_EXE"), &path)?;
        // Under Wine a Rust program needs the ProcessPrng shim beside it, as the test does
        // (scripts/wine/runner.sh puts it beside the test binary).
        let shim = std::env::current_exe()?.with_file_name("bcryptprimitives.dll");
        if shim.is_file() {
            std::fs::copy(&shim, dir.join("bcryptprimitives.dll"))?;
        }
        Ok(path)
    }

    /// Writes `dir/nvidia-smi` (mode 0755) and its data files; returns the script's path.
    /// Every call appends its arguments, one line per call, to `dir/nvidia-smi.calls`.
    ///
    /// # Errors
    /// When `dir` cannot be written.
    #[cfg(unix)]
    pub fn install(&self, dir: &Path) -> std::io::Result<PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        std::fs::create_dir_all(dir)?;
        let dir = dir.canonicalize()?;
        crate::write_atomic(&dir.join("gpus.csv"), self.gpu_csv.as_bytes())?;
        crate::write_atomic(&dir.join("apps.csv"), self.apps_csv.as_bytes())?;
        let d = dir.display().to_string().replace('\'', r"'\''");
        let body = match &self.behaviour {
            SmiBehaviour::Hang => "exec sleep 30\n".to_string(),
            SmiBehaviour::Fail { stdout, code } => {
                crate::write_atomic(&dir.join("fail.txt"), stdout.as_bytes())?;
                format!("cat '{d}/fail.txt'\nexit {code}\n")
            }
            SmiBehaviour::ChildIgnoresTerm => format!(
                "sh -c 'trap \"\" TERM; echo $$ > \"{d}/leftover.pid\"; exec sleep 30' &\nwait\n"
            ),
            SmiBehaviour::Normal
            | SmiBehaviour::NoReservedField
            | SmiBehaviour::LeavesChildHoldingStdout => {
                let leftover = if self.behaviour == SmiBehaviour::LeavesChildHoldingStdout {
                    format!("sleep 30 &\necho $! > '{d}/leftover.pid'\n")
                } else {
                    String::new()
                };
                let reserved_check = if self.behaviour == SmiBehaviour::NoReservedField {
                    "      case \"$a\" in *memory.reserved*) echo 'Field \"memory.reserved\" is not a valid field to query.'; exit 2;; esac\n"
                } else {
                    ""
                };
                format!(
                    "for a in \"$@\"; do\n  case \"$a\" in\n    --query-gpu=*)\n{reserved_check}      cat '{d}/gpus.csv'; {leftover}exit 0;;\n    --query-compute-apps=*) cat '{d}/apps.csv'; {leftover}exit 0;;\n  esac\ndone\necho 'fake nvidia-smi: unsupported arguments' >&2\nexit 2\n"
                )
            }
        };
        let ids = self.devices.map_or_else(String::new, |n| {
            format!(
                "for a in \"$@\"; do\n  case \"$a\" in\n    --id=*) if [ \"${{a#--id=}}\" -ge {n} ]; then echo 'No devices were found'; exit 6; fi;;\n  esac\ndone\n"
            )
        });
        let script = format!("#!/bin/sh\necho \"$*\" >> '{d}/nvidia-smi.calls'\n{ids}{body}");
        let path = dir.join("nvidia-smi");
        crate::write_atomic(&path, script.as_bytes())?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(path)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn a_fake_with_a_device_count_refuses_other_ids() {
        let dir = tempfile::tempdir().unwrap();
        let smi = FakeSmi::new("1024, 16384, 999.99\n", "")
            .devices(1)
            .install(dir.path())
            .unwrap();
        let query = |id: u32| {
            Command::new(&smi)
                .args(["--query-gpu=memory.used", &format!("--id={id}")])
                .output()
                .unwrap()
        };
        let known = query(0);
        assert!(known.status.success());
        assert_eq!(known.stdout, b"1024, 16384, 999.99\n");
        let unknown = query(1);
        assert_eq!(unknown.status.code(), Some(6));
        assert_eq!(unknown.stdout, b"No devices were found\n");
        // Without an id the recorded CSV is printed, as before.
        let all = Command::new(&smi)
            .arg("--query-gpu=memory.used")
            .output()
            .unwrap();
        assert_eq!(all.stdout, b"1024, 16384, 999.99\n");
    }
}
