use super::*;
use hypomnesis::test_helpers::{DeviceBuilder, GpuProcessBuilder};

fn collection(top: usize) -> Collection {
    let dev = DeviceBuilder::new(0)
        .name("NVIDIA H100 80GB HBM3")
        .uuid("GPU-1")
        .memory(Some(100), Some(40), Some(50), Some(10))
        .driver("nvidia", Some("550.54.15".into()))
        .build();
    let mut list = ProcessList::default();
    list.devices = vec![dev];
    list.processes = (1..=5)
        .map(|pid| {
            GpuProcessBuilder::new(pid, 0)
                .name(format!("p{pid}"))
                .used_bytes(Some(u64::from(pid) * 10))
                .build()
        })
        .chain(std::iter::once(GpuProcessBuilder::new(9, 0).build()))
        .collect();
    let mut workloads = BTreeMap::new();
    for pid in [4, 5] {
        workloads.insert(pid, Workload::Pod("uid-a".into()));
    }
    Collection {
        list,
        host: None,
        workloads,
        top_processes: top,
        duration_seconds: 0.01,
        completed_unix_s: 1_700_000_000.5,
        xid: None,
    }
}

#[test]
fn health_xid_and_unattributed_series() {
    use hypomnesis::types::{EccMode, RasCount, RemappedRows};
    let mut c = collection(10);
    let mut h = hypomnesis::MemoryHealth::default();
    h.ecc = Some(EccMode::new(true, false));
    h.ecc_errors.uncorrected_volatile = Some(2);
    h.remapped_rows = Some(RemappedRows::new(3, 1, true, false));
    h.ras = vec![RasCount::new("umc", 0, 5)];
    c.list.devices[0].health = Some(h);
    c.list.processes.clear();
    let mut t = hypomnesis::XidTally::new(1);
    t.add(hypomnesis::types::XidEvent::new(0, 79, 2));
    t.add(hypomnesis::types::XidEvent::new(0, 79, 3));
    c.xid = Some(t);
    let body = to_prometheus_text(&render_fresh(&c));
    let l = "gpu=\"0\",gpu_uuid=\"GPU-1\"";
    for want in [
        format!("hmn_device_ecc_enabled{{{l},mode=\"current\"}} 1"),
        format!("hmn_device_ecc_enabled{{{l},mode=\"pending\"}} 0"),
        format!("hmn_device_ecc_errors_total{{{l},error=\"uncorrected\",scope=\"volatile\"}} 2"),
        format!("hmn_device_remapped_rows_total{{{l},cause=\"uncorrectable\"}} 1"),
        format!("hmn_device_row_remap_pending{{{l}}} 1"),
        format!("hmn_device_row_remap_failure{{{l}}} 0"),
        format!("hmn_device_ras_errors_total{{{l},block=\"umc\",error=\"correctable\"}} 5"),
        format!("hmn_device_xid_events_total{{{l},xid=\"79\"}} 2"),
        format!("hmn_device_memory_unattributed_bytes{{{l}}} 40"),
        format!("hmn_device_memory_unattributed_is_upper_bound{{{l}}} 0"),
    ] {
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    // A listed process without a figure: the remainder is at most that, and says so.
    c.list.processes.push(GpuProcessBuilder::new(9, 0).build());
    assert_eq!(c.list.processes[0].used_bytes, None);
    let body = to_prometheus_text(&render_fresh(&c));
    for want in [
        format!("hmn_device_memory_unattributed_bytes{{{l}}} 40"),
        format!("hmn_device_memory_unattributed_is_upper_bound{{{l}}} 1"),
    ] {
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    // What the driver does not give is omitted, never 0.
    assert!(!body.contains("corrected\",scope=\"aggregate"), "{body}");
    assert!(!body.contains("hmn_device_retired_pages"), "{body}");
    // XIDs that cannot be counted on a device: no series for it.
    c.xid.as_mut().unwrap().unavailable = Some(hypomnesis::XidUncounted::NoNvml {
        cause: hypomnesis::BackendCause::LibraryMissing,
        reason: "libnvidia-ml.so.1 not found".into(),
    });
    let body = to_prometheus_text(&render_fresh(&c));
    assert!(!body.contains("hmn_device_xid_events_total{"), "{body}");
}

fn render_fresh(c: &Collection) -> String {
    render(c, false)
}

#[test]
fn a_stale_collection_reports_no_success_and_its_age() {
    let mut c = collection(10);
    c.host = None;
    let fresh = render(&c, false);
    assert!(
        fresh.contains("hmn_collector_success{collector=\"processes\"} 1.0"),
        "{fresh}"
    );
    assert!(
        fresh.contains("hmn_collector_last_success_timestamp_seconds 1700000000.5"),
        "{fresh}"
    );
    let stale = render(&c, true);
    assert!(stale.contains("hmn_collector_success{collector=\"processes\"} 0.0"));
    assert!(stale.contains("hmn_collector_last_success_timestamp_seconds 1700000000.5"));
    assert!(
        stale
            .lines()
            .filter(|l| l.starts_with("hmn_collector_success{"))
            .all(|l| l.ends_with(" 0.0")),
        "{stale}"
    );
}

#[test]
fn unknown_readings_are_omitted() {
    let om = render_fresh(&collection(10));
    assert!(
        om.contains("hmn_device_memory_total_bytes{gpu=\"0\",gpu_uuid=\"GPU-1\"} 100"),
        "{om}"
    );
    assert!(
        !om.contains("hmn_device_temperature_celsius{"),
        "no temperature sample without a reading"
    );
    assert!(
        !om.contains("pid=\"9\""),
        "a process with unknown memory has no series"
    );
    assert!(om.ends_with("# EOF\n"));
}

#[test]
fn top_n_and_other_bucket() {
    let om = render_fresh(&collection(2));
    assert!(om.contains("pid=\"5\""));
    assert!(om.contains("pid=\"4\""));
    assert!(!om.contains("pid=\"3\""));
    assert!(om.contains("hmn_process_gpu_memory_bytes{gpu=\"0\",gpu_uuid=\"GPU-1\",pid=\"other\",comm=\"other\"} 60"), "{om}");
    assert!(om.contains("hmn_cgroup_gpu_memory_bytes{gpu=\"0\",gpu_uuid=\"GPU-1\",kind=\"pod\",name=\"uid-a\"} 90"), "{om}");
}

#[test]
fn prometheus_text_renames_counters() {
    let om = "# HELP x_joules Energy.\n# TYPE x_joules counter\n# UNIT x_joules joules\nx_joules_total 5.0\nx_joules_created 1.0\n# HELP g_bytes G.\n# TYPE g_bytes gauge\ng_bytes 1\n# EOF\n";
    assert_eq!(
        to_prometheus_text(om),
        "# HELP x_joules_total Energy.\n# TYPE x_joules_total counter\nx_joules_total 5.0\n# HELP g_bytes G.\n# TYPE g_bytes gauge\ng_bytes 1\n"
    );
}

#[test]
fn a_pool_is_three_gauges_with_its_kind_and_an_unknown_is_omitted() {
    use hypomnesis::{MemoryPool, PoolSource};
    let mut gb10 = DeviceBuilder::new(0)
        .name("NVIDIA GB10")
        .uuid("GPU-9")
        .build();
    let mut p = MemoryPool::host_ram(PoolSource::ProcessSum, "NOT_SUPPORTED");
    p.total_bytes = Some(100);
    p.free_bytes = Some(60);
    gb10.pool = Some(p);
    let dgpu = DeviceBuilder::new(1)
        .memory(Some(80), Some(1), Some(79), None)
        .build();
    let mut list = ProcessList::default();
    list.devices = vec![gb10, dgpu];
    let om = render(
        &Collection {
            list,
            host: None,
            workloads: Default::default(),
            top_processes: 5,
            duration_seconds: 0.0,
            completed_unix_s: 0.0,
            xid: None,
        },
        false,
    );
    let labels = "gpu=\"0\",gpu_uuid=\"GPU-9\",pool=\"unified_host\",used_source=\"process_sum\"";
    assert!(
        om.contains(&format!("hmn_device_pool_total_bytes{{{labels}}} 100")),
        "{om}"
    );
    assert!(
        om.contains(&format!("hmn_device_pool_free_bytes{{{labels}}} 60")),
        "{om}"
    );
    assert!(
        !om.contains("hmn_device_pool_used_bytes{"),
        "unknown: no sample"
    );
    assert!(
        !om.contains("gpu=\"1\",gpu_uuid=\"\",pool="),
        "no pool, no series"
    );
}
