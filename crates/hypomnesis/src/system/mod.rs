//! Layer 1, the system edge: every read of `/proc`, `/sys` and user files, and the operating
//! system's facts about processes — host and process memory, process identity and trees,
//! cgroups, PID namespaces, workloads, device names from `pci.ids`.
//!
//! Owns [`fsread`] (the only module that opens files), `http` (feature `hub`: the only one that
//! opens network connections), [`roots::Roots`] and the per-platform
//! readers of host and process memory. May import: `types`. Nothing here knows a GPU backend.

pub mod cgroup;
// The I/O edge: crate-private (readers in every layer above go through it).
pub(crate) mod fsread;
pub mod host;
#[cfg(feature = "hub")]
pub mod http;
// Procfs and sysfs files kept open between readings (opened through `fsread`, re-read with
// `pread`).
pub(crate) mod kept;
// Advisory device leases (`hmn pick`, `hmn run --gpu`).
pub mod lease;
pub mod pci_ids;
pub mod pidns;
pub mod process;
pub mod roots;
pub mod workload;
