//! The one harness of `hmn`'s integration tests: a test bed (a temporary directory with fixture
//! `/proc` and `/sys` trees and the backends a test installs, wired by [`hmn_testbed::Env`]),
//! commands for the built binary, and readers for its output.

use std::process::{Command, Output};

use serde_json::Value;

hmn_testbed::sandbox_newtype!(
    /// A sandbox for the `hmn` binary ([`hmn_testbed::Sandbox`]: fixture `/proc` and `/sys`, no
    /// NVIDIA backend unless one is installed) with commands for the built binary.
    pub Bed
);

impl Bed {
    /// `hmn ARGS` in this bed, not yet run.
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut c = self.env.command(env!("CARGO_BIN_EXE_hmn"));
        c.args(args);
        c
    }

    /// Runs `hmn ARGS` to completion.
    pub fn run(&self, args: &[&str]) -> Output {
        self.cmd(args).output().unwrap()
    }

    /// `hmn record --interval INTERVAL --duration DURATION FILE` to completion, asserting it
    /// succeeded.
    pub fn record(&self, file: &std::path::Path, interval: &str, duration: &str) -> Output {
        let o = self.run(&[
            "record",
            "--interval",
            interval,
            "--duration",
            duration,
            file.to_str().unwrap(),
        ]);
        assert!(o.status.success(), "{}", stderr(&o));
        o
    }

    /// The pids of `hmn ps --json ARGS`, in its order (asserting it succeeded).
    pub fn ps_pids(&self, args: &[&str]) -> Vec<u64> {
        let mut all = vec!["ps", "--json"];
        all.extend_from_slice(args);
        let o = self.run(&all);
        assert!(o.status.success(), "{args:?}: {}", stderr(&o));
        json(&o)["processes"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["pid"].as_u64().unwrap())
            .collect()
    }

    /// Output with this bed's directory replaced by `<tmp>`.
    pub fn normalised(&self, bytes: &[u8]) -> String {
        let text = String::from_utf8(bytes.to_vec()).unwrap();
        text.replace(&self.dir.path().display().to_string(), "<tmp>")
    }
}

/// The command's stdout, as UTF-8.
/// The component `name` of `hmn fits --json`'s estimate.
pub fn component<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["estimate"]["components"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no component {name}: {v}"))
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8(o.stdout.clone()).unwrap()
}

/// The command's stderr, as UTF-8.
pub fn stderr(o: &Output) -> String {
    String::from_utf8(o.stderr.clone()).unwrap()
}

/// The command's stdout as one JSON document.
pub fn json(o: &Output) -> Value {
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: stdout {:?} stderr {:?}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        )
    })
}

/// Line `line` of a text table, cut before the column headed `header` (the whole line when the
/// table has no such column): for asserting on the columns before one that depends on the
/// machine, such as `WORKLOAD` (the test process's own cgroup). Headers are left-aligned over
/// left-aligned cells, so the cut is at the header's first character.
pub fn before_column(table: &str, line: usize, header: &str) -> String {
    let mut lines = table.lines();
    let head = lines.next().unwrap_or_default();
    let row = table.lines().nth(line).unwrap_or_default();
    match head.find(header) {
        Some(at) => {
            let chars = head[..at].chars().count();
            row.chars()
                .take(chars)
                .collect::<String>()
                .trim_end()
                .to_string()
        }
        None => row.trim_end().to_string(),
    }
}

/// Peak RSS (KiB, GNU time's `%M`: the largest of the waited-for tree, so `timeout`'s child
/// hmn) of `hmn ARGS` in `bed`, and its output; hmn is killed after 20 s (a read that blocked
/// on a FIFO would hang it).
pub fn max_rss_kib(bed: &Bed, args: &[&str]) -> (u64, std::process::Output) {
    assert!(
        std::path::Path::new("/usr/bin/time").exists(),
        "GNU time is missing: .ci/run installs the `time` package"
    );
    let out = bed.path("time.out");
    let o = bed
        .env
        .command("/usr/bin/time")
        .arg("-f")
        .arg("%M")
        .arg("-o")
        .arg(&out)
        .args(["timeout", "-s", "KILL", "20"])
        .arg(env!("CARGO_BIN_EXE_hmn"))
        .args(args)
        .output()
        .unwrap();
    let kib = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .last()
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    (kib, o)
}

/// The pids below `root` (and `root`) whose `comm` is `name`.
pub fn named_below(root: u32, name: &str) -> Vec<u32> {
    let mut all: Vec<(u32, u32, String)> = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(comm) = std::fs::read_to_string(format!("/proc/{pid}/comm")) else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let ppid = stat
            .rfind(')')
            .and_then(|c| stat[c + 2..].split(' ').nth(1))
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        all.push((pid, ppid, comm.trim().to_string()));
    }
    let mut below = vec![root];
    let mut i = 0;
    while let Some(&p) = below.get(i) {
        below.extend(all.iter().filter(|(_, pp, _)| *pp == p).map(|(c, _, _)| *c));
        i += 1;
    }
    all.iter()
        .filter(|(pid, _, comm)| below.contains(pid) && comm == name)
        .map(|(pid, _, _)| *pid)
        .collect()
}
