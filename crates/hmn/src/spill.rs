//! `hmn spill -- CMD`: run a command under a [`SpillTracker`] and report its spill episodes, with
//! upstream's exit-code contract (the command's own code; 1 for a signal or a failed start).
//! Also owns the spill report's text block and JSON fields, which `hmn watch` reuses.
//!
//! The command runs through `hmn run`'s machinery ([`crate::run::exec`]: resolution, spawn
//! errors, exit status, signal forwarding). Besides the device tracker, the command tree's own
//! DRM clients are followed ([`TreeEviction`]): bytes evicted from VRAM and GTT growth, per
//! device, added to the JSON after upstream's keys.

use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use hypomnesis::eviction::{DeviceEviction, TreeEviction};
use hypomnesis::process::tree::{ProcessId, read_stat, tree};
use hypomnesis::{Probe, ProbeOptions, Source, SpillReport, SpillTracker};
use serde::Serialize;

use crate::args::{GlobalArgs, SpillArgs};
use crate::format::{bytes, sanitize};
use crate::output;
use crate::run::{exec, job};

/// One episode as upstream's JSON spells it.
#[derive(Debug, Serialize)]
pub struct EpisodeJson {
    start_label: String,
    end_label: Option<String>,
    peak_shared_bytes: u64,
    observations: usize,
    duration_ms: u64,
}

/// A spill report's JSON fields, in upstream's order (`hmn spill --json` and the summary of
/// `hmn watch --json`).
#[derive(Debug, Serialize)]
pub struct SpillFields {
    measurable: bool,
    spilled: bool,
    observations: usize,
    baseline_shared_bytes: u64,
    peak_shared_bytes: u64,
    peak_dedicated_bytes: u64,
    dedicated_limit_bytes: u64,
    total_spill_duration_ms: u64,
    episodes: Vec<EpisodeJson>,
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl SpillFields {
    pub fn new(r: &SpillReport) -> SpillFields {
        SpillFields {
            measurable: r.measurable,
            spilled: r.spilled(),
            observations: r.observations,
            baseline_shared_bytes: r.baseline_shared_bytes,
            peak_shared_bytes: r.peak_shared_bytes,
            peak_dedicated_bytes: r.peak_dedicated_bytes,
            dedicated_limit_bytes: r.dedicated_limit_bytes,
            total_spill_duration_ms: millis(r.total_spill_duration()),
            episodes: r
                .episodes
                .iter()
                .map(|e| EpisodeJson {
                    start_label: e.start_label.clone(),
                    end_label: e.end_label.clone(),
                    peak_shared_bytes: e.peak_shared_bytes,
                    observations: e.observations,
                    duration_ms: millis(e.duration),
                })
                .collect(),
        }
    }
}

/// `hmn spill --json`: upstream's keys in upstream's order, then ours.
#[derive(Serialize)]
struct SpillJson<'a> {
    #[serde(flatten)]
    report: SpillFields,
    schema: u32,
    /// The device tracked.
    device: u32,
    /// Why the device's spill is not measurable; `null` when it is.
    unmeasurable_reason: Option<&'a str>,
    /// The command tree's own DRM clients, per device where it held any.
    tree_drm: &'a [DeviceEviction],
}

/// `{secs:.1}s` for report durations.
fn secs(d: Duration) -> String {
    format!("{:.1}s", d.as_secs_f64())
}

/// The report block: three lines under `prefix` (`hmn spill`, `hmn watch`), continuation lines
/// aligned under the first's text.
pub fn text_block(prefix: &str, r: &SpillReport) -> String {
    let indent = " ".repeat(prefix.chars().count() + 2);
    let limit = if r.dedicated_limit_bytes > 0 {
        format!(" / {}", bytes(r.dedicated_limit_bytes))
    } else {
        String::new()
    };
    let mut out = format!(
        "{prefix}: peak dedicated {}{limit}\n{indent}peak shared    {} (baseline {})\n",
        bytes(r.peak_dedicated_bytes),
        bytes(r.peak_shared_bytes),
        bytes(r.baseline_shared_bytes)
    );
    match (r.longest_episode(), r.first_spill_label()) {
        (Some(longest), Some(first)) => {
            let _ = writeln!(
                out,
                "{indent}episodes       {} — total {}, longest {}, first {} into run",
                r.episodes.len(),
                secs(r.total_spill_duration()),
                secs(longest.duration),
                sanitize(first)
            );
        }
        _ => {
            let _ = writeln!(out, "{indent}episodes       0 — no spill observed");
        }
    }
    out
}

/// The line for a device whose spill cannot be measured.
pub fn not_measurable_line(prefix: &str, device: u32, reason: &str) -> String {
    format!(
        "{prefix}: spill not measurable on GPU {device}: {}\n",
        sanitize(reason)
    )
}

/// One line per device the command's own DRM clients used.
fn tree_lines(devices: &[DeviceEviction]) -> String {
    let mut out = String::new();
    for d in devices {
        let evicted = match (d.peak_evicted_bytes, d.evicted_growth_bytes()) {
            (Some(peak), Some(growth)) => {
                format!(
                    "evicted from VRAM peak {} (+{})",
                    bytes(peak),
                    bytes(growth)
                )
            }
            _ => "evicted from VRAM not reported by the driver".to_string(),
        };
        let gtt = match (d.baseline_gtt_bytes, d.peak_gtt_bytes, d.gtt_growth_bytes()) {
            (Some(base), Some(peak), Some(growth)) => format!(
                "GTT-resident {} → peak {} (+{})",
                bytes(base),
                bytes(peak),
                bytes(growth)
            ),
            _ => "no GTT figure".to_string(),
        };
        let _ = writeln!(
            out,
            "hmn spill: the command's own buffers on GPU {}: {evicted}; {gtt}",
            d.device_index
        );
    }
    out
}

/// The command tree's processes: its root once known (the child's `stat` may not be readable
/// at once), then the root and its descendants at every reading.
struct Tree {
    child: u32,
    root: Option<ProcessId>,
    eviction: TreeEviction,
}

impl Tree {
    fn observe(&mut self, probe: &Probe) {
        if self.root.is_none() {
            self.root = read_stat(probe.roots(), self.child).ok().map(|s| s.id());
        }
        let Some(root) = self.root else {
            return;
        };
        let pids: Vec<u32> = tree(probe.roots(), root).iter().map(|p| p.pid).collect();
        let list = probe.gpu_usage();
        self.eviction
            .observe(list.processes.iter().filter(|p| pids.contains(&p.pid)));
    }
}

pub fn run(
    opts: ProbeOptions,
    g: &GlobalArgs,
    args: &SpillArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let Some((program, rest)) = args.command.split_first() else {
        anyhow::bail!("spill: no command given");
    };
    let probe = Probe::with_options(opts);
    let listed = probe.devices();
    // An index needs no lookup (a missing device is "not measurable", as upstream); any other
    // selector must name a device (a MIG device tracks its GPU).
    let device = match crate::select::plain_index(g, &args.device) {
        Some(i) => i,
        None => crate::select::resolve(
            "spill",
            g,
            &listed.devices,
            || listed.absent_reasons(),
            std::slice::from_ref(&args.device),
        )?
        .first()
        .map_or(0, |s| s.device_index),
    };
    let mut tracker = SpillTracker::with_probe(&probe, device);
    // The tree is followed only where a DRM device could report its clients.
    let drm = listed.devices.iter().any(|d| d.source == Source::Sysfs);
    let forwarder = exec::SignalForwarder::install().context("installing signal handlers")?;
    let mut child = match exec::resolve(program).and_then(|path| {
        let launch = job::Launch {
            path: &path,
            argv0: program,
            args: rest,
            cgroup_procs: None,
            env: &[],
        };
        job::Job::spawn(&launch).map_err(|e| exec::SpawnError::from_io(program, &e))
    }) {
        Ok(c) => c,
        Err(e) => {
            forwarder.finish();
            output::note(&e.upstream_message())?;
            return Ok(ExitCode::from(1));
        }
    };
    forwarder.forward_to(child.id());
    let started = Instant::now();
    let label = || format!("+{:.1}s", started.elapsed().as_secs_f64());
    let mut followed = Tree {
        child: child.id(),
        root: None,
        eviction: TreeEviction::new(),
    };
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) => {}
            Err(e) => {
                // No outcome to pass through: upstream's 1.
                forwarder.finish();
                output::note(&format!("failed to wait on the command: {e}"))?;
                return Ok(ExitCode::from(1));
            }
        }
        tracker.observe(label());
        if drm {
            followed.observe(&probe);
        }
        std::thread::sleep(args.interval);
    };
    // One more reading after the command ends, so a short command gets at least one.
    tracker.observe(label());
    forwarder.finish();
    let exit = exec::exit_code(status);

    let reason = tracker.unmeasurable_reason().map(str::to_string);
    let report = tracker.into_report();
    let tree_drm = followed.eviction.devices();
    if g.json {
        output::json_line(
            out,
            &SpillJson {
                report: SpillFields::new(&report),
                schema: 1,
                device,
                unmeasurable_reason: reason.as_deref(),
                tree_drm: &tree_drm,
            },
        )?;
        out.flush()?;
    }
    let mut text = match &reason {
        None => text_block("hmn spill", &report),
        Some(why) => not_measurable_line("hmn spill", device, why),
    };
    text.push_str(&tree_lines(&tree_drm));
    output::report(&text)?;
    Ok(ExitCode::from(exit.upstream_code()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> SpillReport {
        SpillReport::builder()
            .peak_dedicated_bytes(15 << 30)
            .dedicated_limit_bytes(16 << 30)
            .peak_shared_bytes(3 << 30)
            .baseline_shared_bytes(134 << 20)
            .observations(40)
            .measurable(true)
            .episode(
                "+2.0s",
                Some("+3.0s"),
                2 << 30,
                11,
                Duration::from_millis(1000),
            )
            .episode("+5.0s", None, 3 << 30, 21, Duration::from_millis(2000))
            .build()
    }

    #[test]
    fn the_block_has_upstreams_three_lines() {
        assert_eq!(
            text_block("hmn spill", &report()),
            "hmn spill: peak dedicated 15 GiB / 16 GiB\n\
             \x20          peak shared    3 GiB (baseline 134 MiB)\n\
             \x20          episodes       2 — total 3.0s, longest 2.0s, first +2.0s into run\n"
        );
        let calm = SpillReport::builder().measurable(true).build();
        assert_eq!(
            text_block("hmn watch", &calm),
            "hmn watch: peak dedicated 0 B\n\
             \x20          peak shared    0 B (baseline 0 B)\n\
             \x20          episodes       0 — no spill observed\n"
        );
    }

    #[test]
    fn json_keys_are_upstreams_in_order_then_ours() {
        let json = serde_json::to_string(&SpillJson {
            report: SpillFields::new(&report()),
            schema: 1,
            device: 1,
            unmeasurable_reason: None,
            tree_drm: &[],
        })
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v.as_object().unwrap().keys().collect::<Vec<_>>().len(), 13);
        let order = [
            "measurable",
            "spilled",
            "observations",
            "baseline_shared_bytes",
            "peak_shared_bytes",
            "peak_dedicated_bytes",
            "dedicated_limit_bytes",
            "total_spill_duration_ms",
            "episodes",
            "schema",
            "device",
            "unmeasurable_reason",
            "tree_drm",
        ];
        let positions: Vec<usize> = order
            .iter()
            .map(|k| json.find(&format!("\"{k}\":")).unwrap())
            .collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{json}");
        assert!(json.starts_with(
            "{\"measurable\":true,\"spilled\":true,\"observations\":40,\
             \"baseline_shared_bytes\":140509184,\"peak_shared_bytes\":3221225472,\
             \"peak_dedicated_bytes\":16106127360,\"dedicated_limit_bytes\":17179869184,\
             \"total_spill_duration_ms\":3000,\"episodes\":[{\"start_label\":\"+2.0s\",\
             \"end_label\":\"+3.0s\",\"peak_shared_bytes\":2147483648,\"observations\":11,\
             \"duration_ms\":1000},"
        ));
    }
}
