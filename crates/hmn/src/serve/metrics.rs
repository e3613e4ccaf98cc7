//! The exposition: one collection of devices and processes rendered with prometheus-client
//! (OpenMetrics), and converted to the Prometheus text format 0.0.4 that scrapers get by
//! default. Base units, `hmn_` prefix, snake_case; a reading that is unknown is omitted, never
//! exported as 0 or a driver sentinel. See `docs/serve.md`.

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;

use hypomnesis::cgroup::Workload;
use hypomnesis::{BackendState, Device, HostMemory, ProcessList};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};

use super::series;

type Labels = Vec<(&'static str, String)>;
type GaugeFamily = Family<Labels, Gauge<f64, AtomicU64>>;

/// Everything one collection found.
#[derive(Debug)]
pub struct Collection {
    pub list: ProcessList,
    pub host: Option<HostMemory>,
    /// The workload (cgroup) of each pid that holds GPU memory.
    pub workloads: BTreeMap<u32, Workload>,
    /// Top-N processes per device by memory.
    pub top_processes: usize,
    pub duration_seconds: f64,
    /// When this collection completed, seconds since the Unix epoch.
    pub completed_unix_s: f64,
    /// XID events counted since the server started (`None`: not counted).
    pub xid: Option<hypomnesis::XidTally>,
}

fn device_labels(d: &Device) -> Labels {
    vec![
        ("gpu", d.index.to_string()),
        ("gpu_uuid", d.uuid.clone().unwrap_or_default()),
    ]
}

struct Families {
    reg: Registry,
}

impl Families {
    /// A gauge without labels.
    fn plain(&mut self, name: &str, help: &str, unit: Option<Unit>, value: Option<f64>) {
        let Some(v) = value.filter(|v| v.is_finite()) else {
            return;
        };
        let g = Gauge::<f64, AtomicU64>::default();
        g.set(v);
        match unit {
            Some(u) => self.reg.register_with_unit(name, help, u, g),
            None => self.reg.register(name, help, g),
        }
    }

    fn gauge(&mut self, name: &str, help: &str, unit: Option<Unit>) -> GaugeFamily {
        let f = GaugeFamily::default();
        match unit {
            Some(u) => self.reg.register_with_unit(name, help, u, f.clone()),
            None => self.reg.register(name, help, f.clone()),
        }
        f
    }
}

fn set(f: &GaugeFamily, labels: Labels, value: Option<f64>) {
    if let Some(v) = value.filter(|v| v.is_finite()) {
        f.get_or_create(&labels).set(v);
    }
}

/// Renders a collection as OpenMetrics text (ends with `# EOF`). `stale`: the collection is
/// older than the staleness limit (the collector is stuck), so every `hmn_collector_success`
/// says 0.
pub fn render(c: &Collection, stale: bool) -> String {
    let mut fam = Families {
        reg: Registry::default(),
    };
    let bytes = || Some(Unit::Bytes);
    let total = fam.gauge(
        "hmn_device_memory_total",
        "Device memory installed",
        bytes(),
    );
    let used = fam.gauge(
        "hmn_device_memory_used",
        "Device memory in use (NVIDIA R510+: excludes reserved)",
        bytes(),
    );
    let free = fam.gauge(
        "hmn_device_memory_free",
        "Device memory available for allocation",
        bytes(),
    );
    let reserved = fam.gauge(
        "hmn_device_memory_reserved",
        "Device memory reserved by the driver and firmware",
        bytes(),
    );
    let region_total = fam.gauge(
        "hmn_device_memory_region_total",
        "Device-wide size of a memory region (amdgpu: vram, visible_vram, gtt)",
        bytes(),
    );
    let region_used = fam.gauge(
        "hmn_device_memory_region_used",
        "Device-wide use of a memory region (amdgpu: vram, visible_vram, gtt)",
        bytes(),
    );
    let util = fam.gauge(
        "hmn_device_utilization",
        "Fraction of the last sample period the GPU was busy",
        Some(Unit::Other("ratio".into())),
    );
    let mem_util = fam.gauge(
        "hmn_device_memory_utilization",
        "Fraction of the last sample period device memory was read or written",
        Some(Unit::Other("ratio".into())),
    );
    let temp = fam.gauge(
        "hmn_device_temperature",
        "GPU temperature",
        Some(Unit::Celsius),
    );
    let power = fam.gauge(
        "hmn_device_power",
        "Power draw",
        Some(Unit::Other("watts".into())),
    );
    let clock = fam.gauge(
        "hmn_device_clock",
        "Current clock frequency",
        Some(Unit::Other("hertz".into())),
    );
    let suspended = fam.gauge(
        "hmn_device_runtime_suspended",
        "1 when the device is runtime-suspended (its memory is then not read)",
        None,
    );
    let info = fam.gauge("hmn_device_info", "Device identity; value 1", None);
    let energy: Family<Labels, Counter<f64, AtomicU64>> = Family::default();
    fam.reg.register_with_unit(
        "hmn_device_energy",
        "Energy used since the driver loaded",
        Unit::Joules,
        energy.clone(),
    );
    let proc_mem = fam.gauge(
        "hmn_process_gpu_memory",
        "Device memory of a process (an AMD APU: its VRAM + GTT; top N per device by memory; \
         pid=\"other\" sums the rest)",
        bytes(),
    );
    let cgroup_mem = fam.gauge(
        "hmn_cgroup_gpu_memory",
        "Device memory of the processes of one workload (pod, container, systemd unit)",
        bytes(),
    );
    let nv = super::nvidia::Series::register(&mut fam.reg);
    let health = super::health::Series::register(&mut fam.reg);
    let pools = super::pool::Series::register(&mut fam.reg);
    let success = fam.gauge(
        "hmn_collector_success",
        "1 when the collector answered in the last collection, 0 when it failed or is absent, \
         or when that collection is stale (older than 3 intervals and 2 s)",
        None,
    );

    for d in &c.list.devices {
        let l = device_labels(d);
        let m = &d.memory;
        set(&total, l.clone(), m.total_bytes.map(|v| v as f64));
        set(&used, l.clone(), m.used_bytes.map(|v| v as f64));
        set(&free, l.clone(), m.free_bytes.map(|v| v as f64));
        set(&reserved, l.clone(), m.reserved_bytes.map(|v| v as f64));
        for (region, r) in &d.regions {
            let mut rl = l.clone();
            rl.push(("region", region.clone()));
            set(&region_total, rl.clone(), r.total_bytes.map(|v| v as f64));
            set(&region_used, rl, r.used_bytes.map(|v| v as f64));
        }
        let t = &d.telemetry;
        set(&util, l.clone(), t.utilization_percent.map(|p| p / 100.0));
        set(
            &mem_util,
            l.clone(),
            t.memory_utilization_percent.map(|p| p / 100.0),
        );
        set(&temp, l.clone(), t.temperature_celsius);
        set(&power, l.clone(), t.power_watts);
        for (name, mhz) in [
            ("graphics", t.clock_graphics_mhz),
            ("sm", t.clock_sm_mhz),
            ("memory", t.clock_memory_mhz),
        ] {
            let mut cl = l.clone();
            cl.push(("clock", name.to_string()));
            set(&clock, cl, mhz.map(|v| f64::from(v) * 1e6));
        }
        if let Some(j) = t.energy_joules.filter(|j| j.is_finite() && *j >= 0.0) {
            energy.get_or_create(&l).inc_by(j);
        }
        if d.runtime_status.is_some() {
            set(
                &suspended,
                l.clone(),
                Some(if d.is_suspended() { 1.0 } else { 0.0 }),
            );
        }
        let mut il = l.clone();
        il.extend([
            ("vendor", d.vendor.as_str().to_string()),
            ("model_name", d.name.clone().unwrap_or_default()),
            (
                "driver_version",
                d.driver_version.clone().unwrap_or_default(),
            ),
            (
                "pci_bus_id",
                d.pci_bus_id.map(|p| p.to_string()).unwrap_or_default(),
            ),
        ]);
        set(&info, il, Some(1.0));
        nv.device(d, &l);
        health.device(d, &l, &c.list.unattributed_on(d), c.xid.as_ref());
        pools.device(d, &l);
        processes(c, d, &l, &proc_mem, &cgroup_mem, &nv);
    }
    fam.plain(
        "hmn_hidden_processes",
        "Processes that may hold GPU memory but could not be inspected (run as root to see all)",
        None,
        Some(f64::from(c.list.hidden_processes)),
    );
    let ok = |answered: bool| Some(if answered && !stale { 1.0 } else { 0.0 });
    for b in &c.list.backends {
        // A fallback that was not needed has no series; a backend that failed says 0 (an
        // NVML broken by a driver upgrade is the failure an alert on it is for).
        let v = match b.state {
            BackendState::Active { .. } if !stale => 1.0,
            BackendState::NotTried => continue,
            _ => 0.0,
        };
        set(
            &success,
            vec![("collector", b.backend.as_str().to_ascii_lowercase())],
            Some(v),
        );
    }
    set(
        &success,
        vec![("collector", "host".to_string())],
        ok(c.host.is_some()),
    );
    set(
        &success,
        vec![("collector", "processes".to_string())],
        ok(c.list.failed_devices.is_empty()),
    );
    fam.plain(
        "hmn_collector_last_success_timestamp",
        "When the last collection completed (Unix time); time() minus this is its age",
        Some(Unit::Seconds),
        Some(c.completed_unix_s),
    );
    fam.plain(
        "hmn_collection_duration",
        "Time the last collection took",
        Some(Unit::Seconds),
        Some(c.duration_seconds),
    );
    let host = c.host;
    fam.plain(
        "hmn_host_memory_total",
        "Host RAM (MemTotal)",
        bytes(),
        host.map(|h| h.memory_total_bytes as f64),
    );
    fam.plain(
        "hmn_host_memory_available",
        "Host RAM available without swapping (MemAvailable)",
        bytes(),
        host.map(|h| h.memory_available_bytes as f64),
    );
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &fam.reg);
    // prometheus-client spells an info family `*_info` only for its Info type, which has no
    // label family: add the build info by hand, before `# EOF`.
    let build_info = format!(
        "# HELP hmn_build_info hmn build; value 1.\n# TYPE hmn_build_info gauge\nhmn_build_info{{version=\"{}\"}} 1\n",
        env!("CARGO_PKG_VERSION")
    );
    match out.rfind("# EOF") {
        Some(i) => out.insert_str(i, &build_info),
        None => out.push_str(&build_info),
    }
    out
}

/// The rendering before any collection has completed (and after the server has stopped with
/// none): every collector's `hmn_collector_success` at 0 and no figure — what `--textfile`
/// holds until the first collection, so a file left by an earlier run never reads as fresh.
pub fn render_starting() -> String {
    let mut fam = Families {
        reg: Registry::default(),
    };
    let success = fam.gauge(
        "hmn_collector_success",
        "1 when the collector answered in the last collection, 0 when it failed or is absent, \
         or when that collection is stale (older than 3 intervals and 2 s)",
        None,
    );
    // The collectors every collection reports (serve.md), the GPU backends' included: an alert
    // on `hmn_collector_success{collector="nvml"} == 0` fires while the first collection hangs.
    for collector in ["nvml", "drm", "host", "processes"] {
        set(
            &success,
            vec![("collector", collector.to_string())],
            Some(0.0),
        );
    }
    let mut out = String::new();
    // Writing to a String cannot fail.
    let _ = encode(&mut out, &fam.reg);
    out
}

/// Per-process (top N + other) and per-workload series of one device; which figures get a
/// series and what the rest sums to is `series`'.
fn processes(
    c: &Collection,
    d: &Device,
    l: &Labels,
    proc_mem: &GaugeFamily,
    cgroup_mem: &GaugeFamily,
    nv: &super::nvidia::Series,
) {
    let kind = d.pool_kind();
    let cut = series::processes(&c.list, d.index, kind, c.top_processes);
    for (p, held) in &cut.top {
        let mut pl = l.clone();
        pl.push(("pid", p.pid.to_string()));
        pl.push((
            "comm",
            p.name
                .as_ref()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default(),
        ));
        pl.extend(super::nvidia::process_labels(p, d));
        pl.extend(p.workload.as_ref().map(name_labels).unwrap_or_default());
        nv.process(p, &pl);
        set(proc_mem, pl, Some(*held as f64));
    }
    if let Some(o) = cut.other {
        let mut pl = l.clone();
        pl.push(("pid", "other".to_string()));
        pl.push(("comm", "other".to_string()));
        set(proc_mem, pl, Some(o as f64));
    }
    let on_device = c
        .list
        .processes
        .iter()
        .filter(|p| p.device_index == d.index);
    let by_workload = series::workloads(
        on_device,
        kind,
        |p| c.workloads.get(&p.pid),
        series::MAX_CGROUP_SERIES,
    );
    for (w, u) in by_workload.top {
        let mut wl = l.clone();
        wl.push(("kind", w.kind().to_string()));
        wl.push(("name", w.name().to_string()));
        wl.extend(workload_names(c, d, w));
        set(cgroup_mem, wl, Some(u as f64));
    }
    if let Some(r) = by_workload.other {
        let mut wl = l.clone();
        wl.push(("kind", "other".to_string()));
        wl.push(("name", "other".to_string()));
        set(cgroup_mem, wl, Some(r as f64));
    }
}

/// dcgm-exporter's Kubernetes labels (`namespace`, `pod`, `container`) for the names the node
/// gives (none when unknown).
fn name_labels(w: &hypomnesis::workload::WorkloadInfo) -> Labels {
    [
        ("namespace", &w.namespace),
        ("pod", &w.pod_name),
        ("container", &w.container_name),
    ]
    .into_iter()
    .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
    .collect()
}

/// The names of workload `w` on device `d`, from its processes: a pod's namespace and name
/// (its container only when every process of the pod on this device shares one).
fn workload_names(c: &Collection, d: &Device, w: &Workload) -> Labels {
    let infos: Vec<&hypomnesis::workload::WorkloadInfo> = c
        .list
        .processes
        .iter()
        .filter(|p| p.device_index == d.index && c.workloads.get(&p.pid) == Some(w))
        .filter_map(|p| p.workload.as_ref())
        .collect();
    let Some(first) = infos.first() else {
        return Vec::new();
    };
    let mut labels = name_labels(first);
    if infos
        .iter()
        .any(|i| i.container_name != first.container_name)
    {
        labels.retain(|(k, _)| *k != "container");
    }
    labels
}

/// Converts OpenMetrics text to the Prometheus text format 0.0.4: no `# EOF` and `# UNIT`
/// lines, counter families named with their `_total` suffix, no `_created` samples.
pub fn to_prometheus_text(om: &str) -> String {
    let counters: Vec<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line == "# EOF" || line.starts_with("# UNIT ") {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|p| {
            let rest = line.strip_prefix(p)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(&name)
                .then(|| format!("{p}{name}_total {tail}"))
        });
        match renamed {
            Some(r) => out.push_str(&r),
            None => {
                let sample_name = line.split(['{', ' ']).next().unwrap_or_default();
                if sample_name
                    .strip_suffix("_created")
                    .is_some_and(|n| counters.contains(&n))
                {
                    continue;
                }
                out.push_str(line);
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests;
