//! Test-only: the layer rule of `hypomnesis` and `hmn`, checked from their sources.
//!
//! [`graph`] reads a crate's module graph with `syn` (what counts as an import is defined
//! there); [`mod@check`] fails on an import from a lower layer to a higher one and on any circle of
//! files; [`table`] is the one place the layers and their ranks are written down; [`seams`]
//! finds the files that hold `unsafe` or a platform `cfg`, so ARCHITECTURE.md's lists of them
//! are checked against the code. The checks run as `tests/layers.rs` under
//! `cargo test --workspace`.

pub mod check;
pub mod graph;
pub mod seams;
pub mod table;

pub use check::{Layer, Report, Table, check};
pub use graph::{Edge, Graph, Source, build};
pub use seams::{Seams, scan};
