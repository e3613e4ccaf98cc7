//! The GPU validation run (`bench/device/run-all.sh`, issue 26) rehearsed end to end: the real
//! script, its steps, time limits, `$OUT` layout and comparer, on the test bed's fake NVML and
//! the stand-ins of `bench/device/rehearsal/` (pynvml through ctypes on the fake, a torch that
//! allocates nothing, a transformers that writes the real safetensors layout, an nvidia-smi
//! answering from the fake). hmn's figures reach the comparer by hmn's route and the stand-ins'
//! by theirs, so a disagreement between hmn's JSON and the fake's scenario fails here before a
//! device lease is spent on it. Linux only (bash, coreutils' timeout, python3).
#![cfg(target_os = "linux")]

use std::path::Path;
use std::process::Command;

use hmn_testbed::{Driver, fake_nvml_path};
use serde_json::Value;

/// Runs a device script (`bench/device/SCRIPT`) in rehearsal on the fake NVML with `env`, into
/// a temporary `$OUT`: asserts it succeeded and returned exactly `files`, and gives its log and
/// the comparer's `doc` (`compare.json` or `ops.json`), whose mode must be `rehearsal`.
fn rehearse(script: &str, env: &[(&str, &str)], files: &[&str], doc: &str) -> (String, Value) {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = tempfile::tempdir().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let o = Command::new("bash")
        .arg(root.join("bench/device").join(script))
        .env("REHEARSAL", "1")
        .env("REHEARSAL_NVML", fake_nvml_path(Driver::Modern))
        .env("OUT", out.path())
        .env("TMPDIR", tmp.path())
        .env("HMN", env!("CARGO_BIN_EXE_hmn"))
        .env("PROBE_TIMING", "/nonexistent") // not built by these tests: the step says so
        .envs(env.iter().copied())
        .env_remove("HMN_NVML_LIB")
        .env_remove("HMN_NVIDIA_SMI")
        .output()
        .unwrap();
    let log = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        o.status.success(),
        "{log}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let mut got: Vec<String> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    got.sort();
    assert_eq!(got, files, "{log}");
    let doc: Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join(doc)).unwrap()).unwrap();
    assert_eq!(doc["mode"], "rehearsal");
    (log, doc)
}

#[test]
fn the_device_run_rehearses_clean_on_the_fake_nvml() {
    // Four files, the device tool's limit being eight.
    let (log, doc) = rehearse(
        "run-all.sh",
        &[
            ("REHEARSAL_SMI_ROOT", "1"), // the accounting path: `nvidia-smi -am 1` succeeds
            ("HOLD_GIB", "1"),
            ("FITS_LAYERS", "2"),
            ("FITS_CONTEXTS", "512,2048"),
            ("FITS_MIN_FREE_GIB", "0"),
            ("TIMING_RUNS", "2"),
        ],
        &["compare.json", "raw.tgz", "run-all.log", "summary.md"],
        "compare.json",
    );

    // Every step ran to completion, in the order the lease wants.
    let steps: Vec<(String, String)> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["step"].as_str().unwrap().into(),
                s["rc"].as_str().unwrap().into(),
            )
        })
        .collect();
    let names: Vec<&str> = steps.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        [
            "0-facts", "1-gpu", "2-run", "5-timing", "4-extras", "3-fits"
        ]
    );
    assert!(steps.iter().all(|(_, rc)| rc == "0"), "{steps:?}\n{log}");

    // No figure disagrees, and the central ones were judged rather than skipped.
    let checks = doc["checks"].as_array().unwrap();
    let fails: Vec<&Value> = checks.iter().filter(|c| c["verdict"] == "FAIL").collect();
    assert!(fails.is_empty(), "{fails:#?}");
    let verdict = |figure: &str| {
        checks
            .iter()
            .find(|c| c["figure"] == figure)
            .map(|c| c["verdict"].as_str().unwrap().to_string())
    };
    for figure in [
        "hmn's NVML backend",
        "CUDA driver version",
        "GPU 0 PCI bus id (normalised)",
        "GPU 0 memory.used (bytes)",
        "GPU 0 memory.reserved (bytes)",
        "GPU 0 power (W)",
        "GPU 0 energy (J)",
        "GPU 0 process set",
        "hmn run peak_vram_bytes",
        "accounting: hmn vs nvidia-smi --query-accounted-apps",
        "context 2048: KV cache",
        "hmn doctor --json",
        "hmn serve /metrics",
    ] {
        assert_eq!(verdict(figure).as_deref(), Some("PASS"), "{figure}");
    }
    assert_eq!(
        verdict("Probe device query timings").as_deref(),
        Some("SKIP")
    );
    // Accounting mode was turned back off on the way out.
    assert!(
        log.contains("accounting restored to Disabled: exit 0"),
        "{log}"
    );
}

/// Run 6's script (`bench/device/ops_check.sh`: compute mode, unattributed memory, XID
/// counting, pick, `top` in a pseudo-terminal, start-up) rehearsed on the fake NVML: its
/// four files come back and every figure it judges agrees, so the next lease is not spent on a
/// broken script.
#[test]
fn the_ops_check_rehearses_clean_on_the_fake_nvml() {
    let (log, doc) = rehearse(
        "ops_check.sh",
        &[("HOLD_GIB", "1"), ("TIMING_RUNS", "2"), ("MPS", "0")],
        &["ops-check.log", "ops-check.md", "ops-raw.tgz", "ops.json"],
        "ops.json",
    );
    let checks = doc["checks"].as_array().unwrap();
    let fails: Vec<&Value> = checks.iter().filter(|c| c["verdict"] == "FAIL").collect();
    assert!(fails.is_empty(), "{fails:#?}\n{log}");
    for figure in [
        "GPU 0 compute mode",
        "GPU 0 unattributed memory",
        "GPU 0 hmn_device_compute_mode",
        "GPU 0 XID events counted by watch",
        "top's detail XID line",
        "pick --need 1GiB",
        "pick --need 100000GiB",
        "quits on q",
        "the PyTorch holder's row",
    ] {
        let v = checks.iter().find(|c| c["figure"] == figure);
        assert_eq!(
            v.map(|c| c["verdict"].as_str().unwrap()),
            Some("PASS"),
            "{figure}: {v:?}"
        );
    }
}
