//! The memory-pool series of the exposition: for a device whose GPU allocates from more than
//! (or other than) its own VRAM — an AMD APU's carve-out plus GTT, host RAM (unified memory), a
//! discrete card whose use is its clients' sum — the pool's total, used and free, labelled with
//! the pool's kind (`pool`) and where the used figure comes from (`used_source`). A device
//! without a pool (its `hmn_device_memory_*` are its pool) has none. See `docs/serve.md`.

use std::sync::atomic::AtomicU64;

use hypomnesis::Device;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// The pool families of one rendering.
pub struct Series {
    total: GaugeFamily,
    used: GaugeFamily,
    free: GaugeFamily,
}

fn gauge(reg: &mut Registry, name: &str, help: &str) -> GaugeFamily {
    let f = GaugeFamily::default();
    reg.register_with_unit(name, help, Unit::Bytes, f.clone());
    f
}

impl Series {
    /// Registers the families.
    pub fn register(reg: &mut Registry) -> Series {
        Series {
            total: gauge(
                reg,
                "hmn_device_pool_total",
                "Size of the memory the GPU allocates from, where that is not (only) its own \
                 VRAM: carve-out + GTT (AMD APU), the host's RAM (unified memory)",
            ),
            used: gauge(
                reg,
                "hmn_device_pool_used",
                "In use in that pool (used_source=\"process_sum\" or \"client_sum\": a sum of \
                 per-process figures, a lower bound)",
            ),
            free: gauge(
                reg,
                "hmn_device_pool_free",
                "What can still be allocated in that pool (host RAM parts at most MemAvailable)",
            ),
        }
    }

    /// Sets `d`'s pool series (nothing for a device without a pool; unknown figures omitted).
    pub fn device(&self, d: &Device, labels: &Labels) {
        let Some(p) = &d.pool else {
            return;
        };
        let mut l = labels.clone();
        l.push(("pool", p.kind.as_str().to_string()));
        l.push(("used_source", p.used_source.as_str().to_string()));
        for (f, v) in [
            (&self.total, p.total_bytes),
            (&self.used, p.used_bytes),
            (&self.free, p.free_bytes),
        ] {
            if let Some(v) = v {
                f.get_or_create(&l).set(v as f64);
            }
        }
    }
}
