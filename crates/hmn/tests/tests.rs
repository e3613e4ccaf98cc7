//! `hmn`'s integration tests, built as one binary (one link instead of one per file): each
//! module is one area of the command line, and all of them share the harness in [`util`].
//! A new test file must be declared here; `every_test_file_is_declared` fails otherwise.

// Test harness code: a failed step should stop with its message.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod util;

mod bounds;
mod cli;
mod containers;
mod deploy;
mod device;
mod doctor;
mod drm;
mod files;
mod fits;
mod fits_bounds;
#[cfg(feature = "hub")]
mod fits_hub;
mod fits_invalid;
mod fits_llama;
mod fits_llama_grid;
mod fits_runtimes;
mod fits_vllm;
mod generate;
mod health;
mod jobs;
mod mig;
mod names;
mod nvml_failures;
mod nvml_util;
mod orphans;
mod pick;
mod reads;
mod record;
mod run;
mod selectors;
mod serve;
mod serve_abuse;
mod spill;
mod terminal;
mod top;
mod top_ends;
mod top_wakeups;
mod unified;
mod unified_intel;
mod usage_escapes;
mod watch;

#[test]
fn every_test_file_is_declared() {
    let tests = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    assert_eq!(hmn_testbed::undeclared_test_files(&tests).unwrap(), [""; 0]);
}
