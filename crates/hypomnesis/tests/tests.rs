//! The library's integration tests, built as one binary (one link instead of one per file):
//! each module is one area, and all of them share the harness in [`util`]. A new test file
//! must be declared here; `every_test_file_is_declared` fails otherwise.

// Test harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

#[macro_use]
mod util;

mod drm;
#[cfg(feature = "models")]
mod estimate;
#[cfg(feature = "models")]
mod estimate_configs;
#[cfg(feature = "models")]
mod estimate_llama_cpp;
mod estimate_llama_cuda;
mod estimate_llama_grid;
#[cfg(feature = "models")]
mod estimate_vllm;
mod health;
mod nvml;
mod nvml_absent;
mod nvml_mig;
mod nvml_modes;
mod nvml_mps_util;
mod pid_reuse;
mod reads;
mod sampler;
#[cfg(feature = "serde")]
mod spellings;
mod spill;
mod upstream;
mod upstream_api;

#[test]
fn every_test_file_is_declared() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    assert_eq!(hmn_testbed::undeclared_test_files(&tests).unwrap(), [""; 0]);
}
