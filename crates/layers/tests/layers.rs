//! The layer rule, checked: `hypomnesis` and `hmn` import only downward and have no circle of
//! files (ranks: `src/table.rs`; what an import is: `src/graph.rs`). And the checker itself,
//! against small synthetic crates that break each rule once.

use std::path::Path;

use hmn_layers::{Layer, Report, Source, Table, build, check, table};

// ARCHITECTURE.md's lists of the files with `unsafe` and platform `cfg`, against the code.
mod seams;

/// The crate under `dir` against `table`: `Err` with every finding, named.
fn layer_rule(dir: &str, table: &Table) -> Result<(), String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let source =
        Source::from_dir(&src, table.root).map_err(|e| format!("{}: {e}", src.display()))?;
    let r = check(&build(&source), table);
    if r.is_clean() {
        return Ok(());
    }
    Err(format!(
        "{} breaks the layer rule (ARCHITECTURE.md \"Layers\"):\n{}",
        src.display(),
        r.render(table)
    ))
}

#[test]
fn the_library_imports_only_downward_without_circles() {
    if let Err(e) = layer_rule("../hypomnesis/src", &table::LIBRARY) {
        panic!("{e}");
    }
}

#[test]
fn hmn_imports_only_downward_without_circles() {
    if let Err(e) = layer_rule("../hmn/src", &table::HMN) {
        panic!("{e}");
    }
}

/// Both graphs are real: every file is reached, and there are edges between layers.
#[test]
fn the_graphs_reach_every_file() {
    for (dir, t, at_least) in [
        ("../hypomnesis/src", &table::LIBRARY, 100),
        ("../hmn/src", &table::HMN, 40),
    ] {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
        let g = build(&Source::from_dir(&src, t.root).unwrap());
        assert!(g.errors.is_empty(), "{dir}: {:?}", g.errors);
        assert!(g.files.len() >= at_least, "{dir}: {} files", g.files.len());
        assert!(
            g.edges.iter().any(|e| e.from.components().count() > 1
                && e.to.components().next() != e.from.components().next()),
            "{dir}: no edge between layers"
        );
    }
}

// ---- the checker against synthetic crates ----

/// `low` (rank 0), `high` (rank 1), `other` (rank 1: a sibling of `high`).
const T: Table = Table {
    root: "lib.rs",
    layers: &[
        Layer::new("low", 0),
        Layer::new("high", 1),
        Layer::new("other", 1),
    ],
};

fn report(files: &[(&str, &str)]) -> Report {
    check(
        &build(&Source::from_files("lib.rs", files.iter().copied())),
        &T,
    )
}

const ROOT: &str = "mod low; mod high; mod other; pub use high::Api;";

#[test]
fn a_clean_tree_passes() {
    let r = report(&[
        ("lib.rs", ROOT),
        ("low.rs", "pub struct Thing;"),
        (
            "high.rs",
            "use crate::low::Thing;\npub struct Api(pub Thing);",
        ),
        (
            "other.rs",
            "pub fn f() -> crate::low::Thing { crate::low::Thing }",
        ),
    ]);
    assert!(r.is_clean(), "{}", r.render(&T));
}

#[test]
fn an_upward_import_fails_naming_both_files_and_the_line() {
    let r = report(&[
        ("lib.rs", ROOT),
        ("low.rs", "pub struct Thing;\n\nuse crate::high::Api;\n"),
        ("high.rs", "pub struct Api;"),
        ("other.rs", ""),
    ]);
    assert!(!r.is_clean());
    assert_eq!(r.upward.len(), 1, "{}", r.render(&T));
    let text = r.render(&T);
    assert!(
        text.contains("low.rs (layer low, rank 0) imports high.rs (layer high, rank 1) at line 3: use crate::high::Api;"),
        "{text}"
    );
}

#[test]
fn a_sibling_of_equal_rank_is_refused() {
    let r = report(&[
        ("lib.rs", ROOT),
        ("low.rs", ""),
        ("high.rs", "pub struct Api;"),
        ("other.rs", "fn f(_: crate::high::Api) {}"),
    ]);
    assert_eq!(r.upward.len(), 1, "{}", r.render(&T));
}

#[test]
fn a_path_through_the_crate_root_is_upward() {
    // `crate::Api` is lib.rs's re-export: the root is above every layer.
    let r = report(&[
        ("lib.rs", ROOT),
        ("low.rs", ""),
        ("high.rs", "pub struct Api;"),
        ("other.rs", "fn f(_: crate::Api) {}"),
    ]);
    assert_eq!(r.upward.len(), 1, "{}", r.render(&T));
    assert!(r.render(&T).contains("imports lib.rs (the crate root)"));
}

#[test]
fn a_circle_of_two_files_fails() {
    let r = report(&[
        ("lib.rs", ROOT),
        ("low/mod.rs", "mod a; mod b;"),
        ("low/a.rs", "use super::b::B; pub struct A;"),
        ("low/b.rs", "pub struct B;\nfn f(_: super::a::A) {}\n"),
        ("high.rs", "pub struct Api;"),
        ("other.rs", ""),
    ]);
    assert!(r.upward.is_empty());
    assert_eq!(r.circles.len(), 1, "{}", r.render(&T));
    let text = r.render(&T);
    assert!(
        text.contains("circle of 2 files: low/a.rs ↔ low/b.rs"),
        "{text}"
    );
    assert!(text.contains("low/b.rs → low/a.rs at line 2"), "{text}");
}

#[test]
fn a_parent_that_re_exports_a_child_which_imports_through_it_is_a_circle() {
    // The shape behind most circles: mod.rs defines `Shared` and re-exports the child; the
    // child names `super::Shared`.
    let files = [
        ("lib.rs", ROOT),
        (
            "low/mod.rs",
            "mod child;\npub use child::Api;\npub struct Shared;\n",
        ),
        (
            "low/child.rs",
            "use super::Shared;\npub struct Api(pub Shared);\n",
        ),
        ("high.rs", "pub struct Api;"),
        ("other.rs", ""),
    ];
    let r = report(&files);
    assert_eq!(r.circles.len(), 1, "{}", r.render(&T));
    // A parent that only declares the child is not: `mod child;` is not an import.
    let r = report(&[
        ("lib.rs", ROOT),
        ("low/mod.rs", "mod child;\npub struct Shared;\n"),
        (
            "low/child.rs",
            "use super::Shared;\npub struct Api(pub Shared);\n",
        ),
        ("high.rs", "pub struct Api;"),
        ("other.rs", ""),
    ]);
    assert!(r.is_clean(), "{}", r.render(&T));
}

#[test]
fn paths_in_macros_and_attributes_are_imports_and_doc_links_are_not() {
    let r = report(&[
        ("lib.rs", ROOT),
        (
            "low.rs",
            "/// See [`crate::high::Api`].\npub fn f() { let _ = format!(\"{}\", crate::high::name()); }\n",
        ),
        ("high.rs", "pub fn name() -> &'static str { \"\" }"),
        (
            "other.rs",
            "#[derive(Debug)]\n#[error(\"{}\", crate::high::name())]\npub struct E;\n",
        ),
    ]);
    let lines: Vec<(String, usize)> = r
        .upward
        .iter()
        .map(|e| (e.from.display().to_string(), e.line))
        .collect();
    assert_eq!(
        lines,
        [("low.rs".to_string(), 2), ("other.rs".to_string(), 2)],
        "{}",
        r.render(&T)
    );
}

#[test]
fn cfg_alternatives_of_one_module_are_not_a_circle() {
    // `#[path]` picks one of two files for the same module; a test module in each uses super.
    let r = report(&[
        ("lib.rs", ROOT),
        (
            "low/mod.rs",
            "#[cfg(unix)]\nmod imp;\n#[cfg(not(unix))]\n#[path = \"imp_other.rs\"]\nmod imp;\n",
        ),
        ("low/imp.rs", "fn f() {}\nmod tests { use super::*; }\n"),
        (
            "low/imp_other.rs",
            "fn f() {}\nmod tests { use super::*; }\n",
        ),
        ("high.rs", "pub struct Api;"),
        ("other.rs", ""),
    ]);
    assert!(r.is_clean(), "{}", r.render(&T));
}

#[test]
fn a_module_alias_is_followed_to_its_files() {
    let r = report(&[
        ("lib.rs", ROOT),
        ("low.rs", "pub fn f() {}"),
        (
            "high.rs",
            "use crate::low as base;\npub struct Api;\nfn g() { base::f() }\n",
        ),
        ("other.rs", ""),
    ]);
    assert!(r.is_clean(), "{}", r.render(&T));
    let g = build(&Source::from_files(
        "lib.rs",
        [
            ("lib.rs", ROOT),
            ("low.rs", "pub fn f() {}"),
            ("high.rs", "use crate::low as base;\nfn g() { base::f() }\n"),
            ("other.rs", ""),
        ],
    ));
    assert!(
        g.edges
            .iter()
            .any(|e| e.from == Path::new("high.rs") && e.to == Path::new("low.rs") && e.line == 2),
        "{:?}",
        g.edges
    );
}

#[test]
fn a_file_outside_the_table_or_the_module_tree_fails() {
    let r = report(&[
        ("lib.rs", "mod low; mod high; mod other; mod extra;"),
        ("low.rs", ""),
        ("high.rs", ""),
        ("other.rs", ""),
        ("extra.rs", ""),
        ("stray.rs", ""),
    ]);
    assert_eq!(r.unplaced.len(), 1, "{}", r.render(&T));
    assert!(r.render(&T).contains("unplaced: extra.rs"));
    assert_eq!(r.errors.len(), 1, "{}", r.render(&T));
    assert!(r.errors[0].contains("stray.rs"), "{:?}", r.errors);
    let r = report(&[("lib.rs", "mod low; mod missing;"), ("low.rs", "")]);
    assert!(
        r.errors.iter().any(|e| e.contains("missing/mod.rs")),
        "{:?}",
        r.errors
    );
    let r = report(&[("lib.rs", "mod low;"), ("low.rs", "fn (")]);
    assert!(
        r.errors.iter().any(|e| e.contains("does not parse")),
        "{:?}",
        r.errors
    );
}
