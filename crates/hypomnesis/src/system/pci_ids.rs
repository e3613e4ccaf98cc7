//! Marketing names of DRM devices from the system's own databases, read (bounded) and never
//! bundled, so they are as current as the system: libdrm's `amdgpu.ids` (keyed by PCI device
//! id **and** revision, since one device id is several products) and hwdata's `pci.ids`.
//!
//! Files, under [`Roots::share`] (`/usr/share`, or `HMN_SHARE_ROOT`): `libdrm/amdgpu.ids`;
//! `hwdata/pci.ids` (Fedora, Arch; Debian's `hwdata` links it), else `misc/pci.ids` (Debian's
//! `pci.ids` package). A compressed `pci.ids.gz` is not read.
//!
//! The name ([`marketing_name`]): for an AMD device, the `amdgpu.ids` line of its device id and
//! revision (the first, as libdrm takes it); else the `pci.ids` subsystem line matching the
//! card's subsystem vendor and device (a board's own name); else the `pci.ids` device line —
//! its last bracketed part when it has one (`Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]` →
//! `Radeon RX 6800/6800 XT / 6900 XT`, as `lspci` users read it), or the whole line. None of
//! these: no name, and `hmn` shows vendor and PCI id as before.
//!
//! Formats: `pci.ids` has `vendor  name`, `\tdevice  name`, `\t\tsubvendor subdevice  name`
//! lines (lower-case hex, two spaces), `#` comments, and a trailing `C xx  class` section;
//! `amdgpu.ids` has a version line (`1.0.0`) then `DEVICE,\tREV,\tName` lines (upper-case hex).

use std::path::{Path, PathBuf};

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;

/// The most read of one database file (`pci.ids` is 1.4 MB in 2023; `amdgpu.ids` 17 KB).
const IDS_CAP: Cap = Cap::bytes(16 << 20);

/// The PCI identity of a device, as sysfs gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct PciIdentity {
    /// `vendor`.
    pub vendor: u16,
    /// `device`.
    pub device: u16,
    /// `subsystem_vendor` and `subsystem_device`, when readable.
    pub subsystem: Option<(u16, u16)>,
    /// `revision`, when readable.
    pub revision: Option<u8>,
}

impl PciIdentity {
    /// An identity.
    pub const fn new(
        vendor: u16,
        device: u16,
        subsystem: Option<(u16, u16)>,
        revision: Option<u8>,
    ) -> PciIdentity {
        PciIdentity {
            vendor,
            device,
            subsystem,
            revision,
        }
    }
}

/// What `pci.ids` says about one identity (pure result of [`lookup_pci_ids`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct PciNames {
    /// The vendor line's name.
    pub vendor: Option<String>,
    /// The device line's name.
    pub device: Option<String>,
    /// The matching subsystem line's name.
    pub subsystem: Option<String>,
}

/// Looks `id` up in `pci.ids` text (pure).
pub fn lookup_pci_ids(text: &str, id: &PciIdentity) -> PciNames {
    let mut out = PciNames::default();
    let mut in_vendor = false;
    let mut in_device = false;
    for line in text.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix("\t\t") {
            if in_device {
                let mut parts = rest.splitn(2, "  ");
                let ids: Vec<&str> = parts.next().unwrap_or_default().split(' ').collect();
                if let (Some((sv, sd)), [v, d]) = (id.subsystem, ids.as_slice()) {
                    if hex_is(v, sv) && hex_is(d, sd) {
                        out.subsystem = parts.next().map(|n| n.trim().to_string());
                    }
                }
            }
        } else if let Some(rest) = line.strip_prefix('\t') {
            if in_vendor {
                let (dev, name) = split_entry(rest);
                in_device = name.is_some() && hex_is(dev, id.device);
                if in_device {
                    out.device = name;
                }
            }
        } else {
            if in_vendor || line.starts_with("C ") {
                break; // the next vendor, or the class section
            }
            let (vendor, name) = split_entry(line);
            in_vendor = name.is_some() && hex_is(vendor, id.vendor);
            if in_vendor {
                out.vendor = name;
            }
        }
    }
    out
}

/// Looks a device id and revision up in `amdgpu.ids` text (pure): the first matching line's
/// product name.
pub fn lookup_amdgpu_ids(text: &str, device: u16, revision: u8) -> Option<String> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let mut it = l.splitn(3, ',');
            let (d, r, name) = (it.next()?, it.next()?, it.next()?);
            (hex_is(d.trim(), device) && u8::from_str_radix(r.trim(), 16).ok() == Some(revision))
                .then(|| name.trim().to_string())
        })
        .filter(|n| !n.is_empty())
}

/// The name `hmn` shows (pure; the rule is in the [module docs](self)).
pub fn marketing_name(amdgpu: Option<String>, pci: &PciNames) -> Option<String> {
    amdgpu
        .or_else(|| pci.subsystem.clone())
        .or_else(|| pci.device.as_deref().map(bracketed))
        .filter(|n| !n.is_empty())
}

/// The last bracketed part of a `pci.ids` device name, or the whole name.
fn bracketed(name: &str) -> String {
    let t = name.trim();
    if let Some(body) = t.strip_suffix(']') {
        let mut depth = 0usize;
        for (i, c) in body.char_indices().rev() {
            match c {
                ']' => depth += 1,
                '[' if depth == 0 => return body[i + 1..].trim().to_string(),
                '[' => depth -= 1,
                _ => {}
            }
        }
    }
    t.to_string()
}

/// `(id, name)` of a `xxxx  name` entry.
fn split_entry(s: &str) -> (&str, Option<String>) {
    let mut it = s.splitn(2, "  ");
    let id = it.next().unwrap_or_default().trim();
    (id, it.next().map(|n| n.trim().to_string()))
}

fn hex_is(text: &str, value: u16) -> bool {
    text.len() == 4 && u16::from_str_radix(text, 16).ok() == Some(value)
}

/// The databases found under the share root (`pci.ids`, `amdgpu.ids`).
pub fn database_paths(roots: &Roots) -> (Option<PathBuf>, Option<PathBuf>) {
    let first = |rels: &[&str]| {
        rels.iter()
            .map(|r| roots.share.join(r))
            .find(|p| p.is_file())
    };
    (
        first(&["hwdata/pci.ids", "misc/pci.ids"]),
        first(&["libdrm/amdgpu.ids"]),
    )
}

/// Reads a database (lossily: `pci.ids` has a few non-UTF-8 names); `None` when it cannot be
/// read or is larger than the cap.
fn read(path: &Path) -> Option<String> {
    fsread::read_bytes(path, IDS_CAP)
        .ok()
        .map(|b| String::from_utf8_lossy(&b).into_owned())
}

/// The marketing name of `id` from the system's databases under `roots` (see the
/// [module docs](self)).
pub fn name_of(roots: &Roots, id: &PciIdentity) -> Option<String> {
    let (pci, amd) = database_paths(roots);
    let amdgpu = match (id.vendor, id.revision, amd) {
        (0x1002, Some(rev), Some(path)) => {
            read(&path).and_then(|t| lookup_amdgpu_ids(&t, id.device, rev))
        }
        _ => None,
    };
    if amdgpu.is_some() {
        return amdgpu;
    }
    let names = pci
        .and_then(|p| read(&p))
        .map(|t| lookup_pci_ids(&t, id))
        .unwrap_or_default();
    marketing_name(None, &names)
}

#[cfg(test)]
mod tests;
