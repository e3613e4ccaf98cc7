//! The table's lines kept by [`App::lines`]: made once per snapshot, sort, filter and view.

// Test helpers: a failed step stops the test with its message.
#![allow(clippy::unwrap_used)]

use std::sync::Arc;

use ratatui::crossterm::event::KeyCode;

use super::app::App;
use super::rows::{Column, Line, lines};
use super::tests::{nvidia_shown, press};

/// The lines as made from scratch for what `app` shows now.
fn fresh(app: &App) -> Vec<Line> {
    let s = app.snap().unwrap();
    lines(s, app.sort, app.descending, &app.filter, app.tree)
}

/// The table's lines are kept while nothing they are made of changes, and made again after
/// each change of the snapshot, the sort, its direction, the filter or the view.
#[test]
fn the_lines_are_kept_until_what_made_them_changes() {
    let (_bed, _c, mut app) = nvidia_shown();
    let first = app.lines();
    assert!(first.len() >= 3, "{first:?}");
    assert!(Arc::ptr_eq(&first, &app.lines()), "kept");
    type Change = (&'static str, fn(&mut App));
    let changes: [Change; 7] = [
        ("sort", |a| a.sort = Column::Pid),
        ("direction", |a| a.descending = !a.descending),
        ("filter", |a| a.filter = "worker".into()),
        ("filter cleared", |a| a.filter.clear()),
        ("tree", |a| press(a, KeyCode::Char('t'))),
        ("changed in place", |a| {
            a.snap_mut().unwrap().processes.pop();
        }),
        ("a new snapshot", |a| {
            let mut s = a.snap().unwrap().clone();
            s.processes.truncate(1);
            a.push(s);
        }),
    ];
    for (what, change) in changes {
        let before = app.lines();
        change(&mut app);
        let after = app.lines();
        assert!(!Arc::ptr_eq(&before, &after), "{what}: made again");
        assert_eq!(*after, fresh(&app), "{what}");
        assert!(Arc::ptr_eq(&after, &app.lines()), "{what}: then kept");
    }
    assert_eq!(app.lines().iter().filter(|l| l.row.is_some()).count(), 1);
}
