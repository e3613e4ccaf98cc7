//! `hmn top` (a live terminal view of every GPU and process) and `hmn record` (the same
//! snapshots as JSON Lines), with `hmn top --replay` playing a recording into the same view.
//! See `docs/top.md`.
//!
//! | Module | Owns |
//! |---|---|
//! | [`snapshot`] | the snapshot: the library's devices and rows with what `top` adds (serde), its bounds |
//! | [`collect`] | the collector: one long-lived `Probe` → snapshots; its thread for `top` |
//! | [`recording`] | JSON Lines: writing a snapshot, reading a recording back |
//! | [`recording_v1`] | reading a line of format version 1 into today's snapshot |
//! | [`record`] | `hmn record` |
//! | `ui` | `hmn top`: terminal, event loop, signals (feature `top`) |
//! | `kill`, `pidfd` | a confirmed signal, sent only to the identity that was listed (pidfd on Linux) |
//! | `app`, `rows`, `player` | the view's state and keys; table lines (sort, filter, tree); replay |
//! | `view`, `table`, `panes`, `theme` | drawing: layout, devices, table, detail, status, help, colours |
//! | `screen` | the terminal drawn a frame at a time: only changed cells written, cheap lines and diff |
//! | `growth`, `health` | steady-growth flags per process; a device's unattributed memory, memory health and XID events |

// Without the `top` feature, `record` uses only the writing half of these.
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub mod collect;
pub mod record;
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub mod recording;
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub mod recording_v1;
#[cfg_attr(not(feature = "top"), allow(dead_code))]
pub mod snapshot;

#[cfg(feature = "top")]
mod app;
#[cfg(feature = "top")]
mod clock;
#[cfg(feature = "top")]
mod growth;
#[cfg(feature = "top")]
mod health;
#[cfg(all(test, feature = "top"))]
mod health_tests;
#[cfg(feature = "top")]
mod kept;
#[cfg(feature = "top")]
mod kill;
#[cfg(all(test, feature = "top"))]
mod lines_tests;
#[cfg(feature = "top")]
mod panes;
#[cfg(all(feature = "top", target_os = "linux"))]
#[allow(unsafe_code)]
mod pidfd;
#[cfg(feature = "top")]
mod player;
#[cfg(all(test, feature = "top"))]
mod replays;
#[cfg(feature = "top")]
mod rows;
#[cfg(feature = "top")]
mod screen;
#[cfg(feature = "top")]
mod table;
#[cfg(all(test, feature = "top"))]
pub(crate) mod tests;
#[cfg(feature = "top")]
mod theme;
#[cfg(feature = "top")]
mod ui;
#[cfg(feature = "top")]
mod view;

#[cfg(feature = "top")]
pub use ui::run;
