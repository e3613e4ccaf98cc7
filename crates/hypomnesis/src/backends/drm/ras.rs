//! amdgpu's RAS (reliability, availability, serviceability) counters in sysfs: the error
//! counts per block (`ras/<block>_err_count`) and the bad VRAM pages
//! (`ras/gpu_vram_bad_pages`), as a [`MemoryHealth`].
//!
//! Formats, from the kernel's `amdgpu_ras.c` (`sysfs_emit` format strings):
//! - `<block>_err_count`: `ue: N\nce: M\n`, with a third line `de: K` (deferred errors) for UMC
//!   on newer kernels; `Query currently inaccessible\n` while RAS is not ready. Any `key: u64`
//!   line is read; `ue` and `ce` are required.
//! - `gpu_vram_bad_pages`: one line per page, `0x%08x : 0x%08x : %1s` (pfn, size, flag), the
//!   flag `R` reserved, `P` pending, `F` could not be reserved.
//!
//! Only blocks with RAS enabled have a file; consumer Radeons usually have no `ras/` at all
//! (the health is then unknown, with that reason). Counts accumulate since the driver loaded.
//! Each read queries the hardware: callers read them every few seconds at most.

use std::path::Path;

use crate::system::fsread::{self, Cap};
use crate::types::error::ParseError;
use crate::types::{BadPages, Field, MemoryHealth, RasCount, Unknown, UnknownReason};

/// An `*_err_count` file, parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrCount {
    /// `ue`, `ce`, and `de` when printed.
    Counts { ue: u64, ce: u64, de: Option<u64> },
    /// `Query currently inaccessible`: RAS is not ready.
    Inaccessible,
}

/// The text the kernel prints while RAS is not ready.
const INACCESSIBLE: &str = "Query currently inaccessible";

/// Parses an `*_err_count` file (pure; see the [module docs](self)).
///
/// # Errors
/// A line that is not `key: number`, or `ue`/`ce` missing.
pub(crate) fn parse_err_count(text: &str) -> Result<ErrCount, ParseError> {
    if text.trim() == INACCESSIBLE {
        return Ok(ErrCount::Inaccessible);
    }
    let (mut ue, mut ce, mut de) = (None, None, None);
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let (key, value) = line
            .split_once(':')
            .ok_or_else(|| ParseError::new(format!("expected `key: count`, got {line:?}")))?;
        let value: u64 = value
            .trim()
            .parse()
            .map_err(|_| ParseError::on_line(n + 1, format!("not a count: {line:?}")))?;
        match key.trim() {
            "ue" => ue = Some(value),
            "ce" => ce = Some(value),
            "de" => de = Some(value),
            _ => {}
        }
    }
    match (ue, ce) {
        (Some(ue), Some(ce)) => Ok(ErrCount::Counts { ue, ce, de }),
        _ => Err(ParseError::new("no `ue:` and `ce:` lines")),
    }
}

/// Parses `gpu_vram_bad_pages` (pure): the pages by flag.
///
/// # Errors
/// A line that is not `0x… : 0x… : R|P|F`.
pub(crate) fn parse_bad_pages(text: &str) -> Result<BadPages, ParseError> {
    let mut out = BadPages::default();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let parts: Vec<&str> = line.split(':').map(str::trim).collect();
        let hex = |s: &str| {
            s.strip_prefix("0x")
                .is_some_and(|h| !h.is_empty() && u64::from_str_radix(h, 16).is_ok())
        };
        let slot = match parts.as_slice() {
            [pfn, size, flag] if hex(pfn) && hex(size) => match *flag {
                "R" => &mut out.reserved,
                "P" => &mut out.pending,
                "F" => &mut out.failed,
                _ => {
                    return Err(ParseError::on_line(
                        n + 1,
                        format!("unknown flag in {line:?}"),
                    ));
                }
            },
            _ => {
                return Err(ParseError::on_line(
                    n + 1,
                    format!("expected `pfn : size : flag`, got {line:?}"),
                ));
            }
        };
        *slot = slot.saturating_add(1);
    }
    Ok(out)
}

/// The RAS readings of the amdgpu device whose sysfs directory is `dir`.
pub(crate) fn read(dir: &Path) -> MemoryHealth {
    let mut h = MemoryHealth::default();
    // `ecc` and `ecc_errors` are NVIDIA's readings: null here, and one entry says why for all.
    h.unknown.push(Unknown::new(
        Field::HealthEcc,
        UnknownReason::Unsupported,
        "amdgpu has no ECC mode or ECC counters of this kind (ecc_errors too): its memory errors \
         are the RAS counts (health.ras)",
    ));
    let ras = dir.join("ras");
    let Ok(entries) = fsread::list_dir(&ras) else {
        h.unknown.push(Unknown::new(
            Field::HealthRas,
            UnknownReason::Unsupported,
            "no ras/ directory: RAS is off on this GPU (usual on consumer Radeons)",
        ));
        return h;
    };
    let mut files: Vec<(String, std::path::PathBuf)> = entries
        .into_iter()
        .filter_map(|p| {
            let name = p.file_name()?.to_str()?;
            let block = name.strip_suffix("_err_count")?;
            let ok = !block.is_empty()
                && block
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_');
            ok.then(|| (block.to_string(), p.clone()))
        })
        .collect();
    files.sort();
    // At most this many blocks: the kernel names about twenty.
    files.truncate(64);
    for (block, path) in files {
        match fsread::read_parsed(&path, Cap::SYSFS, parse_err_count) {
            Ok(ErrCount::Counts { ue, ce, de }) => {
                let mut c = RasCount::new(block, ue, ce);
                c.deferred = de;
                h.ras.push(c);
            }
            Ok(ErrCount::Inaccessible) => h.unknown.push(Unknown::new(
                Field::HealthRas,
                UnknownReason::DeviceError,
                format!("{block}: the driver says: Query currently inaccessible (RAS not ready)"),
            )),
            Err(e) => h.unknown.push(Unknown::new(
                Field::HealthRas,
                UnknownReason::Unreadable,
                format!("{block}: {e}"),
            )),
        }
    }
    let pages = ras.join("gpu_vram_bad_pages");
    if pages.exists() {
        match fsread::read_parsed(&pages, Cap::SYSFS, parse_bad_pages) {
            Ok(b) => h.bad_pages = Some(b),
            Err(e) => h.unknown.push(Unknown::new(
                Field::HealthBadPages,
                UnknownReason::Unreadable,
                e.to_string(),
            )),
        }
    }
    if h.ras.is_empty() && h.bad_pages.is_none() && h.unknown.len() == 1 {
        h.unknown.push(Unknown::new(
            Field::HealthRas,
            UnknownReason::Unsupported,
            "ras/ has no error counters",
        ));
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_and_three_line_counts() {
        assert_eq!(
            parse_err_count("ue: 0\nce: 3\n").unwrap(),
            ErrCount::Counts {
                ue: 0,
                ce: 3,
                de: None
            }
        );
        assert_eq!(
            parse_err_count("ue: 1\nce: 0\nde: 7\n").unwrap(),
            ErrCount::Counts {
                ue: 1,
                ce: 0,
                de: Some(7)
            }
        );
        assert_eq!(
            parse_err_count("Query currently inaccessible\n").unwrap(),
            ErrCount::Inaccessible
        );
    }

    #[test]
    fn malformed_counts_are_errors_not_zeros() {
        for bad in [
            "",
            "ue: 1\n",
            "ue: x\nce: 0\n",
            "garbage\n",
            "ue: -1\nce: 0\n",
        ] {
            assert!(parse_err_count(bad).is_err(), "{bad:?}");
        }
        // Unknown keys are ignored (the list grows with kernels).
        assert!(parse_err_count("ue: 0\nce: 0\nfe: 2\n").is_ok());
    }

    #[test]
    fn bad_pages_by_flag() {
        let b = parse_bad_pages(
            "0x0003a8f1 : 0x00001000 : R\n0x0003a8f2 : 0x00001000 : P\n0x00000003 : 0x00001000 : R\n",
        )
        .unwrap();
        assert_eq!((b.reserved, b.pending, b.failed), (2, 1, 0));
        assert_eq!(parse_bad_pages("").unwrap(), BadPages::default());
        assert!(parse_bad_pages("0x1 : 0x1000 : X\n").is_err());
        assert!(parse_bad_pages("1 : 2 : R\n").is_err());
    }
}
