//! MPS client lists and per-process utilization against the fake NVML: the server named and
//! never double counted, clients merged across lists, the 32-byte stride, pre-Volta; samples
//! taken since the previous query, silence as 0 only when the device answered, bad samples,
//! growth between sizing and fill, unsupported devices and old drivers.

use hmn_testbed::{Driver, FakeNvml, FakeProc, FakeProcess, FakeSample};
use hypomnesis::{Field, GpuProcess, ProcessKind, ProcessUtilization, UnknownReason};

use crate::util::Bed;

const MIB: u64 = 1 << 20;

fn row(rows: &[GpuProcess], pid: u32) -> &GpuProcess {
    rows.iter()
        .find(|r| r.pid == pid)
        .unwrap_or_else(|| panic!("no row {pid}: {rows:?}"))
}

/// A bed whose /proc names `server` as the MPS server and the clients as python3.
fn mps_bed(fake: &FakeNvml, server: u32, clients: &[u32]) -> Bed {
    let bed = Bed::with_nvml(fake);
    bed.world
        .proc
        .process(&FakeProc::new(server, "nvidia-cuda-mps").cmdline(&["nvidia-cuda-mps-server"]))
        .unwrap();
    for c in clients {
        bed.world
            .proc
            .process(&FakeProc::new(*c, "python3"))
            .unwrap();
    }
    bed
}

#[test]
fn mps_clients_and_the_server_on_volta() {
    for stride in [24, 32] {
        let fake = FakeNvml::mps_volta(900, [901, 902]).stride(stride);
        let bed = mps_bed(&fake, 900, &[901, 902]);
        let p = bed.probe();
        for rows in [p.gpu_processes().processes, p.gpu_usage().processes] {
            assert_eq!(rows.len(), 3, "stride {stride}: {rows:?}");
            let server = row(&rows, 900);
            assert_eq!(server.kind, ProcessKind::MpsServer, "stride {stride}");
            assert_eq!(server.used_bytes, Some(30 * MIB));
            assert!(!server.may_include_clients, "its own small context");
            // A client in the compute and MPS lists is one row, its figure once.
            let c = row(&rows, 901);
            assert_eq!((c.kind, c.used_bytes), (ProcessKind::Mps, Some(6 << 30)));
            assert_eq!(row(&rows, 902).used_bytes, Some(2 << 30));
        }
    }
}

#[test]
fn a_server_at_least_its_clients_sum_is_not_counted_again() {
    let mut fake = FakeNvml::mps_volta(900, [901, 902]);
    fake.processes[0] = FakeProcess::compute(0, 900, 9 << 30);
    let bed = mps_bed(&fake, 900, &[901, 902]);
    let rows = bed.probe().gpu_processes().processes;
    assert!(row(&rows, 900).may_include_clients);
    let counted: u64 = rows
        .iter()
        .filter(|r| !r.may_include_clients)
        .filter_map(|r| r.used_bytes)
        .sum();
    assert_eq!(counted, 8 << 30);
}

#[test]
fn clients_only_in_the_mps_list_are_clients() {
    let fake = FakeNvml::mps_clients_only_in_mps_list(900, [901, 902]);
    let bed = mps_bed(&fake, 900, &[901, 902]);
    let rows = bed.probe().gpu_processes().processes;
    assert_eq!(row(&rows, 901).kind, ProcessKind::Mps);
    assert_eq!(row(&rows, 900).kind, ProcessKind::MpsServer);
}

#[test]
fn before_volta_the_server_holds_the_only_figure() {
    let fake = FakeNvml::mps_pre_volta(900);
    let bed = mps_bed(&fake, 900, &[]);
    let list = bed.probe().gpu_processes();
    assert!(
        list.warnings.is_empty(),
        "no MPS list is not an error: {:?}",
        list.warnings
    );
    let s = row(&list.processes, 900);
    assert_eq!(s.kind, ProcessKind::MpsServer, "named by its process name");
    assert!(
        !s.may_include_clients,
        "no client listed: its figure stays counted"
    );
    assert_eq!(s.used_bytes, Some(8 << 30));
}

#[test]
fn drivers_without_mps_lists_show_compute_rows() {
    for driver in [Driver::PreR470, Driver::Legacy] {
        let fake = FakeNvml::mps_volta(900, [901, 902]).driver(driver);
        let bed = mps_bed(&fake, 900, &[901, 902]);
        let list = bed.probe().gpu_processes();
        assert!(list.warnings.is_empty(), "{driver:?}: {:?}", list.warnings);
        let kind = row(&list.processes, 901).kind;
        let expected = if driver == Driver::Legacy {
            ProcessKind::Mps
        } else {
            ProcessKind::Compute
        };
        assert_eq!(kind, expected, "{driver:?}");
    }
}

#[test]
fn utilization_is_sampled_since_the_previous_query() {
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .process(FakeProcess::compute(0, 5151, 1 << 30))
        .process(FakeProcess::compute(0, 6000, 1 << 30))
        .sample(FakeSample::new(0, 4242, [37, 12, 0, 3]).rounds(0, 1))
        // A driver's inconsistent sample.
        .sample(FakeSample::new(0, 5151, [150, 10, 0, 0]))
        // Older than the first query's one-second window.
        .sample(FakeSample::new(0, 6000, [80, 8, 0, 0]).age_ms(5000));
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let rows = p.gpu_usage().processes;
    let u = row(&rows, 4242).utilization.unwrap();
    assert_eq!(
        (
            u.sm_percent,
            u.memory_percent,
            u.encoder_percent,
            u.decoder_percent
        ),
        (37, 12, 0, 3)
    );
    assert!(u.sampled);
    let bad = row(&rows, 5151);
    assert_eq!(bad.utilization, None);
    assert_eq!(bad.unknown[0].reason, UnknownReason::Implausible);
    let old = row(&rows, 6000).utilization.unwrap();
    assert!(!old.sampled && old.sm_percent == 0, "{old:?}");
    // The next query starts after the newest sample taken: 4242 had no new one.
    let rows = p.gpu_usage().processes;
    let again = row(&rows, 4242).utilization.unwrap();
    assert_eq!(again, ProcessUtilization::idle(again.since_unix_us));
    assert!(again.since_unix_us >= u.since_unix_us);
}

#[test]
fn a_sample_that_appears_between_sizing_and_fill_is_read() {
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, 4242, 1 << 30))
        .process(FakeProcess::compute(0, 5151, 1 << 30))
        .sample(FakeSample::new(0, 4242, [20, 1, 0, 0]))
        .sample(FakeSample::new(0, 5151, [40, 2, 0, 0]).late());
    let rows = Bed::with_nvml(&fake).probe().gpu_usage().processes;
    assert_eq!(row(&rows, 5151).utilization.map(|u| u.sm_percent), Some(40));
    assert_eq!(row(&rows, 4242).utilization.map(|u| u.sm_percent), Some(20));
}

#[test]
fn no_figure_is_unknown_with_its_reason_never_zero() {
    let cases: [(u32, UnknownReason, &str); 3] = [
        (3, UnknownReason::Unsupported, "Not Supported"),
        (13, UnknownReason::Unsupported, "unction"),
        (15, UnknownReason::DeviceError, "lost"),
    ];
    for (code, reason, text) in cases {
        let fake = FakeNvml::h100s(1)
            .process(FakeProcess::compute(0, 4242, 1 << 30))
            .error("nvmlDeviceGetProcessUtilization", code);
        let list = Bed::with_nvml(&fake).probe().gpu_usage();
        let r = row(&list.processes, 4242);
        assert_eq!(r.utilization, None, "code {code}");
        let u = r
            .unknown
            .iter()
            .find(|u| u.field == Field::Utilization)
            .unwrap();
        assert_eq!(u.reason, reason, "code {code}");
        assert!(
            u.detail.to_lowercase().contains(&text.to_lowercase()),
            "{}",
            u.detail
        );
        assert!(list.failed_devices.is_empty(), "memory still listed");
    }
    // No sample at all (NOT_FOUND): every listed process used nothing.
    let fake = FakeNvml::h100s(1).process(FakeProcess::compute(0, 4242, 1 << 30));
    let rows = Bed::with_nvml(&fake).probe().gpu_usage().processes;
    let u = rows[0].utilization.unwrap();
    assert!(!u.sampled && u.sm_percent == 0);
}

#[test]
fn accounting_records_carry_utilization_over_the_life() {
    let fake = FakeNvml::new()
        .device(hmn_testbed::FakeDevice::h100(0).accounting())
        .process(FakeProcess::compute(0, 4242, 3 << 30).accounting_util(64, 21));
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let _ = p.gpu_usage();
    let acc = p.vram_accounting(&[4242]);
    let rec = &acc[0].processes[0];
    assert_eq!(rec.max_memory_bytes, Some(3 << 30));
    assert_eq!(
        (rec.gpu_utilization_percent, rec.memory_utilization_percent),
        (Some(64), Some(21))
    );
}
