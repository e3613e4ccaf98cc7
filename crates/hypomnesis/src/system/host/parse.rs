//! Pure parsers for the procfs memory files: `statm`, `status`, `meminfo`, `smaps_rollup`.
//!
//! Each takes the file's text and returns plain numbers in bytes; nothing here does I/O. Sizes in
//! `status`, `meminfo` and `smaps_rollup` are printed as `N kB`, which means KiB (the kernel
//! documentation itself once printed `kb`, so the unit is matched case-insensitively). `statm`
//! counts pages; the caller passes the page size.
//!
//! See <https://docs.kernel.org/filesystems/proc.html>.

use crate::types::error::ParseError;

/// The first three fields of `/proc/<pid>/statm`, in pages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Statm {
    /// Total program size (VmSize), pages.
    pub size_pages: u64,
    /// Resident set size (VmRSS), pages.
    pub resident_pages: u64,
    /// Resident file-backed and shared memory (RssFile + RssShmem), pages.
    pub shared_pages: u64,
}

/// Parses `/proc/<pid>/statm` (seven space-separated page counts; the first three are used).
pub fn parse_statm(text: &str) -> Result<Statm, ParseError> {
    let mut it = text.split_ascii_whitespace();
    let mut next = |what: &str| -> Result<u64, ParseError> {
        let field = it
            .next()
            .ok_or_else(|| ParseError::new(format!("missing the {what} field")))?;
        field
            .parse()
            .map_err(|_| ParseError::new(format!("{what} is not a number: {field:?}")))
    };
    Ok(Statm {
        size_pages: next("size")?,
        resident_pages: next("resident")?,
        shared_pages: next("shared")?,
    })
}

/// The resident page count (second field) of a `statm` buffer, without allocating: the hot path
/// of [`crate::process_rss`].
pub fn statm_resident_pages(bytes: &[u8]) -> Result<u64, ParseError> {
    let mut fields = bytes
        .split(|b| b.is_ascii_whitespace())
        .filter(|f| !f.is_empty());
    let _size = fields.next();
    let resident = fields
        .next()
        .ok_or_else(|| ParseError::new("missing the resident field"))?;
    parse_u64_ascii(resident).ok_or_else(|| {
        ParseError::new(format!(
            "resident is not a number: {:?}",
            String::from_utf8_lossy(resident)
        ))
    })
}

fn parse_u64_ascii(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        if b.is_ascii_digit() {
            acc.checked_mul(10)?.checked_add(u64::from(b - b'0'))
        } else {
            None
        }
    })
}

/// Parses a `N kB` size (as printed by `status`, `meminfo`, `smaps_rollup`) into bytes. A bare
/// number (no unit) is taken as bytes; `kB`/`KB`/`kb` mean KiB.
fn parse_kb(value: &str) -> Option<u64> {
    let mut it = value.split_ascii_whitespace();
    let n: u64 = it.next()?.parse().ok()?;
    let bytes = match it.next() {
        None => n,
        Some(u) if u.eq_ignore_ascii_case("kb") => n.checked_mul(1024)?,
        Some(u) if u.eq_ignore_ascii_case("mb") => n.checked_mul(1024 * 1024)?,
        Some(_) => return None,
    };
    if it.next().is_some() {
        return None;
    }
    Some(bytes)
}

/// Iterates `Key: value` lines, yielding (1-based line number, key, trimmed value).
fn key_values(text: &str) -> impl Iterator<Item = (usize, &str, &str)> {
    text.lines().enumerate().filter_map(|(i, line)| {
        let (k, v) = line.split_once(':')?;
        Some((i + 1, k.trim(), v.trim()))
    })
}

/// The fields of `/proc/<pid>/status` this crate uses. Sizes in bytes; absent lines are `None`
/// (kernel threads have no `Vm*` lines).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Status {
    /// `Name:` (the kernel's escaped `comm`).
    pub name: Option<String>,
    /// `Tgid:` (the process id; differs from `Pid:` for a thread).
    pub tgid: Option<u32>,
    /// `PPid:`.
    pub ppid: Option<u32>,
    /// Real UID (first `Uid:` field).
    pub uid_real: Option<u32>,
    /// Effective UID (second `Uid:` field).
    pub uid_effective: Option<u32>,
    /// `NSpid:`: this process's pid in each nested PID namespace, outermost first.
    pub nspid: Vec<u32>,
    /// `VmHWM:` peak resident set size.
    pub vm_hwm_bytes: Option<u64>,
    /// `VmRSS:` resident set size.
    pub vm_rss_bytes: Option<u64>,
    /// `RssAnon:`.
    pub rss_anon_bytes: Option<u64>,
    /// `RssFile:`.
    pub rss_file_bytes: Option<u64>,
    /// `RssShmem:`.
    pub rss_shmem_bytes: Option<u64>,
    /// `VmSwap:` swapped-out anonymous memory.
    pub vm_swap_bytes: Option<u64>,
}

/// Parses `/proc/<pid>/status`. Unknown lines are ignored; a known size line with a malformed
/// value is an error (it means the format changed, and a silent `None` would hide it).
pub fn parse_status(text: &str) -> Result<Status, ParseError> {
    let mut st = Status::default();
    for (line, key, value) in key_values(text) {
        let size = || {
            parse_kb(value).ok_or_else(|| {
                ParseError::on_line(line, format!("{key}: malformed size {value:?}"))
            })
        };
        let int = || {
            value.parse::<u32>().map_err(|_| {
                ParseError::on_line(line, format!("{key}: malformed number {value:?}"))
            })
        };
        match key {
            "Name" => st.name = Some(value.to_string()),
            "Tgid" => st.tgid = Some(int()?),
            "PPid" => st.ppid = Some(int()?),
            "Uid" => {
                let mut ids = value.split_ascii_whitespace().map(str::parse::<u32>);
                let bad = || ParseError::on_line(line, format!("Uid: malformed {value:?}"));
                st.uid_real = Some(ids.next().ok_or_else(bad)?.map_err(|_| bad())?);
                st.uid_effective = Some(ids.next().ok_or_else(bad)?.map_err(|_| bad())?);
            }
            "NSpid" => {
                st.nspid = value
                    .split_ascii_whitespace()
                    .map(str::parse::<u32>)
                    .collect::<Result<_, _>>()
                    .map_err(|_| {
                        ParseError::on_line(line, format!("NSpid: malformed {value:?}"))
                    })?;
            }
            "VmHWM" => st.vm_hwm_bytes = Some(size()?),
            "VmRSS" => st.vm_rss_bytes = Some(size()?),
            "RssAnon" => st.rss_anon_bytes = Some(size()?),
            "RssFile" => st.rss_file_bytes = Some(size()?),
            "RssShmem" => st.rss_shmem_bytes = Some(size()?),
            "VmSwap" => st.vm_swap_bytes = Some(size()?),
            _ => {}
        }
    }
    Ok(st)
}

/// The fields of `/proc/meminfo` this crate uses, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Meminfo {
    /// `MemTotal:`.
    pub total_bytes: u64,
    /// `MemFree:`.
    pub free_bytes: u64,
    /// `MemAvailable:` (Linux 3.14+; `None` before).
    pub available_bytes: Option<u64>,
    /// `SwapTotal:`.
    pub swap_total_bytes: Option<u64>,
    /// `SwapFree:`.
    pub swap_free_bytes: Option<u64>,
}

/// Parses `/proc/meminfo`. `MemTotal` and `MemFree` are required.
pub fn parse_meminfo(text: &str) -> Result<Meminfo, ParseError> {
    let mut total = None;
    let mut free = None;
    let mut m = Meminfo::default();
    for (line, key, value) in key_values(text) {
        let slot = match key {
            "MemTotal" => &mut total,
            "MemFree" => &mut free,
            "MemAvailable" => &mut m.available_bytes,
            "SwapTotal" => &mut m.swap_total_bytes,
            "SwapFree" => &mut m.swap_free_bytes,
            _ => continue,
        };
        *slot = Some(parse_kb(value).ok_or_else(|| {
            ParseError::on_line(line, format!("{key}: malformed size {value:?}"))
        })?);
        // The five are in the first third of the file (`hmn top` reads it every second).
        if total.is_some()
            && free.is_some()
            && m.available_bytes.is_some()
            && m.swap_total_bytes.is_some()
            && m.swap_free_bytes.is_some()
        {
            break;
        }
    }
    m.total_bytes = total.ok_or_else(|| ParseError::new("no MemTotal line"))?;
    m.free_bytes = free.ok_or_else(|| ParseError::new("no MemFree line"))?;
    Ok(m)
}

/// The fields of `/proc/<pid>/smaps_rollup` this crate uses, in bytes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct SmapsRollup {
    /// `Rss:` (from the page-table walk; can differ from `VmRSS`).
    pub rss_bytes: Option<u64>,
    /// `Pss:` proportional set size.
    pub pss_bytes: Option<u64>,
    /// `Swap:`.
    pub swap_bytes: Option<u64>,
    /// `SwapPss:`.
    pub swap_pss_bytes: Option<u64>,
}

/// Parses `/proc/<pid>/smaps_rollup`. The first line is the `[rollup]` header; field names are
/// matched exactly (`Pss:` is not `Pss_Anon:`). An empty file (kernel thread, or a process that
/// is exiting) yields all `None`.
pub fn parse_smaps_rollup(text: &str) -> Result<SmapsRollup, ParseError> {
    let mut r = SmapsRollup::default();
    for (line, key, value) in key_values(text) {
        let slot = match key {
            "Rss" => &mut r.rss_bytes,
            "Pss" => &mut r.pss_bytes,
            "Swap" => &mut r.swap_bytes,
            "SwapPss" => &mut r.swap_pss_bytes,
            _ => continue,
        };
        *slot = Some(parse_kb(value).ok_or_else(|| {
            ParseError::on_line(line, format!("{key}: malformed size {value:?}"))
        })?);
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    // Real `/proc/self/status` captured with `cat` on Linux 6.18 (x86-64).
    const STATUS: &str = include_str!("../../../tests/fixtures/proc/status-6.18.txt");
    // Real `/proc/meminfo` captured on the same machine.
    const MEMINFO: &str = include_str!("../../../tests/fixtures/proc/meminfo-6.18.txt");

    #[test]
    fn statm_fields_in_pages() {
        let s = parse_statm("1180325 111723 9641 1 0 139457 0\n").unwrap();
        assert_eq!(s.resident_pages, 111_723);
        assert_eq!(s.size_pages, 1_180_325);
        assert_eq!(s.shared_pages, 9641);
        assert_eq!(
            statm_resident_pages(b"1180325 111723 9641 1 0 139457 0\n").unwrap(),
            111_723
        );
    }

    #[test]
    fn statm_rejects_garbage() {
        assert!(parse_statm("").is_err());
        assert!(parse_statm("12 x 3").is_err());
        assert!(statm_resident_pages(b"12").is_err());
        assert!(statm_resident_pages(b"12 3a4 5").is_err());
        assert!(
            statm_resident_pages(b"1 99999999999999999999999 2").is_err(),
            "overflow"
        );
    }

    #[test]
    fn status_of_a_real_process() {
        let st = parse_status(STATUS).unwrap();
        assert_eq!(st.name.as_deref(), Some("cat"));
        assert_eq!(st.uid_real, Some(0));
        assert_eq!(st.uid_effective, Some(0));
        assert_eq!(st.vm_rss_bytes, Some(1_748 * 1024));
        assert_eq!(st.vm_hwm_bytes, Some(1_748 * 1024));
        assert_eq!(st.vm_swap_bytes, Some(0));
        assert_eq!(
            st.vm_rss_bytes,
            Some(
                st.rss_anon_bytes.unwrap()
                    + st.rss_file_bytes.unwrap()
                    + st.rss_shmem_bytes.unwrap()
            ),
            "VmRSS = RssAnon + RssFile + RssShmem"
        );
        assert_eq!(st.nspid.len(), 1);
    }

    #[test]
    fn status_doc_sample_with_lowercase_kb() {
        // The kernel documentation prints `20 kb` for VmPTE; accept units case-insensitively.
        let text = "Name:\tx\nUid:\t1000\t1001\t1000\t1000\nVmHWM:\t     476 kB\nVmRSS:\t     476 kb\nVmSwap:\t0 kB\n";
        let st = parse_status(text).unwrap();
        assert_eq!(st.uid_effective, Some(1001));
        assert_eq!(st.vm_rss_bytes, Some(476 * 1024));
    }

    #[test]
    fn kernel_thread_has_no_vm_lines() {
        let st = parse_status("Name:\tkthreadd\nUid:\t0\t0\t0\t0\nPPid:\t0\n").unwrap();
        assert_eq!(st.vm_rss_bytes, None);
        assert_eq!(st.vm_hwm_bytes, None);
    }

    #[test]
    fn status_rejects_malformed_sizes() {
        let err = parse_status("Name:\tx\nVmRSS:\tlots kB\n").unwrap_err();
        assert_eq!(err.line, Some(2));
        assert!(parse_status("VmRSS:\t12 parsecs\n").is_err());
        assert!(parse_status("Uid:\t1000\n").is_err());
    }

    #[test]
    fn meminfo_of_a_real_machine() {
        let m = parse_meminfo(MEMINFO).unwrap();
        assert!(m.total_bytes > 0 && m.total_bytes.is_multiple_of(1024));
        assert!(m.available_bytes.unwrap() <= m.total_bytes);
        assert!(m.free_bytes <= m.total_bytes);
        assert!(m.swap_total_bytes.is_some());
    }

    #[test]
    fn meminfo_needs_total_and_free() {
        assert!(parse_meminfo("MemFree: 1 kB\n").is_err());
        assert!(parse_meminfo("MemTotal: 1 kB\n").is_err());
        let old = parse_meminfo("MemTotal: 8 kB\nMemFree: 4 kB\n").unwrap();
        assert_eq!(
            old.available_bytes, None,
            "pre-3.14 kernels have no MemAvailable"
        );
        assert!(parse_meminfo("MemTotal: x kB\nMemFree: 4 kB\n").is_err());
    }

    #[test]
    fn smaps_rollup_matches_pss_exactly() {
        let text = "00200000-ffffde214000 ---p 00000000 00:00 0                              [rollup]\n\
Rss:              448896 kB\nPss:              423629 kB\nPss_Dirty:        372448 kB\n\
Pss_Anon:         408032 kB\nSwap:              53968 kB\nSwapPss:           53968 kB\n";
        let r = parse_smaps_rollup(text).unwrap();
        assert_eq!(r.pss_bytes, Some(423_629 * 1024));
        assert_eq!(r.rss_bytes, Some(448_896 * 1024));
        assert_eq!(r.swap_bytes, Some(53_968 * 1024));
        assert_eq!(parse_smaps_rollup("").unwrap(), SmapsRollup::default());
    }
}
