//! Pure parsers for `nvidia-smi --format=csv,noheader,nounits` output.
//!
//! The CSV is not quoted: fields are separated by `", "` and a process name may itself contain
//! `", "`. Each line is therefore parsed from both ends: the fixed fields are taken from the
//! front and the back, and whatever remains in the middle is the name. Any field may be a
//! bracketed placeholder (`[N/A]`, `[Not Supported]`, `[Insufficient Permissions]`,
//! `[Unknown Error]`, `[GPU is lost]`), which becomes `None` with a reason — never 0. Memory is
//! in MiB (`nounits`); a trailing ` MiB` is accepted too.

use crate::types::UnknownReason;
use crate::types::error::ParseError;
use crate::types::pci::PciBusId;

/// The largest GPU index `nvidia-smi` can print: far above NVML's device limit (a machine
/// has at most a few dozen GPUs), below where the device numbering (DRM devices follow the
/// NVIDIA ones) could run out.
const MAX_INDEX: u32 = 1 << 16;

/// The `--query-gpu` fields, in order. `memory.reserved` is last so it can be dropped for
/// drivers that do not know it.
pub(crate) const GPU_FIELDS: [&str; 9] = [
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "driver_version",
    "memory.total",
    "memory.used",
    "memory.free",
    "memory.reserved",
];

/// The `--query-compute-apps` fields, in order.
pub(crate) const APP_FIELDS: [&str; 4] = ["pid", "process_name", "used_memory", "gpu_uuid"];

/// A value, or why there is none.
pub(crate) type Field<T> = Result<T, (UnknownReason, String)>;

/// One `--query-gpu` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmiGpu {
    pub index: u32,
    pub name: Field<String>,
    pub uuid: Field<String>,
    pub pci_bus_id: Field<PciBusId>,
    pub driver_version: Field<String>,
    pub total: Field<u64>,
    pub used: Field<u64>,
    pub free: Field<u64>,
    /// `None` when the field was not queried (an nvidia-smi older than R510 rejects it).
    pub reserved: Option<Field<u64>>,
}

/// One `--query-compute-apps` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmiApp {
    pub pid: u32,
    pub name: Field<String>,
    pub used: Field<u64>,
    pub gpu_uuid: Field<String>,
}

/// Classifies a placeholder, or returns the text.
fn field(raw: &str) -> Field<&str> {
    let t = raw.trim();
    let reason = match t {
        "[N/A]" | "N/A" => UnknownReason::DriverSentinel,
        "[Not Supported]" => UnknownReason::Unsupported,
        "[Insufficient Permissions]" => UnknownReason::PermissionDenied,
        "" => UnknownReason::Unsupported,
        _ if t.starts_with('[') && t.ends_with(']') => UnknownReason::DeviceError,
        _ => return Ok(t),
    };
    Err((reason, format!("nvidia-smi printed {t:?}")))
}

fn text(raw: &str) -> Field<String> {
    field(raw).map(str::to_string)
}

/// MiB (optionally suffixed ` MiB`) to bytes.
fn mib(raw: &str, line: usize, what: &str) -> Result<Field<u64>, ParseError> {
    match field(raw) {
        Err(e) => Ok(Err(e)),
        Ok(v) => {
            let v = v.strip_suffix("MiB").map_or(v, str::trim_end);
            let n: u64 = v.parse().map_err(|_| {
                ParseError::on_line(line, format!("{what} is not a MiB count: {v:?}"))
            })?;
            Ok(Ok(n.saturating_mul(1 << 20)))
        }
    }
}

/// Splits a line into `front` leading fields, `back` trailing fields and the joined middle.
fn split_ends(line: &str, front: usize, back: usize) -> Option<(Vec<&str>, String, Vec<&str>)> {
    let parts: Vec<&str> = line.split(", ").collect();
    if parts.len() < front + back + 1 {
        return None;
    }
    let head = parts.get(..front)?.to_vec();
    let tail = parts.get(parts.len() - back..)?.to_vec();
    let middle = parts.get(front..parts.len() - back)?.join(", ");
    Some((head, middle, tail))
}

/// Parses `--query-gpu` output queried with `GPU_FIELDS` (all nine when `with_reserved`, the
/// first eight otherwise).
pub(crate) fn parse_gpus(output: &str, with_reserved: bool) -> Result<Vec<SmiGpu>, ParseError> {
    let back = if with_reserved { 7 } else { 6 };
    let mut gpus = Vec::new();
    for (i, line) in output
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let n = i + 1;
        let (head, name, tail) = split_ends(line.trim_end(), 1, back).ok_or_else(|| {
            ParseError::on_line(n, format!("expected {} fields: {line:?}", back + 2))
        })?;
        let index_text = head.first().copied().unwrap_or_default().trim();
        let index: u32 = index_text.parse().map_err(|_| {
            ParseError::on_line(n, format!("index is not a number: {index_text:?}"))
        })?;
        if index > MAX_INDEX {
            return Err(ParseError::on_line(
                n,
                format!("index {index} is beyond any GPU count (at most {MAX_INDEX})"),
            ));
        }
        let get = |k: usize| tail.get(k).copied().unwrap_or_default();
        let pci_bus_id = match field(get(1)) {
            Ok(p) => Ok(p
                .parse::<PciBusId>()
                .map_err(|e| ParseError::on_line(n, e.message))?),
            Err(e) => Err(e),
        };
        gpus.push(SmiGpu {
            index,
            name: text(&name),
            uuid: text(get(0)),
            pci_bus_id,
            driver_version: text(get(2)),
            total: mib(get(3), n, "memory.total")?,
            used: mib(get(4), n, "memory.used")?,
            free: mib(get(5), n, "memory.free")?,
            reserved: if with_reserved {
                Some(mib(get(6), n, "memory.reserved")?)
            } else {
                None
            },
        });
    }
    Ok(gpus)
}

/// Whether an NVIDIA product name is a part without a framebuffer of its own, whose GPU
/// allocates the host's RAM: GB10 (DGX Spark), Jetson / Orin / Thor. Matched as whole words,
/// case-insensitively (`NVIDIA GB10`, `Orin (nvgpu)`; never `GB100` or `GB200`).
pub(crate) fn is_integrated_name(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric()).any(|w| {
        ["gb10", "jetson", "orin", "thor"]
            .iter()
            .any(|k| w.eq_ignore_ascii_case(k))
    })
}

/// Parses `--query-compute-apps` output queried with `APP_FIELDS`.
pub(crate) fn parse_apps(output: &str) -> Result<Vec<SmiApp>, ParseError> {
    let mut apps = Vec::new();
    for (i, line) in output
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let n = i + 1;
        let (head, name, tail) = split_ends(line.trim_end(), 1, 2)
            .ok_or_else(|| ParseError::on_line(n, format!("expected 4 fields: {line:?}")))?;
        let pid_text = head.first().copied().unwrap_or_default().trim();
        let pid: u32 = pid_text
            .parse()
            .map_err(|_| ParseError::on_line(n, format!("pid is not a number: {pid_text:?}")))?;
        apps.push(SmiApp {
            pid,
            name: text(&name),
            used: mib(tail.first().copied().unwrap_or_default(), n, "used_memory")?,
            gpu_uuid: text(tail.get(1).copied().unwrap_or_default()),
        });
    }
    Ok(apps)
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: u64 = 81_559 << 20;

    #[test]
    fn gpu_rows_with_reserved() {
        let out = "0, NVIDIA H100 80GB HBM3, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55, 00000000:1A:00.0, 550.54.15, 81559, 72908, 8111, 540\n\
                   1, NVIDIA H100 80GB HBM3, GPU-9c72d0b4-1e3a-47c5-b2f8-0d6e5a4c3b21, 00000000:9A:00.0, 550.54.15, 81559, 0, 81019, 540\n";
        let g = parse_gpus(out, true).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].name.as_deref(), Ok("NVIDIA H100 80GB HBM3"));
        assert_eq!(g[0].total, Ok(H100));
        assert_eq!(g[0].used, Ok(72_908 << 20));
        assert_eq!(g[0].reserved, Some(Ok(540 << 20)));
        assert_eq!(
            g[1].pci_bus_id.as_ref().unwrap().to_string(),
            "0000:9a:00.0"
        );
    }

    #[test]
    fn unified_memory_placeholders_are_unknown_not_zero() {
        let out = "0, NVIDIA GB10, GPU-11111111-2222-3333-4444-555555555555, 0000000F:01:00.0, 580.95.05, [N/A], [N/A], [N/A]\n";
        let g = parse_gpus(out, false).unwrap();
        assert_eq!(
            g[0].total.as_ref().unwrap_err().0,
            UnknownReason::DriverSentinel
        );
        assert_eq!(g[0].reserved, None);
        let out = "0, Tesla K80, GPU-1, 0000:04:00.0, 470.1, [Not Supported], 1, 2\n";
        let g = parse_gpus(out, false).unwrap();
        assert_eq!(
            g[0].total.as_ref().unwrap_err().0,
            UnknownReason::Unsupported
        );
    }

    #[test]
    fn integrated_part_names() {
        for n in [
            "NVIDIA GB10",
            "Orin (nvgpu)",
            "NVIDIA Jetson AGX Thor",
            "nvidia thor",
        ] {
            assert!(is_integrated_name(n), "{n}");
        }
        for n in [
            "NVIDIA GB200",
            "NVIDIA GB100",
            "NVIDIA GH200 480GB",
            "NVIDIA H100 80GB HBM3",
            "",
        ] {
            assert!(!is_integrated_name(n), "{n}");
        }
    }

    #[test]
    fn app_names_with_commas_and_placeholders() {
        let out = "2811349, /usr/bin/python3, 72880, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e1a55\n\
                   77, /opt/my, weird, app, 18230, GPU-9c72d0b4-1e3a-47c5-b2f8-0d6e5a4c3b21\n\
                   1460, [Insufficient Permissions], [N/A], GPU-9c72d0b4-1e3a-47c5-b2f8-0d6e5a4c3b21\n";
        let a = parse_apps(out).unwrap();
        assert_eq!(a.len(), 3);
        assert_eq!(a[0].used, Ok(72_880 << 20));
        assert_eq!(a[1].name.as_deref(), Ok("/opt/my, weird, app"));
        assert_eq!(a[1].used, Ok(18_230 << 20));
        assert_eq!(
            a[2].name.as_ref().unwrap_err().0,
            UnknownReason::PermissionDenied
        );
        assert_eq!(
            a[2].used.as_ref().unwrap_err().0,
            UnknownReason::DriverSentinel
        );
    }

    #[test]
    fn units_suffix_and_blank_lines_are_tolerated() {
        let a = parse_apps("\n12, x, 512 MiB, GPU-1\n\n").unwrap();
        assert_eq!(a[0].used, Ok(512 << 20));
        assert!(parse_apps("").unwrap().is_empty());
    }

    #[test]
    fn malformed_lines_are_errors_with_line_numbers() {
        let e = parse_apps("12, x, 5, GPU-1\nNo running processes found\n").unwrap_err();
        assert_eq!(e.line, Some(2));
        assert!(parse_apps("pid, x, 5, GPU-1").is_err());
        assert!(parse_apps("12, x, five, GPU-1").is_err());
        assert!(parse_gpus("0, a, b\n", true).is_err());
        assert!(parse_gpus("x, n, GPU-1, 0000:01:00.0, 1, 2, 3, 4\n", false).is_err());
        assert!(parse_gpus("0, n, GPU-1, garbage, 1, 2, 3, 4\n", false).is_err());
        // An index no machine has (QA: 4294967295 made the device numbering overflow).
        let e = parse_gpus("4294967295, n, GPU-1, 0000:01:00.0, 1, 2, 3, 4\n", false);
        assert!(e.unwrap_err().message.contains("beyond any GPU count"));
        assert!(parse_gpus("65536, n, GPU-1, 0000:01:00.0, 1, 2, 3, 4\n", false).is_ok());
    }
}
