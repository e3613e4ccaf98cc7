//! Who a row belongs to, in the table: the WORKLOAD and NS PID cells, the NAME of a row whose
//! host pid this `/proc` cannot show, the `--workload` filter, and the one-line note with the
//! remedy. The rules are the library's ([`hypomnesis::workload`], [`hypomnesis::pidns`]);
//! `ps` and `watch` only format them.

use hypomnesis::workload::WorkloadInfo;
use hypomnesis::{GpuProcess, UnknownReason};

/// The NAME cell of a row whose host pid is not visible here.
pub const NOT_VISIBLE: &str = "(host pid: not visible here)";

/// Whether the row's pid is an NVML host pid this proc root cannot show.
pub fn hidden_by_namespace(p: &GpuProcess) -> bool {
    p.unknown
        .iter()
        .any(|u| u.reason == UnknownReason::OtherPidNamespace)
}

/// The NAME cell: the name, [`NOT_VISIBLE`], or `?`.
pub fn name_cell(p: &GpuProcess) -> String {
    if hidden_by_namespace(p) {
        NOT_VISIBLE.to_string()
    } else {
        p.name_or_unknown().to_string()
    }
}

/// The WORKLOAD cell: the workload's label, or `-` for none.
pub fn workload_cell(w: Option<&WorkloadInfo>) -> String {
    w.map_or_else(|| "-".to_string(), WorkloadInfo::label)
}

/// The NS PID cell: the innermost pid, or `-` when it is `pid` itself.
pub fn ns_pid_cell(p: &GpuProcess) -> String {
    p.ns_pid.map_or_else(|| "-".to_string(), |n| n.to_string())
}

/// Whether a row's workload matches one of `patterns` (none: every row; a row without a
/// workload matches none).
pub fn workload_matches(w: Option<&WorkloadInfo>, patterns: &[String]) -> bool {
    patterns.is_empty() || w.is_some_and(|w| patterns.iter().any(|p| w.matches(p)))
}

/// The stderr note when some rows' host pids are not visible: one reason, one remedy.
pub fn namespace_note(rows: &[&GpuProcess]) -> Option<String> {
    let n = rows.iter().filter(|p| hidden_by_namespace(p)).count();
    (n > 0).then(|| {
        format!(
            "{n} NVIDIA row{} name{} a host PID that this /proc cannot show (hmn runs in a \
             container's own PID namespace): run the container with --pid=host, or mount the \
             host's /proc read-only (-v /proc:/host/proc:ro) and pass --proc-root /host/proc",
            if n == 1 { "" } else { "s" },
            if n == 1 { "s" } else { "" },
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::Unknown;
    use hypomnesis::test_helpers::GpuProcessBuilder;

    #[test]
    fn cells_and_note() {
        let hidden = GpuProcessBuilder::new(48213, 0)
            .unknown(Unknown::new(
                hypomnesis::Field::Name,
                UnknownReason::OtherPidNamespace,
                "not visible",
            ))
            .build();
        let plain = GpuProcessBuilder::new(7, 0).name("python3").build();
        assert_eq!(name_cell(&hidden), NOT_VISIBLE);
        assert_eq!(name_cell(&plain), "python3");
        assert_eq!(ns_pid_cell(&plain), "-");
        assert_eq!(namespace_note(&[&plain]), None);
        let note = namespace_note(&[&hidden, &plain]).unwrap();
        assert!(note.starts_with("1 NVIDIA row names a host PID"), "{note}");
        assert!(
            note.contains("--pid=host") && note.contains("--proc-root"),
            "{note}"
        );
        let w = hypomnesis::workload::classify("/system.slice/ollama.service");
        assert_eq!(workload_cell(w.as_ref()), "unit:ollama.service");
        assert_eq!(workload_cell(None), "-");
        assert!(workload_matches(w.as_ref(), &["OLLAMA".into()]));
        assert!(workload_matches(None, &[]));
        assert!(!workload_matches(None, &["x".into()]));
    }
}
