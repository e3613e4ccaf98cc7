//! Every key of `fake-nvml.conf`, once: per section, the key's spelling and the model field it
//! writes and reads (`text.rs` spells the values). The test bed writes a scenario through these
//! tables and the fake library reads it back through the same ones.

use super::model::{
    FakeComputeInstance, FakeDevice, FakeEvent, FakeGpuInstance, FakeNvml, FakeProcess, FakeSample,
};
use super::profiles::profile_table;
use super::text::{
    Key, Value, key, parse_pci, read_error, read_half, read_hex, read_pid, read_supported,
    write_errors, write_hex, write_pid, write_supported,
};

/// The `pid` key of a section with `pid`, `child_of_caller` and `caller` fields.
macro_rules! pid_key {
    () => {
        Key {
            name: "pid",
            write: |x| write_pid(x.pid, x.child_of_caller, x.caller),
            read: |x, v| {
                (x.pid, x.child_of_caller, x.caller) = read_pid(v)?;
                Ok(())
            },
        }
    };
}

/// The keys before the first section.
pub(crate) const GLOBAL: &[Key<FakeNvml>] = &[
    key!("init_error", f => f.init_error),
    key!("driver_version", f => f.driver_version),
    key!("nvml_version", f => f.nvml_version),
    key!("cuda_driver_version", f => f.cuda_driver_version),
    Key {
        name: "process_stride",
        write: |f| f.process_stride.write(),
        read: |f, v| {
            let mut s = 0u32;
            s.read(v)?;
            if s != 24 && s != 32 {
                return Err(format!("must be 24 or 32, got {s}"));
            }
            f.process_stride = s;
            Ok(())
        },
    },
    key!("late_processes", f => f.late_processes),
    key!("log_calls", f => f.log_calls),
    key!("device_count", f => f.device_count),
    Key {
        name: "error",
        write: |f| write_errors(&f.errors),
        read: |f, v| read_error(&mut f.errors, v),
    },
];

/// `[device]`.
pub(crate) const DEVICE: &[Key<FakeDevice>] = &[
    key!("name", d => d.name),
    Key {
        name: "name_hex",
        write: |d| d.name_bytes.iter().map(|b| write_hex(b)).collect(),
        read: |d, v| {
            d.name_bytes = Some(read_hex(v)?);
            Ok(())
        },
    },
    key!("uuid", d => d.uuid),
    Key {
        name: "pci_bus_id",
        write: |d| d.pci_bus_id.write(),
        read: |d, v| {
            parse_pci(v)?;
            d.pci_bus_id = v.to_string();
            Ok(())
        },
    },
    key!("pci_device_id", d => d.pci_device_id),
    key!("pci_subsystem_id", d => d.pci_subsystem_id),
    key!("memory_total", d => d.memory_total),
    key!("memory_reserved", d => d.memory_reserved),
    key!("memory_used", d => d.memory_used),
    key!("utilization_gpu", d => d.utilization_gpu),
    key!("utilization_memory", d => d.utilization_memory),
    key!("temperature_c", d => d.temperature_c),
    key!("power_mw", d => d.power_mw),
    key!("energy_mj", d => d.energy_mj),
    key!("clock_graphics_mhz", d => d.clocks_mhz[0]),
    key!("clock_sm_mhz", d => d.clocks_mhz[1]),
    key!("clock_memory_mhz", d => d.clocks_mhz[2]),
    key!("max_clock_graphics_mhz", d => d.max_clocks_mhz[0]),
    key!("max_clock_sm_mhz", d => d.max_clocks_mhz[1]),
    key!("max_clock_memory_mhz", d => d.max_clocks_mhz[2]),
    key!("handle_error", d => d.handle_error),
    key!("accounting_mode", d => d.accounting),
    Key {
        name: "persistence_mode",
        write: |d| write_supported(&d.persistence),
        read: |d, v| read_supported(&mut d.persistence, v),
    },
    Key {
        name: "compute_mode",
        write: |d| write_supported(&d.compute_mode),
        read: |d, v| read_supported(&mut d.compute_mode, v),
    },
    Key {
        name: "error",
        write: |d| write_errors(&d.errors),
        read: |d, v| read_error(&mut d.errors, v),
    },
    Key {
        name: "mig_mode",
        write: |d| d.extras.mig_mode.write(),
        read: |d, v| match v {
            "unsupported" => {
                d.extras.mig_mode = None;
                Ok(())
            }
            _ => d.extras.mig_mode.read(v),
        },
    },
    key!("mig_pending", d => d.extras.mig_pending),
    key!("mig_max_devices", d => d.extras.mig_max_devices),
    Key {
        name: "mig_profiles",
        write: |d| {
            d.extras
                .mig_profiles
                .iter()
                .map(|p| p.to_string())
                .collect()
        },
        read: |d, v| {
            d.extras.mig_profiles = match v {
                "none" => None,
                _ => Some(profile_table(v)?.0),
            };
            Ok(())
        },
    },
    key!("privileged", d => d.extras.privileged),
    key!("mps_supported", d => d.extras.mps_supported),
    key!("mig_record_ids", d => d.extras.mig_record_ids),
    key!("ecc_mode", d => d.health.ecc_mode),
    key!("ecc_pending", d => d.health.ecc_pending),
    Key {
        name: "ecc_corrected_volatile",
        write: |d| write_seq(&d.health.ecc_counts[0]),
        read: |d, v| d.health.ecc_counts[0].read(v),
    },
    Key {
        name: "ecc_uncorrected_volatile",
        write: |d| write_seq(&d.health.ecc_counts[1]),
        read: |d, v| d.health.ecc_counts[1].read(v),
    },
    Key {
        name: "ecc_corrected_aggregate",
        write: |d| write_seq(&d.health.ecc_counts[2]),
        read: |d, v| d.health.ecc_counts[2].read(v),
    },
    Key {
        name: "ecc_uncorrected_aggregate",
        write: |d| write_seq(&d.health.ecc_counts[3]),
        read: |d, v| d.health.ecc_counts[3].read(v),
    },
    Key {
        name: "remapped_rows",
        write: |d| {
            d.health
                .remapped_rows
                .iter()
                .map(|r| format!("{},{},{},{}", r[0], r[1], r[2], r[3]))
                .collect()
        },
        read: |d, v| {
            let mut parts: Vec<u32> = Vec::new();
            parts.read(v)?;
            let r: [u32; 4] = parts
                .try_into()
                .map_err(|_| format!("must be corr,unc,pending,failure, got {v:?}"))?;
            d.health.remapped_rows = Some(r);
            Ok(())
        },
    },
    key!("retired_sbe", d => d.health.retired[0]),
    key!("retired_dbe", d => d.health.retired[1]),
    key!("retired_pending", d => d.health.retired_pending),
    key!("events_supported", d => d.health.events_supported),
    key!("unified_memory", d => d.extras.unified_memory),
];

/// A sequence key left out when empty (NOT_SUPPORTED).
fn write_seq(v: &[u64]) -> Vec<String> {
    if v.is_empty() {
        Vec::new()
    } else {
        v.to_vec().write()
    }
}

/// `[process]` (`pid` is required).
pub(crate) const PROCESS: &[Key<FakeProcess>] = &[
    key!("device", p => p.device),
    key!("list", p => p.list),
    pid_key!(),
    key!("used", p => p.used),
    key!("gpu_instance_id", p => p.gpu_instance_id),
    key!("compute_instance_id", p => p.compute_instance_id),
    key!("from_tick", p => p.from_tick),
    key!("until_tick", p => p.until_tick),
    key!("accounting_max", p => p.accounting_max),
    key!("accounting_start_us", p => p.accounting_start_us),
    Key {
        name: "accounting_gpu_util",
        write: |p| p.accounting_util.map(|u| u.0).write(),
        read: |p, v| read_half(&mut p.accounting_util, (0, 0), false, v),
    },
    Key {
        name: "accounting_mem_util",
        write: |p| p.accounting_util.map(|u| u.1).write(),
        read: |p, v| read_half(&mut p.accounting_util, (0, 0), true, v),
    },
];

/// `[gpu_instance]`.
pub(crate) const GPU_INSTANCE: &[Key<FakeGpuInstance>] = &[
    key!("device", g => g.device),
    key!("id", g => g.id),
    key!("profile_id", g => g.profile_id),
    key!("placement", g => g.placement),
    key!("memory_total", g => g.memory_total),
    key!("memory_reserved", g => g.memory_reserved),
    key!("memory_used", g => g.memory_used),
];

/// A `[compute_instance]` section: the GPU instance it belongs to, and the instance.
pub(crate) struct PlacedCi {
    pub(crate) device: u32,
    pub(crate) gi: u32,
    pub(crate) ci: FakeComputeInstance,
}

/// `[compute_instance]`.
pub(crate) const COMPUTE_INSTANCE: &[Key<PlacedCi>] = &[
    key!("device", c => c.device),
    key!("gi", c => c.gi),
    key!("id", c => c.ci.id),
    key!("name", c => c.ci.name),
    key!("uuid", c => c.ci.uuid),
    key!("slot", c => c.ci.slot),
    key!("gone_after_calls", c => c.ci.gone_after_calls),
    key!("gone_from_enum", c => c.ci.gone_from_enum),
    Key {
        name: "error",
        write: |c| write_errors(&c.ci.errors),
        read: |c, v| read_error(&mut c.ci.errors, v),
    },
    key!("slices", c => c.ci.slices),
    key!("sm", c => c.ci.sm),
];

/// `[sample]`.
pub(crate) const SAMPLE: &[Key<FakeSample>] = &[
    key!("device", s => s.device),
    pid_key!(),
    key!("age_ms", s => s.age_ms),
    key!("sm", s => s.values[0]),
    key!("mem", s => s.values[1]),
    key!("enc", s => s.values[2]),
    key!("dec", s => s.values[3]),
    Key {
        name: "from_round",
        write: |s| s.rounds.map(|r| r.0).write(),
        read: |s, v| read_half(&mut s.rounds, (0, u64::MAX), false, v),
    },
    Key {
        name: "until_round",
        write: |s| s.rounds.map(|r| r.1).write(),
        read: |s, v| read_half(&mut s.rounds, (0, u64::MAX), true, v),
    },
    key!("late", s => s.late),
];

/// `[event]`.
pub(crate) const EVENT: &[Key<FakeEvent>] = &[
    key!("device", e => e.device),
    key!("event_type", e => e.event_type),
    key!("xid", e => e.xid),
    key!("after_waits", e => e.after_waits),
    key!("gpu_instance_id", e => e.gpu_instance_id),
    key!("compute_instance_id", e => e.compute_instance_id),
];
