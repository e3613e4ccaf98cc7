//! The memory-health series of the exposition: ECC mode and error counts, remapped rows or
//! retired pages (NVIDIA), RAS error counts and bad pages (amdgpu), XID events counted since
//! `hmn serve` started, and each device's memory no listed process accounts for. Names follow
//! hmn's conventions; `docs/serve.md` gives each its dcgm-exporter counterpart. A reading the
//! driver does not give is omitted, never 0.

use std::sync::atomic::AtomicU64;

use hypomnesis::types::Bound;
use hypomnesis::{Device, MemoryHealth, Unattributed, Vendor, XidTally, XidUncounted};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;
type CounterFamily = Family<Labels, Counter<f64, AtomicU64>>;

/// The health families of one rendering.
pub struct Series {
    ecc_enabled: GaugeFamily,
    ecc_errors: CounterFamily,
    remapped_rows: CounterFamily,
    remap_pending: GaugeFamily,
    remap_failure: GaugeFamily,
    retired_pages: CounterFamily,
    retired_pending: GaugeFamily,
    ras_errors: CounterFamily,
    bad_pages: GaugeFamily,
    xid_events: CounterFamily,
    xid_counting: GaugeFamily,
    unattributed: GaugeFamily,
    unattributed_upper_bound: GaugeFamily,
}

fn gauge(reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> GaugeFamily {
    let f = GaugeFamily::default();
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, f.clone()),
        None => reg.register(name, help, f.clone()),
    }
    f
}

fn counter(reg: &mut Registry, name: &str, help: &str) -> CounterFamily {
    let f = CounterFamily::default();
    reg.register(name, help, f.clone());
    f
}

fn with(l: &Labels, extra: &[(&'static str, &str)]) -> Labels {
    let mut out = l.clone();
    out.extend(extra.iter().map(|(k, v)| (*k, (*v).to_string())));
    out
}

fn flag(on: bool) -> f64 {
    if on { 1.0 } else { 0.0 }
}

impl Series {
    /// Registers the families.
    pub fn register(reg: &mut Registry) -> Series {
        Series {
            ecc_enabled: gauge(
                reg,
                "hmn_device_ecc_enabled",
                "1 when ECC is on (mode=current) or will be after the next reboot (mode=pending)",
                None,
            ),
            ecc_errors: counter(
                reg,
                "hmn_device_ecc_errors",
                "ECC errors: error=corrected|uncorrected, scope=volatile (since the driver \
                 loaded)|aggregate (the GPU's life)",
            ),
            remapped_rows: counter(
                reg,
                "hmn_device_remapped_rows",
                "Rows of device memory remapped to spare rows, by cause (NVIDIA Ampere and later)",
            ),
            remap_pending: gauge(
                reg,
                "hmn_device_row_remap_pending",
                "1 when a row remapping waits for a GPU reset",
                None,
            ),
            remap_failure: gauge(
                reg,
                "hmn_device_row_remap_failure",
                "1 when a row remapping has failed (no spare row left)",
                None,
            ),
            retired_pages: counter(
                reg,
                "hmn_device_retired_pages",
                "Pages of device memory retired, by cause (NVIDIA before Ampere)",
            ),
            retired_pending: gauge(
                reg,
                "hmn_device_retired_pages_pending",
                "1 when pages wait for a reboot to be retired",
                None,
            ),
            ras_errors: counter(
                reg,
                "hmn_device_ras_errors",
                "amdgpu RAS errors since the driver loaded, by block and error \
                 (uncorrectable|correctable|deferred)",
            ),
            bad_pages: gauge(
                reg,
                "hmn_device_bad_pages",
                "amdgpu bad VRAM pages by status (reserved|pending|failed)",
                None,
            ),
            xid_events: counter(
                reg,
                "hmn_device_xid_events",
                "NVIDIA XID events received since hmn serve started, by xid",
            ),
            xid_counting: gauge(
                reg,
                "hmn_device_xid_counting",
                "1 when this NVIDIA device's XID events are counted since hmn serve started (no \
                 hmn_device_xid_events_total series then means none arrived), 0 when they cannot \
                 be counted (events unsupported, no NVML)",
                None,
            ),
            unattributed: gauge(
                reg,
                "hmn_device_memory_unattributed",
                "Device memory in use that no listed process accounts for (an upper bound where \
                 a process's figure is unknown; omitted where it cannot be bounded)",
                Some(Unit::Bytes),
            ),
            unattributed_upper_bound: gauge(
                reg,
                "hmn_device_memory_unattributed_is_upper_bound",
                "1 when hmn_device_memory_unattributed_bytes is only an upper bound (a listed \
                 process's figure is unknown and may hold part of it), 0 when exact",
                None,
            ),
        }
    }

    /// One device's health, XID count and unattributed memory.
    pub fn device(
        &self,
        d: &Device,
        l: &Labels,
        unattributed: &Unattributed,
        xid: Option<&XidTally>,
    ) {
        if let Some(b) = unattributed.bytes {
            self.unattributed.get_or_create(l).set(b as f64);
            self.unattributed_upper_bound
                .get_or_create(l)
                .set(flag(unattributed.bound == Some(Bound::AtMost)));
        }
        if let Some(t) = xid.filter(|_| d.vendor == Vendor::Nvidia) {
            // While the counter is starting neither is known yet: no sample.
            if t.unavailable != Some(XidUncounted::Starting) {
                self.xid_counting
                    .get_or_create(l)
                    .set(flag(t.total_on(d.index).is_some()));
            }
            if t.total_on(d.index).is_some() {
                for (x, n) in t.counts.get(&d.index).into_iter().flatten() {
                    self.xid_events
                        .get_or_create(&with(l, &[("xid", &x.to_string())]))
                        .inc_by(*n as f64);
                }
            }
        }
        if let Some(h) = &d.health {
            self.health(h, l);
        }
    }

    fn health(&self, h: &MemoryHealth, l: &Labels) {
        if let Some(m) = h.ecc {
            for (mode, on) in [("current", m.current), ("pending", m.pending)] {
                self.ecc_enabled
                    .get_or_create(&with(l, &[("mode", mode)]))
                    .set(flag(on));
            }
        }
        let e = &h.ecc_errors;
        for (error, scope, v) in [
            ("corrected", "volatile", e.corrected_volatile),
            ("uncorrected", "volatile", e.uncorrected_volatile),
            ("corrected", "aggregate", e.corrected_aggregate),
            ("uncorrected", "aggregate", e.uncorrected_aggregate),
        ] {
            if let Some(n) = v {
                self.ecc_errors
                    .get_or_create(&with(l, &[("error", error), ("scope", scope)]))
                    .inc_by(n as f64);
            }
        }
        if let Some(r) = h.remapped_rows {
            for (cause, n) in [
                ("correctable", r.correctable),
                ("uncorrectable", r.uncorrectable),
            ] {
                self.remapped_rows
                    .get_or_create(&with(l, &[("cause", cause)]))
                    .inc_by(f64::from(n));
            }
            self.remap_pending.get_or_create(l).set(flag(r.pending));
            self.remap_failure.get_or_create(l).set(flag(r.failure));
        }
        if let Some(p) = h.retired_pages {
            for (cause, n) in [("single_bit", p.single_bit), ("double_bit", p.double_bit)] {
                if let Some(n) = n {
                    self.retired_pages
                        .get_or_create(&with(l, &[("cause", cause)]))
                        .inc_by(f64::from(n));
                }
            }
            if let Some(pending) = p.pending {
                self.retired_pending.get_or_create(l).set(flag(pending));
            }
        }
        for r in &h.ras {
            let mut errors = vec![
                ("uncorrectable", r.uncorrectable),
                ("correctable", r.correctable),
            ];
            errors.extend(r.deferred.map(|d| ("deferred", d)));
            for (error, n) in errors {
                self.ras_errors
                    .get_or_create(&with(l, &[("block", &r.block), ("error", error)]))
                    .inc_by(n as f64);
            }
        }
        if let Some(b) = h.bad_pages {
            for (status, n) in [
                ("reserved", b.reserved),
                ("pending", b.pending),
                ("failed", b.failed),
            ] {
                self.bad_pages
                    .get_or_create(&with(l, &[("status", status)]))
                    .set(f64::from(n));
            }
        }
    }
}
