//! The text of `fake-nvml.conf` for a [`FakeNvml`] scenario (the format is documented in
//! `fake-nvml/conf.rs` and `fake-nvml/conf_mig.rs`).

use std::fmt::Write as _;

use crate::nvml::{FakeDevice, FakeNvml, FakeProcess, ProcessListKind, Used};

impl FakeNvml {
    /// The scenario file's text.
    pub fn to_conf(&self) -> String {
        let mut s = String::from("# hmn fake NVML scenario\n");
        let mut kv = |k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(s, "{k} = {v}");
        };
        if let Some(c) = self.init_error {
            kv("init_error", &c);
        }
        if let Some(v) = &self.driver_version {
            kv("driver_version", v);
        }
        if let Some(v) = &self.nvml_version {
            kv("nvml_version", v);
        }
        if let Some(v) = self.cuda_driver_version {
            kv("cuda_driver_version", &v);
        }
        kv("process_stride", &self.process_stride);
        kv("late_processes", &self.late_processes);
        if let Some(n) = self.device_count {
            kv("device_count", &n);
        }
        for (sym, code) in &self.errors {
            kv("error", &format!("{sym}:{code}"));
        }
        for d in &self.devices {
            s.push_str("\n[device]\n");
            write_device(&mut s, d);
        }
        for p in &self.processes {
            s.push_str("\n[process]\n");
            write_process(&mut s, p);
        }
        for g in &self.gpu_instances {
            g.write(&mut s);
        }
        for x in &self.samples {
            x.write(&mut s);
        }
        s
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

pub(crate) fn seq<T: std::fmt::Display>(items: impl IntoIterator<Item = T>) -> String {
    items
        .into_iter()
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

fn write_device(s: &mut String, d: &FakeDevice) {
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(s, "{k} = {v}");
    };
    match (&d.name_bytes, &d.name) {
        (Some(b), _) => kv("name_hex", hex(b)),
        (None, Some(n)) => kv("name", n.clone()),
        (None, None) => {}
    }
    kv("uuid", d.uuid.clone());
    kv("pci_bus_id", d.pci_bus_id.clone());
    kv("memory_total", d.memory_total.to_string());
    kv("memory_reserved", d.memory_reserved.to_string());
    kv("memory_used", seq(&d.memory_used));
    let opt = |v: Option<u64>| v.map(|v| v.to_string());
    for (k, v) in [
        ("utilization_gpu", opt(d.utilization_gpu.map(u64::from))),
        (
            "utilization_memory",
            opt(d.utilization_memory.map(u64::from)),
        ),
        ("temperature_c", opt(d.temperature_c.map(u64::from))),
        ("power_mw", opt(d.power_mw.map(u64::from))),
        ("energy_mj", opt(d.energy_mj)),
        ("clock_graphics_mhz", opt(d.clocks_mhz[0].map(u64::from))),
        ("clock_sm_mhz", opt(d.clocks_mhz[1].map(u64::from))),
        ("clock_memory_mhz", opt(d.clocks_mhz[2].map(u64::from))),
        (
            "max_clock_graphics_mhz",
            opt(d.max_clocks_mhz[0].map(u64::from)),
        ),
        ("max_clock_sm_mhz", opt(d.max_clocks_mhz[1].map(u64::from))),
        (
            "max_clock_memory_mhz",
            opt(d.max_clocks_mhz[2].map(u64::from)),
        ),
        ("handle_error", opt(d.handle_error.map(u64::from))),
        ("accounting_mode", opt(d.accounting.then_some(1))),
        (
            "persistence_mode",
            Some(
                d.persistence
                    .map_or("unsupported".to_string(), |on| u8::from(on).to_string()),
            ),
        ),
    ] {
        if let Some(v) = v {
            kv(k, v);
        }
    }
    for (sym, code) in &d.errors {
        kv("error", format!("{sym}:{code}"));
    }
    d.extras.write(s);
}

fn write_process(s: &mut String, p: &FakeProcess) {
    let mut kv = |k: &str, v: String| {
        let _ = writeln!(s, "{k} = {v}");
    };
    kv("device", p.device.to_string());
    kv(
        "list",
        match p.list {
            ProcessListKind::Compute => "compute",
            ProcessListKind::Graphics => "graphics",
            ProcessListKind::Mps => "mps",
        }
        .to_string(),
    );
    kv(
        "pid",
        if p.child_of_caller {
            "child_of_caller".to_string()
        } else if p.caller {
            "caller".to_string()
        } else {
            p.pid.to_string()
        },
    );
    kv(
        "used",
        seq(p.used.iter().map(|u| match u {
            Used::Bytes(b) => b.to_string(),
            Used::NotAvailable => "max".to_string(),
        })),
    );
    if let Some(v) = p.gpu_instance_id {
        kv("gpu_instance_id", v.to_string());
    }
    if let Some(v) = p.compute_instance_id {
        kv("compute_instance_id", v.to_string());
    }
    if let Some(v) = p.from_tick {
        kv("from_tick", v.to_string());
    }
    if let Some(v) = p.until_tick {
        kv("until_tick", v.to_string());
    }
    match p.accounting_max {
        Some(Used::Bytes(b)) => kv("accounting_max", b.to_string()),
        Some(Used::NotAvailable) => kv("accounting_max", "max".to_string()),
        None => {}
    }
    if let Some(v) = p.accounting_start_us {
        kv("accounting_start_us", v.to_string());
    }
    if let Some((g, m)) = p.accounting_util {
        kv("accounting_gpu_util", g.to_string());
        kv("accounting_mem_util", m.to_string());
    }
}
