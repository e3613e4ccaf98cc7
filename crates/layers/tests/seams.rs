//! Where `unsafe` and platform `cfg` are: ARCHITECTURE.md's two lists ("Platforms") against the
//! files of `hypomnesis` and `hmn` that hold them; and the finder itself, against small
//! synthetic files.

// Test helpers: a failed step stops with its message.
#![allow(clippy::unwrap_used, clippy::panic)]

use std::collections::BTreeSet;
use std::path::Path;

use hmn_layers::{Source, scan};

/// The crates whose sources are listed, as (`src` directory from the repository root, root file).
const CRATES: &[(&str, &str)] = &[
    ("crates/hypomnesis/src", "lib.rs"),
    ("crates/hmn/src", "main.rs"),
];

fn repo() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

/// What the code holds: files with `unsafe`, with a platform `cfg`, compiled on some platforms
/// only; repository paths.
fn in_code() -> [BTreeSet<String>; 3] {
    let (mut unsafe_code, mut platform, mut only) =
        (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for (dir, root) in CRATES {
        let seams = scan(&Source::from_dir(&repo().join(dir), root).unwrap());
        assert!(seams.errors.is_empty(), "{dir}: {:?}", seams.errors);
        let full = |p: &Path| format!("{dir}/{}", p.display());
        unsafe_code.extend(seams.unsafe_code.iter().map(|p| full(p)));
        platform.extend(seams.platform_cfg.iter().map(|p| full(p)));
        only.extend(seams.platform_only.iter().map(|p| full(p)));
    }
    [unsafe_code, platform, only]
}

/// The file paths of the table between `<!-- BEGIN name -->` and `<!-- END name -->`: the
/// backticked `.rs` path that starts each row.
fn listed(doc: &str, name: &str) -> BTreeSet<String> {
    let (begin, end) = (
        format!("<!-- BEGIN {name} -->"),
        format!("<!-- END {name} -->"),
    );
    let from = doc
        .find(&begin)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {begin}"));
    let to = doc[from..]
        .find(&end)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {end}"));
    doc[from + begin.len()..from + to]
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split('`').next())
        .filter(|p| p.ends_with(".rs"))
        .map(str::to_string)
        .collect()
}

fn differences(what: &str, code: &BTreeSet<String>, doc: &BTreeSet<String>) -> Vec<String> {
    let mut out = Vec::new();
    for p in code.difference(doc) {
        out.push(format!(
            "{p} holds {what} but ARCHITECTURE.md does not list it"
        ));
    }
    for p in doc.difference(code) {
        out.push(format!("ARCHITECTURE.md lists {p}, which holds no {what}"));
    }
    out
}

#[test]
fn architecture_lists_every_file_with_unsafe_or_a_platform_cfg() {
    let doc = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let [unsafe_code, platform, only] = in_code();
    // The scan is real: both crates have FFI and platform seams.
    assert!(unsafe_code.len() >= 3 && platform.len() >= 10 && only.len() >= 5);
    let mut wrong = differences("unsafe code", &unsafe_code, &listed(&doc, "unsafe"));
    wrong.extend(differences(
        "a platform cfg",
        &platform,
        &listed(&doc, "platform-cfg"),
    ));
    wrong.extend(differences(
        "only one platform's code",
        &only,
        &listed(&doc, "platform-only"),
    ));
    assert!(
        wrong.is_empty(),
        "ARCHITECTURE.md (\"Platforms\") is out of date:\n{}",
        wrong.join("\n")
    );
}

// ---- the finder against synthetic files ----

fn found(text: &str) -> (bool, bool) {
    let s = scan(&Source::from_files("lib.rs", [("lib.rs", text)]));
    assert!(s.errors.is_empty(), "{:?}", s.errors);
    (!s.unsafe_code.is_empty(), !s.platform_cfg.is_empty())
}

#[test]
fn every_kind_of_unsafe_is_found() {
    for text in [
        "fn f() { unsafe { g() } }",
        "fn f() { let x = || unsafe { g() }; }",
        "unsafe fn f() {}",
        "struct S; impl S { unsafe fn f() {} }",
        "trait T { unsafe fn f(); }",
        "struct S; unsafe impl Send for S {}",
        "unsafe trait T {}",
        "unsafe extern \"C\" { fn f(); }",
        "extern \"C\" { unsafe fn f(); }",
        "thread_local! { static X: u8 = unsafe { g() }; }",
    ] {
        assert_eq!(found(text), (true, false), "{text}");
    }
}

#[test]
fn what_is_not_unsafe() {
    for text in [
        "#![deny(unsafe_code)]",
        "#[allow(unsafe_code)] mod ffi {}",
        "// unsafe { g() }\nfn f() {}",
        "fn f() -> &'static str { \"unsafe { }\" }",
        "/// Calls `unsafe` code.\nfn f() {}",
    ] {
        assert_eq!(found(text), (false, false), "{text}");
    }
}

#[test]
fn every_kind_of_platform_cfg_is_found() {
    for text in [
        "#[cfg(unix)] fn f() {}",
        "#[cfg(not(windows))] mod m {}",
        "#![cfg(target_os = \"linux\")]",
        "#[cfg(all(test, target_family = \"unix\"))] mod t {}",
        "#[cfg_attr(not(unix), allow(dead_code))] fn f() {}",
        "fn f() -> bool { cfg!(target_os = \"macos\") }",
        "fn f() { #[cfg(windows)] let x = 1; }",
        "struct S { #[cfg(unix)] a: u8 }",
        "#[cfg(any(target_arch = \"x86_64\", target_env = \"gnu\"))] fn f() {}",
        "macro_rules! m { () => { #[cfg(unix)] fn f() {} } }",
    ] {
        assert_eq!(found(text), (false, true), "{text}");
    }
}

#[test]
fn what_is_not_a_platform_cfg() {
    for text in [
        "#[cfg(test)] mod tests {}",
        "#[cfg(feature = \"windows\")] fn f() {}",
        "#[cfg(debug_assertions)] fn f() {}",
        "#[cfg_attr(test, allow(dead_code))] fn f() {}",
        "fn f() -> bool { cfg!(feature = \"unix\") }",
        "// #[cfg(unix)]\nfn f() {}",
        "fn unix() {} fn g() { unix() }",
    ] {
        assert_eq!(found(text), (false, false), "{text}");
    }
}

#[test]
fn platform_only_files_are_found_through_their_mod_declaration() {
    let s = scan(&Source::from_files(
        "lib.rs",
        [
            (
                "lib.rs",
                "#[cfg(windows)] mod win;
#[cfg(unix)] mod nix;
mod both;
                 #[cfg(test)] mod tests;
mod inline { #[cfg(unix)] mod ignored; }",
            ),
            ("win.rs", "mod helper;"),
            ("win/helper.rs", ""),
            ("nix/mod.rs", "mod deep;"),
            ("nix/deep.rs", ""),
            (
                "both.rs",
                "#[cfg(unix)] mod imp;
#[cfg(not(unix))] #[path = \"imp_other.rs\"] mod imp;",
            ),
            ("both/imp.rs", ""),
            ("imp_other.rs", ""),
            ("tests.rs", ""),
            ("linted.rs", ""),
        ],
    ));
    let only: Vec<&str> = s
        .platform_only
        .iter()
        .map(|p| p.to_str().unwrap())
        .collect();
    assert_eq!(
        only,
        [
            "both/imp.rs",
            "imp_other.rs",
            "nix/deep.rs",
            "nix/mod.rs",
            "win/helper.rs",
            "win.rs"
        ]
    );
    let cfg: Vec<&str> = s.platform_cfg.iter().map(|p| p.to_str().unwrap()).collect();
    assert_eq!(cfg, ["both.rs", "lib.rs"]);
}

#[test]
fn the_lists_are_read_between_their_markers_only() {
    let doc = "| `a.rs` | before |\n<!-- BEGIN x -->\n| File | Why |\n|---|---|\n\
               | `crates/b.rs` | b |\n| `c/d.rs` (and more) | d |\n| not a path | e |\n\
               <!-- END x -->\n| `e.rs` | after |\n";
    assert_eq!(
        listed(doc, "x"),
        BTreeSet::from(["crates/b.rs".to_string(), "c/d.rs".to_string()])
    );
}
