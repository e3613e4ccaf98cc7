//! Build script of `hmn`: the commit `hmn --version` names (`hmn 0.2.16 (cc531be)`), handed to
//! the compiler as the variable `HMN_COMMIT` (read by `args::version`).
//!
//! The commit is, in order: `HMN_COMMIT` from the environment (a build from a source archive, a
//! distribution's build); `git rev-parse --short HEAD` when this file is tracked by the git
//! repository around it (a checkout; a crate unpacked inside some other repository does not
//! count); otherwise none, and `hmn --version` says `commit unknown`. A tree with uncommitted
//! changes still names its HEAD.
//!
//! Cargo reruns this script only when `HMN_COMMIT` changes or when HEAD or the branch it points to
//! moves (checkout, commit, reset, pull): the files watched are HEAD and the branch's ref (its
//! loose file, or `packed-refs` and the refs folder while it has none), so an ordinary build
//! does not recompile `hmn`.
#![allow(
    clippy::print_stdout,
    reason = "a build script talks to cargo on stdout"
)]

use std::path::{Path, PathBuf};
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-env-changed=HMN_COMMIT");
    if let Some(c) = std::env::var("HMN_COMMIT")
        .ok()
        .filter(|c| !c.trim().is_empty())
    {
        println!("cargo:rustc-env=HMN_COMMIT={}", c.trim());
        return;
    }
    let dir =
        std::env::var_os("CARGO_MANIFEST_DIR").map_or_else(|| PathBuf::from("."), PathBuf::from);
    // Only a repository that tracks this package: not one the unpacked crate happens to sit in.
    if git(&dir, &["ls-files", "--error-unmatch", "build.rs"]).is_none() {
        return;
    }
    for path in watched(&dir) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    if let Some(commit) = git(&dir, &["rev-parse", "--short", "HEAD"]) {
        println!("cargo:rustc-env=HMN_COMMIT={commit}");
    }
}

/// The files whose change moves HEAD's commit: HEAD itself and, when HEAD names a branch, that
/// branch's loose ref, or `packed-refs` and the folder a loose ref would appear in. Only paths
/// that exist: cargo reruns the script on every build for a missing one.
fn watched(dir: &Path) -> Vec<PathBuf> {
    let path = |name: &str| {
        git(dir, &["rev-parse", "--git-path", name]).map(|p| {
            let p = PathBuf::from(p);
            if p.is_absolute() { p } else { dir.join(p) }
        })
    };
    let mut files: Vec<PathBuf> = path("HEAD").into_iter().collect();
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        match path(&branch) {
            Some(loose) if loose.is_file() => files.push(loose),
            loose => {
                files.extend(path("packed-refs"));
                files.extend(loose.and_then(|l| l.parent().map(Path::to_path_buf)));
            }
        }
    }
    files.retain(|p| p.exists());
    files
}

/// One line of `git -C dir ARGS` output, or None when git is missing or fails.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .arg("-C")
        .arg(dir)
        .args(args)
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?.trim().to_string();
    (out.status.success() && !line.is_empty()).then_some(line)
}
