//! The two rules over a [`Graph`]: imports run only downward, and no circle of files.
//!
//! A file's layer is its first path component under `src/` (`system/host/mod.rs` is in layer
//! `system`, `ps.rs` in layer `ps`); the crate root (`lib.rs`, `main.rs`) is above every layer.
//! An edge is allowed when both files are in one layer, or when the target's layer has a
//! strictly lower rank (two layers of one rank are siblings and may not import each other). A
//! circle is a strongly connected set of two or more files.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::graph::{Edge, Graph};

/// One layer: a folder (or file) directly under `src/`, and its rank (0 = the bottom).
#[derive(Debug, Clone, Copy)]
pub struct Layer {
    /// The folder or file name under `src/` (`system` for `system/`, `ps` for `ps.rs`).
    pub name: &'static str,
    /// Higher ranks may import lower ones; never the reverse, never a sibling of equal rank.
    pub rank: u8,
}

impl Layer {
    /// A layer named `name` (a folder or file directly under `src/`) of rank `rank`.
    pub const fn new(name: &'static str, rank: u8) -> Layer {
        Layer { name, rank }
    }
}

/// The layers of one crate.
#[derive(Debug, Clone, Copy)]
pub struct Table {
    /// The crate root file (`lib.rs`, `main.rs`): above every layer.
    pub root: &'static str,
    /// Every folder or file directly under `src/`.
    pub layers: &'static [Layer],
}

/// Where a file stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Place {
    Root,
    In(&'static str, u8),
}

impl Table {
    fn place(&self, file: &Path) -> Option<Place> {
        if file == Path::new(self.root) {
            return Some(Place::Root);
        }
        let first = file.components().next()?.as_os_str().to_str()?;
        let name = first.strip_suffix(".rs").unwrap_or(first);
        self.layers
            .iter()
            .find(|l| l.name == name)
            .map(|l| Place::In(l.name, l.rank))
    }
}

/// What the check found.
#[derive(Debug, Default)]
pub struct Report {
    /// Imports from a layer to a higher one, a sibling of equal rank, or the crate root.
    pub upward: Vec<Edge>,
    /// Each circle of files, and the edges that close it.
    pub circles: Vec<(Vec<PathBuf>, Vec<Edge>)>,
    /// Files in no layer of the table.
    pub unplaced: Vec<PathBuf>,
    /// The graph's own errors (unparsable or unreachable files).
    pub errors: Vec<String>,
}

impl Report {
    /// No finding of any kind.
    pub fn is_clean(&self) -> bool {
        self.upward.is_empty()
            && self.circles.is_empty()
            && self.unplaced.is_empty()
            && self.errors.is_empty()
    }

    /// Every finding, one block each, naming the files and the import lines.
    pub fn render(&self, table: &Table) -> String {
        let mut s = String::new();
        for e in &self.errors {
            let _ = writeln!(s, "unreadable: {e}");
        }
        for f in &self.unplaced {
            let _ = writeln!(
                s,
                "unplaced: {} is in no layer of the table (crates/layers/src/table.rs)",
                f.display()
            );
        }
        for e in &self.upward {
            let _ = writeln!(
                s,
                "upward import: {} ({}) imports {} ({}) at line {}: {}",
                e.from.display(),
                describe(table, &e.from),
                e.to.display(),
                describe(table, &e.to),
                e.line,
                e.text
            );
        }
        for (files, edges) in &self.circles {
            let names: Vec<String> = files.iter().map(|f| f.display().to_string()).collect();
            let _ = writeln!(s, "circle of {} files: {}", files.len(), names.join(" ↔ "));
            for e in edges {
                let _ = writeln!(
                    s,
                    "    {} → {} at line {}: {}",
                    e.from.display(),
                    e.to.display(),
                    e.line,
                    e.text
                );
            }
        }
        s
    }
}

fn describe(table: &Table, file: &Path) -> String {
    match table.place(file) {
        Some(Place::Root) => "the crate root".into(),
        Some(Place::In(name, rank)) => format!("layer {name}, rank {rank}"),
        None => "no layer".into(),
    }
}

/// Checks `graph` against `table`.
pub fn check(graph: &Graph, table: &Table) -> Report {
    let mut report = Report {
        errors: graph.errors.clone(),
        ..Report::default()
    };
    for f in &graph.files {
        if table.place(f).is_none() {
            report.unplaced.push(f.clone());
        }
    }
    for e in &graph.edges {
        let (Some(from), Some(to)) = (table.place(&e.from), table.place(&e.to)) else {
            continue;
        };
        let allowed = match (from, to) {
            (Place::Root, _) => true,
            (Place::In(..), Place::Root) => false,
            (Place::In(a, ra), Place::In(b, rb)) => a == b || rb < ra,
        };
        if !allowed {
            report.upward.push(e.clone());
        }
    }
    report.circles = circles(graph);
    report
}

/// Strongly connected sets of two or more files (Tarjan), each with the edges inside it (the
/// first import line of each pair of files).
pub fn circles(graph: &Graph) -> Vec<(Vec<PathBuf>, Vec<Edge>)> {
    let files: Vec<&PathBuf> = graph.files.iter().collect();
    let index: BTreeMap<&PathBuf, usize> = files.iter().enumerate().map(|(i, f)| (*f, i)).collect();
    let mut next: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    for e in &graph.edges {
        if let (Some(&a), Some(&b)) = (index.get(&e.from), index.get(&e.to)) {
            if !next[a].contains(&b) {
                next[a].push(b);
            }
        }
    }
    let mut t = Tarjan {
        next: &next,
        index: vec![None; files.len()],
        low: vec![0; files.len()],
        on_stack: vec![false; files.len()],
        stack: Vec::new(),
        counter: 0,
        sets: Vec::new(),
    };
    for v in 0..files.len() {
        if t.index[v].is_none() {
            t.visit(v);
        }
    }
    let mut out = Vec::new();
    for set in t.sets.into_iter().filter(|s| s.len() > 1) {
        let mut members: Vec<PathBuf> = set.iter().map(|&i| files[i].clone()).collect();
        members.sort();
        let mut edges: Vec<Edge> = Vec::new();
        for e in &graph.edges {
            if members.contains(&e.from)
                && members.contains(&e.to)
                && !edges.iter().any(|x| x.from == e.from && x.to == e.to)
            {
                edges.push(e.clone());
            }
        }
        out.push((members, edges));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

struct Tarjan<'a> {
    next: &'a [Vec<usize>],
    index: Vec<Option<usize>>,
    low: Vec<usize>,
    on_stack: Vec<bool>,
    stack: Vec<usize>,
    counter: usize,
    sets: Vec<Vec<usize>>,
}

impl Tarjan<'_> {
    fn visit(&mut self, v: usize) {
        self.index[v] = Some(self.counter);
        self.low[v] = self.counter;
        self.counter += 1;
        self.stack.push(v);
        self.on_stack[v] = true;
        for &w in &self.next[v] {
            match self.index[w] {
                None => {
                    self.visit(w);
                    self.low[v] = self.low[v].min(self.low[w]);
                }
                Some(iw) if self.on_stack[w] => self.low[v] = self.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(self.low[v]) == self.index[v] {
            let mut set = Vec::new();
            while let Some(w) = self.stack.pop() {
                self.on_stack[w] = false;
                set.push(w);
                if w == v {
                    break;
                }
            }
            self.sets.push(set);
        }
    }
}
