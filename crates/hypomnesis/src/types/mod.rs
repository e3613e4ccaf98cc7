//! The data model shared by every backend: devices, GPU processes, unknown values and warnings.
//!
//! Field names are the `hmn --json` contract (schema 1): they may gain siblings but are never
//! renamed. A value that could not be read is `None` (JSON `null`) and an [`Unknown`] entry says
//! why; a number is never used to mean "unknown".

// Layer 0 (ARCHITECTURE.md "Layers"): the vocabulary every layer above uses. Imports nothing
// else from this crate.

/// `Display` as the value's `as_str` (and, for types listed after `serialize:`, `Serialize`
/// too): one spelling for text and JSON.
macro_rules! spelled_as_str {
    ($($t:ty),* $(; serialize: $($s:ty),*)?) => {
        $(impl std::fmt::Display for $t {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        })*
        $($(
            spelled_as_str!($s);
            #[cfg(feature = "serde")]
            impl serde::Serialize for $s {
                fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                    s.serialize_str(self.as_str())
                }
            }
        )*)?
    };
}

// A façade: each file below defines its part of the model and imports its siblings directly
// (never through this module); this module re-exports them as `hypomnesis::types::…`.
// Public at the crate root (`hypomnesis::accounting`, `hypomnesis::pci`), documented there.
#[doc(hidden)]
pub mod accounting;
mod backend;
mod device;
// The truthful API's errors (public through the crate root's `error` module).
pub(crate) mod error;
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
mod usage;
pub(crate) mod workload;

pub use backend::{Backend, BackendState, BackendStatus};
pub use device::{Device, Telemetry};
pub use kind::{EngineClass, EngineClasses, ProcessKind};
pub use lists::{DeviceList, ProcessList, Warning, absent_reasons, failed_reasons};
pub use name::ProcessName;
#[cfg(feature = "serde")]
pub(crate) use name::serde_fields as name_serde;
pub use nvidia::{MigDevice, MigMode, MigPlacement, MigState, ProcessUtilization};
pub use pool::{MemoryPool, PoolKind, PoolSource};
pub use process::GpuProcess;
pub use runtime::RuntimeStatus;
pub use source::{Source, Unknown, UnknownReason, Vendor};
pub use usage::{DeviceMemory, DeviceRegion, EngineUsage, Engines, ProcessRegions, RegionUsage};

spelled_as_str!(Source; serialize: Vendor, RuntimeStatus, ProcessKind);

#[cfg(test)]
mod tests;
