//! The memory checks (pure): `memory-health` — every device's ECC counts, remapped rows or
//! retired pages, amdgpu RAS counters ([`MemoryHealth::findings`]: a pending remap or
//! retirement asks for a GPU reset or reboot, uncorrectable errors are a failure) — and
//! `unattributed` — device memory no listed process accounts for, with the causes this machine
//! shows ([`Unattributed`]).

use super::facts::{DeviceMemoryFacts, Facts};
use super::model::Check;
use crate::system::pidns::ProcRootNamespace;
use crate::types::{Cause, HealthFinding, MemoryHealth, Severity, Unknown, UnknownReason};

/// What to do when a counter could not be read.
const REMEDY_UNREAD: &str = "run hmn doctor again in a minute (amdgpu answers once RAS is ready); \
     until a counter is read, that memory's health is unknown";

/// Unattributed memory above this share of a device's total is worth a warning…
const SHARE: f64 = 0.10;
/// …when it is also above this many bytes.
const FLOOR: u64 = 1 << 30;

fn gib(b: u64) -> String {
    format!("{:.1} GiB", b as f64 / f64::from(1u32 << 30))
}

/// The readings a device has but could not read (the driver refused, a file unreadable, RAS
/// not ready): not "unsupported", which is no reading to have.
fn unread(h: &MemoryHealth) -> Vec<&Unknown> {
    h.unknown
        .iter()
        .filter(|u| {
            !matches!(
                u.reason,
                UnknownReason::Unsupported | UnknownReason::Suspended | UnknownReason::NotRequested
            )
        })
        .collect()
}

/// What could not be read, in words (`not read: gfx: the driver says: …`); empty when all was.
fn unread_words(h: &MemoryHealth) -> String {
    let u = unread(h);
    if u.is_empty() {
        return String::new();
    }
    let words: Vec<&str> = u.iter().map(|u| u.detail.as_str()).collect();
    format!("not read: {}", words.join("; "))
}

/// One device's health in a few words.
fn describe(d: &DeviceMemoryFacts, h: &MemoryHealth) -> String {
    let name = format!("GPU {} ({})", d.index, d.name);
    let findings = h.findings();
    if !findings.is_empty() {
        let what: Vec<&str> = findings.iter().map(|f| f.what.as_str()).collect();
        return format!("{name}: {}", what.join(", "));
    }
    let mut parts = Vec::new();
    match h.ecc {
        Some(m) if m.current => parts.push("ECC on".to_string()),
        Some(_) => parts.push("ECC off".to_string()),
        None => {}
    }
    if let Some(n) = h.ecc_errors.uncorrected_volatile {
        parts.push(format!("{n} uncorrectable since the driver loaded"));
    }
    if let Some(r) = h.remapped_rows {
        parts.push(format!(
            "remapped rows {}+{}",
            r.correctable, r.uncorrectable
        ));
    }
    if let Some(p) = h.retired_pages {
        let n = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
        parts.push(format!(
            "retired pages {}+{}",
            n(p.single_bit),
            n(p.double_bit)
        ));
    }
    if !h.ras.is_empty() {
        let ce: u64 = h.ras.iter().map(|r| r.correctable).sum();
        let blocks = h.ras.len();
        parts.push(format!(
            "RAS: no uncorrectable error in the {blocks} block{} read, {ce} corrected",
            if blocks == 1 { "" } else { "s" }
        ));
    }
    let missing = unread_words(h);
    if !missing.is_empty() {
        parts.push(missing);
    }
    if !h.counters_meaningful() && unread(h).is_empty() {
        // A GPU without ECC may answer zeros for remapped rows: they say nothing.
        return format!("{name}: no memory error counters (no ECC)");
    }
    format!("{name}: {}", parts.join(", "))
}

/// Every remedy the findings (heaviest first) ask for, each once: a pending remap's reset is not
/// lost beside an uncorrectable error's "drain the GPU". "Watch the counts" only where nothing
/// asks for more, since a reset or service covers it.
fn remedies(findings: &[HealthFinding]) -> String {
    let mut out: Vec<&str> = Vec::new();
    for f in findings {
        let acts = f.weight().1 > 1;
        if (acts || out.is_empty()) && !out.contains(&f.remedy) {
            out.push(f.remedy);
        }
    }
    out.join(". Also ")
}

/// `memory-health`: the worst finding of any device decides the status; every finding is named
/// and every remedy they ask for is given.
pub(super) fn health(f: &Facts) -> Check {
    let Some(m) = &f.memory else {
        return Check::ok("memory-health", "not checked");
    };
    // A device counts when it has a reading, or one it could not read (unknown is not clean).
    let read: Vec<(&DeviceMemoryFacts, &MemoryHealth)> = m
        .devices
        .iter()
        .filter_map(|d| d.health.as_ref().map(|h| (d, h)))
        .filter(|(_, h)| h.any_reading() || !unread(h).is_empty())
        .collect();
    if read.is_empty() {
        return Check::ok(
            "memory-health",
            if m.devices.is_empty() {
                "no GPU".to_string()
            } else {
                "no device reports memory error counters (no ECC, no amdgpu RAS)".to_string()
            },
        );
    }
    let saw = read
        .iter()
        .map(|(d, h)| describe(d, h))
        .collect::<Vec<_>>()
        .join("; ");
    // Every finding, heaviest first (severity, then the remedy's urgency).
    let mut findings: Vec<_> = read.iter().flat_map(|(_, h)| h.findings()).collect();
    findings.sort_by_key(|x| std::cmp::Reverse(x.weight()));
    let Some(worst) = findings.first() else {
        return if read.iter().any(|(_, h)| !unread(h).is_empty()) {
            Check::warn("memory-health", saw, Some(REMEDY_UNREAD.to_string()))
        } else {
            Check::ok("memory-health", saw)
        };
    };
    let remedy = Some(remedies(&findings));
    if worst.severity == Severity::Fail {
        Check::fail("memory-health", saw, remedy)
    } else {
        Check::warn("memory-health", saw, remedy)
    }
}

/// `unattributed`: device memory no listed process accounts for, and the likely causes this
/// machine shows (always `ok`: the checks that can be acted on — `hidepid`, `ptrace`,
/// `container` — say what to do). A device holding more than 10 % of its memory (and over
/// 1 GiB) that way is named first.
pub(super) fn unattributed(f: &Facts) -> Check {
    let Some(m) = &f.memory else {
        return Check::ok("unattributed", "not checked");
    };
    let container = f.pid.proc_root == ProcRootNamespace::Container;
    let mut lines = Vec::new();
    let mut large = Vec::new();
    for u in &m.unattributed {
        let Some(d) = m.devices.iter().find(|d| d.index == u.device_index) else {
            continue;
        };
        let Some(b) = u.bytes else {
            continue;
        };
        let mut causes: Vec<String> = u
            .causes
            .iter()
            .filter(|c| **c != Cause::Driver)
            .map(Cause::describe)
            .collect();
        if container {
            causes.push("processes in other PID namespaces (hmn is in a container)".into());
        }
        causes.push(Cause::Driver.describe());
        let at_most = if u.bound == Some(crate::types::Bound::AtMost) {
            "at most "
        } else {
            ""
        };
        let line = format!(
            "GPU {}: {at_most}{} held by no listed process (likely: {})",
            u.device_index,
            gib(b),
            causes.join(", ")
        );
        let total = d.total_bytes.unwrap_or(u64::MAX);
        if b > FLOOR && b as f64 > SHARE * total as f64 {
            large.push(line);
        } else {
            lines.push(line);
        }
    }
    large.append(&mut lines);
    let lines = large;
    if lines.is_empty() {
        return Check::ok(
            "unattributed",
            "no device's unattributed memory could be bounded",
        );
    }
    Check::ok("unattributed", lines.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::doctor::facts::MemoryFacts;
    use crate::doctor::model::Status;
    use crate::system::pidns::{self, NamespaceFacts};
    use crate::system::roots::Roots;
    use crate::types::{
        Device, EccMode, Field, ProcessList, REMEDY_RESET, REMEDY_SERVICE, RasCount, RemappedRows,
        Source, Vendor,
    };

    fn facts(devices: Vec<Device>) -> Facts {
        let ns = pidns::INIT_PID_NS_INODE;
        let view = pidns::view(&NamespaceFacts::new(
            Some(ns),
            Some(ns),
            vec![10],
            None,
            vec![],
        ));
        let mut f = Facts::empty(Roots::system(), view);
        let list = ProcessList {
            devices,
            ..ProcessList::default()
        };
        f.memory = Some(MemoryFacts::of(&list));
        f
    }

    fn gpu(index: u32, health: MemoryHealth) -> Device {
        let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
        d.name = Some("NVIDIA H200".into());
        d.memory.total_bytes = Some(100 << 30);
        d.memory.used_bytes = Some(20 << 30);
        d.memory.reserved_bytes = Some(0);
        d.health = Some(health);
        d
    }

    fn hopper(remap: RemappedRows) -> MemoryHealth {
        let mut h = MemoryHealth {
            ecc: Some(EccMode::new(true, true)),
            remapped_rows: Some(remap),
            ..MemoryHealth::default()
        };
        h.ecc_errors.uncorrected_volatile = Some(0);
        h
    }

    #[test]
    fn healthy_pending_and_failed_memory() {
        let ok = health(&facts(vec![gpu(
            0,
            hopper(RemappedRows::new(0, 0, false, false)),
        )]));
        assert_eq!(ok.status, Status::Ok);
        assert_eq!(
            ok.saw,
            "GPU 0 (NVIDIA H200): ECC on, 0 uncorrectable since the driver loaded, remapped rows 0+0"
        );
        let pending = health(&facts(vec![
            gpu(0, hopper(RemappedRows::new(0, 0, false, false))),
            gpu(1, hopper(RemappedRows::new(2, 0, true, false))),
        ]));
        assert_eq!(pending.status, Status::Warn);
        assert_eq!(pending.remedy.as_deref(), Some(REMEDY_RESET));
        assert!(
            pending
                .saw
                .contains("GPU 1 (NVIDIA H200): a row remapping is pending")
        );
        // A pending remap beside rows remapped after uncorrectable errors (both warn): the
        // reset that applies the remap, not "watch the counts".
        let both = health(&facts(vec![gpu(
            0,
            hopper(RemappedRows::new(0, 2, true, false)),
        )]));
        assert_eq!(both.status, Status::Warn);
        assert_eq!(both.remedy.as_deref(), Some(REMEDY_RESET), "{both:?}");
        let mut lifetime = hopper(RemappedRows::new(0, 0, true, false));
        lifetime.ecc_errors.uncorrected_aggregate = Some(4);
        let both = health(&facts(vec![gpu(0, lifetime)]));
        assert_eq!(both.remedy.as_deref(), Some(REMEDY_RESET), "{both:?}");
        let mut sick = hopper(RemappedRows::new(0, 0, false, false));
        sick.ecc_errors.uncorrected_volatile = Some(3);
        let failed = health(&facts(vec![gpu(0, sick)]));
        assert_eq!(failed.status, Status::Fail);
        assert_eq!(failed.remedy.as_deref(), Some(REMEDY_SERVICE));
        // Uncorrectable errors beside a pending remap: the failure decides the status, but the
        // remap and its reset are not lost (QA: doctor named only the worst finding).
        let mut both = hopper(RemappedRows::new(0, 1, true, false));
        both.ecc_errors.uncorrected_volatile = Some(2);
        let c = health(&facts(vec![gpu(0, both)]));
        assert_eq!(c.status, Status::Fail);
        assert_eq!(
            c.saw,
            "GPU 0 (NVIDIA H200): 2 uncorrectable ECC errors since the driver loaded, \
             a row remapping is pending, 1 row remapped after uncorrectable errors"
        );
        assert_eq!(
            c.remedy.as_deref(),
            Some(format!("{REMEDY_SERVICE}. Also {REMEDY_RESET}").as_str())
        );
    }

    #[test]
    fn geforce_zeros_and_amd_ras() {
        // No ECC (GeForce), but the driver answers zeros for remapped rows: not "healthy".
        let geforce = MemoryHealth {
            remapped_rows: Some(RemappedRows::new(0, 0, false, false)),
            ..MemoryHealth::default()
        };
        let c = health(&facts(vec![gpu(0, geforce)]));
        assert_eq!(c.status, Status::Ok);
        assert_eq!(
            c.saw,
            "GPU 0 (NVIDIA H200): no memory error counters (no ECC)"
        );
        let amd = MemoryHealth {
            ras: vec![RasCount::new("umc", 1, 0)],
            ..MemoryHealth::default()
        };
        assert_eq!(health(&facts(vec![gpu(0, amd)])).status, Status::Fail);
        assert_eq!(
            health(&facts(vec![gpu(0, MemoryHealth::default())])).saw,
            "no device reports memory error counters (no ECC, no amdgpu RAS)"
        );
        assert_eq!(health(&facts(vec![])).saw, "no GPU");
        // A block RAS could not answer is unknown, not clean: said, and a warning.
        let inaccessible = Unknown::new(
            Field::HealthRas,
            UnknownReason::DeviceError,
            "gfx: the driver says: Query currently inaccessible (RAS not ready)",
        );
        let mut partial = MemoryHealth {
            ras: vec![RasCount::new("umc", 0, 3)],
            ..MemoryHealth::default()
        };
        partial.unknown.push(inaccessible.clone());
        let c = health(&facts(vec![gpu(0, partial)]));
        assert_eq!(c.status, Status::Warn);
        assert_eq!(
            c.saw,
            "GPU 0 (NVIDIA H200): RAS: no uncorrectable error in the 1 block read, 3 corrected, \
             not read: gfx: the driver says: Query currently inaccessible (RAS not ready)"
        );
        assert_eq!(c.remedy.as_deref(), Some(REMEDY_UNREAD));
        // Every block unreadable: not "no device reports counters".
        let mut none_read = MemoryHealth::default();
        none_read.unknown.push(inaccessible);
        let c = health(&facts(vec![gpu(0, none_read)]));
        assert_eq!(c.status, Status::Warn);
        assert!(c.saw.contains("not read: gfx"), "{}", c.saw);
        // "Unsupported" is no reading to have: still ok.
        let mut off = MemoryHealth::default();
        off.unknown.push(Unknown::new(
            Field::HealthRas,
            UnknownReason::Unsupported,
            "no ras/ directory",
        ));
        assert_eq!(health(&facts(vec![gpu(0, off)])).status, Status::Ok);
        let none = Facts::empty(Roots::system(), facts(vec![]).pid);
        assert_eq!(health(&none).saw, "not checked");
    }

    #[test]
    fn unattributed_names_the_causes_and_stays_ok() {
        let c = unattributed(&facts(vec![gpu(0, MemoryHealth::default())]));
        assert_eq!(c.status, Status::Ok);
        assert_eq!(
            c.saw,
            "GPU 0: 20.0 GiB held by no listed process (likely: the driver's own allocations)"
        );
        let mut unknown = gpu(0, MemoryHealth::default());
        unknown.memory.used_bytes = None;
        assert_eq!(
            unattributed(&facts(vec![unknown])).saw,
            "no device's unattributed memory could be bounded"
        );
    }
}
