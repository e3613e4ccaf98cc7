//! PCI bus addresses: [`PciBusId`], parsed from every spelling the drivers use and printed in one.
//!
//! NVML prints `00000000:1A:00.0` (8-digit domain, upper case), its legacy field
//! `0000:1A:00.0`, nvidia-smi the 8-digit form, sysfs and DRM fdinfo `0000:1a:00.0`. Joining
//! NVIDIA devices with DRM and hwmon data needs one spelling, so every source is parsed into the
//! four numbers and printed as sysfs does: `0000:1a:00.0`.

use std::fmt;
use std::str::FromStr;

use crate::types::error::ParseError;
use crate::types::spelling::text_serde;

/// A PCI address (domain, bus, device, function).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PciBusId {
    /// PCI domain (segment).
    pub domain: u32,
    /// Bus number.
    pub bus: u8,
    /// Device (slot) number, 0–31.
    pub device: u8,
    /// Function number, 0–7.
    pub function: u8,
}

impl PciBusId {
    /// A PCI address from its four numbers.
    pub const fn new(domain: u32, bus: u8, device: u8, function: u8) -> Self {
        PciBusId {
            domain,
            bus,
            device,
            function,
        }
    }
}

impl fmt::Display for PciBusId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{:04x}:{:02x}:{:02x}.{:x}",
            self.domain, self.bus, self.device, self.function
        )
    }
}

impl FromStr for PciBusId {
    type Err = ParseError;

    /// Parses `DDDD:BB:DD.F` with a 4- or 8-digit domain in either case, or `BB:DD.F` (domain
    /// 0). Surrounding whitespace is ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || ParseError::new(format!("invalid PCI bus id {s:?}"));
        let t = s.trim();
        let (head, function) = t.rsplit_once('.').ok_or_else(bad)?;
        let mut parts: Vec<&str> = head.split(':').collect();
        let (domain, bus, device) = match parts.len() {
            3 => {
                let device = parts.pop().ok_or_else(bad)?;
                let bus = parts.pop().ok_or_else(bad)?;
                let domain = parts.pop().ok_or_else(bad)?;
                (domain, bus, device)
            }
            2 => {
                let device = parts.pop().ok_or_else(bad)?;
                let bus = parts.pop().ok_or_else(bad)?;
                ("0", bus, device)
            }
            _ => return Err(bad()),
        };
        let hex = |v: &str, max_len: usize| {
            if v.is_empty() || v.len() > max_len || !v.bytes().all(|b| b.is_ascii_hexdigit()) {
                None
            } else {
                u32::from_str_radix(v, 16).ok()
            }
        };
        let domain = hex(domain, 8).ok_or_else(bad)?;
        let bus = hex(bus, 2)
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(bad)?;
        let device = hex(device, 2)
            .filter(|v| *v < 32)
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(bad)?;
        let function = hex(function, 1)
            .filter(|v| *v < 8)
            .and_then(|v| u8::try_from(v).ok())
            .ok_or_else(bad)?;
        Ok(PciBusId::new(domain, bus, device, function))
    }
}

text_serde!(PciBusId);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_driver_spelling_normalises_to_sysfs_form() {
        for s in [
            "00000000:1A:00.0",
            "0000:1A:00.0",
            "0000:1a:00.0",
            "1a:00.0",
            " 00000000:1a:00.0\n",
        ] {
            let id: PciBusId = s.parse().unwrap();
            assert_eq!(id.to_string(), "0000:1a:00.0", "from {s:?}");
        }
        let id: PciBusId = "00000001:C1:1F.7".parse().unwrap();
        assert_eq!(id.to_string(), "0001:c1:1f.7");
    }

    #[test]
    fn malformed_ids_are_rejected() {
        for s in [
            "",
            "garbage",
            "0000:1a:00",
            "0000:1g:00.0",
            "0000:1a:20.0",
            "0000:1a:00.8",
            "000000000:1a:00.0",
            "0000:100:00.0",
            "a:b:c:d.0",
        ] {
            assert!(s.parse::<PciBusId>().is_err(), "{s:?} should be rejected");
        }
    }

    #[test]
    fn ordering_is_bus_order() {
        let a: PciBusId = "0000:01:00.0".parse().unwrap();
        let b: PciBusId = "0000:1a:00.0".parse().unwrap();
        let c: PciBusId = "0001:00:00.0".parse().unwrap();
        assert!(a < b && b < c);
    }
}
