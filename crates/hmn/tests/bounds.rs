//! Issue 17's smaller bounds, through the built binary: usage errors are one `hmn:` line (exit
//! 2); a duration under 1 ms, a `--user` nobody has and a `--proc-root` that is not one are
//! refused; CSV carries no control characters; `watch --duration` ends on time; SIGHUP gives
//! `watch` its summary.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, stderr, stdout};

/// Runs `hmn ARGS` and checks it is a one-line `hmn:` error with exit 2 and nothing on stdout;
/// returns the line.
fn refused(bed: &Bed, args: &[&str]) -> String {
    let o = bed.run(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    assert!(o.stdout.is_empty(), "{args:?}");
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{args:?}: one line: {err}");
    assert!(err.starts_with("hmn: "), "{args:?}: {err}");
    err.trim_end().to_string()
}

#[test]
fn usage_errors_are_one_line_with_the_prefix() {
    let bed = Bed::new();
    assert_eq!(
        refused(&bed, &["ps", "--jsn"]),
        "hmn: unexpected argument '--jsn' found; a similar argument exists: '--json' (see 'hmn ps --help')"
    );
    assert_eq!(
        refused(&bed, &["fits"]),
        "hmn: the following required arguments were not provided: <SIZE|PATH> (see 'hmn fits --help')"
    );
    assert_eq!(
        refused(&bed, &["frobnicate"]),
        "hmn: unrecognized subcommand 'frobnicate' (see 'hmn --help')"
    );
    let err = refused(&bed, &["--json", "watch", "--interval", "soon"]);
    assert!(
        err.starts_with("hmn: invalid value 'soon' for '--interval <DURATION>'")
            && err.ends_with("(see 'hmn watch --help')"),
        "{err}"
    );
    // Help and version are not errors.
    let o = bed.run(&["ps", "--help"]);
    assert_eq!(o.status.code(), Some(0));
    assert!(stdout(&o).contains("Usage: hmn ps"));
}

#[test]
fn durations_that_round_to_zero_are_refused() {
    let bed = Bed::new().real_proc();
    let me = std::process::id().to_string();
    for (args, value) in [
        (
            &["watch", "--interval", "0.0000000001s", &me][..],
            "0.0000000001s",
        ),
        (&["watch", "--duration", "0.5ms", &me], "0.5ms"),
        (&["run", "--interval", "0.0001", "--", "true"], "0.0001"),
        (&["spill", "--interval", "0.9ms", "--", "true"], "0.9ms"),
    ] {
        let err = refused(&bed, args);
        assert!(
            err.contains(&format!(
                "invalid duration \"{value}\": shorter than 1 ms, the shortest interval hmn samples at"
            )),
            "{err}"
        );
    }
}

#[test]
fn an_unknown_user_is_an_error_naming_it() {
    let bed = Bed::new();
    assert_eq!(
        refused(&bed, &["ps", "--user", "root,nosuchuser-hmn"]),
        "hmn: invalid value 'nosuchuser-hmn' for '--user <USER>': no such user \"nosuchuser-hmn\" (see 'hmn ps --help')"
    );
    let o = bed.run(&["ps", "--user", "root", "--user", "0"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
}

#[test]
fn a_proc_root_that_is_not_one_is_an_error() {
    let bed = Bed::new();
    let empty = bed.path("empty-proc");
    std::fs::create_dir(&empty).unwrap();
    let shown = empty.display().to_string();
    let expected = format!(
        "hmn: --proc-root {shown}: not a proc root (no process directories and no meminfo)"
    );
    assert_eq!(refused(&bed, &["--proc-root", &shown, "ps"]), expected);
    // The same through the environment.
    let o = bed
        .cmd(&["ps"])
        .env("HMN_PROC_ROOT", &empty)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(stderr(&o).trim_end(), expected);
    // Unreadable: another user's directory, seen by `nobody`.
    if nix::unistd::geteuid().is_root() {
        use std::os::unix::fs::PermissionsExt;
        use std::os::unix::process::CommandExt;
        let locked = bed.path("locked-proc");
        std::fs::create_dir(&locked).unwrap();
        std::fs::create_dir(locked.join("1")).unwrap();
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(bed.dir.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let o = bed
            .cmd(&["--proc-root", &locked.display().to_string(), "ps"])
            .uid(65534)
            .gid(65534)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.starts_with(&format!("hmn: --proc-root {}: ", locked.display()))
                && err.contains("ermission denied")
                && err.lines().count() == 1,
            "{err}"
        );
    }
}

#[test]
fn csv_carries_no_control_characters() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1).process(FakeProcess::compute(0, 31337, 1 << 20)));
    bed.fixture()
        .process(&FakeProc::new(31337, "evil\x1b[2J\tx,\"y\""))
        .unwrap();
    let csv = stdout(&bed.run(&["ps", "--csv"]));
    assert!(!csv.chars().any(|c| c.is_control() && c != '\n'), "{csv:?}");
    assert_eq!(csv.lines().count(), 2, "one record: {csv:?}");
    assert!(
        csv.lines()
            .nth(1)
            .unwrap()
            .contains(",\"evil\\x1b[2J\\x09x,\"\"y\"\"\","),
        "escaped like the table, then quoted: {csv:?}"
    );
}

/// `sleep 30`, killed and reaped on drop.
struct Sleeper(std::process::Child);

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn sleeper() -> Sleeper {
    Sleeper(Command::new("sleep").arg("30").spawn().unwrap())
}

#[test]
fn watch_duration_ends_on_time() {
    let bed = Bed::new().real_proc();
    let s = sleeper();
    let pid = s.0.id().to_string();
    let started = Instant::now();
    // An interval far longer than the duration: the watch must not wait it out.
    let o = bed.run(&[
        "watch",
        "--json",
        "--interval",
        "20s",
        "--duration",
        "400ms",
        &pid,
    ]);
    let took = started.elapsed();
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(took < Duration::from_secs(10), "{took:?}: not the interval");
    let summary: Value = serde_json::from_str(stdout(&o).lines().last().unwrap()).unwrap();
    assert_eq!(summary["kind"], "summary");
    assert_eq!(
        summary["samples"], 2,
        "one at the start, one at the deadline"
    );
    let elapsed = summary["elapsed_ms"].as_u64().unwrap();
    assert!((400..10_000).contains(&elapsed), "{elapsed}");
}

#[test]
fn sighup_gives_watch_its_summary() {
    use std::os::unix::process::CommandExt;
    let bed = Bed::new().real_proc();
    let s = sleeper();
    let pid = s.0.id().to_string();
    let child = bed
        .cmd(&["watch", "--interval", "100ms", &pid])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let hmn = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(hmn, nix::sys::signal::Signal::SIGHUP).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(0), "not killed by SIGHUP");
    let err = stderr(&o);
    assert!(
        err.contains("hmn watch: ") && err.contains("BASELINE RSS"),
        "{err}"
    );
}
