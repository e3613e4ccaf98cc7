//! The process table's lines: filtered, sorted by any column, flat or as a tree of parents and
//! children (pure: a snapshot in, lines out).

use std::cmp::Ordering;
use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::snapshot::{ProcessRow, Snapshot};

/// A column of the process table; every one sorts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Column {
    Pid,
    User,
    Name,
    Device,
    Kind,
    Vram,
    Rss,
    Engine,
    Workload,
}

impl Column {
    pub const ALL: [Column; 9] = [
        Column::Pid,
        Column::User,
        Column::Name,
        Column::Device,
        Column::Kind,
        Column::Vram,
        Column::Rss,
        Column::Engine,
        Column::Workload,
    ];

    /// The header.
    pub fn title(self) -> &'static str {
        match self {
            Column::Pid => "PID",
            Column::User => "USER",
            Column::Name => "NAME",
            Column::Device => "DEV",
            Column::Kind => "KIND",
            Column::Vram => "VRAM",
            Column::Rss => "RSS",
            Column::Engine => "GPU%",
            Column::Workload => "WORKLOAD",
        }
    }

    fn index(self) -> usize {
        Column::ALL.iter().position(|c| *c == self).unwrap_or(0)
    }

    /// The next column (wrapping).
    #[must_use]
    pub fn next(self) -> Column {
        Column::ALL[(self.index() + 1) % Column::ALL.len()]
    }

    /// The previous column (wrapping).
    #[must_use]
    pub fn prev(self) -> Column {
        Column::ALL[(self.index() + Column::ALL.len() - 1) % Column::ALL.len()]
    }

    /// Compares two rows by this column; unknown values sort last in either direction.
    pub fn compare(self, a: &ProcessRow, b: &ProcessRow, descending: bool) -> Ordering {
        fn known<T: Ord>(a: Option<T>, b: Option<T>, descending: bool) -> Ordering {
            match (a, b) {
                (Some(x), Some(y)) if descending => y.cmp(&x),
                (Some(x), Some(y)) => x.cmp(&y),
                (Some(_), None) => Ordering::Less,
                (None, Some(_)) => Ordering::Greater,
                (None, None) => Ordering::Equal,
            }
        }
        let lower = |s: Option<&str>| s.map(str::to_lowercase);
        let name = |r: &ProcessRow| r.gpu.name.as_ref().map(|n| n.escaped().to_lowercase());
        let engine = |r: &ProcessRow| r.busiest_engine().map(|(_, v)| (v * 1000.0) as i64);
        let (ra, rb) = (a, b);
        let (a, b) = (&a.gpu, &b.gpu);
        let primary = match self {
            Column::Pid => known(Some(a.pid), Some(b.pid), descending),
            Column::User => known(
                lower(a.user.as_deref()),
                lower(b.user.as_deref()),
                descending,
            ),
            Column::Name => known(name(ra), name(rb), descending),
            Column::Device => known(Some(a.device_index), Some(b.device_index), descending),
            Column::Kind => known(Some(a.kind.as_str()), Some(b.kind.as_str()), descending),
            Column::Vram => known(a.used_bytes, b.used_bytes, descending),
            Column::Rss => known(ra.rss_bytes, rb.rss_bytes, descending),
            Column::Engine => known(engine(ra), engine(rb), descending),
            Column::Workload => known(ra.workload_label(), rb.workload_label(), descending),
        };
        primary
            .then(a.device_index.cmp(&b.device_index))
            .then(a.pid.cmp(&b.pid))
    }

    /// Whether this column sorts largest first by default.
    pub fn numeric(self) -> bool {
        matches!(
            self,
            Column::Vram | Column::Rss | Column::Engine | Column::Pid | Column::Device
        )
    }
}

/// One line of the table: a process's row on one device, or (tree view) a parent that holds
/// no GPU memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub pid: u32,
    /// The row in `Snapshot::processes`; `None` for an ancestor line.
    pub row: Option<usize>,
    pub device: Option<u32>,
    pub start_time: Option<u64>,
    pub name: String,
    /// The tree drawing before the name (`├─ `, `│  └─ `), empty in the flat view.
    pub prefix: String,
}

impl Line {
    /// What identifies the line across snapshots.
    pub fn key(&self) -> (u32, Option<u32>) {
        (self.pid, self.device)
    }
}

/// Whether a row matches the filter (case-insensitive substring of name, user, pid, command
/// line, container/unit, kind).
pub fn matches(r: &ProcessRow, filter: &str) -> bool {
    if filter.is_empty() {
        return true;
    }
    let f = filter.to_lowercase();
    let has = |s: Option<&str>| s.is_some_and(|s| s.to_lowercase().contains(&f));
    has(r.gpu.name.as_ref().map(|n| n.escaped()).as_deref())
        || has(r.gpu.user.as_deref())
        || r.gpu.pid.to_string().contains(&f)
        || has(r.cmdline.as_deref())
        || has(r.workload_label().as_deref())
        || r.gpu.kind.as_str().contains(&f)
}

fn line(s: &Snapshot, i: usize, prefix: String) -> Line {
    let r = &s.processes[i];
    Line {
        pid: r.gpu.pid,
        row: Some(i),
        device: Some(r.gpu.device_index),
        start_time: r.start_time,
        name: r.name_or_unknown(),
        prefix,
    }
}

/// The table's lines for a snapshot.
pub fn lines(s: &Snapshot, sort: Column, descending: bool, filter: &str, tree: bool) -> Vec<Line> {
    let mut idx: Vec<usize> = (0..s.processes.len())
        .filter(|i| matches(&s.processes[*i], filter))
        .collect();
    let cmp = |a: &usize, b: &usize| sort.compare(&s.processes[*a], &s.processes[*b], descending);
    idx.sort_by(cmp);
    if !tree {
        return idx.into_iter().map(|i| line(s, i, String::new())).collect();
    }
    // Nodes: every pid with rows, and the ancestors the snapshot carries.
    let mut rows_of: BTreeMap<u32, Vec<usize>> = BTreeMap::new();
    let mut parent: HashMap<u32, Option<u32>> = HashMap::new();
    for (i, r) in s.processes.iter().enumerate() {
        rows_of.entry(r.gpu.pid).or_default().push(i);
        parent.insert(r.gpu.pid, r.ppid);
    }
    let mut names: HashMap<u32, (String, Option<u64>)> = HashMap::new();
    for a in &s.ancestors {
        parent.entry(a.pid).or_insert(a.ppid);
        let name = a.name.clone().unwrap_or_else(|| "?".to_string());
        names.insert(a.pid, (name, a.start_time));
    }
    // Visible: the pids of matching rows and everything above them.
    let mut visible: BTreeSet<u32> = BTreeSet::new();
    for i in &idx {
        let mut pid = Some(s.processes[*i].gpu.pid);
        while let Some(p) = pid {
            if !parent.contains_key(&p) || !visible.insert(p) {
                break;
            }
            pid = parent.get(&p).copied().flatten();
        }
    }
    let up = |p: u32| {
        parent
            .get(&p)
            .copied()
            .flatten()
            .filter(|pp| visible.contains(pp) && *pp != p)
    };
    let mut children: BTreeMap<Option<u32>, Vec<u32>> = BTreeMap::new();
    for p in &visible {
        children.entry(up(*p)).or_default().push(*p);
    }
    // Each node sorts by the best row in its subtree (rank in the sorted order).
    let rank: HashMap<usize, usize> = idx.iter().enumerate().map(|(r, i)| (*i, r)).collect();
    let mut best: HashMap<u32, usize> = HashMap::new();
    fn best_of(
        p: u32,
        children: &BTreeMap<Option<u32>, Vec<u32>>,
        rows_of: &BTreeMap<u32, Vec<usize>>,
        rank: &HashMap<usize, usize>,
        best: &mut HashMap<u32, usize>,
        depth: usize,
    ) -> usize {
        if let Some(b) = best.get(&p) {
            return *b;
        }
        let own = rows_of
            .get(&p)
            .into_iter()
            .flatten()
            .filter_map(|i| rank.get(i).copied())
            .min()
            .unwrap_or(usize::MAX);
        let kids = if depth > 256 {
            usize::MAX
        } else {
            children
                .get(&Some(p))
                .into_iter()
                .flatten()
                .map(|c| best_of(*c, children, rows_of, rank, best, depth + 1))
                .min()
                .unwrap_or(usize::MAX)
        };
        let b = own.min(kids);
        best.insert(p, b);
        b
    }
    for p in &visible {
        best_of(*p, &children, &rows_of, &rank, &mut best, 0);
    }
    for list in children.values_mut() {
        list.sort_by_key(|p| (best.get(p).copied().unwrap_or(usize::MAX), *p));
    }
    let mut out = Vec::new();
    let mut done: BTreeSet<u32> = BTreeSet::new();
    let roots: Vec<u32> = children.get(&None).cloned().unwrap_or_default();
    // Roots first; then anything a parent loop in hostile data left unreachable.
    let rest: Vec<u32> = visible.iter().copied().collect();
    for start in roots.iter().chain(&rest) {
        if done.contains(start) {
            continue;
        }
        // Depth-first, with an explicit stack: (pid, indent text, is last sibling, depth).
        let mut stack = vec![(*start, String::new(), true, 0usize)];
        while let Some((p, indent, last, depth)) = stack.pop() {
            if !done.insert(p) {
                continue;
            }
            let branch = match (depth, last) {
                (0, _) => String::new(),
                (_, true) => format!("{indent}└─ "),
                (_, false) => format!("{indent}├─ "),
            };
            match rows_of.get(&p) {
                Some(rows) => {
                    let mut rows = rows.clone();
                    rows.sort_by(cmp);
                    for i in rows {
                        out.push(line(s, i, branch.clone()));
                    }
                }
                None => {
                    // An ancestor: its identity as the snapshot carried it; a pid named only as
                    // someone's parent (`?`) has none.
                    let (name, start_time) = names
                        .get(&p)
                        .cloned()
                        .unwrap_or_else(|| ("?".to_string(), None));
                    out.push(Line {
                        pid: p,
                        row: None,
                        device: None,
                        start_time,
                        name,
                        prefix: branch,
                    });
                }
            }
            let child_indent = match (depth, last) {
                (0, _) => String::new(),
                (_, true) => format!("{indent}   "),
                (_, false) => format!("{indent}│  "),
            };
            if depth < 64 {
                let kids = children.get(&Some(p)).into_iter().flatten().rev();
                for (n, c) in kids.enumerate() {
                    stack.push((*c, child_indent.clone(), n == 0, depth + 1));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::top::snapshot::Ancestor;
    use hypomnesis::test_helpers::GpuProcessBuilder;

    fn row(pid: u32, ppid: u32, dev: u32, vram: Option<u64>, name: &str) -> ProcessRow {
        let mut r = ProcessRow::from_gpu(
            GpuProcessBuilder::new(pid, dev)
                .used_bytes(vram)
                .name(name)
                .build(),
        );
        r.ppid = Some(ppid);
        r
    }

    fn snap() -> Snapshot {
        let mut s = Snapshot::empty(1, 1000);
        s.processes = vec![
            row(10, 5, 0, Some(100), "trainer"),
            row(11, 10, 0, Some(300), "worker"),
            row(11, 10, 1, None, "worker"),
            row(20, 1, 1, Some(50), "Xorg"),
        ];
        s.ancestors = vec![Ancestor {
            pid: 5,
            ppid: Some(1),
            start_time: Some(77),
            name: Some("bash".into()),
        }];
        s
    }

    fn shown(l: &[Line]) -> Vec<String> {
        l.iter()
            .map(|l| format!("{}{}:{:?}", l.prefix, l.pid, l.device))
            .collect()
    }

    #[test]
    fn flat_sorts_by_any_column_with_unknown_last() {
        let s = snap();
        let l = lines(&s, Column::Vram, true, "", false);
        assert_eq!(
            shown(&l),
            ["11:Some(0)", "10:Some(0)", "20:Some(1)", "11:Some(1)"]
        );
        let l = lines(&s, Column::Vram, false, "", false);
        assert_eq!(
            shown(&l),
            ["20:Some(1)", "10:Some(0)", "11:Some(0)", "11:Some(1)"]
        );
        let l = lines(&s, Column::Name, false, "", false);
        assert_eq!(l[0].name, "trainer");
        assert_eq!(l[3].name, "Xorg");
        for c in Column::ALL {
            assert_eq!(lines(&s, c, true, "", false).len(), 4, "{c:?}");
        }
    }

    #[test]
    fn the_filter_matches_name_pid_and_command_line() {
        let mut s = snap();
        s.processes[3].cmdline = Some("/usr/lib/xorg/Xorg :0 -nolisten tcp".into());
        assert_eq!(lines(&s, Column::Pid, false, "WORK", false).len(), 2);
        assert_eq!(lines(&s, Column::Pid, false, "nolisten", false)[0].pid, 20);
        assert_eq!(lines(&s, Column::Pid, false, "10", false)[0].pid, 10);
        assert!(lines(&s, Column::Pid, false, "nothing", false).is_empty());
    }

    #[test]
    fn the_tree_nests_children_under_parents_and_shows_ancestors() {
        let s = snap();
        let l = lines(&s, Column::Vram, true, "", true);
        assert_eq!(
            shown(&l),
            [
                "5:None",
                "└─ 10:Some(0)",
                "   └─ 11:Some(0)",
                "   └─ 11:Some(1)",
                "20:Some(1)"
            ]
        );
        assert_eq!(l[0].name, "bash");
        // Every line carries the identity a signal is checked against, ancestors included.
        assert_eq!(l[0].start_time, Some(77));
        // Filtered: the match and the lines above it.
        let l = lines(&s, Column::Vram, true, "worker", true);
        assert_eq!(shown(&l)[0], "5:None");
        assert_eq!(l.len(), 4);
    }

    #[test]
    fn a_parent_loop_in_hostile_data_terminates() {
        let mut s = snap();
        s.processes[0].ppid = Some(11); // 10 -> 11 -> 10
        let l = lines(&s, Column::Pid, false, "", true);
        assert!(l.len() <= 4 + 1, "{:?}", shown(&l));
    }
}
