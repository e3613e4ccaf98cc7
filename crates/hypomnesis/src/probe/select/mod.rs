//! Device selectors: one device (or one MIG device) named the way users and CUDA name it, and
//! resolved against a listed set of devices — the one implementation every `hmn` command uses.
//!
//! A [`DeviceSelector`] is parsed from text ([`str::parse`]):
//!
//! | Text | Selector |
//! |---|---|
//! | `0`, `3` | hmn's device index (NVML order for NVIDIA); with a [`CudaView`], a CUDA ordinal |
//! | `GPU-3a1f7c2e-…`, `GPU-3a1f` | a GPU by UUID, or by a prefix that names one GPU |
//! | `MIG-8443519f-…`, `MIG-8443` | a MIG device by UUID or unique prefix (R470+ form) |
//! | `MIG-GPU-<uuid>/<gi>/<ci>` | a MIG device in the R450/R460 form: GPU, GPU instance, compute instance |
//! | `0000:1a:00.0`, `00000000:1A:00.0`, `1a:00.0`, `1a:00` | a PCI bus id, any spelling NVML accepts |
//!
//! [`Resolver::resolve`] turns one into a [`Selected`] device (and MIG device), or a
//! [`SelectError`] whose text is one line naming the input. `CUDA_VISIBLE_DEVICES` and
//! `CUDA_DEVICE_ORDER` are read by [`cuda_view`] (module [`cuda`]). Everything here is pure:
//! no driver call, no environment read.

pub mod cuda;
mod selector;

#[doc(no_inline)]
pub use cuda::{CudaDeviceOrder, CudaView, OrderBasis, cuda_view};
pub use selector::{DeviceSelector, SelectError, Selected};

use crate::types::Device;
use selector::resolve_named;

/// Resolves selectors against listed devices, with integer selectors read as CUDA ordinals
/// when a [`CudaView`] is given (`hmn --cuda-order`).
#[derive(Debug, Clone, Copy)]
pub struct Resolver<'a> {
    devices: &'a [Device],
    cuda: Option<&'a CudaView>,
}

impl<'a> Resolver<'a> {
    /// A resolver over `devices`; integers are hmn indices.
    pub const fn new(devices: &'a [Device]) -> Resolver<'a> {
        Resolver {
            devices,
            cuda: None,
        }
    }

    /// Integers are ordinals of this CUDA view.
    #[must_use]
    pub const fn with_cuda(mut self, cuda: Option<&'a CudaView>) -> Resolver<'a> {
        self.cuda = cuda;
        self
    }

    /// The device (and MIG device) `sel` names.
    ///
    /// # Errors
    /// [`SelectError::NoSuchIndex`], [`SelectError::NoSuchCudaOrdinal`],
    /// [`SelectError::NoMatch`] or [`SelectError::Ambiguous`].
    pub fn resolve(&self, sel: &DeviceSelector) -> Result<Selected, SelectError> {
        match sel {
            DeviceSelector::Index(i) => match self.cuda {
                Some(view) => view.ordinal(*i),
                None => self
                    .devices
                    .iter()
                    .find(|d| d.index == *i)
                    .map(|d| Selected::device(d.index))
                    .ok_or(SelectError::NoSuchIndex {
                        index: *i,
                        count: self.devices.len(),
                    }),
            },
            other => resolve_named(other, self.devices),
        }
    }

    /// Every selector resolved, in order, duplicates removed.
    ///
    /// # Errors
    /// The first selector that does not resolve.
    pub fn resolve_all(&self, sels: &[DeviceSelector]) -> Result<Vec<Selected>, SelectError> {
        let mut out: Vec<Selected> = Vec::new();
        for s in sels {
            let r = self.resolve(s)?;
            if !out.contains(&r) {
                out.push(r);
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests;
