//! The detail pane's device lines: memory no listed process accounts for, memory health (ECC
//! mode and counts, remapped rows or retired pages, amdgpu RAS blocks and bad pages, and the
//! findings `hmn devices` prints) and the XID events counted since `top` started. Every
//! reading that is unknown is `?`, never 0; a section that could not be read says why.

use hypomnesis::types::Bound;
use hypomnesis::types::xid_meaning;
use hypomnesis::{Device, Unattributed, XidTally};

use super::snapshot::Snapshot;

/// Memory on `d` that no listed process accounts for. Rows left out by the row cap make the
/// figure an upper bound ("at most").
pub fn unattributed(s: &Snapshot, d: &Device) -> Unattributed {
    let mut u = Unattributed::of(
        d,
        s.processes
            .iter()
            .filter(|p| p.gpu.device_index == d.index)
            .map(|p| &p.gpu),
        s.failed_devices.contains(&d.index),
        s.hidden_processes,
    );
    if s.processes_omitted > 0 && u.bytes.is_some() {
        u.bound = Some(Bound::AtMost);
    }
    u
}

fn n<T: ToString>(v: Option<T>) -> String {
    v.map_or_else(|| "?".to_string(), |v| v.to_string())
}

fn yes_no(v: Option<bool>) -> &'static str {
    match v {
        Some(true) => "yes",
        Some(false) => "no",
        None => "?",
    }
}

/// The memory-health lines of `d` (indented under its `GPU` line).
pub fn health_lines(d: &Device) -> Vec<String> {
    let Some(h) = &d.health else {
        return vec!["  memory health: not read (suspended, unreadable, or not recorded)".into()];
    };
    let mut out = Vec::new();
    if let Some(e) = h.ecc {
        out.push(format!(
            "  ECC {}{}",
            if e.current { "on" } else { "off" },
            if e.pending == e.current {
                String::new()
            } else {
                format!(" ({} after a reset)", if e.pending { "on" } else { "off" })
            }
        ));
    }
    let c = &h.ecc_errors;
    if c.any_known() {
        out.push(format!(
            "  ECC errors: corrected {} volatile / {} aggregate; uncorrected {} / {}",
            n(c.corrected_volatile),
            n(c.corrected_aggregate),
            n(c.uncorrected_volatile),
            n(c.uncorrected_aggregate)
        ));
    }
    if let Some(r) = &h.remapped_rows {
        out.push(format!(
            "  remapped rows: {} correctable, {} uncorrectable, pending {}, failure {}",
            r.correctable,
            r.uncorrectable,
            yes_no(Some(r.pending)),
            yes_no(Some(r.failure))
        ));
    }
    if let Some(p) = &h.retired_pages {
        out.push(format!(
            "  retired pages: {} single-bit, {} double-bit, pending {}",
            n(p.single_bit),
            n(p.double_bit),
            yes_no(p.pending)
        ));
    }
    for r in &h.ras {
        out.push(format!(
            "  RAS {}: {} uncorrectable, {} correctable{}",
            crate::format::sanitize(&r.block),
            r.uncorrectable,
            r.correctable,
            r.deferred
                .map(|d| format!(", {d} deferred"))
                .unwrap_or_default()
        ));
    }
    if let Some(b) = &h.bad_pages {
        out.push(format!(
            "  bad pages: {} reserved, {} pending, {} failed",
            b.reserved, b.pending, b.failed
        ));
    }
    for u in &h.unknown {
        out.push(format!("  {} ? ({}: {})", u.field, u.reason, u.detail));
    }
    out.extend(
        crate::devices::health_lines(d)
            .into_iter()
            .map(|l| format!("  {}", l.trim_start())),
    );
    if out.is_empty() {
        out.push("  memory health: nothing to read on this device".to_string());
    }
    out
}

/// The XID line of device `index`: the count since `top` started and the last one, or why
/// there is none. `None`: not counted (a replay).
pub fn xid_line(tally: Option<&XidTally>, index: u32) -> String {
    let Some(t) = tally else {
        return "  XID events: not counted (a replay)".to_string();
    };
    let since = super::clock::utc(t.since_unix_ms);
    match t.count_on(index) {
        Ok(total) => {
            let last = t.last.get(&index).map_or_else(String::new, |e| {
                let at = super::clock::utc(e.unix_ms);
                format!(
                    "; last XID {} ({}) at {}",
                    e.xid,
                    xid_meaning(e.xid).0,
                    at.get(11..).unwrap_or(&at)
                )
            });
            format!("  XID events since {since}: {total}{last}")
        }
        Err(why) => format!("  XID events: unavailable: {why}"),
    }
}

/// Starts the thread that counts XID events ([`crate::health::spawn_xid_counter`]) until
/// `control.stop`; the UI reads the tally at each draw.
///
/// # Errors
/// When the thread cannot be started.
pub fn spawn_xid(
    opts: hypomnesis::ProbeOptions,
    control: std::sync::Arc<super::collect::Control>,
) -> std::io::Result<crate::health::SharedTally> {
    crate::health::spawn_xid_counter(opts, control, |c| &c.stop)
}
