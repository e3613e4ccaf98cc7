//! The data model shared by every backend: devices, GPU processes, unknown values and warnings.
//!
//! Field names are the `hmn --json` contract (schema 1): they may gain siblings but are never
//! renamed. A value that could not be read is `None` (JSON `null`) and an [`Unknown`] entry says
//! why; a number is never used to mean "unknown".

// Layer 0 (ARCHITECTURE.md "Layers"): the vocabulary every layer above uses. Imports nothing
// else from this crate.

// A façade: each file below defines its part of the model and imports its siblings directly
// (never through this module); this module re-exports them as `hypomnesis::types::…`.
// Public at the crate root (`hypomnesis::accounting`, `hypomnesis::pci`), documented there.
#[doc(hidden)]
pub mod accounting;
mod backend;
mod device;
mod field;
// The truthful API's errors (public through the crate root's `error` module).
pub(crate) mod error;
mod health;
mod kind;
mod lists;
mod name;
mod nvidia;
#[doc(hidden)]
pub mod pci;
mod pool;
mod process;
mod runtime;
mod source;
// `spelled!` and `text_serde!`: each contract value's one spelling (used by every layer).
pub(crate) mod spelling;
mod totals;
mod unattributed;
mod usage;
pub(crate) mod workload;

pub use backend::{Backend, BackendCause, BackendProblem, BackendState, BackendStatus, QueryError};
pub use device::{Device, Telemetry};
pub use field::Field;
pub use health::{
    BadPages, EccErrors, EccMode, HealthFinding, MemoryHealth, REMEDY_REBOOT_AMD, REMEDY_RESET,
    REMEDY_SERVICE, REMEDY_WATCH, RasCount, RemappedRows, RetiredPages, Severity, XidClass,
    XidEvent, XidTally, XidUncounted, xid_meaning,
};
pub use kind::{EngineClass, EngineClasses, ProcessKind};
pub use lists::{DeviceList, ProcessList, Warning, absent_reasons, failed_reasons};
pub use name::ProcessName;
#[cfg(feature = "serde")]
pub(crate) use name::serde_fields as name_serde;
pub use nvidia::{ComputeMode, MigDevice, MigMode, MigPlacement, MigState, ProcessUtilization};
pub use pool::{MemoryPool, PoolKind, PoolSource};
pub use process::GpuProcess;
pub use runtime::RuntimeStatus;
pub use source::{Source, Unknown, UnknownReason, Vendor};
pub use spelling::UnknownSpelling;
pub use totals::{Completeness, VramSum};
pub use unattributed::{Bound, Cause, Unattributed};
pub use usage::{DeviceMemory, DeviceRegion, EngineUsage, Engines, ProcessRegions, RegionUsage};

#[cfg(test)]
mod tests;
