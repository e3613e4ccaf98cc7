//! `/proc/<pid>/cgroup`, parsed (pure): one [`CgroupLine`] per hierarchy, and the v2 and v1
//! memory paths among them.

/// One line of `/proc/<pid>/cgroup`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupLine {
    /// Hierarchy id (0 for cgroup v2).
    pub hierarchy: u32,
    /// Controllers of a v1 hierarchy (`memory`, `cpu,cpuacct`, `name=systemd`); empty for v2.
    pub controllers: Vec<String>,
    /// The group's path inside its hierarchy.
    pub path: String,
}

/// Parses `/proc/<pid>/cgroup` (pure). Malformed lines are skipped.
pub fn parse_proc_cgroup(text: &str) -> Vec<CgroupLine> {
    text.lines()
        .filter_map(|l| {
            let mut it = l.splitn(3, ':');
            let hierarchy = it.next()?.parse().ok()?;
            let controllers = it
                .next()?
                .split(',')
                .filter(|c| !c.is_empty())
                .map(str::to_string)
                .collect();
            let path = it.next()?.to_string();
            Some(CgroupLine {
                hierarchy,
                controllers,
                path,
            })
        })
        .collect()
}

/// The process's cgroup v2 path (`0::/…`), if it has one.
pub fn v2_path(lines: &[CgroupLine]) -> Option<&str> {
    lines
        .iter()
        .find(|l| l.hierarchy == 0 && l.controllers.is_empty())
        .map(|l| l.path.as_str())
}

/// The process's cgroup v1 memory-controller path, if it has one.
pub fn v1_memory_path(lines: &[CgroupLine]) -> Option<&str> {
    lines
        .iter()
        .find(|l| l.controllers.iter().any(|c| c == "memory"))
        .map(|l| l.path.as_str())
}
