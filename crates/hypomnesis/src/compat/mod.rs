//! Layer 6, the upstream-compatible API: everything that exists to be the published
//! hypomnesis 0.2 API (re-exported at the crate root exactly as upstream has it) — free
//! functions over one shared probe, plain-`u64` value types, upstream's backend chains and
//! errors (`docs/upstream.md`).
//!
//! May import every layer below; nothing imports it.

// Upstream's error and Result alias (public through the crate root's `error` module).
pub(crate) mod error;
pub mod gpu;
pub mod ram;
#[cfg(feature = "report")]
pub mod report;
pub mod snapshot;
pub mod spill;
