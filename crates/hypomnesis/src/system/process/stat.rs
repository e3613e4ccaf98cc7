//! What `/proc/<pid>/stat` says of a process, parsed (pure): [`Stat`], the identity that
//! survives pid reuse ([`ProcessId`]), the boot-time arithmetic of start times, and the
//! [`Target`] a table follows. Public as `hypomnesis::process::tree::…`.

use crate::types::ProcessName;
use crate::types::error::ParseError;

/// A process, identified across pid reuse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ProcessId {
    /// The process id.
    pub pid: u32,
    /// Start time, clock ticks after boot (`stat` field 22).
    pub start_time: u64,
}

impl ProcessId {
    /// Whether this process can be the parent of `child`, whose `ppid` is this pid: a parent
    /// starts no later than its child (same clock tick allowed). A process that took the pid
    /// after the child started cannot be its parent.
    pub fn may_parent(&self, child: &ProcessId) -> bool {
        self.start_time <= child.start_time
    }
}

/// The fields of `/proc/<pid>/stat` this crate uses.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stat {
    /// Field 1.
    pub pid: u32,
    /// Field 2, the `comm` between the parentheses (it may itself contain spaces and `)`),
    /// as bytes: a process may name itself anything.
    pub comm: ProcessName,
    /// Field 3 (`R`, `S`, `Z`, …).
    pub state: char,
    /// Field 4.
    pub ppid: u32,
    /// Field 9, the kernel's `PF_*` flags.
    pub flags: u64,
    /// Field 22, clock ticks after boot.
    pub start_time: u64,
    /// Field 24, resident set size in pages (the same counter as `statm`'s second field).
    pub rss_pages: u64,
}

/// `PF_KTHREAD`: the process is a kernel thread.
const PF_KTHREAD: u64 = 0x0020_0000;

/// `PF_EXITING`: the process has begun to exit (`do_exit` sets it before it releases the
/// address space).
const PF_EXITING: u64 = 0x0000_0004;

impl Stat {
    /// This process's identity.
    pub fn id(&self) -> ProcessId {
        ProcessId {
            pid: self.pid,
            start_time: self.start_time,
        }
    }

    /// Whether it is a kernel thread (`PF_KTHREAD`): it has no file descriptors of its own.
    pub fn is_kernel_thread(&self) -> bool {
        self.flags & PF_KTHREAD != 0
    }

    /// Whether it is exiting (`PF_EXITING`): its memory is being released, so its RSS is no
    /// longer a measurement of it (it reads 0 once the address space is gone).
    pub fn is_exiting(&self) -> bool {
        self.flags & PF_EXITING != 0
    }

    /// Whether it is a zombie (`Z`) or dead (`X`): exited, its files closed.
    pub fn has_exited(&self) -> bool {
        matches!(self.state, 'Z' | 'X')
    }
}

/// Parses `/proc/<pid>/stat` text. See [`parse_stat_bytes`].
pub fn parse_stat(text: &str) -> Result<Stat, ParseError> {
    parse_stat_bytes(text.as_bytes())
}

/// Parses `/proc/<pid>/stat` as the kernel writes it: bytes, since the command name is whatever
/// the process set (not necessarily UTF-8). The command name is everything between the first
/// `(` and the *last* `)`, since a process may name itself `a) b (c`; every other field is
/// ASCII.
pub fn parse_stat_bytes(bytes: &[u8]) -> Result<Stat, ParseError> {
    let bad = |what: &str| ParseError::new(format!("stat: {what}"));
    let open = bytes
        .iter()
        .position(|b| *b == b'(')
        .ok_or_else(|| bad("no '('"))?;
    let close = bytes
        .iter()
        .rposition(|b| *b == b')')
        .ok_or_else(|| bad("no ')'"))?;
    if close < open {
        return Err(bad("')' before '('"));
    }
    let pid = bytes
        .get(..open)
        .and_then(|p| std::str::from_utf8(p).ok())
        .map(str::trim)
        .and_then(|p| p.parse().ok())
        .ok_or_else(|| bad("malformed pid"))?;
    let comm = ProcessName::from(bytes.get(open + 1..close).unwrap_or_default());
    let rest = std::str::from_utf8(bytes.get(close + 1..).unwrap_or_default())
        .map_err(|_| bad("not ASCII after the name"))?;
    // Fields 3 (state) to 24 (rss), field N in `fields[N - 3]`; the rest of the line is not
    // split (read for every listed process every second).
    let mut fields = [""; 22];
    let mut got = 0;
    for (slot, word) in fields.iter_mut().zip(rest.split_ascii_whitespace()) {
        *slot = word;
        got += 1;
    }
    let field = |n: usize| {
        fields
            .get(n - 3)
            .filter(|_| n - 3 < got)
            .copied()
            .ok_or_else(|| bad(&format!("no field {n}")))
    };
    let state = field(3)?.chars().next().ok_or_else(|| bad("empty state"))?;
    let ppid = field(4)?.parse().map_err(|_| bad("malformed ppid"))?;
    let flags = field(9)?.parse().map_err(|_| bad("malformed flags"))?;
    let start_time = field(22)?
        .parse()
        .map_err(|_| bad("malformed start time"))?;
    let rss_pages = field(24)?.parse().map_err(|_| bad("malformed rss"))?;
    Ok(Stat {
        pid,
        comm,
        state,
        ppid,
        flags,
        start_time,
        rss_pages,
    })
}

/// The boot time, seconds since the Unix epoch: the `btime` line of `/proc/stat` (pure).
pub fn parse_btime(proc_stat: &str) -> Option<u64> {
    proc_stat
        .lines()
        .find_map(|l| l.strip_prefix("btime "))
        .and_then(|v| v.trim().parse().ok())
}

/// A start time in clock ticks after boot (`stat` field 22) as µs since the Unix epoch, given
/// the boot time in seconds and the clock-tick rate (pure; one-second resolution from `btime`).
pub fn start_unix_us(start_ticks: u64, btime_s: u64, clock_ticks: u64) -> u64 {
    let tick_us = 1_000_000 / clock_ticks.max(1);
    btime_s
        .saturating_mul(1_000_000)
        .saturating_add(start_ticks.saturating_mul(tick_us))
}

/// A set of processes to follow over time.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Target {
    /// A process and all its descendants, re-discovered at every refresh.
    Tree(ProcessId),
    /// These processes, each on its own (no descendants).
    Processes(Vec<ProcessId>),
    /// A process's descendants, re-discovered at every refresh, without the process itself: the
    /// tree under a supervisor that is not part of what is measured (`hmn run`'s guard, the
    /// subreaper parent that stays between hmn and the command).
    Descendants(ProcessId),
}
