//! Layer 4, measurement over time: rules that turn readings into the figures a caller
//! reports — a process tree sampled over a run and its peaks, this process's own usage and the
//! deltas of a phase, a tree's DRM eviction.
//!
//! May import: `types`, `system`, `backends`, `probe`. Not `estimate` (its sibling of equal
//! rank), nor anything above.

pub mod eviction;
pub mod growth;
pub mod own;
pub mod peaks;
pub mod phase;
pub mod sampler;
