//! Where NVML is looked for when no library is named (`HMN_NVML_LIB` / `ProbeOptions` name one
//! and win on every platform).
//!
//! - Linux, macOS: the soname `libnvidia-ml.so.1` through the dynamic loader.
//! - Windows: the driver's copy `%SystemRoot%\System32\nvml.dll` first, then the older
//!   driver's `%ProgramFiles%\NVIDIA Corporation\NVSMI\nvml.dll`, then the bare `nvml.dll`
//!   through the loader's search (the application's folder, then `PATH`). Full paths first, so
//!   a `nvml.dll` planted in the current folder or on `PATH` is not preferred to the driver's.
//!   A candidate that exists but cannot be loaded is passed over for the next; a driver
//!   answer (driver not loaded, no permission) is final.
//!
//! The list is pure (tested on every platform); only `NvmlBackend::load` touches files.

use std::ffi::OsStr;
use std::path::PathBuf;

/// The name loaded when no path is given (the soname, or Windows' bare DLL name).
#[cfg(not(windows))]
pub const DEFAULT_LIBRARY: &str = "libnvidia-ml.so.1";
/// The name loaded when no path is given (the soname, or Windows' bare DLL name).
#[cfg(windows)]
pub const DEFAULT_LIBRARY: &str = "nvml.dll";

/// The full paths tried on Windows before the bare name, in order (pure): from
/// `%SystemRoot%` and `%ProgramFiles%`, each skipped when the variable is unset or empty.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn windows_candidates(
    system_root: Option<&OsStr>,
    program_files: Option<&OsStr>,
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Some(root) = system_root.filter(|r| !r.is_empty()) {
        out.push(PathBuf::from(root).join("System32").join("nvml.dll"));
    }
    if let Some(pf) = program_files.filter(|p| !p.is_empty()) {
        out.push(
            PathBuf::from(pf)
                .join("NVIDIA Corporation")
                .join("NVSMI")
                .join("nvml.dll"),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn system32_then_nvsmi_and_unset_variables_are_skipped() {
        let c = windows_candidates(
            Some(OsStr::new(r"C:\Windows")),
            Some(OsStr::new(r"C:\Program Files")),
        );
        assert_eq!(c.len(), 2);
        assert!(c[0].ends_with("nvml.dll") && c[0].starts_with(r"C:\Windows"));
        assert!(c[0].to_string_lossy().contains("System32"));
        assert!(c[1].to_string_lossy().contains("NVSMI"));
        assert_eq!(
            windows_candidates(None, Some(OsStr::new(""))),
            Vec::<PathBuf>::new()
        );
        assert_eq!(
            windows_candidates(Some(OsStr::new("/w")), None),
            vec![PathBuf::from("/w/System32/nvml.dll")]
        );
    }
}
