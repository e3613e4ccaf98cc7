//! Test support for hypomnesis (not published): everything a test needs to exercise GPU code
//! paths on a machine without a GPU.
//!
//! | Module | Owns |
//! |---|---|
//! | [`gguf`] | a minimal GGUF writer for model-file tests |
//! | [`nvml`] | the fake NVML library (built by `build.rs`) and its scenario files |
//! | [`smi`] | a fake `nvidia-smi` script |
//! | [`procfs`] | fixture `/proc` trees modelled on real Linux 6.x files |
//! | [`sysfs`] | fixture `/sys` trees for DRM devices and the AMD KFD |
//! | [`world`] | a `/proc` + `/sys` pair and the recorded fdinfo samples |

pub mod gguf;
pub mod nvml;
pub mod procfs;
pub mod smi;
pub mod sysfs;
pub mod world;

pub use gguf::{GgufWriter, ggml};
pub use nvml::{Driver, FakeDevice, FakeNvml, FakeProcess, ProcessListKind, Used, fake_nvml_path};
pub use procfs::{FakeProc, ProcFixture};
pub use smi::{FakeSmi, SmiBehaviour};
pub use sysfs::{FakeGpu, SysFixture};
pub use world::{World, fdinfo_dir, fdinfo_sample};

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
