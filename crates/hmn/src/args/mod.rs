//! The command line, defined once with clap derive, and the only place arguments are parsed:
//! the value parsers (sizes, durations, patterns, device selectors), each with a typed
//! [`ArgError`], and the probe options built from the global flags; each subcommand's options
//! are in [`commands`]. No probing here: `--help`
//! and `--version` return before anything is measured.

use std::path::{Path, PathBuf};

use clap::{Args, Parser, Subcommand};
use hypomnesis::{ProbeOptions, Roots};

mod commands;
pub use commands::*;
// `hmn fits` options and their value parsers.
mod fits;
pub use fits::{DeviceSel, FitsArgs};
#[cfg(test)]
use fits::{parse_device_sel, parse_runtime};
// The value parsers every subcommand's options share, and their error.
mod values;
#[cfg(feature = "serve")]
pub use values::env_millis;
pub use values::{ArgError, GpuArg, parse_size};
#[cfg(test)]
use values::{parse_duration, parse_pattern, parse_selector};

/// What `hmn --version` prints after `hmn `: the package version and the commit it was built
/// from, `0.2.16 (cc531be)`. The commit is the compile-time variable `HMN_COMMIT`, which
/// `crates/hmn/build.rs` sets from git (or passes through); built from the library package
/// (feature `cli`, no build script of ours) only a `HMN_COMMIT` set in the build's environment
/// names it. Without one: `0.2.16 (commit unknown)`.
pub fn version() -> &'static str {
    static LINE: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    LINE.get_or_init(|| {
        let commit = option_env!("HMN_COMMIT").map(str::trim).unwrap_or("");
        let commit = if commit.is_empty() {
            "commit unknown"
        } else {
            commit
        };
        format!("{} ({commit})", env!("CARGO_PKG_VERSION"))
    })
}

/// RAM and GPU memory, measured: every device, every process, truthfully.
#[derive(Debug, Parser)]
#[command(
    name = "hmn",
    version = version(),
    about = "RAM and GPU memory, measured",
    long_about = "RAM and GPU memory, measured.\n\n\
        With no subcommand, hmn prints one line per GPU (free / total memory, reserved memory, \
        driver, MIG mode), one per MIG device (profile, GI/CI ids, its own free / total, MIG- \
        UUID) and a host RAM line; --cuda-order adds the devices CUDA would see, with the basis \
        of their order. NVIDIA GPUs are read through NVML, or nvidia-smi when NVML cannot be \
        loaded. A value that could not be read is shown as `?` (null in JSON), never 0.\n\n\
        Exit status: 0, no GPU at all included; 2 when GPUs may exist that nothing can show (an \
        NVML that cannot start or count its devices, every device unreadable).",
    after_help = "Run `hmn ps --help` for the per-process listing.",
    args_conflicts_with_subcommands = false
)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,

    #[command(subcommand)]
    pub command: Option<Command>,
}

/// Options every subcommand accepts.
#[derive(Debug, Args)]
pub struct GlobalArgs {
    /// Print JSON (schema 1) on stdout instead of text.
    #[arg(long, global = true)]
    pub json: bool,

    /// Read process and memory files from DIR instead of /proc (e.g. the host's /proc mounted
    /// in a container).
    #[arg(long, global = true, value_name = "DIR", env = "HMN_PROC_ROOT")]
    pub proc_root: Option<PathBuf>,

    /// Read device files from DIR instead of /sys.
    #[arg(long, global = true, value_name = "DIR", env = "HMN_SYS_ROOT")]
    pub sys_root: Option<PathBuf>,

    /// Read the kubelet's pods/ and containers/ (pod, namespace and container names) under DIR
    /// instead of /var/log (e.g. the host's /var/log mounted in a container). Listed only,
    /// never a log file read.
    #[arg(long, global = true, value_name = "DIR", env = "HMN_LOG_ROOT")]
    pub log_root: Option<PathBuf>,

    /// Load NVML from PATH instead of libnvidia-ml.so.1 on the loader's search path.
    #[arg(long, global = true, value_name = "PATH", env = "HMN_NVML_LIB")]
    pub nvml_lib: Option<PathBuf>,

    /// Run PATH as nvidia-smi (the fallback when NVML cannot be loaded) instead of looking it
    /// up on PATH.
    #[arg(long, global = true, value_name = "PATH", env = "HMN_NVIDIA_SMI")]
    pub nvidia_smi: Option<PathBuf>,

    /// Read integer --device values as CUDA ordinals: the devices CUDA_VISIBLE_DEVICES makes
    /// visible, in CUDA's order (CUDA_DEVICE_ORDER: FASTEST_FIRST unless PCI_BUS_ID; on mixed
    /// models FASTEST_FIRST is a guess, and says so). `hmn --cuda-order` shows the mapping.
    #[arg(long, global = true)]
    pub cuda_order: bool,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// List the processes holding GPU memory: one row per (process, device).
    #[command(
        long_about = "List the processes holding GPU memory: one row per (process, device).\n\n\
            Columns: PID USER NAME DEVICE KIND VRAM, then MIG (the MIG device) under MIG, NS PID (the pid inside the \
            process's own PID namespace, when it differs) and WORKLOAD (its container, pod, \
            Slurm job or systemd unit, from its cgroup) when some row has one. For NVIDIA, KIND is \
            compute, graphics or compute+graphics (a process in both NVML lists is one row with \
            the larger figure), mps (an MPS client) or mps-server (the MPS server, counted once \
            in sums); for other GPUs, the engine classes the process used (compute, \
            graphics, video, copy, other), or idle. Inside a container without the host's /proc, \
            an NVIDIA row's host PID cannot be named: its NAME says so and a note gives the \
            remedy. \
            A summary line always goes to stderr. VRAM `?` means the driver did not report a \
            usable figure (JSON null, with the reason under `unknown`).\n\n\
            Exit status: 0, or with --exit-status: 0 rows listed, 1 none, 2 undetermined \
            (a device could not be read, or processes were hidden). Always 2 when nothing could \
            be queried, or when NVML is installed but broken (it cannot start or count its \
            devices) and nvidia-smi did not answer in its place."
    )]
    Ps(PsArgs),

    /// Run a command and report the peak RAM and GPU memory of its whole process tree.
    #[command(
        long_about = "Run a command and report the peak RAM and GPU memory of its whole process tree \
            (the command and every descendant, followed by (pid, start time) so a reused pid is \
            never merged).\n\n\
            Peak RAM comes from a transient memory cgroup when hmn can create one (root, or a \
            delegated cgroup v2 subtree): the kernel's own peak of everything the tree was \
            charged, including page cache and daemons that left the tree. Otherwise it is the \
            largest sum of the tree's RSS over the samples, with the largest per-process peak \
            (VmHWM) as a floor. The report says which. VRAM peaks are sampled.\n\n\
            The command's stdin, stdout and stderr are untouched; the report goes to stderr (or \
            JSON to stdout with --json). The command \
            runs in a process group of its own (it takes the terminal when hmn has it; Ctrl+Z \
            stops both) and is killed if hmn is. SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to \
            hmn, or to hmn's process group, are forwarded to the command once, and the report \
            is still written. Details and JSON fields: docs/run-and-watch.md.\n\n\
            Exit status: the command's (0–255); 128+N when it was killed by signal N; 127 when \
            it cannot be found, 126 when it cannot be run."
    )]
    Run(RunArgs),

    /// Run a command and report whether GPU memory spilled out of VRAM into system memory.
    #[command(
        long_about = "Run a command and report whether GPU memory spilled out of VRAM into system \
            memory while it ran: the device's dedicated memory at 85 % of its capacity or more \
            while the memory holding GPU buffers in system memory grew by 256 MiB or more over \
            the first reading (upstream hypomnesis's rule), as episodes.\n\n\
            On Linux this is measurable on AMD (amdgpu: VRAM and GTT from sysfs) and discrete \
            Intel GPUs whose VRAM size sysfs gives (xe, i915: sums over their DRM clients); \
            not on NVIDIA (the driver has no system-memory fallback and no such figure) or \
            integrated GPUs, where the report says why. The command's own DRM clients' \
            eviction (bytes evicted from VRAM, GTT growth) is reported too.\n\n\
            The command's stdin, stdout and stderr are untouched; the report goes to stderr, \
            and with --json a JSON object to stdout after the command's output. SIGINT, \
            SIGTERM, SIGHUP and SIGQUIT sent to hmn are forwarded to the command, and the \
            report is still written. docs/run-and-watch.md.\n\n\
            Exit status: the command's own (0–255); 1 when it was killed by a signal or could \
            not be started."
    )]
    Spill(SpillArgs),

    /// Follow processes' RAM and GPU memory over time, with deltas from each one's start.
    #[command(
        long_about = "Follow processes' RAM and GPU memory over time: one row per process per \
            interval with the change since that process's first sample (and its SM utilization \
            on NVIDIA), and a summary at the end or on Ctrl+C: baseline and peak per process, \
            the driver's accounting records where accounting mode is on (each process's peak \
            memory and utilization over its life), and the spill report of one device \
            (--device, else 0). Without PIDs, follows the --top N processes by GPU memory, \
            narrowed by --device, --min and --filter, chosen once or, with --follow-new, every \
            interval (each change of the followed set is a line on stderr). --follow-new, \
            --filter and --min apply to auto-selection only: with explicit PIDs they are an \
            error. docs/run-and-watch.md.\n\n\
            Exit status: 0 when no spill was observed on the tracked device (or it is not \
            measurable), 1 when one was, 2 on an error, 3 when --exit-on-growth ended it \
            (whatever the spill)."
    )]
    Watch(WatchArgs),

    /// Will a model fit? Its memory, component by component, against a device's free memory.
    #[command(
        long_about = "Will a model fit? SIZE (e.g. 14GiB) is compared with a device's free memory \
            as it is. PATH (a .safetensors or .gguf file, a model.safetensors.index.json, or a \
            directory holding them and config.json; a shard brings its whole set) is read, \
            headers only, and estimated \
            component by component: weights (exact, from the headers), KV cache (per layer: \
            GQA, head_dim, sliding-window and hybrid layers, MLA, KV dtype), activations and \
            compute buffers, runtime overhead and a margin, each with a low/high band for the \
            runtime, every assumption stated. The verdict compares the band with the device's \
            live free memory (or the runtime's split over several GPUs, partial offload with \
            VRAM and host RAM both judged, or host RAM alone: see --device and --gpu-layers) \
            and gives the headroom or shortfall, the largest context and batch that fit, and \
            the largest --gpu-layers; a setting the runtime refuses to start with (vLLM beyond \
            its max_model_len) does not fit.\n\n\
            --free SIZE compares with a given budget instead of a device (planning for a card \
            that is not here). Defaults: device 0, batch 1, runtime generic, context 4096 \
            (vllm: the trained context, which vLLM must fit to start), KV cache bf16 \
            (llama.cpp: f16). Formulas and sources: docs/estimation.md.\n\n\
            Exit status: 0 when the high end fits (on some device with --device all); 1 when \
            it does not, only the low end does, or a component is unknown (incomplete); 2 on \
            an error (unreadable or malformed model, no GPU, a device that cannot be read)."
    )]
    Fits(FitsArgs),

    /// Pick the device(s) with room for a command: prints their UUIDs, best fit first.
    #[command(
        long_about = "Pick the device(s) with at least --need free for a command, and print their \
            selectors (GPU-…/MIG-… UUIDs; a PCI bus id for a device without one), one per line, \
            best fit first: the smallest free memory that fits, then the least busy, then the \
            higher index (MIG devices are candidates on their own; with --count above 1 they \
            are left out). --need takes a SIZE, or a MODEL (a path, hf:ORG/REPO or a URL) judged as `hmn fits` would.\n\n\
            Concurrent picks do not get the same memory: each pick reserves what it needs on \
            the device's lock file for --lease (default 60 s), and a later pick counts live \
            reservations as used. Lock directory: HMN_LOCK_DIR, else /run/hmn, \
            /dev/shm/hmn-locks or /tmp/hmn-locks (docs/pick.md). An inherited \
            CUDA_VISIBLE_DEVICES limits the NVIDIA candidates.\n\n\
            Exit status: 0 picked; 1 no device has room (after --wait, if given); 2 on an \
            error (an unreadable model or size, a broken NVML)."
    )]
    Pick(PickArgs),

    /// Export device and process metrics for Prometheus (text 0.0.4 or OpenMetrics).
    #[cfg(feature = "serve")]
    #[command(
        long_about = "Export device and process metrics for Prometheus: GET /metrics (Prometheus \
            text 0.0.4, or OpenMetrics when the Accept header asks), GET /healthz.\n\n\
            Binds to loopback (127.0.0.1:9835) by default: exposing the exporter to the network \
            is your explicit choice (--listen 0.0.0.0:9835). Collection runs in the background \
            every --interval; a scrape serves the last complete collection and never waits for \
            the driver (503 until the first one completes). Series: each device, each MIG \
            instance (with dcgm-exporter's UUID, GPU_I_ID and GPU_I_PROFILE labels), the \
            --processes largest processes of each device with their utilization (the rest \
            summed as pid=\"other\"), and sums per pod, container, systemd unit or Slurm job. \
            Metric names and labels: docs/serve.md; deployment: deploy/, docs/containers.md.\n\n\
            Exit status: 0 when stopped by SIGTERM or SIGINT (Ctrl+C); 2 when it cannot start \
            (a bad --listen, an address in use, an unusable --textfile)."
    )]
    Serve(ServeArgs),

    /// A live view of every GPU and GPU process: memory, telemetry, host RAM (q quits, ? helps).
    #[cfg(feature = "top")]
    #[command(
        long_about = "A live view of every GPU and GPU process: host RAM and swap; per device its \
            memory (used / reserved / total; GTT and visible VRAM on amdgpu), utilization, \
            temperature, power, clocks and a history chart; per process its VRAM on each \
            device (its MIG device, its MPS role), host RSS, engine use (NVIDIA: SM from \
            NVML), container or unit.\n\n\
            Sort by any column (< >), filter (/), tree (t), detail (Enter), pause (p), \
            interval (+ -), SIGTERM/SIGKILL to the selected process (x / X, after a \
            confirmation), help (?), quit (q). Collection runs on its own thread: a GPU driver \
            call that hangs shows as STALE, never as a frozen screen. `?` means unknown, never 0. \
            NO_COLOR (or --mono) draws without colours.\n\n\
            --replay FILE plays a recording of `hmn record` into the same view, with pause, \
            seek and speed keys. docs/top.md.\n\n\
            Exit status: 0 when quit; 2 on an error (no terminal, an unreadable or malformed \
            recording)."
    )]
    Top(TopArgs),

    /// Record the snapshots `hmn top` draws to FILE, one JSON line per sample.
    #[command(
        long_about = "Record the snapshots `hmn top` draws to FILE, one JSON line per sample, \
            flushed per sample (format: docs/top.md). Play it back with `hmn top --replay FILE`.\n\n\
            FILE is written under a temporary name beside it and renamed into place when \
            recording stops (--duration, Ctrl+C, SIGTERM, SIGHUP); if hmn is killed outright, \
            the temporary file (.FILE.*.hmn-tmp) holds every complete sample. Samples are \
            taken on a thread of their own, so --duration and signals end the recording even \
            while a GPU driver call hangs. - streams to stdout. FILE must be absent, or a \
            regular file and --force given. Each line keeps at most --max-processes rows (largest \
            VRAM first) and says how many it left out.\n\n\
            Exit status: 0 when the recording is written; 2 on an error (FILE exists without \
            --force, a write fails: the complete lines written before it are kept)."
    )]
    Record(RecordArgs),

    /// Why a figure could be missing here: one line per check, ok / warn / fail, with the remedy.
    #[command(
        long_about = "Why a figure could be missing on this machine: one line per check — NVML \
            (found, loadable, library and driver versions, mismatch), nvidia-smi, accounting and \
            persistence modes, /dev/nvidia* and /dev/dri/* access and groups, /proc hidepid, \
            capabilities for other users' fdinfo (and ptrace_scope), the kernel against the fdinfo \
            keys of each DRM driver present, runtime-suspended devices, cgroups (whether hmn run \
            can make its memory cgroup: it creates and removes an empty one), and whether hmn \
            runs in a container and which PID namespace /proc shows; on Windows and macOS: NVML, \
            nvidia-smi, accounting and the DXGI or Metal backend. Each says what it saw and, \
            when not ok, the exact remedy.\n\n\
            Exit status: 0 all ok, 1 warnings, 2 failures."
    )]
    Doctor,

    /// Print a shell completion script (bash, zsh, fish, elvish, powershell) on stdout.
    #[command(
        long_about = "Print a shell completion script on stdout, generated from hmn's own \
            command line. Install it, e.g.:\n\n  \
            bash: hmn completions bash | sudo tee /usr/share/bash-completion/completions/hmn\n  \
            zsh:  hmn completions zsh > \"${fpath[1]}/_hmn\"\n  \
            fish: hmn completions fish > ~/.config/fish/completions/hmn.fish\n\n\
            Exit status: 0; 2 for a shell hmn does not know, or a failed write."
    )]
    Completions(CompletionsArgs),

    /// Print hmn's man page (roff) on stdout: `hmn man | man -l -`.
    #[command(
        long_about = "Print hmn's man page (roff) on stdout, generated from hmn's own command \
            line: `hmn man | man -l -` reads it; `hmn man > hmn.1` installs it.\n\n\
            Exit status: 0; 2 when it cannot be written."
    )]
    Man,

    /// Internal: the first step of `hmn run`'s and `hmn spill`'s command (its cgroup, its
    /// terminal, dying with hmn), then the command itself.
    #[command(hide = true, name = "__exec")]
    Exec(ExecArgs),
}

/// Refuses a proc root that cannot be listed, or that is not one: neither a process directory
/// nor `meminfo` in it (an empty directory, a mistyped path). Otherwise every command would
/// report "0 processes" as if the machine ran none.
fn check_proc_root(p: &Path) -> Result<(), ArgError> {
    let refuse = |why: String| ArgError::NotAProcRoot {
        flag: "--proc-root",
        path: p.to_path_buf(),
        why,
    };
    let entries = std::fs::read_dir(p).map_err(|e| refuse(format!("cannot be listed: {e}")))?;
    let looks_like_proc = entries.flatten().any(|e| {
        let name = e.file_name();
        name == "meminfo"
            || name
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
    });
    if looks_like_proc {
        Ok(())
    } else {
        Err(refuse(
            "not a proc root (no process directories and no meminfo)".to_string(),
        ))
    }
}

/// The subcommand named on the command line (`ps`, `run`, …), or empty: for the pointer to its
/// `--help` in a usage error, which clap reports before any subcommand is known.
pub fn subcommand_of_argv() -> String {
    use clap::CommandFactory as _;
    let cmd = Cli::command();
    let names: Vec<&str> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .map(clap::Command::get_name)
        .collect();
    std::env::args_os()
        .skip(1)
        .take_while(|a| a != "--")
        .find_map(|a| {
            let a = a.to_str()?;
            names.iter().find(|n| **n == a).map(|n| (*n).to_string())
        })
        .unwrap_or_default()
}

impl GlobalArgs {
    /// The probe's options: the `HMN_*` environment (which clap already merged into the root
    /// and backend flags) with the given roots, each checked to be a directory.
    ///
    /// # Errors
    /// [`ArgError::NotADirectory`] for a root that is not a directory.
    pub fn probe_options(&self) -> Result<ProbeOptions, ArgError> {
        let nonempty = |p: &Option<PathBuf>| p.clone().filter(|p| !p.as_os_str().is_empty());
        let check_dir = |flag: &'static str, p: &Path| {
            if p.is_dir() {
                Ok(())
            } else {
                Err(ArgError::NotADirectory {
                    flag,
                    path: p.to_path_buf(),
                })
            }
        };
        let mut roots = Roots::system();
        // The container runtimes' roots have no flag: HMN_DOCKER_ROOT, HMN_CONTAINERD_ROOT,
        // HMN_CRIO_ROOT.
        let env = Roots::from_env();
        (roots.docker, roots.containerd, roots.crio) = (env.docker, env.containerd, env.crio);
        if let Some(p) = nonempty(&self.proc_root) {
            check_dir("--proc-root", &p)?;
            check_proc_root(&p)?;
            roots = roots.with_proc(p);
        }
        if let Some(p) = nonempty(&self.sys_root) {
            check_dir("--sys-root", &p)?;
            roots = roots.with_sys(p);
        }
        // The log root may be absent (no kubelet here): names are then simply not found.
        if let Some(p) = nonempty(&self.log_root) {
            roots = roots.with_log(p);
        }
        let mut opts = ProbeOptions::from_env().roots(roots);
        opts.nvml_library = nonempty(&self.nvml_lib);
        opts.nvidia_smi = nonempty(&self.nvidia_smi);
        // The library falls back to its default on a value it cannot read; the command line
        // refuses it, as a bad flag is refused.
        if let Some(t) = values::env_millis(hypomnesis::probe::ENV_NVIDIA_SMI_TIMEOUT_MS)? {
            opts = opts.nvidia_smi_timeout(t);
        }
        Ok(opts)
    }
}

#[cfg(test)]
mod tests;
