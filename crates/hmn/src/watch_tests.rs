//! `watch`'s unit tests (beside it for its size).
use super::*;
use hypomnesis::test_helpers::GpuProcessBuilder;

fn args(extra: &[&str]) -> WatchArgs {
    use clap::Parser;
    let cli =
        crate::args::Cli::try_parse_from(["hmn", "watch"].iter().chain(extra.iter()).copied())
            .unwrap();
    match cli.command {
        Some(crate::args::Command::Watch(w)) => w,
        other => panic!("{other:?}"),
    }
}

#[test]
fn auto_selection_flags_conflict_with_explicit_pids() {
    assert!(check_conflicts(&args(&["1", "--top", "3"])).is_ok());
    assert!(check_conflicts(&args(&["--follow-new", "--min", "1G"])).is_ok());
    for (flag, extra) in [
        ("--follow-new", &["--follow-new"][..]),
        ("--filter", &["--filter", "py"]),
        ("--min", &["--min", "1GiB"]),
    ] {
        let mut all = vec!["42"];
        all.extend_from_slice(extra);
        assert_eq!(
            check_conflicts(&args(&all)).unwrap_err().to_string(),
            format!(
                "watch {flag} only applies to auto-selection; drop {flag} or the explicit PID list"
            )
        );
    }
}

#[test]
fn candidates_rank_by_memory_then_name_then_pid() {
    let row = |pid, dev, used: Option<u64>, name: &str| {
        GpuProcessBuilder::new(pid, dev)
            .used_bytes(used)
            .name(name)
            .build()
    };
    let rows = vec![
        row(1, 0, Some(5 << 30), "python3"),
        row(2, 0, Some(5 << 30), "llama"),
        row(3, 1, Some(9 << 30), "vllm"),
        row(4, 0, None, "unknown"),
        row(5, 0, Some(1 << 20), "Xorg"),
    ];
    let pids = |a: &WatchArgs| {
        let on = a.device.as_ref().map(|d| match d {
            DeviceSelector::Index(i) => Selected::device(*i),
            other => panic!("{other:?}"),
        });
        candidates(&rows, a, on)
            .iter()
            .map(|r| r.pid)
            .collect::<Vec<u32>>()
    };
    assert_eq!(pids(&args(&[])), [3, 2, 1, 5, 4]);
    assert_eq!(pids(&args(&["--device", "0"])), [2, 1, 5, 4]);
    assert_eq!(
        pids(&args(&["--min", "1GiB"])),
        [3, 2, 1],
        "unknown left out"
    );
    assert_eq!(pids(&args(&["--filter", "PY", "--filter", "org"])), [1, 5]);
    assert_eq!(
        criteria(&args(&["--device", "1", "--filter", "py", "--min", "1GiB"])),
        "top 5 on GPU 1 matching \"py\" at least 1 GiB"
    );
}

#[test]
fn set_changes_name_who_entered_and_left() {
    let f = |pid, name: &str| Followed {
        id: ProcessId { pid, start_time: 7 },
        name: name.into(),
        workload: None,
    };
    assert_eq!(set_change(&[f(1, "a")], &[f(1, "a")]), None);
    assert_eq!(
        set_change(&[f(1, "a"), f(2, "b")], &[f(1, "a"), f(3, "c"), f(4, "d")]).as_deref(),
        Some("entered pid=3 (c), pid=4 (d); left pid=2 (b)")
    );
    assert_eq!(
        set_change(&[f(1, "a")], &[]).as_deref(),
        Some("left pid=1 (a)")
    );
}
