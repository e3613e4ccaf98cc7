//! Apple Silicon's GPU memory from IOKit, platform-free: the `PerformanceStatistics`
//! dictionary of the `AGXAccelerator` service parsed ([`from_entries`], over the entries the
//! macOS FFI read; [`parse_ioreg`], over the text `ioreg -r -d 1 -c IOAccelerator` prints for
//! the same dictionary) and the Metal device's pool built from it ([`apple_pool`]). Tested on
//! every platform with captured dictionaries; the FFI is `iokit.rs` (macOS only).
//!
//! The keys (all numbers; the set varies by model and macOS version, so each is optional):
//! `Alloc system memory` — system memory allocated to GPU clients, bytes (it follows a loaded
//! model: 21343043584 on an M1 Pro with a 17 GB llama-server model); `In use system memory` —
//! the part resident for the GPU now (near 0 when it idles); `In use system memory (driver)`;
//! `Device Utilization %`. Apple documents none of them: the meanings are observed (DataDog PR
//! #54789 `gpu.apple.system_memory.allocated` / `.in_use`; oshi PR #3092). An Intel Mac's
//! AMD or Intel accelerator prints `vramUsedBytes` / `vramFreeBytes` instead: that dictionary
//! is not read as unified memory.

use crate::types::error::ParseError;
use crate::types::{Field, MemoryPool, Unknown, UnknownReason};

/// One value of the dictionary, as CoreFoundation typed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Value {
    /// A `CFNumber` that is an integer.
    Number(i64),
    /// Anything else (a string, data, a boolean, a float, a nested dictionary), by its type.
    Other(String),
}

/// What the dictionary says about memory.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct PerfStats {
    /// `Alloc system memory`: system memory allocated to GPU clients, bytes.
    pub alloc_system_memory: Option<u64>,
    /// `In use system memory`: resident for the GPU now, bytes.
    pub in_use_system_memory: Option<u64>,
    /// `Device Utilization %`.
    pub device_utilization: Option<u64>,
    /// A discrete accelerator's keys (`vramUsedBytes`, `vramFreeBytes`, `inUseVidMemoryBytes`).
    pub discrete_keys: bool,
    /// Why a memory figure is missing: one line per problem.
    pub problems: Vec<String>,
}

const ALLOC: &str = "Alloc system memory";
const IN_USE: &str = "In use system memory";
const UTILIZATION: &str = "Device Utilization %";
const DISCRETE: [&str; 3] = ["vramUsedBytes", "vramFreeBytes", "inUseVidMemoryBytes"];

/// Reads the memory figures from the dictionary's entries. A key that is absent, not an
/// integer, negative or given twice leaves its figure unknown, with the problem recorded.
pub(crate) fn from_entries(entries: impl IntoIterator<Item = (String, Value)>) -> PerfStats {
    let mut s = PerfStats::default();
    let mut seen: Vec<String> = Vec::new();
    for (key, value) in entries {
        if seen.contains(&key) {
            s.problems.push(format!("{key:?} given twice"));
            match key.as_str() {
                ALLOC => s.alloc_system_memory = None,
                IN_USE => s.in_use_system_memory = None,
                _ => {}
            }
            continue;
        }
        seen.push(key.clone());
        s.discrete_keys |= DISCRETE.contains(&key.as_str());
        let slot = match key.as_str() {
            ALLOC => &mut s.alloc_system_memory,
            IN_USE => &mut s.in_use_system_memory,
            UTILIZATION => &mut s.device_utilization,
            _ => continue,
        };
        match value {
            Value::Number(n) => match u64::try_from(n) {
                Ok(v) => *slot = Some(v),
                Err(_) => s.problems.push(format!("{key:?} is negative ({n})")),
            },
            Value::Other(kind) => s.problems.push(format!("{key:?} is not a number ({kind})")),
        }
    }
    if s.alloc_system_memory.is_none() && !seen.iter().any(|k| k == ALLOC) {
        s.problems.push(if s.discrete_keys {
            format!("no {ALLOC:?}: a discrete accelerator's statistics (vramUsedBytes …)")
        } else {
            format!("no {ALLOC:?} key")
        });
    }
    s
}

/// Parses the text `ioreg` prints for the dictionary: `{"key"=value,"key"=value}`, optionally
/// after `"PerformanceStatistics" = `. Integers become [`Value::Number`]; any other value
/// (a quoted string, `<data>`, `Yes`) is [`Value::Other`].
///
/// # Errors
/// Text that is not one brace-delimited dictionary of `"key"=value` entries.
#[cfg_attr(not(any(test, feature = "fuzzing")), allow(dead_code))]
pub(crate) fn parse_ioreg(text: &str) -> Result<Vec<(String, Value)>, ParseError> {
    let bad = |why: &str| ParseError::new(format!("PerformanceStatistics: {why}"));
    let start = text.find('{').ok_or_else(|| bad("no '{'"))?;
    let end = text.rfind('}').ok_or_else(|| bad("no '}'"))?;
    let body = text
        .get(start + 1..end)
        .ok_or_else(|| bad("'}' before '{'"))?;
    if body.contains(['{', '}']) {
        return Err(bad("a nested dictionary"));
    }
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let after_quote = rest.strip_prefix('"').ok_or_else(|| {
            bad(&format!(
                "an entry not starting with a quoted key: {rest:.40?}"
            ))
        })?;
        let close = after_quote
            .find('"')
            .ok_or_else(|| bad("an unterminated key"))?;
        let key = after_quote.get(..close).unwrap_or_default().to_string();
        let tail = after_quote
            .get(close + 1..)
            .unwrap_or_default()
            .trim_start();
        let tail = tail
            .strip_prefix('=')
            .ok_or_else(|| bad(&format!("no '=' after {key:?}")))?;
        let (raw, next) = match split_value(tail) {
            Some((v, n)) => (v, n),
            None => return Err(bad(&format!("an unterminated value of {key:?}"))),
        };
        let raw = raw.trim();
        if raw.is_empty() {
            return Err(bad(&format!("no value for {key:?}")));
        }
        let value = raw
            .parse::<i64>()
            .map_or_else(|_| Value::Other(kind_of(raw).to_string()), Value::Number);
        out.push((key, value));
        rest = next.trim_start();
    }
    Ok(out)
}

/// The value before the next top-level comma (commas inside quotes or `<…>` belong to it), and
/// what follows the comma; `None` for an unterminated quote or `<`.
fn split_value(text: &str) -> Option<(&str, &str)> {
    let (mut quoted, mut data) = (false, false);
    for (i, c) in text.char_indices() {
        match c {
            '"' if !data => quoted = !quoted,
            '<' if !quoted => data = true,
            '>' if !quoted => data = false,
            ',' if !quoted && !data => return Some((text.get(..i)?, text.get(i + 1..)?)),
            _ => {}
        }
    }
    (!quoted && !data).then_some((text, ""))
}

fn kind_of(raw: &str) -> &'static str {
    if raw.starts_with('"') {
        "a string"
    } else if raw.starts_with('<') {
        "data"
    } else if raw.parse::<f64>().is_ok() {
        "a float"
    } else {
        "not a number"
    }
}

/// The pool of Apple Silicon's GPU: Metal's working set (`budget`,
/// `recommendedMaxWorkingSetSize`) as its total, IOKit's `Alloc system memory` as used and
/// `In use system memory` as active; free (the working set less what clients allocated, at
/// most the host's available RAM) is the probe's part. `stats` is the dictionary, or why it
/// could not be read; the unknowns go on the device.
pub(crate) fn apple_pool(
    budget: u64,
    stats: Result<PerfStats, String>,
) -> (MemoryPool, Vec<Unknown>) {
    let mut pool = MemoryPool::working_set(
        "MTLDevice.hasUnifiedMemory: the GPU allocates the host's RAM (Apple Silicon); used is \
         IOKit's AGXAccelerator PerformanceStatistics \"Alloc system memory\"",
    );
    pool.total_bytes = Some(budget);
    let mut unknown = Vec::new();
    match stats {
        Ok(s) => {
            pool.used_bytes = s.alloc_system_memory;
            pool.active_bytes = s.in_use_system_memory;
            if pool.used_bytes.is_none() {
                unknown.push(Unknown::new(
                    Field::PoolUsedBytes,
                    UnknownReason::Unsupported,
                    format!("IOKit PerformanceStatistics: {}", s.problems.join("; ")),
                ));
            }
        }
        Err(why) => unknown.push(Unknown::new(
            Field::PoolUsedBytes,
            UnknownReason::Unreadable,
            format!("IOKit PerformanceStatistics: {why}"),
        )),
    }
    (pool, unknown)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::{PoolKind, PoolSource};

    /// The captured dictionaries (public test fixtures, `docs/memory-model.md` cites them):
    /// (what, `ioreg` text, Alloc, In use).
    const CAPTURED: [(&str, &str, u64, u64); 5] = [
        (
            "M1 Pro 14-core (AGXAcceleratorG13X), a 17 GB model loaded",
            r#"{"In use system memory (driver)"=0,"Alloc system memory"=21343043584,"Tiler Utilization %"=22,"Renderer Utilization %"=20,"Device Utilization %"=22,"Allocated PB Size"=55181312,"In use system memory"=507330560}"#,
            21_343_043_584,
            507_330_560,
        ),
        (
            "M3 MacBook Air (AGXAcceleratorG15G)",
            r#"{"In use system memory (driver)"=0,"Alloc system memory"=6093651968,"Tiler Utilization %"=32,"Renderer Utilization %"=31,"Device Utilization %"=34,"In use system memory"=3898310656}"#,
            6_093_651_968,
            3_898_310_656,
        ),
        (
            "M4 (AGXAcceleratorG16G)",
            r#"{"In use system memory (driver)"=0,"Alloc system memory"=2679144448,"Tiler Utilization %"=23,"Renderer Utilization %"=23,"Device Utilization %"=23,"In use system memory"=725286912}"#,
            2_679_144_448,
            725_286_912,
        ),
        (
            "M4 Max (40 cores)",
            r#"{"In use system memory (driver)"=0,"Alloc system memory"=52967440384,"Tiler Utilization %"=10,"recoveryCount"=0,"Device Utilization %"=16,"In use system memory"=2363801600}"#,
            52_967_440_384,
            2_363_801_600,
        ),
        (
            "the full key set",
            r#"  |   "PerformanceStatistics" = {"In use system memory (driver)"=0,"Alloc system memory"=4272832512,"Tiler Utilization %"=54,"recoveryCount"=0,"lastRecoveryTime"=0,"Renderer Utilization %"=57,"TiledSceneBytes"=1081344,"Device Utilization %"=57,"SplitSceneCount"=0,"Allocated PB Size"=120061952,"In use system memory"=1200357376}"#,
            4_272_832_512,
            1_200_357_376,
        ),
    ];

    #[test]
    fn every_captured_dictionary() {
        for (what, text, alloc, in_use) in CAPTURED {
            let s = from_entries(parse_ioreg(text).unwrap());
            assert_eq!(s.alloc_system_memory, Some(alloc), "{what}");
            assert_eq!(s.in_use_system_memory, Some(in_use), "{what}");
            assert!(s.problems.is_empty() && !s.discrete_keys, "{what}: {s:?}");
        }
        let m1 = from_entries(parse_ioreg(CAPTURED[0].1).unwrap());
        assert_eq!(m1.device_utilization, Some(22));
    }

    #[test]
    fn the_typed_map_the_ffi_gives() {
        let entries = vec![
            (ALLOC.to_string(), Value::Number(21_343_043_584)),
            (IN_USE.to_string(), Value::Number(507_330_560)),
            ("model".to_string(), Value::Other("a string".into())),
        ];
        let s = from_entries(entries);
        assert_eq!(
            (s.alloc_system_memory, s.in_use_system_memory),
            (Some(21_343_043_584), Some(507_330_560))
        );
    }

    #[test]
    fn missing_or_malformed_figures_are_unknown_with_the_reason() {
        // Utilization only (some models and macOS versions).
        let s = from_entries(parse_ioreg(r#"{"Device Utilization %"=5}"#).unwrap());
        assert_eq!(s.alloc_system_memory, None);
        assert_eq!(s.problems, ["no \"Alloc system memory\" key"]);
        // Not a number, negative, given twice.
        let s = from_entries(
            parse_ioreg(r#"{"Alloc system memory"="lots","In use system memory"=-5}"#).unwrap(),
        );
        assert_eq!(
            (s.alloc_system_memory, s.in_use_system_memory),
            (None, None)
        );
        assert_eq!(
            s.problems,
            [
                "\"Alloc system memory\" is not a number (a string)",
                "\"In use system memory\" is negative (-5)"
            ]
        );
        let s = from_entries(
            parse_ioreg(r#"{"Alloc system memory"=1,"Alloc system memory"=2}"#).unwrap(),
        );
        assert_eq!(s.alloc_system_memory, None);
        assert_eq!(s.problems, ["\"Alloc system memory\" given twice"]);
        let s = from_entries(parse_ioreg(r#"{"Alloc system memory"=1.5}"#).unwrap());
        assert_eq!(
            s.problems,
            ["\"Alloc system memory\" is not a number (a float)"]
        );
    }

    #[test]
    fn an_intel_macs_discrete_accelerator_is_not_unified_memory() {
        let s = from_entries(
            parse_ioreg(
                r#"{"vramUsedBytes"=1073741824,"vramFreeBytes"=7516192768,"GPU Activity(%)"=3}"#,
            )
            .unwrap(),
        );
        assert!(s.discrete_keys);
        assert_eq!(s.alloc_system_memory, None);
        assert!(s.problems[0].contains("discrete accelerator"));
    }

    #[test]
    fn malformed_text_is_one_error_naming_the_dictionary() {
        for (text, why) in [
            ("", "no '{'"),
            ("{\"a\"=1", "no '}'"),
            ("}{", "'}' before '{'"),
            ("{\"a\"={\"b\"=1}}", "a nested dictionary"),
            ("{a=1}", "an entry not starting with a quoted key"),
            ("{\"a=1}", "an unterminated key"),
            ("{\"a\" 1}", "no '=' after \"a\""),
            ("{\"a\"=}", "no value for \"a\""),
            ("{\"a\"=\"x,}", "an unterminated value of \"a\""),
            ("{\"a\"=<00,}", "an unterminated value of \"a\""),
        ] {
            let e = parse_ioreg(text).unwrap_err().to_string();
            assert!(
                e.starts_with("PerformanceStatistics: ") && e.contains(why),
                "{text:?}: {e}"
            );
        }
        // Quoted commas and data stay inside their value.
        let v = parse_ioreg(r#"{"name"="a, b","blob"=<00,01>,"n"=3}"#).unwrap();
        assert_eq!(v.len(), 3);
        assert_eq!(v[2], ("n".to_string(), Value::Number(3)));
        assert_eq!(parse_ioreg("{ }").unwrap(), []);
    }

    #[test]
    fn the_metal_devices_pool() {
        let m1 = from_entries(parse_ioreg(CAPTURED[0].1).unwrap());
        let (p, unknown) = apple_pool(25 << 30, Ok(m1));
        assert_eq!(p.kind, PoolKind::UnifiedHost);
        assert_eq!(p.total_bytes, Some(25 << 30));
        assert_eq!(p.used_bytes, Some(21_343_043_584));
        assert_eq!(p.active_bytes, Some(507_330_560));
        assert_eq!(p.free_source, PoolSource::WorkingSetMinusAllocHostBound);
        assert!(!p.used_is_lower_bound, "IOKit's figure is the device's own");
        assert!(unknown.is_empty());
        let (p, unknown) = apple_pool(25 << 30, Err("no AGXAccelerator service".into()));
        assert_eq!(p.used_bytes, None);
        assert_eq!(unknown[0].reason, UnknownReason::Unreadable);
        assert!(unknown[0].detail.contains("no AGXAccelerator service"));
        let (_, unknown) = apple_pool(1, Ok(from_entries(Vec::new())));
        assert_eq!(unknown[0].reason, UnknownReason::Unsupported);
        assert!(unknown[0].detail.contains("no \"Alloc system memory\" key"));
    }
}
