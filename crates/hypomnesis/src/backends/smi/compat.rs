//! Upstream hypomnesis 0.2's two `nvidia-smi` queries, one device id at a time, for the
//! upstream-compatible API ([`crate::gpu`]): a device's memory (`--query-gpu=memory.used,
//! memory.total,driver_version --id=N`) and its compute processes (`--query-compute-apps=pid,
//! process_name,used_memory --id=N`).
//!
//! The truthful backend (the parent module) asks once for every device and every field; the
//! compatible layer asks what upstream asks, per id, so an `nvidia-smi` that answers upstream
//! answers it the same way (including one that knows only some ids). Parsing is pure and lives
//! here too.

use super::Smi;
use crate::backends::error::BackendError;
use crate::types::error::ParseError;

/// One device's memory as `nvidia-smi` reports it (MiB converted to bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmiMemory {
    /// `memory.used`: device-wide.
    pub used: u64,
    /// `memory.total`.
    pub total: u64,
    /// `driver_version`, unless a placeholder.
    pub driver_version: Option<String>,
}

/// One `--query-compute-apps` row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SmiComputeApp {
    /// The process id.
    pub pid: u32,
    /// `nvidia-smi`'s own name for it, unless empty.
    pub name: Option<String>,
    /// `used_memory` in bytes.
    pub used: u64,
}

const MIB: u64 = 1 << 20;

impl Smi {
    /// Device `id`'s memory and driver version.
    ///
    /// # Errors
    /// When `nvidia-smi` cannot run, fails (an id it does not know), or prints something else.
    pub(crate) fn memory_of(&self, id: u32) -> Result<SmiMemory, BackendError> {
        let out = self.run(&[
            "--query-gpu=memory.used,memory.total,driver_version".to_string(),
            "--format=csv,noheader,nounits".to_string(),
            format!("--id={id}"),
        ])?;
        parse_memory(&out).map_err(|e| self.output_error(e))
    }

    /// Device `id`'s compute processes; lines that are not `pid, name, MiB` are left out.
    ///
    /// # Errors
    /// When `nvidia-smi` cannot run or fails.
    pub(crate) fn compute_apps_of(&self, id: u32) -> Result<Vec<SmiComputeApp>, BackendError> {
        let out = self.run(&[
            "--query-compute-apps=pid,process_name,used_memory".to_string(),
            "--format=csv,noheader,nounits".to_string(),
            format!("--id={id}"),
        ])?;
        Ok(parse_compute_apps(&out))
    }
}

/// Parses the first line of `--query-gpu=memory.used,memory.total,driver_version` output.
///
/// # Errors
/// When the line is missing or a memory figure is not a MiB count (a placeholder such as
/// `[N/A]` included: the figure is unknown, and no number stands in for it).
pub(crate) fn parse_memory(output: &str) -> Result<SmiMemory, ParseError> {
    let line = output
        .lines()
        .next()
        .ok_or_else(|| ParseError::new("no output"))?;
    let mut parts = line.split(',').map(str::trim);
    let mut mib = |what: &str| -> Result<u64, ParseError> {
        let text = parts.next().unwrap_or_default();
        let text = text.strip_suffix("MiB").map_or(text, str::trim_end);
        text.parse::<u64>()
            .map(|v| v.saturating_mul(MIB))
            .map_err(|_| ParseError::on_line(1, format!("{what} is not a MiB count: {text:?}")))
    };
    let used = mib("memory.used")?;
    let total = mib("memory.total")?;
    let driver_version = parts
        .next()
        .filter(|d| !d.is_empty() && !d.starts_with('['))
        .map(str::to_string);
    Ok(SmiMemory {
        used,
        total,
        driver_version,
    })
}

/// Parses `--query-compute-apps=pid,process_name,used_memory` output. The memory is after the
/// last comma and the pid before the first, so a name containing commas survives; a line whose
/// pid or memory is not a number (`[N/A]`) is left out.
pub(crate) fn parse_compute_apps(output: &str) -> Vec<SmiComputeApp> {
    output
        .lines()
        .filter_map(|line| {
            let (rest, used) = line.rsplit_once(',')?;
            let used = used.trim();
            let used: u64 = used
                .strip_suffix("MiB")
                .map_or(used, str::trim_end)
                .parse()
                .ok()?;
            let (pid, name) = rest.split_once(',')?;
            let pid: u32 = pid.trim().parse().ok()?;
            let name = name.trim();
            Some(SmiComputeApp {
                pid,
                name: (!name.is_empty()).then(|| name.to_string()),
                used: used.saturating_mul(MIB),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_is_read_from_the_first_line() {
        let m = parse_memory("1024, 16384, 999.99\n2048, 8192, 999.99\n").unwrap();
        assert_eq!(
            m,
            SmiMemory {
                used: 1024 * MIB,
                total: 16384 * MIB,
                driver_version: Some("999.99".to_string())
            }
        );
        let m = parse_memory("0 MiB, 81559 MiB, [N/A]").unwrap();
        assert_eq!((m.used, m.total), (0, 81559 * MIB));
        assert_eq!(m.driver_version, None);
    }

    #[test]
    fn unknown_memory_is_an_error_not_a_zero() {
        assert!(parse_memory("").is_err());
        let e = parse_memory("[N/A], 16384, 550.54.15").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1: memory.used is not a MiB count: \"[N/A]\""
        );
        assert!(parse_memory("1024").is_err(), "no total");
    }

    #[test]
    fn compute_apps_keep_commas_in_names_and_drop_unreadable_rows() {
        let apps = parse_compute_apps(
            "4242, python3, 10240\n\
             77, /opt/app, with comma, 512\n\
             88, [N/A], [N/A]\n\
             nonsense\n\
             99, , 1\n",
        );
        assert_eq!(
            apps,
            vec![
                SmiComputeApp {
                    pid: 4242,
                    name: Some("python3".to_string()),
                    used: 10240 * MIB
                },
                SmiComputeApp {
                    pid: 77,
                    name: Some("/opt/app, with comma".to_string()),
                    used: 512 * MIB
                },
                SmiComputeApp {
                    pid: 99,
                    name: None,
                    used: MIB
                },
            ]
        );
        assert!(parse_compute_apps("").is_empty());
    }
}
