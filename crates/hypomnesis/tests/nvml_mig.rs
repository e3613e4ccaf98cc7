//! MIG against the fake NVML (through the real dlopen path): the presets copied from real
//! H100/H200 captures, the unprivileged view, pending mode, no instances, an instance destroyed
//! at every point of the reading, drivers too old for a symbol, and injected error codes.

use hmn_testbed::{
    Driver, FakeComputeInstance, FakeDevice, FakeGpuInstance, FakeNvml, FakeProcess,
};
use hypomnesis::{Device, Field, MigMode, ProcessKind, UnknownReason};

use crate::util::Bed;

const MIB: u64 = 1 << 20;

fn gpu0(fake: &FakeNvml) -> (Device, Vec<hypomnesis::Warning>) {
    let list = Bed::with_nvml(fake).probe().devices();
    (list.devices[0].clone(), list.warnings)
}

#[test]
fn two_1g10gb_instances_as_on_the_real_h100() {
    let bed = Bed::with_nvml(&FakeNvml::h100_mig_two_1g10gb());
    let p = bed.probe();
    let list = p.devices();
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);
    let d = &list.devices[0];
    let mig = d.mig.as_ref().unwrap();
    assert_eq!(
        (mig.current, mig.pending),
        (MigMode::Enabled, MigMode::Enabled)
    );
    assert!(d.mig_enabled());
    let ids: Vec<_> = mig
        .instances
        .iter()
        .map(|m| (m.index, m.gpu_instance_id, m.compute_instance_id))
        .collect();
    assert_eq!(ids, [(0, Some(11), Some(0)), (1, Some(13), Some(0))]);
    let a = &mig.instances[0];
    assert_eq!(
        a.uuid.as_deref(),
        Some("MIG-8443519f-66f7-5962-8955-60dba0866f3a")
    );
    assert_eq!(a.name.as_deref(), Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb"));
    assert_eq!(a.profile.as_deref(), Some("1g.10gb"));
    assert!(!a.profile_approximate);
    assert_eq!(a.gpu_instance_profile.as_deref(), Some("1g.10gb"));
    assert_eq!(a.gpu_instance_profile_id, Some(19));
    assert_eq!(a.placement.map(|p| (p.start, p.size)), Some((4, 1)));
    assert_eq!(a.multiprocessor_count, Some(16));
    assert_eq!(
        a.parent_uuid.as_deref(),
        Some("GPU-0d0831da-0c98-2717-6446-8acd91d39b65")
    );
    assert_eq!(a.memory.total_bytes, Some(9984 * MIB));
    assert_eq!(a.memory.used_bytes, Some(4210 * MIB));
    assert_eq!(a.memory.free_bytes, Some((9984 - 4210) * MIB));
    // The whole card: total stays the card's, used is the instances' sum (4210 + 15).
    assert_eq!(d.memory.total_bytes, Some(81_559 * MIB));
    assert_eq!(d.memory.used_bytes, Some(4225 * MIB));

    let procs = p.gpu_processes();
    assert!(procs.failed_devices.is_empty(), "{:?}", procs.warnings);
    assert_eq!(procs.processes.len(), 1);
    let r = &procs.processes[0];
    assert_eq!((r.pid, r.used_bytes), (10385, Some(4188 * MIB)));
    assert_eq!(
        (r.gpu_instance_id, r.compute_instance_id),
        (Some(11), Some(0))
    );
    assert_eq!(r.mig_index, Some(0));
    assert_eq!(r.mig_uuid, a.uuid);
    assert_eq!(
        r.device_uuid, d.uuid,
        "the parent's UUID, as nvidia-smi attributes it"
    );
    // Under MIG the driver gives no per-process utilization: unknown, never 0.
    assert_eq!(r.utilization, None);
    let u = r
        .unknown
        .iter()
        .find(|u| u.field == Field::Utilization)
        .unwrap();
    assert_eq!(u.reason, UnknownReason::Unsupported);
    assert!(u.detail.contains("MIG"), "{}", u.detail);
}

#[test]
fn mixed_profiles_name_the_device_and_the_gpu_instance_apart() {
    let bed = Bed::with_nvml(&FakeNvml::h100_mig_mixed());
    let p = bed.probe();
    let d = &p.devices().devices[0];
    let mig = d.mig.as_ref().unwrap();
    let names: Vec<_> = mig
        .instances
        .iter()
        .map(|m| {
            (
                m.profile.clone().unwrap(),
                m.gpu_instance_profile.clone().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("1c.3g.40gb".to_string(), "3g.40gb".to_string()),
            ("1g.10gb".to_string(), "1g.10gb+me".to_string()),
            ("1g.10gb".to_string(), "1g.10gb".to_string()),
        ]
    );
    assert_eq!(mig.instances[1].dcgm_profile(), Some("1g.10gb+me"));
    assert_eq!(mig.instances[0].memory.total_bytes, Some(40_448 * MIB));
    assert_eq!(d.memory.used_bytes, Some(12_657 * MIB), "12627 + 15 + 15");
    let rows = p.gpu_processes().processes;
    let pids: Vec<_> = rows
        .iter()
        .map(|r| (r.pid, r.mig_index, r.gpu_instance_id))
        .collect();
    assert_eq!(
        pids,
        [
            (23804, Some(0), Some(1)),
            (23806, Some(0), Some(1)),
            (23808, Some(0), Some(1))
        ]
    );
}

#[test]
fn the_h200_profile_name_is_not_its_memory() {
    let (d, _) = gpu0(&FakeNvml::h200_mig());
    let m = &d.mig.unwrap().instances[0];
    assert_eq!(m.profile.as_deref(), Some("1g.18gb"));
    assert_eq!(m.memory.total_bytes, Some(16_384 * MIB));
    assert_eq!(
        m.uuid.as_deref(),
        Some("MIG-30366fdf-6105-5648-968d-679e250aa830")
    );
    assert_eq!(d.memory.used_bytes, Some(639 * MIB));
}

#[test]
fn an_unprivileged_caller_still_sees_every_mig_device() {
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.devices[0] = fake.devices[0].clone().unprivileged();
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let list = p.devices();
    assert!(
        list.warnings.is_empty(),
        "no warning for the expected refusal: {:?}",
        list.warnings
    );
    let d = &list.devices[0];
    let mig = d.mig.as_ref().unwrap();
    assert_eq!(mig.instances.len(), 2);
    assert_eq!(mig.instances[0].profile.as_deref(), Some("1g.10gb"));
    assert_eq!(mig.instances[0].gpu_instance_profile, None);
    assert_eq!(mig.instances[0].placement, None);
    assert_eq!(mig.instances[0].memory.used_bytes, Some(4210 * MIB));
    let why = mig
        .unknown
        .iter()
        .find(|u| u.field == Field::MigInstancesGpuInstanceProfile)
        .unwrap();
    assert_eq!(why.reason, UnknownReason::PermissionDenied);
    // The whole-GPU memory is refused, and says where the figures are.
    assert_eq!(d.memory.total_bytes, None);
    let mem = d
        .unknown
        .iter()
        .find(|u| u.field == Field::MemoryTotalBytes)
        .unwrap();
    assert_eq!(mem.reason, UnknownReason::PermissionDenied);
    assert!(mem.detail.contains("mig.instances"), "{}", mem.detail);
    // Processes come from the MIG devices, which need no privilege.
    let procs = p.gpu_processes();
    assert!(procs.failed_devices.is_empty(), "{:?}", procs.warnings);
    assert_eq!(procs.processes[0].mig_index, Some(0));
}

#[test]
fn records_without_instance_ids_get_them_from_the_handle() {
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.devices[0] = fake.devices[0].clone().mig_records_without_ids();
    let rows = Bed::with_nvml(&fake).probe().gpu_processes().processes;
    assert_eq!(
        (rows[0].gpu_instance_id, rows[0].compute_instance_id),
        (Some(11), Some(0))
    );
}

#[test]
fn pending_and_disabled_modes_list_no_instance() {
    let fake = FakeNvml::new().device(
        FakeDevice::h100(0)
            .mig(false, true)
            .mig_profiles("h100_80gb"),
    );
    let (d, w) = gpu0(&fake);
    let m = d.mig.unwrap();
    assert_eq!(
        (m.current, m.pending),
        (MigMode::Disabled, MigMode::Enabled)
    );
    assert!(m.change_pending() && m.instances.is_empty() && w.is_empty());
    // A GPU without MIG has no `mig` at all, and no unknown for it.
    let (d, _) = gpu0(&FakeNvml::h100s(1));
    assert!(d.mig.is_none());
    assert!(d.unknown.iter().all(|u| u.field != Field::Mig));
}

#[test]
fn mig_enabled_with_no_instances_is_a_state_not_an_error() {
    let fake = FakeNvml::new().device(FakeNvml::h100_mig_parent());
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let list = p.devices();
    let m = list.devices[0].mig.as_ref().unwrap();
    assert!(m.enabled() && m.instances.is_empty() && m.unknown.is_empty());
    assert!(
        list.warnings.is_empty(),
        "no warning per empty slot: {:?}",
        list.warnings
    );
    let procs = p.gpu_processes();
    assert!(procs.processes.is_empty() && procs.failed_devices.is_empty());
    assert!(procs.warnings.is_empty(), "{:?}", procs.warnings);
}

/// Issue 21: a library user planning over every device of a probe gets the answers
/// `hmn fits --device all` gives (`crates/hmn/tests/mig.rs`): the GPU in MIG mode judged as its
/// two MIG devices, each against its own GPU instance's memory; a GPU in MIG mode without one
/// not judged, with a warning; a plain GPU as itself.
#[test]
fn a_plan_over_every_device_judges_each_mig_device_as_hmn_fits_does() {
    use hypomnesis::estimate::plan::{Placement, Target, judged_devices, plan};
    use hypomnesis::estimate::{Estimate, Fit};
    const GIB: u64 = 1 << 30;
    let list = Bed::with_nvml(&FakeNvml::h100_mig_two_1g10gb())
        .probe()
        .devices();
    let (devices, warnings) = judged_devices(&list.devices);
    assert!(warnings.is_empty(), "{warnings:?}");
    let every = Target::Devices {
        devices: &devices,
        every: true,
    };
    let p = plan(every, None, &Estimate::requested(6 * GIB), None);
    assert_eq!(p.placement, Placement::BestDevice);
    let seen: Vec<(Option<u32>, Option<&str>, Option<u64>)> = p
        .fits
        .iter()
        .map(|f| (f.index, f.mig_uuid.as_deref(), f.free_bytes))
        .collect();
    assert_eq!(
        seen,
        [
            (
                Some(0),
                Some("MIG-8443519f-66f7-5962-8955-60dba0866f3a"),
                Some((9984 - 4210) * MIB)
            ),
            (
                Some(0),
                Some("MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
                Some((9984 - 15) * MIB)
            ),
        ]
    );
    // 5.6 GiB free in the first: 6 GiB does not fit there; the other (9.7 GiB free) is chosen.
    let fit = |i: usize| p.fits[i].verdict.as_ref().map(|v| v.fit);
    assert_eq!(fit(0), Some(Fit::DoesNotFit));
    assert_eq!(fit(1), Some(Fit::Fits));
    assert_eq!((p.chosen, p.fit), (Some(1), Some(Fit::Fits)));
    assert_eq!(
        p.fits[1].name.as_deref(),
        Some("NVIDIA H100 80GB HBM3 MIG 1g.10gb")
    );

    // MIG on without a MIG device beside a plain GPU: only the plain GPU is judged.
    let list = Bed::with_nvml(
        &FakeNvml::new()
            .device(FakeNvml::h100_mig_parent())
            .device(FakeDevice::h100(1)),
    )
    .probe()
    .devices();
    let (devices, warnings) = judged_devices(&list.devices);
    assert_eq!(devices.iter().map(|d| d.index).collect::<Vec<_>>(), [1]);
    assert_eq!(warnings.len(), 1);
    assert_eq!(warnings[0].device_index, Some(0));
    assert_eq!(
        warnings[0].message,
        "MIG is enabled with no MIG device configured: nothing can run on it; not judged"
    );
}

/// The second instance (GI 13, holding pid 777) is destroyed after its handle answered `n`
/// calls, for every `n`: whatever call of hmn's it lands on, the answer is whole.
#[test]
fn an_instance_destroyed_at_any_call_is_present_or_absent_never_half() {
    for n in 0..=12 {
        let mut fake = FakeNvml::h100_mig_two_1g10gb()
            .process(FakeProcess::compute(0, 777, 5 * MIB).mig(13, 0));
        fake.gpu_instances[1].compute_instances[0] = fake.gpu_instances[1].compute_instances[0]
            .clone()
            .gone_after_calls(n);
        let bed = Bed::with_nvml(&fake);
        let p = bed.probe();
        let list = p.gpu_processes();
        let d = &list.devices[0];
        let mig = d.mig.as_ref().unwrap();
        // The first instance is never affected.
        let first = &mig.instances[0];
        assert_eq!(
            (first.index, first.gpu_instance_id),
            (0, Some(11)),
            "n = {n}"
        );
        assert!(list.processes.iter().any(|r| r.pid == 10385), "n = {n}");
        match mig.instances.get(1) {
            Some(second) => {
                // Present: every field read (nothing half-filled).
                assert_eq!(
                    second.uuid.as_deref(),
                    Some("MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
                    "n = {n}"
                );
                assert_eq!(second.memory.total_bytes, Some(9984 * MIB), "n = {n}");
                assert!(second.unknown.is_empty(), "n = {n}: {:?}", second.unknown);
            }
            None => {
                // Absent: named once when it vanished while read, not at all when never seen.
                let named: Vec<_> = list
                    .warnings
                    .iter()
                    .filter(|w| w.message.contains("MIG device 1"))
                    .collect();
                assert!(named.len() <= 1, "n = {n}: {:?}", list.warnings);
                if n > 0 {
                    assert_eq!(named.len(), 1, "n = {n}: {:?}", list.warnings);
                }
            }
        }
        // Its process is either listed in its instance or not at all; never on the wrong one.
        for r in list.processes.iter().filter(|r| r.pid == 777) {
            assert_eq!(
                (r.mig_index, r.gpu_instance_id),
                (Some(1), Some(13)),
                "n = {n}"
            );
        }
        assert!(
            list.failed_devices.is_empty(),
            "n = {n}: {:?}",
            list.warnings
        );
    }
}

#[test]
fn an_instance_gone_before_its_processes_are_read_is_named_once() {
    let mut fake =
        FakeNvml::h100_mig_two_1g10gb().process(FakeProcess::compute(0, 777, 5 * MIB).mig(13, 0));
    // Found when the devices are listed (lookup 0), gone for the process lists (lookup 1).
    fake.gpu_instances[1].compute_instances[0] = fake.gpu_instances[1].compute_instances[0]
        .clone()
        .gone_from_enum(1);
    let list = Bed::with_nvml(&fake).probe().gpu_processes();
    assert_eq!(list.devices[0].mig.as_ref().unwrap().instances.len(), 2);
    assert!(list.processes.iter().all(|r| r.pid != 777));
    let w: Vec<_> = list.warnings.iter().map(ToString::to_string).collect();
    assert_eq!(
        w,
        [
            "GPU 0: MIG device 1 (MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3) was destroyed; its processes are not listed"
        ]
    );
    assert!(list.failed_devices.is_empty());
}

#[test]
fn drivers_too_old_for_a_symbol_degrade_with_a_reason() {
    // R440-like: no MIG symbol at all. The mode is unknown, with the symbol named.
    let fake = FakeNvml::h100_mig_two_1g10gb().driver(Driver::PreMig);
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let d = &p.devices().devices[0];
    assert!(d.mig.is_none());
    let u = d.unknown.iter().find(|u| u.field == Field::Mig).unwrap();
    assert_eq!(u.reason, UnknownReason::Unsupported);
    assert!(u.detail.contains("nvmlDeviceGetMigMode"), "{}", u.detail);
    // The whole GPU's lists answer in its place (a privileged caller).
    assert_eq!(p.gpu_processes().processes[0].gpu_instance_id, Some(11));

    // R450/R460-like: MIG devices, no profile names (no …ProfileInfoV), no MPS lists.
    let fake = FakeNvml::h100_mig_two_1g10gb().driver(Driver::PreR470);
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let d = &p.devices().devices[0];
    let m = &d.mig.as_ref().unwrap().instances[0];
    assert_eq!(m.profile.as_deref(), Some("1g.10gb"));
    assert_eq!(m.gpu_instance_profile, None);
    assert_eq!(
        m.gpu_instance_profile_id,
        Some(19),
        "the v1 call still gives ids"
    );
    let u = m
        .unknown
        .iter()
        .find(|u| u.field == Field::GpuInstanceProfile)
        .unwrap();
    assert!(u.detail.contains("R470"), "{}", u.detail);
    assert_eq!(d.memory.reserved_bytes, None, "v1 memory");
    let list = p.gpu_processes();
    assert_eq!(list.processes.len(), 1);
    assert!(list.warnings.is_empty(), "{:?}", list.warnings);

    // Pre-R510: MIG works through the v1 memory call.
    let (d, w) = gpu0(&FakeNvml::h100_mig_two_1g10gb().driver(Driver::Legacy));
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        d.mig.unwrap().instances[1].memory.used_bytes,
        Some(15 * MIB)
    );
}

#[test]
fn injected_error_codes_become_reasons_never_panics() {
    // The mode itself fails (UNKNOWN): an unknown `mig` on the device.
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.devices[0] = fake.devices[0].clone().error("nvmlDeviceGetMigMode", 999);
    let (d, _) = gpu0(&fake);
    assert!(d.mig.is_none());
    assert_eq!(
        d.unknown
            .iter()
            .find(|u| u.field == Field::Mig)
            .unwrap()
            .reason,
        UnknownReason::DeviceError
    );

    // The slot count fails: MIG on, instances unknown, one warning; the whole GPU's lists
    // answer for the processes.
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.devices[0] = fake.devices[0]
        .clone()
        .error("nvmlDeviceGetMaxMigDeviceCount", 4);
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let list = p.devices();
    let m = list.devices[0].mig.as_ref().unwrap();
    assert!(m.enabled() && m.instances.is_empty());
    assert_eq!(m.unknown[0].reason, UnknownReason::PermissionDenied);
    assert_eq!(list.warnings.len(), 1, "{:?}", list.warnings);
    assert_eq!(p.gpu_processes().processes[0].pid, 10385);

    // One slot refused: a warning naming it; the other instance stands.
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.gpu_instances[1].compute_instances[0] = fake.gpu_instances[1].compute_instances[0]
        .clone()
        .error("nvmlDeviceGetMigDeviceHandleByIndex", 4);
    let (d, w) = gpu0(&fake);
    assert_eq!(d.mig.unwrap().instances.len(), 1);
    assert_eq!(w.len(), 1);
    assert!(w[0].message.starts_with("MIG device 1: "), "{}", w[0]);

    // A MIG device's UUID fails (UNKNOWN, not "gone"): present, its UUID unknown.
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.gpu_instances[0].compute_instances[0] = fake.gpu_instances[0].compute_instances[0]
        .clone()
        .error("nvmlDeviceGetUUID", 999);
    let (d, _) = gpu0(&fake);
    let m = &d.mig.unwrap().instances[0];
    assert_eq!(m.uuid, None);
    assert_eq!(m.unknown[0].field, Field::Uuid);
    assert_eq!(m.profile.as_deref(), Some("1g.10gb"));

    // A MIG device's process list fails: the device is marked failed, with the instance named.
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.gpu_instances[0].compute_instances[0] = fake.gpu_instances[0].compute_instances[0]
        .clone()
        .error("nvmlDeviceGetComputeRunningProcesses_v3", 999);
    let list = Bed::with_nvml(&fake).probe().gpu_processes();
    assert_eq!(list.failed_devices, [0]);
    assert!(
        list.warnings[0]
            .message
            .starts_with("MIG device 0 (MIG-8443"),
        "{:?}",
        list.warnings
    );
}

#[test]
fn a_gpu_instance_with_two_compute_instances_shares_one_memory() {
    let gi = FakeGpuInstance::new(0, 1, 9, (0, 4), 2000 * MIB)
        .ci(FakeComputeInstance::new(
            0,
            "1c.3g.40gb",
            "MIG-aaaa0000-0000-0000-0000-000000000000",
        ))
        .ci(FakeComputeInstance::new(
            1,
            "2c.3g.40gb",
            "MIG-bbbb0000-0000-0000-0000-000000000000",
        ));
    let fake = FakeNvml::new()
        .device(FakeNvml::h100_mig_parent())
        .gpu_instance(gi)
        .process(FakeProcess::compute(0, 50, 1000 * MIB).mig(1, 0))
        .process(FakeProcess::compute(0, 51, 900 * MIB).mig(1, 1));
    let bed = Bed::with_nvml(&fake);
    let p = bed.probe();
    let d = &p.devices().devices[0];
    let m = &d.mig.as_ref().unwrap().instances;
    assert_eq!(m.len(), 2);
    assert_eq!(m[0].memory, m[1].memory, "one GPU instance, one figure");
    assert_eq!(
        (m[0].compute_instance_id, m[1].compute_instance_id),
        (Some(0), Some(1))
    );
    assert_eq!(
        d.memory.used_bytes,
        Some(2000 * MIB),
        "counted once in the card's figure"
    );
    let rows = p.gpu_processes().processes;
    let placed: Vec<_> = rows
        .iter()
        .map(|r| (r.pid, r.mig_index, r.compute_instance_id))
        .collect();
    assert_eq!(placed, [(50, Some(0), Some(0)), (51, Some(1), Some(1))]);
    assert!(rows.iter().all(|r| r.kind == ProcessKind::Compute));
}

#[test]
fn accounting_is_unsupported_under_mig_not_off() {
    let mut fake = FakeNvml::h100_mig_two_1g10gb();
    fake.devices[0] = fake.devices[0].clone().accounting();
    let acc = Bed::with_nvml(&fake).probe().vram_accounting(&[10385]);
    assert_eq!(acc[0].enabled, None);
    let u = acc[0].unknown.as_ref().unwrap();
    assert_eq!(u.reason, UnknownReason::Unsupported);
    assert!(u.detail.contains("MIG-enabled"), "{}", u.detail);
    assert!(acc[0].processes.is_empty());
}
