//! Shell completions and the man page, generated from the clap definition: bash sources the
//! completion and completes a subcommand; `man -l` renders the page.

use std::process::{Command, Stdio};

use crate::util::{Bed, stderr, stdout};

#[test]
fn bash_sources_the_completion_and_completes_subcommands() {
    let bed = Bed::new();
    let o = bed.run(&["completions", "bash"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let script = bed.path("hmn.bash");
    std::fs::write(&script, &o.stdout).unwrap();
    let probe = format!(
        "set -e; source {}; complete -p hmn; \
         COMP_WORDS=(hmn do); COMP_CWORD=1; _hmn hmn do hmn; echo \"words: ${{COMPREPLY[*]}}\"; \
         COMP_WORDS=(hmn ps --work); COMP_CWORD=2; _hmn hmn --work ps; echo \"flags: ${{COMPREPLY[*]}}\"",
        script.display()
    );
    let o = Command::new("bash")
        .args(["--norc", "-c", &probe])
        .output()
        .unwrap();
    let out = stdout(&o);
    assert!(o.status.success(), "{out}{}", stderr(&o));
    assert!(
        out.starts_with("complete -o bashdefault -o default -o nosort -F _hmn hmn"),
        "{out}"
    );
    assert!(out.contains("words: doctor"), "{out}");
    assert!(out.contains("flags: --workload"), "{out}");
}

#[test]
fn every_shell_and_a_bad_one() {
    let bed = Bed::new();
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let o = bed.run(&["completions", shell]);
        assert!(o.status.success(), "{shell}: {}", stderr(&o));
        assert!(stdout(&o).contains("doctor"), "{shell}");
    }
    let o = bed.run(&["completions", "tcsh"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn man_renders_the_page() {
    let bed = Bed::new();
    let o = bed.run(&["man"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let page = bed.path("hmn.1");
    std::fs::write(&page, &o.stdout).unwrap();
    assert!(
        Command::new("man")
            .arg("--version")
            .stdout(Stdio::null())
            .status()
            .is_ok(),
        "man is not installed: scripts/test.sh installs man-db and groff"
    );
    let o = Command::new("man")
        .arg("-l")
        .arg(&page)
        .env("MANPAGER", "cat")
        .env("MANWIDTH", "100")
        .env("LC_ALL", "C.UTF-8")
        .output()
        .unwrap();
    let text = stdout(&o);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(
        stderr(&o).trim().is_empty(),
        "groff warnings: {}",
        stderr(&o)
    );
    for want in [
        "hmn - RAM and GPU memory, measured",
        "HMN PS",
        "HMN DOCTOR",
        "--workload",
        "--proc-root",
    ] {
        assert!(text.contains(want), "{want} missing:\n{text}");
    }
}
