//! The value parsers of the command line — sizes, durations, name patterns, device
//! selectors — each refusal a typed [`ArgError`] whose text names the input.

use std::path::PathBuf;

/// Why a command-line value was refused. The text is what the usage error shows.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ArgError {
    /// Not a size.
    #[error(
        "invalid size {0:?}: expected a number with an optional unit (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)"
    )]
    Size(String),
    /// A size beyond `u64` bytes.
    #[error("invalid size {0:?}: too large")]
    SizeTooLarge(String),
    /// Not a duration in (0, 24 h].
    #[error("invalid duration {0:?}: expected a positive number with ms, s, m or h")]
    Duration(String),
    /// A positive duration under 1 ms: it would round to 0 ms in every report and make a
    /// sampling loop spin.
    #[error("invalid duration {0:?}: shorter than 1 ms, the shortest interval hmn samples at")]
    DurationTooShort(String),
    /// A `--user` name the system does not know.
    #[cfg_attr(not(unix), allow(dead_code))]
    #[error("no such user {0:?}")]
    NoSuchUser(String),
    /// A `--user` name that could not be looked up (the user database failed).
    #[cfg_attr(not(unix), allow(dead_code))]
    #[error("cannot look up user {0:?}: {1}")]
    UserLookup(String, String),
    /// A root flag naming a directory that cannot be listed, or that holds neither process
    /// directories nor `meminfo` (an empty directory, a wrong path).
    #[error("{flag} {}: {why}", path.display())]
    NotAProcRoot {
        /// The flag.
        flag: &'static str,
        /// What it named.
        path: PathBuf,
        /// Why it is refused.
        why: String,
    },
    /// An environment variable hmn reads whose value is not what it takes.
    #[error("{name}={value:?}: {expected}")]
    Env {
        /// The variable.
        name: &'static str,
        /// Its value (lossy).
        value: String,
        /// What it takes.
        expected: &'static str,
    },
    /// A blank `--filter` pattern.
    #[error("invalid filter {0:?}: expected a non-blank name pattern")]
    BlankPattern(String),
    /// Neither a device selector nor `all` or `cpu`.
    #[error(
        "invalid device {0:?}: expected an index, a GPU-… or MIG-… UUID (or a unique prefix of one), a PCI bus id, `all` or `cpu`"
    )]
    DeviceSelector(String),
    /// Not a device selector (its message names the input).
    #[error("{0}")]
    Select(hypomnesis::select::SelectError),
    /// A KV cache type or runtime the library does not know (its message).
    #[error("{}", .0.message)]
    Estimate(hypomnesis::error::ParseError),
    /// Not a growth rate.
    #[error(
        "invalid rate {0:?}: expected a size per unit of time, such as 500MiB/h, 10MB/min or 1KiB/s"
    )]
    Rate(String),
    /// Neither `auto` nor a device selector.
    #[error(
        "invalid --gpu {0:?}: expected auto, or a device (an index, a GPU-…/MIG-… UUID, a PCI bus id)"
    )]
    Gpu(String),
    /// A root flag (`--proc-root`, `--sys-root`) naming something that is not a directory.
    #[error("{flag} {}: not a directory", path.display())]
    NotADirectory {
        /// The flag.
        flag: &'static str,
        /// What it named.
        path: PathBuf,
    },
}

pub(super) fn parse_pattern(s: &str) -> Result<String, ArgError> {
    if s.trim().is_empty() {
        Err(ArgError::BlankPattern(s.to_string()))
    } else {
        Ok(s.to_string())
    }
}

/// Parses a size: a byte count, or a number with a unit. Binary units `K`, `KiB`, `M`, `MiB`,
/// `G`, `GiB`, `T`, `TiB` (powers of 1024) and decimal `kB`, `MB`, `GB`, `TB` (powers of 1000);
/// `B` is bytes. Case-insensitive, optional space, decimals allowed (`1.5GiB`).
pub fn parse_size(text: &str) -> Result<u64, ArgError> {
    let (num, unit) = split_number(text);
    let bad = || ArgError::Size(text.to_string());
    if num.is_empty() || num.matches('.').count() > 1 {
        return Err(bad());
    }
    let factor: u64 = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kib" => 1 << 10,
        "m" | "mib" => 1 << 20,
        "g" | "gib" => 1 << 30,
        "t" | "tib" => 1 << 40,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        "tb" => 1_000_000_000_000,
        _ => return Err(bad()),
    };
    let too_large = || ArgError::SizeTooLarge(text.to_string());
    if let Ok(whole) = num.parse::<u64>() {
        return whole.checked_mul(factor).ok_or_else(too_large);
    }
    let value: f64 = num.parse().map_err(|_| bad())?;
    let bytes = (value * factor as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(too_large());
    }
    Ok(bytes as u64)
}

/// A timeout in whole milliseconds from the environment variable `name`: `None` when it is
/// unset or empty; refused (not ignored) when it is not a number from 1 to 86,400,000 (24 h).
pub fn env_millis(name: &'static str) -> Result<Option<std::time::Duration>, ArgError> {
    let Some(v) = std::env::var_os(name).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    let text = v.to_string_lossy();
    match text.trim().parse::<u64>() {
        Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(Some(std::time::Duration::from_millis(ms))),
        _ => Err(ArgError::Env {
            name,
            value: text.into_owned(),
            expected: "expected whole milliseconds from 1 to 86400000",
        }),
    }
}

/// Parses a duration: a number with `ms`, `s`, `m` or `h` (a bare number is seconds), at least
/// 1 ms (a shorter one would round to zero: a busy loop) and at most a day.
pub fn parse_duration(text: &str) -> Result<std::time::Duration, ArgError> {
    let (num, unit) = split_number(text);
    let bad = || ArgError::Duration(text.to_string());
    let value: f64 = num.parse().map_err(|_| bad())?;
    let seconds = match unit {
        "ms" => value / 1000.0,
        "" | "s" => value,
        "m" => value * 60.0,
        "h" => value * 3600.0,
        _ => return Err(bad()),
    };
    if !(seconds > 0.0 && seconds <= 86_400.0) {
        return Err(bad());
    }
    let d = std::time::Duration::from_secs_f64(seconds);
    if d < std::time::Duration::from_millis(1) {
        return Err(ArgError::DurationTooShort(text.to_string()));
    }
    Ok(d)
}

/// Splits trimmed `text` into its leading digits and dots and the trimmed rest (the unit).
fn split_number(text: &str) -> (&str, &str) {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    (num, unit.trim())
}

/// A device selector: an index, a `GPU-`/`MIG-` UUID or unique prefix, `MIG-GPU-<uuid>/<gi>/<ci>`,
/// or a PCI bus id (`hypomnesis::select`).
pub(super) fn parse_selector(s: &str) -> Result<hypomnesis::select::DeviceSelector, ArgError> {
    s.parse().map_err(ArgError::Select)
}

pub(super) fn parse_duration_arg(s: &str) -> Result<std::time::Duration, ArgError> {
    parse_duration(s)
}

pub(super) fn parse_size_arg(s: &str) -> Result<u64, ArgError> {
    parse_size(s)
}

/// Parses a growth rate: a size ([`parse_size`]) per `s`, `min`/`m` or `h`, as bytes per
/// second (`500MiB/h`, `1GiB/h`, `10MB/min`).
pub fn parse_rate(text: &str) -> Result<f64, ArgError> {
    let bad = || ArgError::Rate(text.to_string());
    let (size, per) = text.trim().rsplit_once('/').ok_or_else(bad)?;
    let bytes = parse_size(size).map_err(|_| bad())?;
    let seconds = match per.trim() {
        "s" | "sec" => 1.0,
        "m" | "min" => 60.0,
        "h" | "hour" => 3600.0,
        _ => return Err(bad()),
    };
    if bytes == 0 {
        return Err(bad());
    }
    Ok(bytes as f64 / seconds)
}

pub(super) fn parse_rate_arg(s: &str) -> Result<f64, ArgError> {
    parse_rate(s)
}

/// `--gpu`: `auto`, or a device.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GpuArg {
    /// Pick one (`--need` says how much it needs).
    Auto,
    /// This device.
    Device(hypomnesis::select::DeviceSelector),
}

pub(super) fn parse_gpu(s: &str) -> Result<GpuArg, ArgError> {
    if s.trim() == "auto" {
        return Ok(GpuArg::Auto);
    }
    s.parse()
        .map(GpuArg::Device)
        .map_err(|_| ArgError::Gpu(s.to_string()))
}
