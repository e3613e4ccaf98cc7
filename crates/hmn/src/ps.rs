//! `hmn ps`: the processes holding GPU memory, as a table, JSON (schema 1) or CSV, with a
//! totals line on stderr.

use std::cmp::Reverse;
use std::io::Write;
use std::process::ExitCode;

use hypomnesis::select::Selected;
use hypomnesis::{
    BackendProblem, Device, Error, Field, GpuProcess, PoolKind, Probe, ProcessList, Unattributed,
    VramSum, Warning,
};
use serde::Serialize;

use crate::args::{GlobalArgs, PsArgs, SortKey};
use crate::format::{Align, Table, bytes, csv_field, opt_bytes};
use crate::output;
use crate::who;

/// `hmn ps --json` (schema 1).
#[derive(Serialize)]
struct PsJson<'a> {
    schema: u32,
    processes: &'a [GpuProcess],
    hidden_processes: u32,
    failed_devices: &'a [u32],
    warnings: &'a [Warning],
    /// Per device: used memory no listed process accounts for (additive).
    unattributed: &'a [Unattributed],
    /// Each backend that failed with no fallback in its place (additive; absent when none):
    /// GPU processes may exist that this listing cannot show, and the exit status is 2.
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    failed_backends: &'a [BackendProblem],
}

pub fn run(
    probe: &Probe,
    g: &GlobalArgs,
    args: &PsArgs,
    out: &mut dyn Write,
) -> anyhow::Result<ExitCode> {
    let list = if args.util {
        // Engine counters are cumulative: the second sample's deltas over the first give the
        // utilization of the interval.
        let _ = probe.gpu_processes();
        std::thread::sleep(args.interval);
        probe.gpu_processes()
    } else {
        probe.gpu_processes()
    };
    let selected = crate::select::resolve(
        "ps",
        g,
        &list.devices,
        || list.absent_reasons(),
        &args.device,
    )?;
    for s in &selected {
        list.device(s.device_index).map_err(device_error)?;
    }
    let wanted: Vec<u32> = selected.iter().map(|s| s.device_index).collect();
    let mut rows: Vec<&GpuProcess> = list
        .processes
        .iter()
        .filter(|p| keep(p, args, &selected))
        .collect();
    sort_rows(&mut rows, args.sort);
    let unattributed: Vec<Unattributed> = list
        .devices
        .iter()
        .filter(|d| wanted.is_empty() || wanted.contains(&d.index))
        .map(|d| list.unattributed_on(d))
        .collect();

    // The library's verdict (`ProcessList::completeness`): a backend that is here but broken
    // (an NVML that cannot start or count) may hide GPU processes — exit 2, as upstream,
    // whatever was listed from other backends; so does a listing where no device could be
    // queried.
    let complete = list.completeness((!wanted.is_empty()).then_some(wanted.as_slice()));
    if g.json {
        let owned: Vec<GpuProcess> = rows.iter().map(|r| (*r).clone()).collect();
        output::json_line(
            out,
            &PsJson {
                schema: 1,
                processes: &owned,
                hidden_processes: list.hidden_processes,
                failed_devices: &list.failed_devices,
                warnings: &list.warnings,
                unattributed: &unattributed,
                failed_backends: &complete.failed_backends,
            },
        )?;
    } else if args.csv {
        write_csv(out, &rows)?;
        output::warnings(&list.warnings)?;
    } else {
        // Nothing could be read: no table to show (its header alone would read as "none").
        if !complete.nothing_read {
            out.write_all(table(&rows, args.util, &list).as_bytes())?;
        }
        output::warnings(&list.warnings)?;
    }
    // The totals line goes out after stdout is complete, so `2>&1` keeps them in order.
    out.flush()?;
    // No count when nothing could be read: "0 GPU processes found" would be a guess.
    if !complete.nothing_read {
        output::note(&totals_line(&rows, list.hidden_processes, &list.devices))?;
    }
    if let Some(line) = crate::health::unattributed_line(&unattributed) {
        output::note(&format!("ps: {line}"))?;
    }
    if let Some(note) = who::namespace_note(&rows) {
        output::note(&format!("ps: {note}"))?;
    }
    for failed in &complete.failed_backends {
        output::note(&format!("ps failed to count devices: {failed}"))?;
    }
    if complete.nothing_read {
        output::note("ps: no device could be queried, so nothing could be listed")?;
    } else if list.devices.is_empty() && complete.failed_backends.is_empty() {
        output::note(&output::no_gpu_line(&list.absent_reasons()))?;
    }
    Ok(ExitCode::from(exit_code(
        args.exit_status,
        rows.is_empty(),
        &complete,
    )))
}

/// `ps`'s exit status: 2 when the listing failed; with `--exit-status`, 1 when no process was
/// found and none can have been missed, 2 when some may have been (hidden, a failed device).
fn exit_code(exit_status: bool, empty: bool, c: &hypomnesis::Completeness) -> u8 {
    match (exit_status, empty, c.may_miss_processes()) {
        _ if c.is_failure() => 2,
        (false, _, _) | (true, false, _) => 0,
        (true, true, false) => 1,
        (true, true, true) => 2,
    }
}

/// A `--device` that cannot be listed, in `ps`'s words: the library decides which case it is.
fn device_error(e: Error) -> anyhow::Error {
    match e {
        Error::DeviceIndexOutOfRange { index, count } => anyhow::anyhow!(
            "ps: no GPU {index} (have {count} device{})",
            if count == 1 { "" } else { "s" }
        ),
        Error::DeviceUnreadable { index, reason } => {
            anyhow::anyhow!("ps: GPU {index} could not be queried: {reason}")
        }
        other => anyhow::anyhow!("ps: {other}"),
    }
}

fn keep(p: &GpuProcess, a: &PsArgs, selected: &[Selected]) -> bool {
    let pid_ok = a.pid.is_empty() || a.pid.contains(&p.pid);
    let dev_ok = selected.is_empty() || selected.iter().any(|s| s.matches(p));
    let user_ok = a.user.is_empty()
        || a.user.iter().any(|u| {
            p.user.as_deref() == Some(u.as_str())
                || u.parse::<u32>().ok().is_some_and(|id| p.uid == Some(id))
        });
    let name_ok =
        name_matches(p, &a.filter) && who::workload_matches(p.workload.as_ref(), &a.workload);
    let min_ok = a
        .min
        .is_none_or(|min| min == 0 || p.footprint_bytes().is_some_and(|f| f >= min));
    pid_ok && dev_ok && user_ok && name_ok && min_ok
}

/// Whether a row's name contains one of `patterns`, case-insensitively (no patterns: every
/// row; a row without a name matches none).
pub fn name_matches(p: &GpuProcess, patterns: &[String]) -> bool {
    patterns.is_empty()
        || p.name.as_ref().is_some_and(|n| {
            let n = n.to_string_lossy().to_lowercase();
            patterns.iter().any(|f| n.contains(&f.to_lowercase()))
        })
}

fn sort_rows(rows: &mut [&GpuProcess], key: SortKey) {
    // Ties always break by device, then pid, so the order is stable across runs. `Reverse` of
    // an `Option` puts `None` (unknown) after every known figure.
    let tie = |p: &GpuProcess| (p.device_index, p.pid);
    match key {
        SortKey::Vram => rows.sort_by_key(|p| (Reverse(p.used_bytes), tie(p))),
        SortKey::Shared => rows.sort_by_key(|p| (Reverse(p.gtt_bytes()), tie(p))),
        SortKey::Total => rows.sort_by_key(|p| (Reverse(p.footprint_bytes()), tie(p))),
        SortKey::Pid => rows.sort_by_key(|p| (p.pid, p.device_index)),
        SortKey::Name => rows.sort_by(|a, b| a.name.cmp(&b.name).then(tie(a).cmp(&tie(b)))),
        SortKey::User => rows.sort_by(|a, b| {
            a.user
                .cmp(&b.user)
                .then(a.uid.cmp(&b.uid))
                .then(tie(a).cmp(&tie(b)))
        }),
        SortKey::Device => rows.sort_by_key(|p| (p.device_index, Reverse(p.used_bytes), p.pid)),
    }
}

fn user_cell(p: &GpuProcess) -> String {
    match (&p.user, p.uid) {
        (Some(u), _) => u.clone(),
        (None, Some(uid)) => uid.to_string(),
        (None, None) => "?".to_string(),
    }
}

/// The VRAM cell: the bytes, `?` when unknown, or where a shared client is counted.
fn vram_cell(p: &GpuProcess) -> String {
    match (p.used_bytes, p.shared_with.first()) {
        (Some(0), Some(owner)) => format!("shared w/ {owner}"),
        (used, _) => opt_bytes(used),
    }
}

/// The UTIL cell: NVML's SM and memory percent (`?` when NVML gives none, as under MIG), or
/// the busiest DRM engine class, or `-` when the driver gave no figure. The hook for `hmn top`:
/// the same cell for the same row (`GpuProcess::utilization`, filled by every `Probe` query with
/// the time since the previous one).
pub fn util_cell(p: &GpuProcess) -> String {
    if let Some(u) = p.utilization {
        let mut cell = format!("{}% sm {}% mem", u.sm_percent, u.memory_percent);
        for (v, name) in [(u.encoder_percent, "enc"), (u.decoder_percent, "dec")] {
            if v > 0 {
                cell.push_str(&format!(" {v}% {name}"));
            }
        }
        return cell;
    }
    if p.unknown.iter().any(|u| u.field == Field::Utilization) {
        return "?".to_string();
    }
    p.engines
        .iter()
        .max_by(|a, b| a.1.busy_percent.total_cmp(&b.1.busy_percent))
        .map_or_else(
            || "-".to_string(),
            |(class, u)| format!("{:.0}% {class}", u.busy_percent),
        )
}

/// The MIG cell: `1g.10gb GI 11 CI 0`-style, from the row's MIG device (`-` outside MIG);
/// also for `hmn top`.
pub fn mig_cell(p: &GpuProcess, list: &ProcessList) -> String {
    mig_cell_of(p, &list.devices)
}

/// As [`mig_cell`], with the devices given (`hmn top`'s snapshot).
pub fn mig_cell_of(p: &GpuProcess, devices: &[Device]) -> String {
    let Some(m) = p.mig_index else {
        return "-".to_string();
    };
    let profile = devices
        .iter()
        .find(|d| d.index == p.device_index)
        .and_then(|d| d.mig_instance(m))
        .and_then(|i| i.profile.clone())
        .unwrap_or_else(|| format!("#{m}"));
    let id = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    format!(
        "{profile} GI {} CI {}",
        id(p.gpu_instance_id),
        id(p.compute_instance_id)
    )
}

/// The text table: `PID USER NAME DEVICE KIND VRAM` (and `MIG` when a row is in a MIG
/// instance, `UTIL` with `--util`; `NS PID` and `WORKLOAD` when some row has one).
fn table(rows: &[&GpuProcess], util: bool, list: &ProcessList) -> String {
    let mig = rows.iter().any(|p| p.mig_index.is_some());
    let ns = rows.iter().any(|p| p.ns_pid.is_some());
    let workload = rows.iter().any(|p| p.workload.is_some());
    let mut headers = vec![("PID", Align::Right)];
    if ns {
        headers.push(("NS PID", Align::Right));
    }
    headers.extend([
        ("USER", Align::Left),
        ("NAME", Align::Left),
        ("DEVICE", Align::Right),
        ("KIND", Align::Left),
        ("VRAM", Align::Right),
    ]);
    if mig {
        headers.push(("MIG", Align::Left));
    }
    if util {
        headers.push(("UTIL", Align::Left));
    }
    if workload {
        headers.push(("WORKLOAD", Align::Left));
    }
    let mut t = Table::new(&headers);
    for p in rows {
        let mut cells = vec![p.pid.to_string()];
        if ns {
            cells.push(who::ns_pid_cell(p));
        }
        cells.extend([
            user_cell(p),
            who::name_cell(p),
            p.device_index.to_string(),
            p.kind.to_string(),
            vram_cell(p),
        ]);
        if mig {
            cells.push(mig_cell(p, list));
        }
        if util {
            cells.push(util_cell(p));
        }
        if workload {
            cells.push(who::workload_cell(p.workload.as_ref()));
        }
        t.row(cells);
    }
    t.render()
}

fn write_csv(out: &mut dyn Write, rows: &[&GpuProcess]) -> std::io::Result<()> {
    writeln!(
        out,
        "pid,user,uid,name,device_index,device_uuid,kind,used_bytes,source"
    )?;
    for p in rows {
        let opt = |v: Option<String>| v.map(|s| csv_field(&s)).unwrap_or_default();
        writeln!(
            out,
            "{},{},{},{},{},{},{},{},{}",
            p.pid,
            opt(p.user.clone()),
            opt(p.uid.map(|u| u.to_string())),
            opt(p.name.as_ref().map(hypomnesis::ProcessName::escaped)),
            p.device_index,
            opt(p.device_uuid.clone()),
            p.kind,
            opt(p.used_bytes.map(|u| u.to_string())),
            p.source,
        )?;
    }
    Ok(())
}

/// The totals line: `N GPU processes found (X total; …)`. Each row counts what it holds of its device's pool
/// (`GpuProcess::pool_bytes`: VRAM plus GTT on an AMD APU, as the device line counts), and each
/// device whose pool is not dedicated VRAM is named with its pool.
fn totals_line(rows: &[&GpuProcess], hidden: u32, devices: &[Device]) -> String {
    let n = rows.len();
    let mut line = format!("{n} GPU process{} found", if n == 1 { "" } else { "es" });
    let mut parts = Vec::new();
    let kind = |index: u32| {
        devices
            .iter()
            .find(|d| d.index == index)
            .and_then(Device::pool_kind)
    };
    if n > 0 {
        // The library's sum, each row counting its share of its device's pool: an MPS server
        // that may hold its clients' memory is not added again; a row with unknown usage is
        // counted apart (the total is then a lower bound).
        let sum = VramSum::of_pools(rows.iter().copied(), kind);
        parts.push(format!("{} total", bytes(sum.known_bytes)));
        let mut pools: Vec<(u32, PoolKind)> = rows
            .iter()
            .filter_map(|p| Some((p.device_index, kind(p.device_index)?)))
            .filter(|(_, k)| *k != PoolKind::Dedicated)
            .collect();
        pools.sort_by_key(|(index, _)| *index);
        pools.dedup_by_key(|(index, _)| *index);
        for (index, k) in pools {
            parts.push(match k {
                PoolKind::CarveOutPlusGtt => {
                    format!("GPU {index}: carve-out + GTT, each process's VRAM and GTT counted")
                }
                _ => format!("GPU {index}: {}", k.label()),
            });
        }
        if sum.mps_servers_left_out > 0 {
            parts.push("the MPS server's figure left out: it may include its clients'".into());
        }
        if sum.unknown_rows > 0 {
            parts.push(format!("{} with unknown usage", sum.unknown_rows));
        }
    }
    if hidden > 0 {
        parts.push(format!("{hidden} hidden — run as root to see all"));
    }
    if !parts.is_empty() {
        line.push_str(&format!(" ({})", parts.join("; ")));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::test_helpers::GpuProcessBuilder;

    #[test]
    fn totals_line_wording() {
        let a = GpuProcessBuilder::new(1, 0)
            .used_bytes(Some(1 << 30))
            .build();
        let b = GpuProcessBuilder::new(2, 0).build();
        assert_eq!(totals_line(&[], 0, &[]), "0 GPU processes found");
        assert_eq!(
            totals_line(&[&a], 0, &[]),
            "1 GPU process found (1 GiB total)"
        );
        assert_eq!(
            totals_line(&[&a, &b], 3, &[]),
            "2 GPU processes found (1 GiB total; 1 with unknown usage; 3 hidden — run as root to see all)"
        );
    }

    #[test]
    fn totals_count_an_apus_gtt_and_name_the_pool() {
        use hypomnesis::test_helpers::DeviceBuilder;
        use hypomnesis::{MemoryPool, PoolSource, ProcessRegions, RegionUsage, Source, Vendor};
        let region = |b: u64| {
            let mut r = RegionUsage::default();
            r.resident_bytes = Some(b);
            r
        };
        let mut regions = ProcessRegions::default();
        regions.vram = Some(region(5 << 20));
        regions.gtt = Some(region(24 << 30));
        let apu_row = GpuProcessBuilder::new(1, 1)
            .source(Source::Fdinfo)
            .used_bytes(Some(5 << 20))
            .regions(regions)
            .build();
        let gb10_row = GpuProcessBuilder::new(2, 0)
            .used_bytes(Some(1 << 30))
            .build();
        let mut apu = DeviceBuilder::new(1).vendor(Vendor::Amd).build();
        apu.pool = Some(MemoryPool::new(
            PoolKind::CarveOutPlusGtt,
            [PoolSource::VramPlusGtt; 3],
            "vddnb",
        ));
        let mut gb10 = DeviceBuilder::new(0).build();
        gb10.pool = Some(MemoryPool::host_ram(
            PoolSource::ProcessSum,
            "NOT_SUPPORTED",
        ));
        assert_eq!(
            totals_line(&[&gb10_row, &apu_row], 0, &[gb10, apu.clone()]),
            "2 GPU processes found (25 GiB total; GPU 0: unified with host RAM; GPU 1: carve-out + \
             GTT, each process's VRAM and GTT counted)"
        );
        // The same row on a device not known as an APU: its VRAM only, as before.
        apu.pool = None;
        assert_eq!(
            totals_line(&[&apu_row], 0, &[apu]),
            "1 GPU process found (5 MiB total)"
        );
    }

    #[test]
    fn the_totals_leave_an_mps_server_out() {
        let mut server = GpuProcessBuilder::new(1, 0)
            .used_bytes(Some(3 << 30))
            .build();
        server.may_include_clients = true;
        let client = GpuProcessBuilder::new(2, 0)
            .used_bytes(Some(1 << 30))
            .build();
        assert_eq!(
            totals_line(&[&server, &client], 0, &[]),
            "2 GPU processes found (1 GiB total; the MPS server's figure left out: it may include its clients')"
        );
    }

    #[test]
    fn exit_codes_follow_the_librarys_completeness() {
        let complete = ProcessList::default().completeness(None);
        let mut hidden = ProcessList::default();
        hidden.hidden_processes = 1;
        let hidden = hidden.completeness(None);
        let mut broken = ProcessList::default();
        broken.backends.push(hypomnesis::BackendStatus::new(
            hypomnesis::Backend::Nvml,
            hypomnesis::BackendState::failed(hypomnesis::BackendCause::VersionMismatch, "mismatch"),
        ));
        let broken = broken.completeness(None);
        for (exit_status, empty, c, code) in [
            (false, true, &complete, 0),
            (false, true, &hidden, 0),
            (true, false, &hidden, 0),
            (true, true, &complete, 1),
            (true, true, &hidden, 2),
            (false, false, &broken, 2),
            (true, false, &broken, 2),
        ] {
            assert_eq!(
                exit_code(exit_status, empty, c),
                code,
                "{exit_status} {empty} {c:?}"
            );
        }
    }

    #[test]
    fn util_cells_say_unknown_and_never_zero_for_it() {
        use hypomnesis::{ProcessUtilization, Unknown, UnknownReason};
        let mut p = GpuProcessBuilder::new(1, 0).build();
        assert_eq!(util_cell(&p), "-", "no figure at all");
        p.unknown.push(Unknown::new(
            Field::Utilization,
            UnknownReason::Unsupported,
            "MIG",
        ));
        assert_eq!(util_cell(&p), "?");
        p.utilization = Some(ProcessUtilization::new(37, 12, 0, 5, true, 0));
        assert_eq!(util_cell(&p), "37% sm 12% mem 5% dec");
        p.utilization = Some(ProcessUtilization::idle(0));
        assert_eq!(util_cell(&p), "0% sm 0% mem");
        let list = ProcessList::default();
        assert_eq!(mig_cell(&p, &list), "-");
        p.mig_index = Some(2);
        p.gpu_instance_id = Some(13);
        assert_eq!(
            mig_cell(&p, &list),
            "#2 GI 13 CI ?",
            "the device not listed: its index"
        );
    }

    #[test]
    fn vram_sort_puts_unknown_last() {
        let a = GpuProcessBuilder::new(1, 0).used_bytes(Some(5)).build();
        let b = GpuProcessBuilder::new(2, 0).build();
        let c = GpuProcessBuilder::new(3, 1).used_bytes(Some(9)).build();
        let mut rows = vec![&a, &b, &c];
        sort_rows(&mut rows, SortKey::Vram);
        let pids: Vec<u32> = rows.iter().map(|p| p.pid).collect();
        assert_eq!(pids, vec![3, 1, 2]);
    }

    fn drm_row(pid: u32, vram: u64, gtt: Option<u64>) -> GpuProcess {
        use hypomnesis::{ProcessRegions, RegionUsage};
        let region = |b| {
            let mut r = RegionUsage::default();
            r.resident_bytes = Some(b);
            r
        };
        let mut regions = ProcessRegions::default();
        regions.vram = Some(region(vram));
        regions.gtt = gtt.map(region);
        GpuProcessBuilder::new(pid, 1)
            .used_bytes(Some(vram))
            .regions(regions)
            .build()
    }

    #[test]
    fn shared_and_total_sorts_keep_unknown_last() {
        let nvidia = GpuProcessBuilder::new(1, 0).used_bytes(Some(50)).build();
        let unknown = GpuProcessBuilder::new(2, 0).build();
        let a = drm_row(3, 10, Some(100));
        let b = drm_row(4, 30, Some(5));
        let c = drm_row(5, 40, None);
        let order = |key| {
            let mut rows = vec![&nvidia, &unknown, &a, &b, &c];
            sort_rows(&mut rows, key);
            rows.iter().map(|p| p.pid).collect::<Vec<u32>>()
        };
        assert_eq!(order(SortKey::Vram), [1, 5, 4, 3, 2]);
        // Shared (GTT): NVIDIA rows have no figure and sort last, never as 0.
        assert_eq!(order(SortKey::Shared), [3, 4, 5, 1, 2]);
        // Total: 110, 35, 40, 50 (NVIDIA: VRAM alone), unknown last.
        assert_eq!(order(SortKey::Total), [3, 1, 5, 4, 2]);
        assert_eq!(unknown.footprint_bytes(), None);
    }

    #[test]
    fn a_device_that_cannot_be_listed_is_one_ps_error() {
        let e = |err| device_error(err).to_string();
        assert_eq!(
            e(Error::DeviceIndexOutOfRange { index: 9, count: 1 }),
            "ps: no GPU 9 (have 1 device)"
        );
        assert_eq!(
            e(Error::DeviceUnreadable {
                index: 1,
                reason: "GPU is lost".into()
            }),
            "ps: GPU 1 could not be queried: GPU is lost"
        );
        assert_eq!(
            e(Error::NoGpu {
                reasons: vec![hypomnesis::BackendProblem::new(
                    hypomnesis::Backend::Nvml,
                    hypomnesis::BackendCause::LibraryMissing,
                    "library not found"
                )]
            }),
            "ps: no GPU found (NVML: library not found)"
        );
    }
}
