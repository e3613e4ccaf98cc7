//! Builds the fake NVML library (`fake-nvml/lib.rs`) with plain `rustc`, in four variants
//! (driver generations: see `fake-nvml/lib.rs`), so `cargo test` from a clean clone needs no
//! manual step. For a Windows target the library is named `nvml.dll` (cross-compiled with
//! mingw from Linux), and the fake `nvidia-smi` (`fake-smi/main.rs`) is built as
//! `nvidia-smi.exe`, since there is no `/bin/sh` to run the script version.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=fake-nvml");
    println!("cargo:rerun-if-changed=src/nvml_conf");
    println!("cargo:rerun-if-changed=fake-smi");
    let windows = std::env::var("CARGO_CFG_TARGET_OS").is_ok_and(|os| os == "windows");
    let rustc = std::env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Some(out_dir) = std::env::var_os("OUT_DIR").map(PathBuf::from) else {
        println!("cargo:warning=OUT_DIR is not set");
        std::process::exit(1);
    };
    let source = PathBuf::from("fake-nvml").join("lib.rs");
    let variants: [(&str, &[&str], &str); 4] = [
        ("modern", &[], "HMN_FAKE_NVML_MODERN"),
        ("legacy", &["legacy_driver"], "HMN_FAKE_NVML_LEGACY"),
        (
            "pre_r470",
            &["legacy_driver", "no_mps", "no_profile_v"],
            "HMN_FAKE_NVML_PRE_R470",
        ),
        (
            "pre_mig",
            &["legacy_driver", "no_mps", "no_profile_v", "no_mig"],
            "HMN_FAKE_NVML_PRE_MIG",
        ),
    ];
    for (variant, cfgs, env) in variants {
        let dir = out_dir.join(variant);
        if let Err(e) = std::fs::create_dir_all(&dir) {
            println!("cargo:warning=cannot create {}: {e}", dir.display());
            std::process::exit(1);
        }
        let lib = dir.join(if windows {
            "nvml.dll"
        } else {
            "libnvidia-ml.so.1"
        });
        let mut cmd = Command::new(&rustc);
        cmd.args([
            "--edition",
            "2021",
            "--crate-type",
            "cdylib",
            "--crate-name",
            "nvidia_ml",
        ])
        .args([
            "-C",
            "opt-level=1",
            "-C",
            "panic=abort",
            "-C",
            "debuginfo=0",
        ])
        .args(["-D", "warnings"])
        .arg("-o")
        .arg(&lib)
        .arg(&source);
        for cfg in cfgs {
            cmd.args(["--cfg", cfg]);
        }
        if let Ok(target) = std::env::var("TARGET") {
            cmd.args(["--target", &target]);
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            Ok(s) => {
                println!("cargo:warning=building the fake NVML ({variant}) failed: {s}");
                std::process::exit(1);
            }
            Err(e) => {
                println!("cargo:warning=cannot run rustc to build the fake NVML: {e}");
                std::process::exit(1);
            }
        }
        println!("cargo:rustc-env={env}={}", lib.display());
    }
    if windows {
        let exe = out_dir.join("nvidia-smi.exe");
        let mut cmd = Command::new(&rustc);
        cmd.args([
            "--edition",
            "2021",
            "--crate-type",
            "bin",
            "--crate-name",
            "nvidia_smi",
        ])
        .args(["-C", "opt-level=1", "-C", "debuginfo=0", "-D", "warnings"])
        .arg("-o")
        .arg(&exe)
        .arg(PathBuf::from("fake-smi").join("main.rs"));
        if let Ok(target) = std::env::var("TARGET") {
            cmd.args(["--target", &target]);
        }
        match cmd.status() {
            Ok(s) if s.success() => {}
            other => {
                println!("cargo:warning=building the fake nvidia-smi.exe failed: {other:?}");
                std::process::exit(1);
            }
        }
        println!("cargo:rustc-env=HMN_FAKE_SMI_EXE={}", exe.display());
    }
}
