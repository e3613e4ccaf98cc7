//! The NVIDIA series of the exposition: compute mode (a state set), MIG mode, MIG devices and their GPU instances' memory
//! with labels that join dcgm-exporter's (`UUID` = the parent GPU's UUID, `GPU_I_ID` = the NVML
//! GPU-instance id, `GPU_I_PROFILE` = its profile without `MIG `), the same labels on the
//! process series of a MIG device, and per-process utilization (NVML's SM, memory, encoder and
//! decoder since the previous collection; DRM engine classes). See `docs/serve.md`.

use std::collections::BTreeSet;
use std::sync::atomic::AtomicU64;

use hypomnesis::{ComputeMode, Device, GpuProcess, MigDevice, MigMode};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// The NVIDIA families of one rendering.
pub struct Series {
    compute_mode: GaugeFamily,
    mig_mode: GaugeFamily,
    mig_info: GaugeFamily,
    mig_total: GaugeFamily,
    mig_used: GaugeFamily,
    mig_free: GaugeFamily,
    utilization: GaugeFamily,
}

fn gauge(reg: &mut Registry, name: &str, help: &str, unit: Option<Unit>) -> GaugeFamily {
    let f = GaugeFamily::default();
    match unit {
        Some(u) => reg.register_with_unit(name, help, u, f.clone()),
        None => reg.register(name, help, f.clone()),
    }
    f
}

fn set(f: &GaugeFamily, labels: Labels, value: f64) {
    if value.is_finite() {
        f.get_or_create(&labels).set(value);
    }
}

/// dcgm-exporter's labels for a MIG device: the parent's `UUID`, `GPU_I_ID`, `GPU_I_PROFILE`.
fn dcgm_labels(m: &MigDevice) -> Labels {
    vec![
        ("UUID", m.parent_uuid.clone().unwrap_or_default()),
        (
            "GPU_I_ID",
            m.gpu_instance_id.map(|v| v.to_string()).unwrap_or_default(),
        ),
        (
            "GPU_I_PROFILE",
            m.dcgm_profile().unwrap_or_default().to_string(),
        ),
    ]
}

impl Series {
    /// Registers the families.
    pub fn register(reg: &mut Registry) -> Series {
        let bytes = || Some(Unit::Bytes);
        Series {
            compute_mode: gauge(
                reg,
                "hmn_device_compute_mode",
                "1 for the GPU's compute mode, 0 for the others (default, exclusive_thread, prohibited, exclusive_process); absent where NVML gives none",
                None,
            ),
            mig_mode: gauge(
                reg,
                "hmn_device_mig_enabled",
                "1 when MIG is on for the GPU (mode=\"current\"), or will be after the next GPU reset (mode=\"pending\")",
                None,
            ),
            mig_info: gauge(
                reg,
                "hmn_mig_device_info",
                "A MIG device (compute instance); value 1. UUID is the parent GPU's, as in dcgm-exporter",
                None,
            ),
            mig_total: gauge(
                reg,
                "hmn_mig_memory_total",
                "Memory of a MIG GPU instance (its compute instances share it)",
                bytes(),
            ),
            mig_used: gauge(
                reg,
                "hmn_mig_memory_used",
                "Memory in use in a MIG GPU instance",
                bytes(),
            ),
            mig_free: gauge(
                reg,
                "hmn_mig_memory_free",
                "Memory available in a MIG GPU instance",
                bytes(),
            ),
            utilization: gauge(
                reg,
                "hmn_process_gpu_utilization",
                "Fraction of the last period an engine was busy for a process (NVIDIA: sm, memory, encoder, decoder; DRM: engine classes)",
                Some(Unit::Other("ratio".into())),
            ),
        }
    }

    /// A GPU's MIG mode and MIG devices (`l`: the device's labels).
    pub fn device(&self, d: &Device, l: &Labels) {
        if let Some(current) = d.compute_mode {
            for mode in ComputeMode::ALL {
                let mut ml = l.clone();
                ml.push(("mode", mode.as_str().to_string()));
                set(
                    &self.compute_mode,
                    ml,
                    if *mode == current { 1.0 } else { 0.0 },
                );
            }
        }
        let Some(m) = &d.mig else {
            return;
        };
        for (mode, value) in [("current", m.current), ("pending", m.pending)] {
            let mut ml = l.clone();
            ml.push(("mode", mode.to_string()));
            set(
                &self.mig_mode,
                ml,
                if value == MigMode::Enabled { 1.0 } else { 0.0 },
            );
        }
        let mut seen_gi: BTreeSet<Option<u32>> = BTreeSet::new();
        for i in &m.instances {
            let mut il = l.clone();
            il.extend(dcgm_labels(i));
            let mut info = il.clone();
            info.extend([
                ("mig_uuid", i.uuid.clone().unwrap_or_default()),
                ("mig_index", i.index.to_string()),
                (
                    "compute_instance_id",
                    i.compute_instance_id
                        .map(|v| v.to_string())
                        .unwrap_or_default(),
                ),
                ("profile", i.profile.clone().unwrap_or_default()),
            ]);
            set(&self.mig_info, info, 1.0);
            // Memory is the GPU instance's: once per GPU instance, never per compute instance.
            if i.gpu_instance_id.is_some() && !seen_gi.insert(i.gpu_instance_id) {
                continue;
            }
            if i.gpu_instance_id.is_none() {
                il.push(("mig_uuid", i.uuid.clone().unwrap_or_default()));
            }
            for (f, v) in [
                (&self.mig_total, i.memory.total_bytes),
                (&self.mig_used, i.memory.used_bytes),
                (&self.mig_free, i.memory.free_bytes),
            ] {
                if let Some(v) = v {
                    set(f, il.clone(), v as f64);
                }
            }
        }
    }

    /// A process series' utilization (`pl`: its labels, MIG ones included).
    pub fn process(&self, p: &GpuProcess, pl: &Labels) {
        if let Some(u) = p.utilization {
            for (engine, v) in [
                ("sm", u.sm_percent),
                ("memory", u.memory_percent),
                ("encoder", u.encoder_percent),
                ("decoder", u.decoder_percent),
            ] {
                let mut el = pl.clone();
                el.push(("engine", engine.to_string()));
                set(&self.utilization, el, f64::from(v) / 100.0);
            }
        }
        for (class, e) in &p.engines {
            let mut el = pl.clone();
            el.push(("engine", class.clone()));
            set(&self.utilization, el, e.busy_percent / 100.0);
        }
    }
}

/// The labels a process series of a MIG device adds: dcgm-exporter's and its `mig_uuid`.
pub fn process_labels(p: &GpuProcess, d: &Device) -> Labels {
    let Some(m) = p.mig_index.and_then(|i| d.mig_instance(i)) else {
        return Vec::new();
    };
    let mut l = dcgm_labels(m);
    l.push(("mig_uuid", m.uuid.clone().unwrap_or_default()));
    l
}
