//! Pure parser for DRM client usage stats in `/proc/<pid>/fdinfo/<fd>`.
//!
//! Follows the kernel's `Documentation/gpu/drm-usage-stats.rst`: one `key: value` per line, split
//! at the first `:`, all whitespace around key and value trimmed (amdgpu prints
//! `drm-memory-gtt: \t…`, a space *and* a tab). Sizes are `<uint>` with an optional ` KiB` /
//! ` MiB` (the kernel picks the largest unit that divides exactly, so the same key changes unit
//! between reads); `kB` (amdgpu before 5.19) and `GiB` are accepted too. Longer prefixes are
//! matched first (`drm-engine-capacity-` before `drm-engine-`, `drm-total-cycles-` before
//! `drm-total-`). Unknown keys are ignored; a known key with a malformed value is recorded in
//! [`ClientStats::problems`] and otherwise ignored, so one odd line never hides the rest.
//!
//! amdgpu's pre-5.19 format (`pdev:`, `vram mem: N kB`, `gfx0: 12.5%`) is recognised too.
//!
//! Bounded: at most [`MAX_KEYS`] `key: value` lines are parsed (a real DRM fdinfo has about
//! 40); a file with more is marked [`ClientStats::over_key_limit`] and its figures are not
//! used. At most [`MAX_PROBLEMS`] malformed lines are recorded.

use std::collections::BTreeMap;

use super::driver::AMDGPU;

/// Memory figures of one driver region (`drm-<kind>-<region>`), in bytes; `None` = not printed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RegionStats {
    /// `drm-total-<r>`: all buffers created, resident or not.
    pub total: Option<u64>,
    /// `drm-shared-<r>`: buffers shared with another file.
    pub shared: Option<u64>,
    /// `drm-resident-<r>` (or its deprecated alias `drm-memory-<r>`, never both added).
    pub resident: Option<u64>,
    /// `drm-purgeable-<r>`.
    pub purgeable: Option<u64>,
    /// `drm-active-<r>`.
    pub active: Option<u64>,
    /// `drm-evicted-<r>` / `amd-evicted-<r>`.
    pub evicted: Option<u64>,
    /// `drm-memory-<r>`, kept apart so it is used only when `drm-resident-<r>` is absent.
    pub memory_alias: Option<u64>,
}

impl RegionStats {
    /// Resident bytes: `drm-resident-`, else the deprecated `drm-memory-` alias.
    pub fn resident_bytes(&self) -> Option<u64> {
        self.resident.or(self.memory_alias)
    }
}

/// Counters of one engine class (`drm-engine-<e>`, `drm-cycles-<e>`, …).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct EngineStats {
    /// `drm-engine-<e>`: cumulative busy nanoseconds.
    pub busy_ns: Option<u64>,
    /// `drm-engine-capacity-<e>`: identical engines in the class (absent = 1).
    pub capacity: Option<u64>,
    /// `drm-cycles-<e>`: busy cycles.
    pub cycles: Option<u64>,
    /// `drm-total-cycles-<e>`: the GPU timestamp `cycles` is measured against.
    pub total_cycles: Option<u64>,
    /// `drm-maxfreq-<e>`, in Hz.
    pub max_freq_hz: Option<u64>,
    /// amdgpu before 5.19: instantaneous busy percent (`gfx0: 12.5%`), max over rings.
    pub instant_percent: Option<f64>,
}

/// The most `key: value` lines parsed from one fdinfo file (real files have about 40).
pub const MAX_KEYS: usize = 1024;
/// The most malformed lines recorded in [`ClientStats::problems`].
pub const MAX_PROBLEMS: usize = 16;

/// Everything one fdinfo file says about its DRM client.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ClientStats {
    /// `drm-driver` (or `amdgpu` for the pre-5.19 amdgpu format). `None` means the file has no
    /// DRM stats (not a DRM fd, or a hot-unplugged device).
    pub driver: Option<String>,
    /// `drm-pdev` (or `pdev`), the PCI slot in sysfs spelling.
    pub pdev: Option<String>,
    /// `drm-client-id`.
    pub client_id: Option<u64>,
    /// `drm-client-name`.
    pub client_name: Option<String>,
    /// amdgpu `pasid` (per-client GPU VM id): identifies a client in the pre-5.19 format, which
    /// has no `drm-client-id`.
    pub pasid: Option<u64>,
    /// Memory per driver region name (`vram`, `local0`, `vram0`, `memory`, …).
    pub regions: BTreeMap<String, RegionStats>,
    /// Counters per engine class name.
    pub engines: BTreeMap<String, EngineStats>,
    /// Lines with a known key and a value that could not be parsed (at most
    /// [`MAX_PROBLEMS`]).
    pub problems: Vec<String>,
    /// The first size line of the client's figure (total, resident or its `memory` alias, amdgpu's
    /// requested) that could not be parsed, whatever the cap on `problems`: the figure is short
    /// of it. A malformed shared, purgeable, active or evicted size is only a problem.
    pub malformed_size: Option<String>,
    /// The file has more than [`MAX_KEYS`] `key: value` lines: parsing stopped there, and
    /// its figures must not be used (they may be incomplete).
    pub over_key_limit: bool,
}

/// Parses a size value: `<uint>` then optional `KiB`/`MiB`/`GiB`/`kB`, into bytes.
pub fn parse_size(value: &str) -> Option<u64> {
    let mut it = value.split_ascii_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    let factor: u64 = match it.next() {
        None => 1,
        Some("KiB" | "kB" | "KB") => 1 << 10,
        Some("MiB") => 1 << 20,
        Some("GiB") => 1 << 30,
        Some(_) => return None,
    };
    if it.next().is_some() {
        return None;
    }
    n.checked_mul(factor)
}

/// Parses `<uint>` with an optional fixed unit (`ns`, `Hz`).
fn parse_with_unit(value: &str, unit: &str) -> Option<u64> {
    let mut it = value.split_ascii_whitespace();
    let n = it.next()?.parse().ok()?;
    match it.next() {
        None => Some(n),
        Some(u) if u == unit => it.next().is_none().then_some(n),
        Some(_) => None,
    }
}

/// Parses a frequency with `Hz`, `KHz`/`kHz` or `MHz` into Hz.
fn parse_freq(value: &str) -> Option<u64> {
    let mut it = value.split_ascii_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    let factor = match it.next() {
        None | Some("Hz") => 1,
        Some("KHz" | "kHz") => 1_000,
        Some("MHz") => 1_000_000,
        Some(_) => return None,
    };
    n.checked_mul(factor)
}

/// amdgpu 5.14–5.18 ring usage `I.F%`, where F is hundredths printed without zero padding
/// (`%d.%d%%`): `3.5%` is 3.05 %.
fn parse_legacy_percent(value: &str) -> Option<f64> {
    let v = value.strip_suffix('%')?;
    let (i, f) = v.split_once('.').unwrap_or((v, "0"));
    let i: u32 = i.parse().ok()?;
    let f: u32 = f.parse().ok()?;
    (f < 100).then(|| f64::from(i) + f64::from(f) / 100.0)
}

/// The memory kinds of `drm-<kind>-<region>`, longest first is not needed: each is followed by
/// `-`.
const MEMORY_KINDS: [&str; 7] = [
    "total",
    "shared",
    "resident",
    "purgeable",
    "active",
    "evicted",
    "memory",
];

/// Parses one fdinfo file.
pub fn parse(text: &str) -> ClientStats {
    let mut c = ClientStats::default();
    let mut legacy_amdgpu = false;
    let mut keys = 0usize;
    for line in text.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        keys += 1;
        if keys > MAX_KEYS {
            c.over_key_limit = true;
            break;
        }
        let (key, value) = (key.trim(), value.trim());
        if let Err(what) = parse_line(&mut c, &mut legacy_amdgpu, key, value) {
            let problem = || format!("{key}: {what} {value:?}");
            if what == MALFORMED_SIZE && c.malformed_size.is_none() {
                c.malformed_size = Some(problem());
            }
            if c.problems.len() < MAX_PROBLEMS {
                c.problems.push(problem());
            }
        }
    }
    if legacy_amdgpu && c.driver.is_none() {
        c.driver = Some(AMDGPU.fdinfo_name.to_string());
    }
    c
}

type LineResult = Result<(), &'static str>;

/// What a memory size line that could not be parsed is called ([`ClientStats::malformed_size`])
/// when the figure is made of it: resident (or its `memory` alias) and total.
const MALFORMED_SIZE: &str = "malformed size";
/// The same for the sizes the figure is not made of (shared, purgeable, active, evicted): that
/// detail is unknown, the figure is not short of it.
const MALFORMED_DETAIL: &str = "malformed size (a detail; the figure does not include it)";

/// Whether a `drm-<kind>-<region>` size is part of a client's figure.
fn in_figure(kind: &str) -> bool {
    matches!(kind, "total" | "resident" | "memory")
}

fn parse_line(c: &mut ClientStats, legacy: &mut bool, key: &str, value: &str) -> LineResult {
    if let Some(rest) = key.strip_prefix("drm-") {
        match rest {
            "driver" => c.driver = Some(value.to_string()),
            "pdev" => c.pdev = Some(value.to_ascii_lowercase()),
            "client-id" => c.client_id = Some(value.parse().map_err(|_| "malformed client id")?),
            "client-name" => c.client_name = Some(value.to_string()),
            _ => parse_drm_key(c, rest, value)?,
        }
    } else if let Some(region) = key.strip_prefix("amd-evicted-") {
        let v = parse_size(value).ok_or(MALFORMED_DETAIL)?;
        c.regions.entry(region.to_string()).or_default().evicted = Some(v);
    } else if let Some(region) = key.strip_prefix("amd-requested-") {
        // amdgpu's "requested" = all allocations, i.e. the total; drm-total wins if printed.
        let v = parse_size(value).ok_or(MALFORMED_SIZE)?;
        let r = c.regions.entry(region.to_string()).or_default();
        r.total = r.total.or(Some(v));
    } else if key == "pasid" {
        c.pasid = Some(value.parse().map_err(|_| "malformed pasid")?);
    } else if key == "pdev" {
        *legacy = true;
        c.pdev = Some(value.to_ascii_lowercase());
    } else if let Some(region) = key.strip_suffix(" mem") {
        // amdgpu 5.14–5.18: `vram mem: N kB` (resident).
        *legacy = true;
        let v = parse_size(value).ok_or(MALFORMED_SIZE)?;
        c.regions
            .entry(region.to_string())
            .or_default()
            .memory_alias = Some(v);
    } else if *legacy && value.ends_with('%') {
        let class = key.trim_end_matches(|ch: char| ch.is_ascii_digit());
        let p = parse_legacy_percent(value).ok_or("malformed percentage")?;
        let e = c.engines.entry(class.to_string()).or_default();
        e.instant_percent = Some(e.instant_percent.map_or(p, |q| q.max(p)));
    }
    Ok(())
}

fn engine<'a>(c: &'a mut ClientStats, class: &str) -> &'a mut EngineStats {
    c.engines.entry(class.to_string()).or_default()
}

/// `drm-<rest>` keys other than the identity ones.
fn parse_drm_key(c: &mut ClientStats, rest: &str, value: &str) -> LineResult {
    // Engine keys first: `engine-capacity-` before `engine-`, `total-cycles-` before `total-`.
    if let Some(e) = rest.strip_prefix("engine-capacity-") {
        let n: u64 = value.parse().map_err(|_| "malformed capacity")?;
        if n == 0 {
            return Err("zero capacity");
        }
        engine(c, e).capacity = Some(n);
    } else if let Some(e) = rest.strip_prefix("engine-") {
        engine(c, e).busy_ns = Some(parse_with_unit(value, "ns").ok_or("malformed busy time")?);
    } else if let Some(e) = rest.strip_prefix("total-cycles-") {
        engine(c, e).total_cycles = Some(value.parse().map_err(|_| "malformed cycles")?);
    } else if let Some(e) = rest.strip_prefix("cycles-") {
        engine(c, e).cycles = Some(value.parse().map_err(|_| "malformed cycles")?);
    } else if let Some(e) = rest.strip_prefix("maxfreq-") {
        engine(c, e).max_freq_hz = Some(parse_freq(value).ok_or("malformed frequency")?);
    } else if let Some((kind, region)) = MEMORY_KINDS.iter().find_map(|k| {
        rest.strip_prefix(k)
            .and_then(|r| r.strip_prefix('-'))
            .map(|r| (*k, r))
    }) {
        let bytes = parse_size(value).ok_or(if in_figure(kind) {
            MALFORMED_SIZE
        } else {
            MALFORMED_DETAIL
        })?;
        let r = c.regions.entry(region.to_string()).or_default();
        let slot = match kind {
            "total" => &mut r.total,
            "shared" => &mut r.shared,
            "resident" => &mut r.resident,
            "purgeable" => &mut r.purgeable,
            "active" => &mut r.active,
            "evicted" => &mut r.evicted,
            _ => &mut r.memory_alias,
        };
        *slot = Some(bytes);
    }
    // Anything else (`drm-curfreq-*`, future keys) is ignored, as the spec asks.
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;
    const KIB: u64 = 1 << 10;

    #[test]
    fn sizes_change_unit_between_reads() {
        assert_eq!(parse_size("0"), Some(0));
        assert_eq!(parse_size("1536"), Some(1536));
        assert_eq!(parse_size("192 KiB"), Some(192 * KIB));
        assert_eq!(parse_size("16 MiB"), Some(16 * MIB));
        assert_eq!(parse_size("25600 MiB"), Some(25 << 30));
        assert_eq!(parse_size("2 GiB"), Some(2 << 30));
        assert_eq!(parse_size("2068 kB"), Some(2068 * KIB));
        assert_eq!(parse_size("3 parsecs"), None);
        assert_eq!(parse_size("x KiB"), None);
        assert_eq!(parse_size("18446744073709551615 MiB"), None, "overflow");
    }

    #[test]
    fn longer_prefixes_win() {
        let c = parse(
            "drm-driver:\txe\ndrm-total-cycles-rcs:\t7655183225\ndrm-cycles-rcs:\t28257900\ndrm-engine-capacity-vcs:\t2\n",
        );
        let rcs = c.engines["rcs"];
        assert_eq!(rcs.total_cycles, Some(7_655_183_225));
        assert_eq!(rcs.cycles, Some(28_257_900));
        assert!(!c.regions.contains_key("cycles-rcs"));
        assert_eq!(c.engines["vcs"].capacity, Some(2));
    }

    #[test]
    fn amdgpu_space_tab_and_alias_are_not_added() {
        let c = parse(
            "drm-driver:\tamdgpu\ndrm-resident-gtt:\t2 MiB\ndrm-memory-gtt: \t2048 KiB\ndrm-memory-cpu: \t0 KiB\n",
        );
        assert_eq!(c.regions["gtt"].resident_bytes(), Some(2 * MIB));
        assert_eq!(c.regions["gtt"].memory_alias, Some(2 * MIB));
        assert_eq!(c.regions["cpu"].resident_bytes(), Some(0));
    }

    #[test]
    fn unknown_keys_are_ignored_and_bad_values_recorded() {
        let c = parse(
            "pos:\t0\nflags:\t02100002\nmnt_id:\t26\nino:\t1234\npasid:\t32770\nv3d-jobs-bin:\t3 jobs\ndrm-driver:\tv3d\ndrm-total-memory:\tlots\ndrm-engine-bin:\t12 parsecs\ndrm-curfreq-x:\t5 Hz\n",
        );
        assert_eq!(c.driver.as_deref(), Some("v3d"));
        assert!(c.regions.is_empty());
        assert_eq!(c.problems.len(), 2, "{:?}", c.problems);
    }

    #[test]
    fn a_file_without_drm_lines_has_no_driver() {
        let c = parse("pos:\t0\nflags:\t0100002\nmnt_id:\t21\nino:\t5\n");
        assert_eq!(c.driver, None);
    }

    #[test]
    fn legacy_amdgpu_format() {
        let c = parse(
            "pos:\t0\nflags:\t02100002\nmnt_id:\t21\npdev:\t0000:03:00.0\npasid:\t32773\nvram mem:\t2068 kB\ngtt mem:\t8192 kB\ncpu mem:\t0 kB\ngfx0:\t12.5%\ngfx1:\t3.50%\ndma0:\t0.0%\n",
        );
        assert_eq!(c.driver.as_deref(), Some("amdgpu"));
        assert_eq!(c.pdev.as_deref(), Some("0000:03:00.0"));
        assert_eq!(c.regions["vram"].resident_bytes(), Some(2068 * KIB));
        let gfx = c.engines["gfx"].instant_percent.unwrap();
        assert!(
            (gfx - 12.05).abs() < 1e-9,
            "hundredths without zero padding: {gfx}"
        );
        assert_eq!(c.engines["dma"].instant_percent, Some(0.0));
    }

    #[test]
    fn keys_beyond_the_limit_are_not_parsed() {
        let mut text = String::from("drm-driver: amdgpu\n");
        for i in 0..MAX_KEYS * 3 {
            text.push_str(&format!(
                "drm-total-r{i}: {i} KiB\nbad-{i}\ndrm-engine-e{i}: x\n"
            ));
        }
        let c = parse(&text);
        assert!(c.over_key_limit);
        assert!(
            c.regions.len() + c.engines.len() < MAX_KEYS,
            "parsing stopped"
        );
        assert_eq!(c.problems.len(), MAX_PROBLEMS);
        let small = parse("drm-driver: amdgpu\ndrm-total-vram: 1 KiB\n");
        assert!(!small.over_key_limit);
        assert_eq!(small.malformed_size, None);
        // A malformed size after the problems' cap is still known: the figures are short of it.
        let mut text = String::from("drm-driver: amdgpu\n");
        for i in 0..MAX_PROBLEMS + 4 {
            text.push_str(&format!("drm-engine-e{i}: x\n"));
        }
        text.push_str("drm-resident-vram: 12 parsecs\ndrm-resident-gtt: -1 KiB\n");
        let c = parse(&text);
        assert_eq!(c.problems.len(), MAX_PROBLEMS);
        assert_eq!(
            c.malformed_size.as_deref(),
            Some("drm-resident-vram: malformed size \"12 parsecs\""),
            "the first one"
        );
        // A detail the figure is not made of: that detail is unknown, the figure is not short.
        for line in [
            "amd-evicted-vram: 12 parsecs",
            "drm-evicted-vram: -1 KiB",
            "drm-shared-vram: x",
            "drm-purgeable-gtt: 18446744073709551615 KiB",
            "drm-active-vram: 1 furlong",
        ] {
            let c = parse(&format!(
                "drm-driver: amdgpu\ndrm-resident-vram: 2 MiB\n{line}\n"
            ));
            assert_eq!(c.malformed_size, None, "{line}");
            assert_eq!(c.regions["vram"].resident, Some(2 * MIB), "{line}");
            assert_eq!(c.regions["vram"].evicted, None, "{line}");
            assert_eq!(c.problems.len(), 1, "{line}");
            assert!(c.problems[0].contains("a detail"), "{:?}", c.problems);
        }
    }

    #[test]
    fn maxfreq_units() {
        let c = parse("drm-driver: msm\ndrm-maxfreq-gpu: 800000000 Hz\ndrm-maxfreq-x: 900 MHz\n");
        assert_eq!(c.engines["gpu"].max_freq_hz, Some(800_000_000));
        assert_eq!(c.engines["x"].max_freq_hz, Some(900_000_000));
    }
}
