//! The subcommands' options, one struct each (clap derive), with their own value enums.

use std::path::PathBuf;

use clap::{Args, ValueEnum};

use hypomnesis::select::DeviceSelector;

use super::values::{
    ArgError, GpuArg, parse_duration_arg, parse_gpu, parse_pattern, parse_rate_arg, parse_selector,
    parse_size_arg,
};

/// `hmn run` options.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// Time between samples (e.g. 100ms, 1s).
    #[arg(long, value_name = "DURATION", default_value = "100ms", value_parser = parse_duration_arg)]
    pub interval: std::time::Duration,

    /// Write every sample to FILE as JSON Lines (flushed per sample to a temporary file that
    /// becomes FILE when the run ends; - or /dev/stdout streams to stdout). FILE must be absent
    /// or a regular file.
    #[arg(long, value_name = "FILE")]
    pub timeline: Option<PathBuf>,

    /// Write an SVG chart of RSS and VRAM over time to FILE (- for stdout). FILE must be absent
    /// or a regular file.
    #[arg(long, value_name = "FILE.svg")]
    pub plot: Option<PathBuf>,

    /// Do not create a cgroup: peak RAM from samples only.
    #[arg(long)]
    pub no_cgroup: bool,

    /// Run the command on a device picked for it — `auto` (the best fit with --need free, as
    /// `hmn pick`) or a DEVICE — with CUDA_VISIBLE_DEVICES, ROCR_VISIBLE_DEVICES or
    /// ZE_AFFINITY_MASK set to it, and its memory reserved against concurrent picks until the
    /// command holds it (or --lease passes, or it ends).
    #[arg(long, value_name = "auto|DEVICE", value_parser = parse_gpu)]
    pub gpu: Option<GpuArg>,

    /// With --gpu: what the command needs, a SIZE (24GiB) or a MODEL file or directory, or
    /// hf:ORG/REPO (the `hmn fits` verdict decides).
    #[arg(long, value_name = "SIZE|MODEL", requires = "gpu")]
    pub need: Option<std::ffi::OsString>,

    /// With --gpu: wait up to DURATION for a device with room (default: do not wait).
    #[arg(long, value_name = "DURATION", requires = "gpu", value_parser = parse_duration_arg)]
    pub wait: Option<std::time::Duration>,

    /// With --gpu: the longest the reservation holds before the command has allocated.
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = parse_duration_arg)]
    pub lease: std::time::Duration,

    /// The command and its arguments.
    #[arg(required = true, value_name = "CMD", num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `hmn spill` options.
#[derive(Debug, Args)]
pub struct SpillArgs {
    /// Time between readings: a number of milliseconds (upstream's spelling, e.g. 100), or a
    /// duration with a unit (100ms, 1s).
    #[arg(long, value_name = "DURATION", default_value = "100", value_parser = parse_interval_ms)]
    pub interval: std::time::Duration,

    /// The device whose spill is tracked: hmn's index (NVIDIA first, then DRM devices), a
    /// GPU-… or MIG-… UUID, or a PCI bus id (a MIG device tracks its GPU).
    #[arg(long, value_name = "DEVICE", default_value = "0", value_parser = parse_selector)]
    pub device: DeviceSelector,

    /// The command and its arguments (after `--`).
    #[arg(required = true, value_name = "CMD", num_args = 1.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// A `--user` value: a numeric UID as it is, or a user name this system knows (through the C
/// library, so LDAP/SSSD users too) — a name that matches nobody is refused rather than
/// matching no process.
pub(super) fn parse_user(s: &str) -> Result<String, ArgError> {
    if s.parse::<u32>().is_ok() {
        return Ok(s.to_string());
    }
    // Platform seam: no C user database off Unix; the name is compared with each owner's.
    #[cfg(not(unix))]
    return Ok(s.to_string());
    #[cfg(unix)]
    match nix::unistd::User::from_name(s) {
        Ok(Some(_)) => Ok(s.to_string()),
        Ok(None) => Err(ArgError::NoSuchUser(s.to_string())),
        Err(e) => Err(ArgError::UserLookup(s.to_string(), e.desc().to_string())),
    }
}

/// `hmn spill --interval`: bare digits are milliseconds (upstream's `--interval MS`); anything
/// else is a duration (`100ms`, `1s`).
pub(super) fn parse_interval_ms(s: &str) -> Result<std::time::Duration, ArgError> {
    let t = s.trim();
    if !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit()) {
        return match t.parse::<u64>() {
            Ok(ms) if (1..=86_400_000).contains(&ms) => Ok(std::time::Duration::from_millis(ms)),
            _ => Err(ArgError::Duration(s.to_string())),
        };
    }
    super::values::parse_duration(s)
}

/// `hmn watch` options.
#[derive(Debug, Args)]
pub struct WatchArgs {
    /// Processes to follow. Without any, the --top N by GPU memory.
    #[arg(value_name = "PID")]
    pub pids: Vec<u32>,

    /// How many processes to follow when no PID is given (largest GPU memory first).
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub top: u32,

    /// Time between samples.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_arg)]
    pub interval: std::time::Duration,

    /// Stop after DURATION (default: until Ctrl+C or every process has exited).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub duration: Option<std::time::Duration>,

    /// Re-select the --top N every interval instead of once (auto-selection only): a process
    /// that starts using the GPU joins, one that stops or falls out of the top leaves, each
    /// change one line on stderr. With nothing to select at first, waits for work.
    #[arg(long)]
    pub follow_new: bool,

    /// Auto-select only processes whose name contains PATTERN, case-insensitively
    /// (repeatable: any matches; auto-selection only). A blank pattern is rejected.
    #[arg(long, value_name = "PATTERN", value_parser = parse_pattern)]
    pub filter: Vec<String>,

    /// Auto-select only processes holding at least SIZE on a device (VRAM, plus GTT-resident
    /// bytes for AMD/Intel rows; auto-selection only). Rows whose use is unknown are left out.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub min: Option<u64>,

    /// Auto-select on this device only (an index, a GPU-… or MIG-… UUID, or a PCI bus id; a
    /// MIG device narrows to its processes), and track its spill. Without it, processes are
    /// selected on every device and device 0's spill is tracked.
    #[arg(long, value_name = "DEVICE", value_parser = parse_selector)]
    pub device: Option<DeviceSelector>,

    /// Exit (status 3) as soon as a followed process's RAM or VRAM grows steadily at RATE or
    /// faster (e.g. 500MiB/h): for scripts.
    #[arg(long, value_name = "RATE", value_parser = parse_rate_arg)]
    pub exit_on_growth: Option<f64>,

    /// The window a steady growth is judged over (at least a third of it, up to 10 min, must
    /// pass before a verdict).
    #[arg(long, value_name = "DURATION", default_value = "30m", value_parser = parse_duration_arg)]
    pub growth_window: std::time::Duration,

    /// The least rise over the window that counts as growth.
    #[arg(long, value_name = "SIZE", default_value = "256MiB", value_parser = parse_size_arg)]
    pub growth_min: u64,
}

/// `hmn pick --vendor` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum VendorArg {
    /// NVIDIA.
    Nvidia,
    /// AMD.
    Amd,
    /// Intel.
    Intel,
}

/// `hmn pick` options.
#[derive(Debug, Args)]
pub struct PickArgs {
    /// What the command needs on each device: a SIZE (24GiB) or a MODEL (a .safetensors or
    /// .gguf file, a directory, hf:ORG/REPO or a URL: the `hmn fits` verdict decides, with the
    /// default runtime).
    #[arg(long, value_name = "SIZE|MODEL")]
    pub need: std::ffi::OsString,

    /// How many devices.
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub count: u32,

    /// Wait up to DURATION for devices with room, retrying every 2 s (default: do not wait).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub wait: Option<std::time::Duration>,

    /// Only this vendor's devices.
    #[arg(long, value_enum)]
    pub vendor: Option<VendorArg>,

    /// How long the picked memory stays reserved against other picks, for the command to
    /// allocate it.
    #[arg(long, value_name = "DURATION", default_value = "60s", value_parser = parse_duration_arg)]
    pub lease: std::time::Duration,
}

/// `hmn top` options.
#[cfg(feature = "top")]
#[derive(Debug, Args)]
pub struct TopArgs {
    /// Time between samples (+ and - change it while running).
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_arg)]
    pub interval: std::time::Duration,

    /// Play a recording of `hmn record` instead of measuring.
    #[arg(long, value_name = "FILE")]
    pub replay: Option<PathBuf>,

    /// Rows kept per sample (largest VRAM first).
    #[arg(long, value_name = "N", default_value_t = 1000, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_processes: u32,

    /// How often to look for new AMD/Intel GPU clients (a walk over every process's fds).
    /// Default: calibrated at start to stay within 0.5 % of a core (5 s to 5 min).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub rescan: Option<std::time::Duration>,

    /// Draw without colours (as NO_COLOR does).
    #[arg(long)]
    pub mono: bool,

    /// Use the mouse: the wheel scrolls, a click selects.
    #[arg(long)]
    pub mouse: bool,
}

/// `hmn record` options.
#[derive(Debug, Args)]
pub struct RecordArgs {
    /// Time between samples.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = parse_duration_arg)]
    pub interval: std::time::Duration,

    /// Stop after DURATION (default: until Ctrl+C, SIGTERM or SIGHUP).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub duration: Option<std::time::Duration>,

    /// Rows kept per sample (largest VRAM first): bounds the size of each line.
    #[arg(long, value_name = "N", default_value_t = 64, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub max_processes: u32,

    /// How often to look for new AMD/Intel GPU clients (default: calibrated, as `hmn top`).
    #[arg(long, value_name = "DURATION", value_parser = parse_duration_arg)]
    pub rescan: Option<std::time::Duration>,

    /// Replace FILE if it exists (without it, an existing FILE is refused).
    #[arg(long)]
    pub force: bool,

    /// Where to write (- for stdout).
    #[arg(value_name = "FILE")]
    pub file: PathBuf,
}

/// `hmn serve` options.
#[cfg(feature = "serve")]
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// Address and port to listen on. Default loopback only; use 0.0.0.0:9835 to expose it.
    #[arg(long, value_name = "ADDRESS:PORT", default_value = "127.0.0.1:9835")]
    pub listen: String,

    /// Time between collections.
    #[arg(long, value_name = "DURATION", default_value = "5s", value_parser = parse_duration_arg)]
    pub interval: std::time::Duration,

    /// Export per-process memory for the N largest processes of each device (the rest are
    /// summed into pid="other"), bounding the number of series.
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub processes: usize,

    /// Also write the exposition to DIR/hmn.prom after every collection (atomically; it must
    /// be absent or a regular file), for node_exporter's textfile collector.
    #[arg(long, value_name = "DIR")]
    pub textfile: Option<PathBuf>,
}

/// `hmn completions` arguments.
#[derive(Debug, Args)]
pub struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `hmn __exec` arguments: the first step of `hmn run`'s and `hmn spill`'s command
/// (`run::job::exec_helper`).
#[derive(Debug, Args)]
pub struct ExecArgs {
    /// hmn's pid: the command is killed if hmn dies, and not started if it already has.
    #[arg(long, value_name = "PID")]
    pub parent: Option<u32>,
    /// The transient cgroup's `cgroup.procs` file, joined first.
    #[arg(long, value_name = "FILE")]
    pub cgroup_procs: Option<PathBuf>,
    /// The standard fd of the terminal whose foreground the command's group takes.
    #[arg(long, value_name = "FD")]
    pub tty: Option<i32>,
    /// Stay as the command's parent (Linux): its subreaper, passing its status and signals
    /// through, and killing what is left of its tree if hmn dies (`run::guard`).
    #[arg(long, requires = "parent")]
    pub guard: bool,
    /// The program's path, its `argv[0]`, then its arguments.
    #[arg(required = true, num_args = 2.., trailing_var_arg = true, allow_hyphen_values = true)]
    pub command: Vec<std::ffi::OsString>,
}

/// `hmn ps` options.
#[derive(Debug, Args)]
pub struct PsArgs {
    /// Print CSV (a header row, then one row per process and device; sizes in bytes, unknown
    /// empty).
    #[arg(long, conflicts_with = "json")]
    pub csv: bool,

    /// Only these processes (repeatable, or comma-separated).
    #[arg(long, value_name = "PID", value_delimiter = ',')]
    pub pid: Vec<u32>,

    /// Only these devices (repeatable, or comma-separated): an index, a GPU-… or MIG-… UUID (or
    /// a unique prefix), MIG-GPU-UUID/GI/CI, or a PCI bus id; a MIG device keeps its own
    /// processes. One that names no device, or a device that cannot be read, is an error
    /// (exit 2).
    #[arg(long, value_name = "DEVICE", value_delimiter = ',', value_parser = parse_selector)]
    pub device: Vec<DeviceSelector>,

    /// Only processes of these users, by name or numeric UID (repeatable, or comma-separated).
    /// A name this system does not know is an error.
    #[arg(long, value_name = "USER", value_delimiter = ',', value_parser = parse_user)]
    pub user: Vec<String>,

    /// Only processes whose name contains PATTERN, case-insensitively (repeatable: any
    /// matches). A blank pattern is rejected, since an unset shell variable would otherwise
    /// match everything.
    #[arg(long, value_name = "PATTERN", value_parser = parse_pattern)]
    pub filter: Vec<String>,

    /// Only processes whose workload contains PATTERN, case-insensitively (repeatable: any
    /// matches): a pod UID, container id or runtime (docker, containerd, cri-o, podman), a
    /// Slurm job (slurm:4242), a systemd unit, or any part of the cgroup path. Processes with
    /// no workload match none.
    #[arg(long, value_name = "PATTERN", value_parser = parse_pattern)]
    pub workload: Vec<String>,

    /// Only rows using at least SIZE of GPU memory (e.g. 512MiB, 1.5GiB, 2G, 100MB): VRAM, plus
    /// GTT-resident bytes for AMD/Intel rows (upstream's "footprint", as `--sort total`). Rows
    /// whose usage is unknown cannot be shown to reach SIZE and are left out.
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub min: Option<u64>,

    /// Sort order.
    #[arg(long, value_enum, default_value_t = SortKey::Vram)]
    pub sort: SortKey,

    /// Exit 0 when rows were listed, 1 when none, 2 when it could not be determined.
    #[arg(long)]
    pub exit_status: bool,

    /// Also measure utilization: take two samples --interval apart and add a UTIL column (NVIDIA:
    /// SM and memory percent since the first sample, from NVML; `?` under MIG, where the
    /// driver gives none; AMD, Intel and other DRM GPUs: the busiest engine class of each row).
    #[arg(long)]
    pub util: bool,

    /// Time between the two samples of --util (e.g. 200ms, 1s).
    #[arg(long, value_name = "DURATION", default_value = "200ms", value_parser = parse_duration_arg, requires = "util")]
    pub interval: std::time::Duration,
}

/// `hmn ps --sort` keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SortKey {
    /// Largest device memory first (unknown last). Upstream's names `dedicated` and
    /// `committed` are the same order.
    #[value(alias = "dedicated", alias = "committed")]
    Vram,
    /// Largest GTT-resident bytes first (system memory holding a DRM row's buffers, where
    /// what does not fit in VRAM goes); rows without such a figure (NVIDIA) last.
    Shared,
    /// Largest VRAM + GTT-resident bytes first (VRAM alone for rows without a GTT figure;
    /// unknown last).
    Total,
    /// By process id.
    Pid,
    /// By name.
    Name,
    /// By user.
    User,
    /// By device, then largest first.
    Device,
}
