//! `hmn watch [PID…]`: follow processes' RAM and GPU memory, one row per process per interval
//! with deltas from each process's first sample (the sampler's baselines), and one device's
//! spill ([`SpillTracker`]); a closing report (baseline and peak per process, the spill report)
//! at the end or on Ctrl+C.
//!
//! Without PIDs the processes are auto-selected: the `--top` N rows by GPU memory (ties by
//! name, then pid), narrowed by `--device`, `--min` and `--filter`, once or — with
//! `--follow-new` — every interval, each change of the followed set one line on stderr.
//! A process whose RAM or VRAM grows steadily (`watch_growth`) is said on stderr when the flag
//! is raised and cleared, and carried in each JSON sample's `growth`.
//! Exit status, as upstream: 0 when no spill was observed, 1 when one was, 2 on an error; 3
//! when `--exit-on-growth RATE` ended the watch.

use std::cmp::Reverse;
use std::fmt::Write as _;
use std::io::Write;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::bail;
use hypomnesis::process::tree::{ProcessId, read_stat};
use hypomnesis::sampler::{Sampler, SamplerOptions, SamplerReport, Target};
use hypomnesis::select::{DeviceSelector, Selected};
use hypomnesis::workload::WorkloadInfo;
use hypomnesis::{GpuProcess, Probe, ProcessName, SpillReport, SpillTracker};
use serde::Serialize;
use serde_json::json;

use crate::args::{GlobalArgs, WatchArgs};
use crate::format::{Align, Table, bytes, sanitize};
use crate::output;
use crate::ps::name_matches;
use crate::spill::{SpillFields, not_measurable_line, text_block};

/// A process's device memory: `?` when unknown, `≥ X` when a device's figure is missing.
fn vram_cell(v: Option<u64>, lower_bound: bool) -> String {
    match (v, lower_bound) {
        (None, _) => "?".to_string(),
        (Some(v), true) => format!("≥ {}", bytes(v)),
        (Some(v), false) => bytes(v),
    }
}

fn signed(delta: i128) -> String {
    let magnitude = bytes(u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX));
    match delta {
        0 => "0 B".to_string(),
        d if d > 0 => format!("+{magnitude}"),
        _ => format!("-{magnitude}"),
    }
}

/// A followed process.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Followed {
    id: ProcessId,
    name: ProcessName,
    /// Its workload (cgroup, and the pod's or container's names), looked up when it was chosen.
    workload: Option<WorkloadInfo>,
}

/// Auto-selection only: `--follow-new`, `--filter` and `--min` with explicit PIDs is a usage
/// error (upstream's wording), found before anything is measured.
fn check_conflicts(args: &WatchArgs) -> anyhow::Result<()> {
    if args.pids.is_empty() {
        return Ok(());
    }
    for (flag, given) in [
        ("--follow-new", args.follow_new),
        ("--filter", !args.filter.is_empty()),
        ("--min", args.min.is_some()),
    ] {
        if given {
            bail!(
                "watch {flag} only applies to auto-selection; drop {flag} or the explicit PID list"
            );
        }
    }
    Ok(())
}

/// The explicit pids (each must be a running process; one given twice is watched once), their
/// workloads named as `hmn ps` names them.
fn explicit(probe: &Probe, pids: &[u32]) -> anyhow::Result<Vec<Followed>> {
    let names = hypomnesis::workload::names::NameCache::new();
    let mut seen = std::collections::BTreeSet::new();
    pids.iter()
        .filter(|pid| seen.insert(**pid))
        .map(|pid| {
            let s = read_stat(probe.roots(), *pid)
                .map_err(|_| anyhow::anyhow!("watch: no process {pid}"))?;
            // A zombie has exited: nothing of it is left to watch.
            if s.has_exited() {
                anyhow::bail!("watch: process {pid} has exited (state {})", s.state);
            }
            Ok(Followed {
                id: s.id(),
                name: s.comm,
                workload: hypomnesis::workload::of_process_named(probe.roots(), *pid, &names),
            })
        })
        .collect()
}

/// The rows auto-selection may pick, best first: on `--device` (if given; a MIG device keeps
/// its own rows), at least `--min`, matching `--filter`, by GPU memory (unknown last), then
/// name, then pid.
fn candidates<'a>(
    rows: &'a [GpuProcess],
    args: &WatchArgs,
    on: Option<Selected>,
) -> Vec<&'a GpuProcess> {
    let mut rows: Vec<&GpuProcess> = rows
        .iter()
        .filter(|r| on.is_none_or(|s| s.matches(r)))
        .filter(|r| {
            args.min
                .is_none_or(|m| m == 0 || r.footprint_bytes().is_some_and(|f| f >= m))
        })
        .filter(|r| name_matches(r, &args.filter))
        .collect();
    rows.sort_by(|a, b| {
        Reverse(a.used_bytes)
            .cmp(&Reverse(b.used_bytes))
            .then_with(|| a.name.cmp(&b.name))
            .then(a.pid.cmp(&b.pid))
    });
    rows
}

/// The top `--top` processes of the candidates (a process on several devices once).
fn auto_select(probe: &Probe, args: &WatchArgs, on: Option<Selected>) -> Vec<Followed> {
    let list = probe.gpu_processes();
    let mut out: Vec<Followed> = Vec::new();
    for r in candidates(&list.processes, args, on) {
        if out.len() >= args.top as usize {
            break;
        }
        if let Ok(st) = read_stat(probe.roots(), r.pid) {
            if !out.iter().any(|f| f.id == st.id()) {
                out.push(Followed {
                    id: st.id(),
                    name: r.name.clone().unwrap_or(st.comm),
                    workload: r.workload.clone(),
                });
            }
        }
    }
    out
}

/// `(top N on GPU d, matching "a", "b", at least X)`: the auto-selection's criteria.
fn criteria(args: &WatchArgs) -> String {
    let mut parts = vec![format!("top {}", args.top)];
    match &args.device {
        Some(DeviceSelector::Index(d)) => parts.push(format!("on GPU {d}")),
        Some(d) => parts.push(format!("on {}", sanitize(&d.to_string()))),
        None => {}
    }
    if !args.filter.is_empty() {
        let quoted: Vec<String> = args.filter.iter().map(|f| format!("{f:?}")).collect();
        parts.push(format!("matching {}", quoted.join(", ")));
    }
    if let Some(m) = args.min {
        parts.push(format!("at least {}", bytes(m)));
    }
    parts.join(" ")
}

/// `entered pid=N (name), …; left pid=M (name)`, or `None` when the set did not change.
fn set_change(before: &[Followed], now: &[Followed]) -> Option<String> {
    let list = |fs: Vec<&Followed>| {
        fs.iter()
            .map(|f| format!("pid={} ({})", f.id.pid, f.name.escaped()))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let has = |set: &[Followed], f: &Followed| set.iter().any(|g| g.id == f.id);
    let entered: Vec<&Followed> = now.iter().filter(|f| !has(before, f)).collect();
    let left: Vec<&Followed> = before.iter().filter(|f| !has(now, f)).collect();
    let mut parts = Vec::new();
    if !entered.is_empty() {
        parts.push(format!("entered {}", list(entered)));
    }
    if !left.is_empty() {
        parts.push(format!("left {}", list(left)));
    }
    (!parts.is_empty()).then(|| parts.join("; "))
}

/// The spill record of the JSON summary: upstream's fields, then the device and the reason.
#[derive(Serialize)]
struct SpillJson<'a> {
    #[serde(flatten)]
    report: SpillFields,
    device: u32,
    unmeasurable_reason: Option<&'a str>,
}

pub fn run(
    probe: Probe,
    g: &GlobalArgs,
    args: &WatchArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    check_conflicts(args)?;
    let devices = probe.devices();
    // A backend that is here but broken hides processes: a hard error, as upstream.
    if let Some(failed) = devices.failed_reasons().first() {
        bail!("watch failed to count devices: {failed}");
    }
    let on = match &args.device {
        Some(sel) => Some(crate::watch_gpu::device(g, &devices, sel)?),
        None => None,
    };
    let spill_device = on.map_or(0, |s| s.device_index);
    let mut tracker = SpillTracker::with_probe(&probe, spill_device);
    let mut followed = if args.pids.is_empty() {
        auto_select(&probe, args, on)
    } else {
        explicit(&probe, &args.pids)?
    };
    if followed.is_empty() && !args.follow_new {
        bail!(
            "watch: no GPU process to auto-select ({}); name PIDs to watch, or add --follow-new \
             to wait for work",
            criteria(args)
        );
    }
    let stop = crate::signals::stop()?;
    let mut device_watch = crate::watch_device::DeviceWatch::start(&probe, &devices)?;
    let ids = |fs: &[Followed]| fs.iter().map(|f| f.id).collect::<Vec<_>>();
    let mut sampler = Sampler::new(
        probe,
        Target::Processes(ids(&followed)),
        SamplerOptions::default()
            .interval(args.interval)
            .keep_timeline(false),
    );
    // A device whose memory is host RAM: its VRAM column is host RAM too (never added).
    let host_notes: Vec<(u32, String)> = devices
        .devices
        .iter()
        .filter_map(|d| Some((d.index, crate::pool::host_memory_note(d)?)))
        .collect();
    let host_devices: Vec<u32> = host_notes.iter().map(|(i, _)| *i).collect();
    start_record(g, args, &followed, spill_device, on, &host_devices, out)?;
    if !g.json {
        for n in crate::watch_gpu::mig_notes(&devices, on.map(|s| s.device_index)) {
            output::note(&n)?;
        }
        for (_, n) in &host_notes {
            output::note(&format!("watch: {n}"))?;
        }
    }
    let started = Instant::now();
    // `--duration` ends the watch on time: the last wait is cut short at the deadline, where
    // the last sample is taken.
    let deadline = args.duration.map(|d| started + d);
    let mut header = !g.json;
    let mut widths: Vec<usize> = Vec::new();
    let mut first = true;
    let mut trends = crate::watch_growth::Trends::new(args);
    let mut grown = None;
    loop {
        let t = started.elapsed().as_secs_f64();
        if args.follow_new && !first {
            let now = auto_select(sampler.probe(), args, on);
            if let Some(change) = set_change(&followed, &now) {
                output::report(&format!(
                    "hmn watch: +{t:.1}s followed set changed: {change}\n"
                ))?;
                sampler.set_target(Target::Processes(ids(&now)));
                followed = now;
            }
        }
        first = false;
        tracker.observe(format!("+{t:.1}s"));
        let spilling = tracker.is_measurable().then(|| tracker.is_spilling());
        let s = sampler.sample();
        let peaks = sampler.report().processes;
        let with_workload = followed.iter().any(|f| f.workload.is_some());
        let mut headers = vec![
            ("TIME", Align::Right),
            ("PID", Align::Right),
            ("NAME", Align::Left),
            ("RSS", Align::Right),
            ("ΔRSS", Align::Right),
            ("VRAM", Align::Right),
            ("ΔVRAM", Align::Right),
            ("SM", Align::Right),
        ];
        if with_workload {
            headers.push(("WORKLOAD", Align::Left));
        }
        let mut table = Table::new(&headers);
        let mut said = Vec::new();
        for p in &s.processes {
            let (growth, lines) = trends.observe(s.t_ms as f64 / 1000.0, p);
            said.extend(lines);
            grown = grown.or_else(|| trends.exceeded(p.pid, &growth));
            let workload = followed
                .iter()
                .find(|f| f.id.pid == p.pid)
                .and_then(|f| f.workload.as_ref());
            // Unknown where it has rows without a figure (never 0); a lower bound where some.
            let vram = p.vram();
            // The sampler follows fixed (pid, start time) identities: a pid names one process.
            let (r0, v0) = peaks
                .iter()
                .find(|b| b.pid == p.pid)
                .map_or((p.rss_bytes, vram), |b| {
                    (b.baseline_rss_bytes, b.baseline_vram_bytes)
                });
            let dr = i128::from(p.rss_bytes) - i128::from(r0);
            let dv = vram.zip(v0).map(|(v, v0)| i128::from(v) - i128::from(v0));
            if g.json {
                let mut line = json!({"kind": "sample", "t_ms": s.t_ms, "unix_ms": s.unix_ms,
                "pid": p.pid, "name": p.name, "rss_bytes": p.rss_bytes, "rss_delta_bytes": dr,
                "vram_bytes": vram, "vram_delta_bytes": dv, "vram_by_device": p.vram_bytes,
                "spilling": spilling, "utilization_by_device": p.utilization,
                "workload": workload, "growth": growth});
                if let (false, Some(o)) = (p.vram_unknown.is_empty(), line.as_object_mut()) {
                    o.insert("vram_unknown".to_string(), json!(p.vram_unknown));
                }
                if let (Some(hex), Some(o)) = (p.name.bytes_hex(), line.as_object_mut()) {
                    o.insert("name_bytes_hex".to_string(), hex.into());
                }
                output::json_line(out, &line)?;
            } else {
                let mut cells = vec![
                    format!("+{:.1}s", s.t_ms as f64 / 1000.0),
                    p.pid.to_string(),
                    p.name.escaped(),
                    bytes(p.rss_bytes),
                    signed(dr),
                    vram_cell(vram, p.vram_is_lower_bound()),
                    dv.map_or_else(|| "?".to_string(), signed),
                    crate::watch_gpu::sm_cell(p),
                ];
                if with_workload {
                    cells.push(crate::who::workload_cell(workload));
                }
                table.row(cells);
            }
        }
        if !g.json && !s.processes.is_empty() {
            // Columns keep the widest width seen; the header again when one widened.
            let (text, grew) = table.render_kept(&mut widths);
            let mut lines = text.lines();
            let head = lines.next().unwrap_or_default();
            if header || grew {
                writeln!(out, "{head}")?;
                header = false;
            }
            for l in lines {
                writeln!(out, "{l}")?;
            }
        }
        device_watch.observe(&s, g.json, out)?;
        for line in said {
            output::report(&format!(
                "hmn watch: +{:.1}s {}\n",
                s.t_ms as f64 / 1000.0,
                sanitize(&line)
            ))?;
        }
        // A fixed set ends when every process has; a followed one waits for work.
        let gone = s.processes.is_empty() && !args.follow_new || grown.is_some();
        let now = Instant::now();
        let over = deadline.is_some_and(|d| now >= d);
        let pause = deadline.map_or(args.interval, |d| args.interval.min(d - now));
        if gone || over || stop.sleep(pause) {
            break;
        }
    }
    let t_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    device_watch.finish(t_ms, g.json, out)?;
    let reason = tracker.unmeasurable_reason().map(str::to_string);
    let spill = tracker.into_report();
    // With the driver's accounting records (peak memory, utilization over each life).
    let closing = Closing {
        spill: &spill,
        reason: reason.as_deref(),
        spill_device,
        devices: &device_watch,
    };
    closing_report(&sampler.finish(), &closing, g, out)?;
    if let Some(why) = grown {
        output::note(&format!("watch: --exit-on-growth: {}", sanitize(&why)))?;
        return Ok(ExitCode::from(3));
    }
    Ok(ExitCode::from(u8::from(spill.spilled())))
}

/// The start: a JSON record, or one line on stderr.
fn start_record(
    g: &GlobalArgs,
    args: &WatchArgs,
    followed: &[Followed],
    spill_device: u32,
    on: Option<Selected>,
    host_devices: &[u32],
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    let pids: Vec<u32> = followed.iter().map(|f| f.id.pid).collect();
    if g.json {
        return output::json_line(
            out,
            &json!({"kind": "start", "schema": 1, "pids": pids, "host_memory_devices": host_devices,
            "interval_ms": args.interval.as_millis(), "duration_ms": args.duration.map(|d| d.as_millis()),
            "follow_new": args.follow_new, "filters": args.filter, "min_bytes": args.min,
            "device": on.map(|s| s.device_index), "spill_device": spill_device,
            "device_selector": args.device.as_ref().map(ToString::to_string),
            "mig_index": on.and_then(|s| s.mig_index)}),
        );
    }
    let every = format!(
        "every {}{}",
        crate::format::duration(args.interval),
        args.duration
            .map(|d| format!(", for {}", crate::format::duration(d)))
            .unwrap_or_default()
    );
    let what = if args.follow_new {
        let waiting = if pids.is_empty() {
            "; waiting for work to appear"
        } else {
            ""
        };
        format!(
            "following the {} (re-selected every interval), {} initially{waiting}",
            criteria(args),
            pids.len()
        )
    } else if args.pids.is_empty() {
        format!(
            "{} process{} ({})",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" },
            criteria(args)
        )
    } else {
        format!(
            "{} process{}",
            pids.len(),
            if pids.len() == 1 { "" } else { "es" }
        )
    };
    output::note(&format!(
        "watch: {what}, {every}; spill of GPU {spill_device} — Ctrl+C for the summary"
    ))
}

/// What the closing report says besides the sampler's report.
struct Closing<'a> {
    spill: &'a SpillReport,
    reason: Option<&'a str>,
    spill_device: u32,
    devices: &'a crate::watch_device::DeviceWatch,
}

/// The closing report: samples and time, baseline and peak per process, the devices' figures
/// and the spill report (stderr), or one JSON line of kind `summary`.
fn closing_report(
    r: &SamplerReport,
    c: &Closing<'_>,
    g: &GlobalArgs,
    out: &mut dyn Write,
) -> anyhow::Result<()> {
    if g.json {
        let mut line = json!({"kind": "summary", "samples": r.samples, "elapsed_ms": r.elapsed_ms,
        "per_pid": r.processes, "accounting": r.vram_accounting, "spill": SpillJson {
            report: SpillFields::new(c.spill),
            device: c.spill_device,
            unmeasurable_reason: c.reason,
        }});
        if let (Some(o), serde_json::Value::Object(more)) =
            (line.as_object_mut(), c.devices.summary_fields())
        {
            o.extend(more);
        }
        return output::json_line(out, &line);
    }
    let mut t = Table::new(&[
        ("PID", Align::Right),
        ("NAME", Align::Left),
        ("BASELINE RSS", Align::Right),
        ("PEAK RSS", Align::Right),
        ("BASELINE VRAM", Align::Right),
        ("PEAK VRAM", Align::Right),
    ]);
    for p in &r.processes {
        t.row(vec![
            p.pid.to_string(),
            p.name.escaped(),
            bytes(p.baseline_rss_bytes),
            bytes(p.peak_rss_bytes),
            vram_cell(p.baseline_vram_bytes, p.vram_is_lower_bound),
            vram_cell(p.peak_vram_bytes, p.vram_is_lower_bound),
        ]);
    }
    let mut text = format!(
        "hmn watch: {} samples over {:.1} s\n",
        r.samples,
        r.elapsed_ms as f64 / 1000.0
    );
    for line in t.render().lines() {
        let _ = writeln!(text, "  {}", sanitize(line));
    }
    for line in crate::watch_gpu::accounting_lines(&r.vram_accounting)
        .into_iter()
        .chain(c.devices.closing_lines())
    {
        let _ = writeln!(text, "  {line}");
    }
    text.push_str(&match c.reason {
        None => text_block("hmn watch", c.spill),
        Some(why) => not_measurable_line("hmn watch", c.spill_device, why),
    });
    output::report(&text)
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
