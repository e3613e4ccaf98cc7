//! Test support for hypomnesis (not published): everything a test needs to exercise GPU code
//! paths on a machine without a GPU.
//!
//! | Module | Owns |
//! |---|---|
//! | [`mod@env`] | the environment wiring: roots, backend paths, `HMN_*` variables, commands |
//! | [`gguf`] | a minimal GGUF writer for model-file tests |
//! | [`hub`] | a Hub-shaped HTTP server in the test process (ranges, redirects, 401, 404, hostile answers), counting the bytes it sends |
//! | [`hostile_models`] | hostile GGUF headers (metadata arrays, strings, keys, nesting, tensor infos) for the bounds of `hmn fits` |
//! | [`nvml`] | the fake NVML library (built by `build.rs`) and the builders of its scenarios (MIG, MPS and utilization samples in `nvml_mig`); the scenario's model and every key of its file in `nvml_conf/`, which the library includes too |
//! | [`smi`] | a fake `nvidia-smi` script |
//! | [`sandbox`] | [`Sandbox`]: a temporary directory with fixture trees and its [`Env`], the base of both crates' harnesses |
//! | [`procfs`] | fixture `/proc` trees modelled on real Linux 6.x files |
//! | [`sysfs`] | fixture `/sys` trees for DRM devices and the AMD KFD |
//! | [`world`] | a `/proc` + `/sys` pair and the recorded fdinfo samples |

pub mod env;
pub mod gguf;
pub mod hostile_models;
pub mod hub;
pub mod llama_grid;
pub mod nvml;
mod nvml_conf;
mod nvml_mig;
pub mod procfs;
pub mod sandbox;
pub mod smi;
pub mod sysfs;
pub mod world;

pub use env::Env;

/// A symbolic link at `link` whose text is `target` (fixtures of `/proc` and `/sys`). On
/// Windows a file symlink, which needs the privilege to create one (under Wine it works).
///
/// # Errors
/// When the link cannot be created.
pub fn symlink(
    target: impl AsRef<std::path::Path>,
    link: impl AsRef<std::path::Path>,
) -> std::io::Result<()> {
    #[cfg(unix)]
    return std::os::unix::fs::symlink(target, link);
    #[cfg(windows)]
    return std::os::windows::fs::symlink_file(target, link);
}
pub use gguf::{GgufWriter, ggml};
pub use nvml::{
    DeviceExtras, Driver, FakeComputeInstance, FakeDevice, FakeEvent, FakeGpuInstance, FakeHealth,
    FakeNvml, FakeProcess, FakeSample, NVML_TELEMETRY_CALLS, ProcessListKind, Used, fake_nvml_path,
    nvml_calls, nvml_hang_flag,
};
pub use procfs::{FakeProc, ProcFixture};
pub use sandbox::Sandbox;
pub use smi::{FakeSmi, SmiBehaviour};
pub use sysfs::{FakeGpu, SysFixture};
pub use world::{World, fdinfo_dir, fdinfo_sample, kubelet_container};

/// The system Python for tests that run Python children (`/usr/bin/python3` when it exists: a
/// version-manager shim on `PATH` would add its own processes to a process tree).
pub fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

/// The `.rs` files directly in a test directory that its single test binary (`tests.rs`,
/// built with `autotests = false`) does not declare with `mod NAME;`: tests that would
/// silently never run.
///
/// # Errors
/// When the directory or `tests.rs` cannot be read.
pub fn undeclared_test_files(tests_dir: &std::path::Path) -> std::io::Result<Vec<String>> {
    let root = std::fs::read_to_string(tests_dir.join("tests.rs"))?;
    let declared = |module: &str| {
        root.lines()
            .any(|l| !l.trim_start().starts_with("//") && l.contains(&format!("mod {module};")))
    };
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(tests_dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        if let Some(module) = name.strip_suffix(".rs") {
            if module != "tests" && !declared(module) {
                missing.push(name);
            }
        }
    }
    missing.sort();
    Ok(missing)
}

/// Writes `contents` to `path` atomically (temp file + rename), so a concurrent reader or
/// `exec` never sees a half-written file.
pub(crate) fn write_atomic(path: &std::path::Path, contents: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    let dir = path.parent().unwrap_or(std::path::Path::new("."));
    std::fs::create_dir_all(dir)?;
    let tmp = dir.join(format!(
        ".{}.tmp-{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    {
        let mut f = std::fs::File::create(&tmp)?;
        f.write_all(contents)?;
        f.sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
