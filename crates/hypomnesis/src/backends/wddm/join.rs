//! NVML's devices joined to DXGI's adapters by PCI location (pure; tested on every platform).
//!
//! NVML names a device by its PCI address; DXGI names an adapter by its LUID and says nothing of
//! where it sits. The kernel-mode thunk `D3DKMTQueryAdapterInfo(KMTQAITYPE_ADAPTERADDRESS)`
//! gives an adapter's bus, device and function (no PCI domain), so an NVML device is joined to
//! the one NVIDIA adapter at its bus/device/function — never by order (upstream assumes the
//! n-th NVIDIA adapter is NVML's device n, which a TCC-mode GPU, invisible to DXGI, breaks).
//! What the join enables: the caller's own VRAM (`QueryVideoMemoryInfo`) and PDH's adapter
//! counters (spill) for an NVIDIA GPU.

use super::parse::Luid;
use crate::types::pci::PciBusId;

/// Where an adapter sits on the PCI bus (`D3DKMT_ADAPTERADDRESS`: no domain).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct PciLocation {
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

impl PciLocation {
    fn is(&self, id: &PciBusId) -> bool {
        self.bus == u32::from(id.bus)
            && self.device == u32::from(id.device)
            && self.function == u32::from(id.function)
    }
}

/// The adapter at `id` among the NVIDIA adapters `located` (each with its location, or why it
/// could not be located), or why there is none: exactly one adapter at that bus/device/function
/// joins; none (a TCC-mode GPU has no WDDM adapter) or several (PCI domains, which D3DKMT does
/// not report) do not.
pub(crate) fn adapter_at(
    id: &PciBusId,
    located: &[(Luid, Result<PciLocation, String>)],
) -> Result<Luid, String> {
    let at: Vec<Luid> = located
        .iter()
        .filter(|(_, loc)| loc.as_ref().is_ok_and(|l| l.is(id)))
        .map(|(luid, _)| *luid)
        .collect();
    match at.as_slice() {
        [one] => Ok(*one),
        [] => {
            let unlocated: Vec<&String> = located
                .iter()
                .filter_map(|(_, l)| l.as_ref().err())
                .collect();
            match unlocated.first() {
                Some(why) => Err(format!(
                    "no DXGI adapter found at PCI {id}; {} NVIDIA adapter(s) could not be located ({why})",
                    unlocated.len()
                )),
                None => Err(format!(
                    "no DXGI adapter at PCI {id} (a TCC-mode GPU has none: DXGI and PDH see WDDM GPUs only)"
                )),
            }
        }
        many => Err(format!(
            "{} DXGI adapters at bus/device/function {:02x}:{:02x}.{:x} (D3DKMT reports no PCI \
             domain): not joined",
            many.len(),
            id.bus,
            id.device,
            id.function
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn luid(low: u32) -> Luid {
        Luid { high: 0, low }
    }

    fn at(bus: u32) -> Result<PciLocation, String> {
        Ok(PciLocation {
            bus,
            device: 0,
            function: 0,
        })
    }

    #[test]
    fn the_adapter_at_the_devices_address_joins_whatever_the_order() {
        // Two GPUs enumerated by DXGI in the opposite order of NVML's.
        let located = [(luid(7), at(0x41)), (luid(9), at(0x01))];
        let first: PciBusId = "00000000:01:00.0".parse().unwrap();
        let second: PciBusId = "0000:41:00.0".parse().unwrap();
        assert_eq!(adapter_at(&first, &located), Ok(luid(9)));
        assert_eq!(adapter_at(&second, &located), Ok(luid(7)));
    }

    #[test]
    fn a_tcc_gpu_has_no_adapter_and_is_not_given_another() {
        // NVML lists the TCC GPU at 02:00.0; DXGI shows only the WDDM one at 01:00.0.
        let located = [(luid(9), at(0x01))];
        let tcc: PciBusId = "0000:02:00.0".parse().unwrap();
        let e = adapter_at(&tcc, &located).unwrap_err();
        assert!(e.contains("no DXGI adapter at PCI 0000:02:00.0"), "{e}");
        assert!(e.contains("TCC"), "{e}");
    }

    #[test]
    fn an_unlocatable_adapter_is_named_in_the_reason() {
        let located = [(
            luid(9),
            Err("D3DKMTOpenAdapterFromLuid: 0xc000000d".to_string()),
        )];
        let id: PciBusId = "0000:01:00.0".parse().unwrap();
        let e = adapter_at(&id, &located).unwrap_err();
        assert!(
            e.contains("1 NVIDIA adapter(s) could not be located"),
            "{e}"
        );
        assert!(e.contains("0xc000000d"), "{e}");
    }

    #[test]
    fn two_adapters_at_one_address_in_different_domains_are_not_joined() {
        let located = [(luid(1), at(0x01)), (luid(2), at(0x01))];
        let id: PciBusId = "0001:01:00.0".parse().unwrap();
        let e = adapter_at(&id, &located).unwrap_err();
        assert!(
            e.starts_with("2 DXGI adapters at bus/device/function 01:00.0"),
            "{e}"
        );
    }

    #[test]
    fn function_and_device_numbers_count() {
        let located = [(
            luid(3),
            Ok(PciLocation {
                bus: 1,
                device: 0,
                function: 1,
            }),
        )];
        assert!(adapter_at(&"0000:01:00.0".parse().unwrap(), &located).is_err());
        assert_eq!(
            adapter_at(&"0000:01:00.1".parse().unwrap(), &located),
            Ok(luid(3))
        );
    }
}
