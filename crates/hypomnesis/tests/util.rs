//! The one harness of the library's integration tests: a test bed (a temporary directory with
//! fixture `/proc` and `/sys` trees and the backends a test installs, wired by
//! [`hmn_testbed::Env`]) and the probe that reads it.

use hypomnesis::{Probe, ProbeOptions, Roots};

hmn_testbed::sandbox_newtype!(
    /// A sandbox for the library ([`hmn_testbed::Sandbox`]: fixture `/proc` and `/sys`, no NVIDIA
    /// backend unless one is installed) and the probe that reads it.
    pub Bed
);

impl Bed {
    /// Probe options for this bed: its roots and NVML, and no `nvidia-smi` fallback (a test
    /// that wants one adds it).
    pub fn options(&self) -> ProbeOptions {
        let mut roots = Roots::system()
            .with_sys(&self.env.sys)
            .with_share(&self.env.share)
            .with_log(&self.env.log)
            .with_runtimes_under(&self.env.runtimes);
        if let Some(proc) = &self.env.proc {
            roots = roots.with_proc(proc);
        }
        ProbeOptions::default()
            .roots(roots)
            .nvml_library(&self.env.nvml)
            .use_nvidia_smi(false)
    }

    /// A probe of this bed.
    pub fn probe(&self) -> Probe {
        Probe::with_options(self.options())
    }
}

/// The variable that tells this test binary, run again as a child, which test it is there to
/// run the body of ([`in_child`]).
const CHILD_TEST: &str = "HMN_TEST_CHILD";
/// The file the child writes once the body has returned: proof that it ran.
const CHILD_DONE: &str = "HMN_TEST_CHILD_DONE";

/// Runs a test's body in a child process (this test binary, run again on that one test), with
/// the bed's environment (`HMN_PROC_ROOT`, `HMN_SYS_ROOT`, `HMN_NVML_LIB`, `HMN_NVIDIA_SMI`).
///
/// The crate-level functions (the upstream-compatible API) read one shared probe configured
/// from the environment on first use, so a test of them cannot point them at its own fakes in
/// a process that other tests share: the body runs where the shared probe is created from the
/// bed alone. In the parent, `bed` builds the fixtures and the child is started; in the child
/// (`HMN_TEST_CHILD` names this test) only `body` runs. The parent fails with the child's
/// output when the child fails, or when it did not run the body (a misnamed test).
///
/// `test` is the test's path as `module_path!()` gives it, with the test's name: the
/// [`child_test!`] macro passes it. Returns the child's output in the parent (for a test that
/// also checks what the child printed), `None` in the child.
pub fn in_child(
    test: &str,
    bed: impl FnOnce() -> Bed,
    body: impl FnOnce(),
) -> Option<std::process::Output> {
    in_child_under(&[], test, bed, body)
}

/// [`in_child`], the child started through `wrapper` (a program and its arguments, given the
/// test binary and its arguments after them): `unshare --pid --fork --mount-proc` runs the body
/// as pid 1 of a private PID namespace with its own `/proc`.
pub fn in_child_under(
    wrapper: &[&str],
    test: &str,
    bed: impl FnOnce() -> Bed,
    body: impl FnOnce(),
) -> Option<std::process::Output> {
    // `module_path!()` starts with this binary's crate name; the test filter does not.
    let name = test.split_once("::").map_or(test, |(_, rest)| rest);
    if std::env::var(CHILD_TEST).is_ok_and(|t| t == name) {
        body();
        if let Some(done) = std::env::var_os(CHILD_DONE) {
            std::fs::write(done, name).expect("write the child's done file");
        }
        return None;
    }
    let bed = bed();
    let done = bed.path("child-done");
    let exe = std::env::current_exe().expect("this test binary's path");
    let mut command = match wrapper.split_first() {
        Some((program, args)) => {
            let mut c = bed.env.command(program);
            c.args(args).arg(exe);
            c
        }
        None => bed.env.command(exe),
    };
    let out = command
        .args([name, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD_TEST, name)
        .env(CHILD_DONE, &done)
        .output()
        .expect("run this test binary as a child");
    let show = || {
        format!(
            "--- child stdout\n{}\n--- child stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    };
    assert!(
        out.status.success(),
        "the child failed ({})\n{}",
        out.status,
        show()
    );
    assert!(done.exists(), "the child did not run {name}\n{}", show());
    Some(out)
}

/// Declares a test whose body runs in a child process set up by a bed ([`in_child`]),
/// optionally followed by `stderr |text| { … }`, a check of what the child wrote to stderr:
///
/// ```ignore
/// child_test! {
///     /// What it checks.
///     fn name() bed { Bed::with_nvml(&FakeNvml::h100s(1)) } body {
///         assert_eq!(hypomnesis::device_count().unwrap(), 1);
///     }
/// }
/// ```
macro_rules! child_test {
    ($(#[$meta:meta])* fn $name:ident() bed $bed:block body $body:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            $crate::util::in_child(
                concat!(module_path!(), "::", stringify!($name)),
                || $bed,
                || $body,
            );
        }
    };
    ($(#[$meta:meta])* fn $name:ident() bed $bed:block body $body:block stderr |$err:ident| $check:block) => {
        $(#[$meta])*
        #[test]
        fn $name() {
            if let Some(out) = $crate::util::in_child(
                concat!(module_path!(), "::", stringify!($name)),
                || $bed,
                || $body,
            ) {
                let $err = String::from_utf8_lossy(&out.stderr).into_owned();
                $check
            }
        }
    };
}
