//! Pure parsers for Windows GPU performance-counter instance names and PDH multi-strings.
//!
//! - `GPU Process Memory` instances: `pid_<decimal>_luid_0x<8 hex>_0x<8 hex>_phys_<n>`;
//! - `GPU Adapter Memory` instances: the bare tail `luid_0x<8 hex>_0x<8 hex>_phys_<n>`;
//! - `_Total` and anything else is rejected.
//!
//! The first hex group is the LUID's `HighPart` (printed unsigned, stored as `i32`, the bits
//! reinterpreted), the second its `LowPart`.

/// A WDDM adapter's locally unique id (`LUID { LowPart, HighPart }`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct Luid {
    pub high: i32,
    pub low: u32,
}

/// `pid_…_luid_…_phys_…` → (pid, LUID, physical segment).
pub(crate) fn process_instance(name: &str) -> Option<(u32, Luid, u32)> {
    let rest = name.strip_prefix("pid_")?;
    let (pid, tail) = rest.split_once('_')?;
    if pid.is_empty() || !pid.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let (luid, phys) = adapter_instance(tail)?;
    Some((pid.parse().ok()?, luid, phys))
}

/// `luid_0x…_0x…_phys_…` → (LUID, physical segment).
pub(crate) fn adapter_instance(name: &str) -> Option<(Luid, u32)> {
    let rest = name.strip_prefix("luid_")?;
    let mut parts = rest.split('_');
    let high = hex32(parts.next()?)?;
    let low = hex32(parts.next()?)?;
    if parts.next()? != "phys" {
        return None;
    }
    let phys = parts.next()?;
    if parts.next().is_some() || phys.is_empty() || !phys.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    Some((
        Luid {
            high: i32::from_ne_bytes(high.to_ne_bytes()),
            low,
        },
        phys.parse().ok()?,
    ))
}

/// `0x` and up to 8 hex digits.
fn hex32(s: &str) -> Option<u32> {
    let h = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X"))?;
    if h.is_empty() || h.len() > 8 {
        return None;
    }
    u32::from_str_radix(h, 16).ok()
}

/// A UTF-16 multi-string (NUL-separated, ending in an empty string) as its strings.
#[cfg_attr(not(windows), allow(dead_code))]
pub(crate) fn multi_sz(buf: &[u16]) -> Vec<String> {
    buf.split(|c| *c == 0)
        .take_while(|s| !s.is_empty())
        .map(String::from_utf16_lossy)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn process_instances() {
        let (pid, luid, phys) =
            process_instance("pid_1234_luid_0x00000000_0x0000D1A2_phys_0").unwrap();
        assert_eq!(
            (pid, luid, phys),
            (
                1234,
                Luid {
                    high: 0,
                    low: 0xD1A2
                },
                0
            )
        );
        let (_, luid, phys) = process_instance("pid_7_luid_0xFFFFFFFF_0xFFFFFFFF_phys_3").unwrap();
        assert_eq!(
            luid,
            Luid {
                high: -1,
                low: u32::MAX
            }
        );
        assert_eq!(phys, 3);
        for bad in [
            "_Total",
            "pid__luid_0x0_0x1_phys_0",
            "pid_12a_luid_0x0_0x1_phys_0",
            "pid_1_luid_0xZZ_0x1_phys_0",
            "pid_1_luid_0x0_0x1",
            "pid_1_luid_0x0_0x1_phys_",
            "pid_1_luid_0x0_0x1_phys_0_extra",
            "pid_1_luid_0x123456789_0x1_phys_0",
            "luid_0x0_0x1_phys_0",
            "",
        ] {
            assert_eq!(process_instance(bad), None, "{bad}");
        }
    }

    #[test]
    fn adapter_instances() {
        assert_eq!(
            adapter_instance("luid_0x80000000_0x00012345_phys_1"),
            Some((
                Luid {
                    high: i32::MIN,
                    low: 0x12345
                },
                1
            ))
        );
        for bad in [
            "_Total",
            "pid_4_luid_0x0_0x1_phys_0",
            "luid_0x0_0x1",
            "luid_0x0_phys_0",
        ] {
            assert_eq!(adapter_instance(bad), None, "{bad}");
        }
    }

    #[test]
    fn multi_strings() {
        let w = |s: &str| s.encode_utf16().collect::<Vec<_>>();
        assert_eq!(multi_sz(&w("a\0bc\0\0")), vec!["a", "bc"]);
        assert_eq!(multi_sz(&w("\0")), Vec::<String>::new());
        assert_eq!(multi_sz(&[]), Vec::<String>::new());
        assert_eq!(multi_sz(&w("only")), vec!["only"]);
    }
}
