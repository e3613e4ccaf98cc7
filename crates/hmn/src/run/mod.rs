//! `hmn run -- CMD`: run a command like `time(1)` and report the peak RAM and VRAM of its whole
//! process tree. See `hmn run --help` and `docs/run-and-watch.md`.

pub mod exec;
mod gpu;
#[cfg(target_os = "linux")]
mod guard;
#[cfg(unix)]
#[allow(unsafe_code)]
mod helper;
#[cfg(unix)]
#[allow(unsafe_code)]
pub mod job;
#[cfg(windows)]
#[path = "job_windows.rs"]
pub mod job;
mod launch;
#[cfg(feature = "plot")]
mod plot;
mod report;
#[cfg(unix)]
mod tty;

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::Context as _;
use hypomnesis::cgroup::PeakCgroup;
use hypomnesis::peaks::{CGROUP_JOIN_WAIT, CgroupJoin, KernelPeak, cgroup_join};
use hypomnesis::process::tree::{ProcessId, read_stat};
use hypomnesis::sampler::{Sampler, SamplerOptions, Target};
use hypomnesis::{Probe, ProbeOptions};

use crate::args::{GlobalArgs, RunArgs};
use crate::outfile::{Dest, Sink};
use report::RunReport;

/// Environment variable that disables the cgroup (as `--no-cgroup`).
const ENV_NO_CGROUP: &str = "HMN_NO_CGROUP";
/// The transient cgroup's name: this prefix, hmn's pid and its start time
/// (`hypomnesis::cgroup::transient_name`).
const CGROUP_PREFIX: &str = "hmn-run-";

/// Removes the transient cgroups of earlier runs whose hmn was killed, and the probe groups of
/// killed `hmn doctor`s (one line each on stderr when it held processes, or could not be
/// removed).
fn remove_stale_cgroups(roots: &hypomnesis::Roots) -> anyhow::Result<()> {
    let doctors = hypomnesis::cgroup::remove_stale(roots, hypomnesis::doctor::PROBE_CGROUP_PREFIX);
    for stale in hypomnesis::cgroup::remove_stale(roots, CGROUP_PREFIX)
        .into_iter()
        .chain(doctors)
    {
        match stale {
            Ok(s) if s.moved == 0 => {}
            Ok(s) => crate::output::note(&format!(
                "run: removed {} (its hmn, pid {}, is gone); moved the {} process{} left in it \
                 to hmn's own cgroup",
                s.dir.display(),
                s.owner,
                s.moved,
                if s.moved == 1 { "" } else { "es" }
            ))?,
            Err(e) => crate::output::note(&format!("run: a stale cgroup stays: {e}"))?,
        }
    }
    Ok(())
}

pub fn run(
    opts: ProbeOptions,
    g: &GlobalArgs,
    args: &RunArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("run: no command given");
    };
    let resolved = match exec::resolve(program) {
        Ok(p) => p,
        Err(e) => {
            crate::output::note(&format!("run: {e}"))?;
            return Ok(ExitCode::from(e.exit_code()));
        }
    };
    // Output files are checked and created (under a temporary name) before the command runs:
    // a refused target is exit 2 and the command never starts.
    stdout_claims(g.json, args.timeline.as_deref(), args.plot.as_deref())?;
    let timeline = match &args.timeline {
        Some(path) => Some(
            Sink::open(&Dest::of(path))
                .with_context(|| format!("--timeline {}", path.display()))?,
        ),
        None => None,
    };
    let timeline = Arc::new(Mutex::new(TimelineOut::new(timeline)));
    #[cfg(feature = "plot")]
    let plot_sink = match &args.plot {
        Some(path) => Some(
            Sink::open(&Dest::of(path)).with_context(|| format!("--plot {}", path.display()))?,
        ),
        None => None,
    };
    // `--gpu`: picked (and reserved) before anything else starts; no room, no command.
    let (gpu_lease, env) = match gpu::prepare(&opts, g, args)? {
        Ok(Some((lease, env))) => (Some(Arc::new(Mutex::new(lease))), env),
        Ok(None) => (None, Vec::new()),
        Err(code) => return Ok(code),
    };
    let mut warnings = Vec::new();
    // Platform seam: transient cgroups are Linux-only; Windows uses a Job object below.
    let no_cgroup = args.no_cgroup
        || !cfg!(target_os = "linux")
        || std::env::var_os(ENV_NO_CGROUP).is_some_and(|v| !v.is_empty());
    let cgroup = if no_cgroup {
        None
    } else {
        remove_stale_cgroups(&opts.roots)?;
        match PeakCgroup::create(
            &opts.roots,
            &hypomnesis::cgroup::transient_name(&opts.roots, CGROUP_PREFIX),
        ) {
            Ok(c) => Some(c),
            Err(e) => {
                warnings.push(format!("no transient cgroup, so peak RAM is sampled ({e})"));
                None
            }
        }
    };
    let forwarder = exec::SignalForwarder::install().context("installing signal handlers")?;
    let started = Instant::now();
    let procs = cgroup.as_ref().map(PeakCgroup::procs_file);
    let launch = job::Launch {
        path: &resolved,
        argv0: program,
        args: rest,
        cgroup_procs: procs.as_deref(),
        env: &env,
    };
    #[cfg(not(windows))]
    let spawned = job::Job::spawn(&launch);
    #[cfg(windows)]
    let (spawned, job) = match job::Job::spawn_in_job(&launch, &mut warnings) {
        Ok((c, j)) => (Ok(c), j),
        Err(e) => (Err(e), None),
    };
    let mut child = match spawned {
        Ok(c) => c,
        Err(e) => {
            let err = exec::SpawnError::from_io(program, &e);
            crate::output::note(&format!("run: {err}"))?;
            if let Some(c) = cgroup {
                let _ = c.remove();
            }
            return Ok(ExitCode::from(err.exit_code()));
        }
    };
    forwarder.forward_to(child.id());
    #[cfg(unix)]
    let guarded = child.guarded();
    #[cfg(not(unix))]
    let guarded = false;
    // The child joins the cgroup itself before it execs the command; whether the cgroup's
    // peak then counts for the command is the library's rule (`peaks::cgroup_join`).
    let cgroup = cgroup.and_then(|c| {
        let deadline = Instant::now() + CGROUP_JOIN_WAIT;
        loop {
            let in_group = c.contains(child.id());
            let ended = !in_group && matches!(child.try_wait(), Ok(Some(_)));
            let charged = if ended { c.peak_bytes() } else { None };
            match cgroup_join(in_group, ended, charged, Instant::now() > deadline) {
                CgroupJoin::Joined => return Some(c),
                CgroupJoin::NotJoined => {
                    warnings.push(
                        "the command could not join the transient cgroup; peak RAM is sampled"
                            .to_string(),
                    );
                    let _ = c.remove();
                    return None;
                }
                _ => std::thread::sleep(std::time::Duration::from_millis(1)),
            }
        }
    });

    // Sampling starts once the command runs: before, the child's process is hmn's own step.
    child.wait_exec();
    // Measurement: a problem here never stops the workload.
    let root = match read_stat(&opts.roots, child.id()) {
        Ok(st) => Some(st.id()),
        // Ended before the first sample: its peak is the kernel's (cgroup, rusage).
        Err(_) if matches!(child.try_wait(), Ok(Some(_))) => None,
        Err(e) => {
            warnings.push(format!(
                "cannot follow the command's processes ({e}); running it unmeasured"
            ));
            None
        }
    };
    let interval = args.interval;
    // The chart keeps only what it draws, in bounded memory (plot::PlotSeries).
    #[cfg(feature = "plot")]
    let series = Arc::new(Mutex::new(plot::PlotSeries::default()));
    let handle = root.map(|root: ProcessId| {
        // Guarded, the child is the guard: the command is what runs under it.
        let target = if guarded {
            Target::Descendants(root)
        } else {
            Target::Tree(root)
        };
        let sampler = Sampler::new(
            Probe::with_options(opts.clone()),
            target,
            SamplerOptions::default()
                .interval(interval)
                .keep_timeline(false),
        );
        let timeline = Arc::clone(&timeline);
        #[cfg(feature = "plot")]
        let series = args.plot.is_some().then(|| Arc::clone(&series));
        let gpu_lease = gpu_lease.clone();
        sampler.start(move |s| {
            if let Some(Ok(mut l)) = gpu_lease.as_ref().map(|l| l.lock()) {
                l.observe(s);
            }
            if let Ok(mut t) = timeline.lock() {
                t.write(s);
            }
            #[cfg(feature = "plot")]
            if let Some(Ok(mut p)) = series.as_ref().map(|p| p.lock()) {
                p.push(s);
            }
        })
    });
    let status = child.wait().context("waiting for the command")?;
    let wall = started.elapsed();
    if let Some(Ok(mut l)) = gpu_lease.as_ref().map(|l| l.lock()) {
        l.release();
    }
    let samples = handle
        .map(hypomnesis::sampler::SamplerHandle::stop)
        .unwrap_or_default();
    let forwarded = forwarder.finish();

    // The command's own, without the image of hmn's helpers.
    let rusage_max_rss = child.max_rss_bytes();
    let cgroup_peak = cgroup.as_ref().and_then(PeakCgroup::peak_bytes);
    let cgroup_version = cgroup.as_ref().map(PeakCgroup::version);
    if let Some(c) = cgroup {
        match c.remove_moving_leftovers() {
            Ok(0) => {}
            Ok(n) => warnings.push(format!(
                "{n} process{} the command left running moved out of the transient cgroup (to \
                 hmn's own), which was removed",
                if n == 1 { "" } else { "es" }
            )),
            Err(e) => warnings.push(format!("the cgroup was left behind: {e}")),
        }
    }
    let exit = exec::exit_code(status);
    // The kernel's peak of the container that held the tree: the transient cgroup (Linux), the
    // Job object (Windows). The headline from it, floored, is the library's (`peaks::peak_ram`).
    let kernel_peak = cgroup_peak
        .zip(cgroup_version)
        .map(|(bytes, version)| KernelPeak::cgroup(bytes, version));
    #[cfg(windows)]
    let kernel_peak = kernel_peak.or_else(|| {
        job.as_ref()
            .and_then(|j| j.peak_memory_bytes().ok().flatten())
            .map(KernelPeak::job)
    });
    let report = RunReport::new(
        &args.command,
        exit,
        wall,
        interval,
        &samples,
        rusage_max_rss,
        kernel_peak,
        forwarded,
        warnings,
    );
    let mut file_errors = Vec::new();
    if let Some(p) = &args.timeline {
        let out = match timeline.lock() {
            Ok(mut t) => std::mem::take(&mut *t),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        if let Err(e) = out.finish() {
            file_errors.push(format!("run: --timeline {}: {e}", p.display()));
        }
    }
    #[cfg(feature = "plot")]
    if let (Some(p), Some(sink)) = (&args.plot, plot_sink) {
        let drawn = match series.lock() {
            Ok(mut p) => std::mem::take(&mut *p),
            Err(poisoned) => std::mem::take(&mut *poisoned.into_inner()),
        };
        if let Err(e) = plot::write_svg(sink, &drawn) {
            file_errors.push(format!(
                "run: --plot {}: {}",
                p.display(),
                crate::output::chain(&e)
            ));
        }
    }
    #[cfg(not(feature = "plot"))]
    if let Some(p) = &args.plot {
        crate::output::note(&format!(
            "run: --plot {}: this hmn was built without the plot feature",
            p.display()
        ))?;
    }
    if g.json {
        crate::output::json_line(out, &report)?;
    }
    crate::output::report(&report.text())?;
    // An output file that could not be written is an error (exit 2), reported after the
    // report; the file was not put in place (its target is as it was).
    for e in &file_errors {
        crate::output::note(e)?;
    }
    if !file_errors.is_empty() {
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::from(exit.code))
}

/// Refuses two outputs on stdout: `--json`'s report and a `-` (or `/dev/stdout`) FILE, or
/// both FILEs on stdout.
fn stdout_claims(json: bool, timeline: Option<&Path>, plot: Option<&Path>) -> anyhow::Result<()> {
    let on_stdout = |p: Option<&Path>| p.is_some_and(|p| Dest::of(p) == Dest::Stdout);
    let (t, p) = (on_stdout(timeline), on_stdout(plot));
    anyhow::ensure!(
        !(t && p),
        "--timeline and --plot cannot both write to stdout"
    );
    for (flag, claimed, path) in [("--timeline", t, timeline), ("--plot", p, plot)] {
        if let (true, true, Some(path)) = (json, claimed, path) {
            anyhow::bail!(
                "{flag} {}: stdout already carries the --json report",
                path.display()
            );
        }
    }
    Ok(())
}

/// `--timeline`: one JSON line per sample, flushed per sample. A file is written under a
/// temporary name in its directory and renamed into place when the run ends, so a reader never
/// sees a partial timeline under its name; a crash of hmn (SIGKILL) leaves the temporary file,
/// holding every sample written until then as complete lines. On stdout (`-`), lines stream
/// as they are sampled; a closed pipe ends the timeline quietly.
#[derive(Debug, Default)]
struct TimelineOut {
    sink: Option<Sink>,
    error: Option<std::io::Error>,
}

impl TimelineOut {
    fn new(sink: Option<Sink>) -> TimelineOut {
        TimelineOut { sink, error: None }
    }

    fn write(&mut self, s: &hypomnesis::sampler::Sample) {
        let Some(sink) = self.sink.as_mut() else {
            return;
        };
        let line = crate::output::json_vec(s).map(|mut l| {
            l.push(b'\n');
            l
        });
        let written = line
            .map_err(std::io::Error::from)
            .and_then(|l| sink.write_all(&l))
            .and_then(|()| sink.flush());
        match written {
            Ok(()) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::BrokenPipe
                    && matches!(sink, Sink::Stdout(_)) =>
            {
                self.sink = None;
            }
            Err(e) => {
                self.sink = None; // the temporary file is removed
                self.error = Some(e);
            }
        }
    }

    fn finish(self) -> std::io::Result<()> {
        match (self.error, self.sink) {
            (Some(e), _) => Err(e),
            (None, Some(sink)) => sink.commit(),
            (None, None) => Ok(()),
        }
    }
}
