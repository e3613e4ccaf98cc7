//! Unit tests of the selectors and the CUDA view, over hand-built devices.

use super::*;
use crate::types::{MigDevice, MigMode, MigState, Source, Vendor};

/// Two H100s (index 0 at bus 0x1a, index 1 at 0x3a), an AMD GPU (index 2), and an H100 in MIG
/// mode (index 3 at 0x09) with MIG devices 0 and 1 (GI 11 and 13).
pub(crate) fn devices() -> Vec<Device> {
    let nvidia = |index: u32, uuid: &str, bus: &str| {
        let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
        d.name = Some("NVIDIA H100 80GB HBM3".into());
        d.uuid = Some(uuid.into());
        d.pci_bus_id = Some(bus.parse().unwrap());
        d
    };
    let mut amd = Device::new(2, Vendor::Amd, Source::Sysfs);
    amd.pci_bus_id = Some("0000:c1:00.0".parse().unwrap());
    let mut mig = nvidia(
        3,
        "GPU-0d0831da-0c98-2717-6446-8acd91d39b65",
        "0000:00:09.0",
    );
    let mut st = MigState::new(MigMode::Enabled, MigMode::Enabled);
    for (i, gi, uuid) in [
        (0, 11, "MIG-8443519f-66f7-5962-8955-60dba0866f3a"),
        (1, 13, "MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
    ] {
        let mut m = MigDevice::new(i, 3);
        m.uuid = Some(uuid.into());
        m.gpu_instance_id = Some(gi);
        m.compute_instance_id = Some(0);
        m.profile = Some("1g.10gb".into());
        st.instances.push(m);
    }
    mig.mig = Some(st);
    vec![
        nvidia(
            0,
            "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000",
            "0000:1a:00.0",
        ),
        nvidia(
            1,
            "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001",
            "0000:3a:00.0",
        ),
        amd,
        mig,
    ]
}

fn sel(s: &str) -> DeviceSelector {
    s.parse().unwrap()
}

fn resolve(s: &str) -> Result<Selected, SelectError> {
    Resolver::new(&devices()).resolve(&sel(s))
}

#[test]
fn every_spelling_parses() {
    assert_eq!(sel(" 2 "), DeviceSelector::Index(2));
    assert_eq!(sel("GPU-3a1f"), DeviceSelector::Uuid("GPU-3a1f".into()));
    assert_eq!(sel("gpu-3A1F"), DeviceSelector::Uuid("gpu-3A1F".into()));
    assert_eq!(sel("MIG-8443"), DeviceSelector::MigUuid("MIG-8443".into()));
    assert_eq!(
        sel("MIG-GPU-0d0831da/11/0"),
        DeviceSelector::MigLegacy {
            gpu_uuid: "GPU-0d0831da".into(),
            gpu_instance: 11,
            compute_instance: 0
        }
    );
    let bus = DeviceSelector::PciBusId("0000:1a:00.0".parse().unwrap());
    for s in [
        "0000:1a:00.0",
        "00000000:1A:00.0",
        "1a:00.0",
        "0000:1A:00",
        "1a:00",
    ] {
        assert_eq!(sel(s), bus, "{s}");
    }
    assert_eq!(
        sel("MIG-GPU-0d0831da/11/0").to_string(),
        "MIG-GPU-0d0831da/11/0"
    );
    assert_eq!(bus.to_string(), "0000:1a:00.0");
}

#[test]
fn malformed_selectors_are_refused_with_one_line() {
    for s in [
        "",
        " ",
        "-1",
        "first",
        "GPU-",
        "MIG-",
        "MIG-GPU-x/1",
        "MIG-GPU-x/a/0",
        "MIG-GPU-/1/0",
        "1a:00.9",
        "zz:00.0",
        "99999999999",
    ] {
        let e = s.parse::<DeviceSelector>().unwrap_err();
        assert!(matches!(e, SelectError::Malformed(_)), "{s:?}: {e:?}");
        assert!(!e.to_string().contains('\n'));
        assert!(e.to_string().starts_with("invalid device "), "{e}");
    }
}

#[test]
fn selectors_resolve_to_devices_and_mig_devices() {
    assert_eq!(resolve("1"), Ok(Selected::device(1)));
    assert_eq!(
        resolve("GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0001"),
        Ok(Selected::device(1))
    );
    assert_eq!(
        resolve("gpu-0D0831DA"),
        Ok(Selected::device(3)),
        "case-insensitive prefix"
    );
    assert_eq!(resolve("00000000:3A:00.0"), Ok(Selected::device(1)));
    assert_eq!(
        resolve("c1:00.0"),
        Ok(Selected::device(2)),
        "a DRM device by bus id"
    );
    assert_eq!(resolve("MIG-ee69"), Ok(Selected::mig(3, 1)));
    assert_eq!(
        resolve("MIG-8443519f-66f7-5962-8955-60dba0866f3a"),
        Ok(Selected::mig(3, 0))
    );
    assert_eq!(
        resolve("MIG-GPU-0d0831da-0c98-2717-6446-8acd91d39b65/13/0"),
        Ok(Selected::mig(3, 1))
    );
}

#[test]
fn unknown_and_ambiguous_selectors_say_so() {
    let e = resolve("9").unwrap_err();
    assert_eq!(e.to_string(), "no GPU 9 (have 4 devices)");
    let e = resolve("GPU-3a1f").unwrap_err();
    assert!(matches!(e, SelectError::Ambiguous { ref candidates, .. } if candidates.len() == 2));
    assert!(
        e.to_string()
            .starts_with("GPU-3a1f matches 2 devices (GPU-3a1f7c2e-"),
        "{e}"
    );
    let e = resolve("GPU-ffff").unwrap_err();
    assert!(
        e.to_string()
            .starts_with("no device matches GPU-ffff (have GPU 0 GPU-3a1f"),
        "{e}"
    );
    assert!(matches!(
        resolve("MIG-0000"),
        Err(SelectError::NoMatch { .. })
    ));
    assert!(matches!(
        resolve("MIG-GPU-0d0831da/12/0"),
        Err(SelectError::NoMatch { .. })
    ));
    assert!(matches!(
        resolve("0000:99:00.0"),
        Err(SelectError::NoMatch { .. })
    ));
    let none = Resolver::new(&[]).resolve(&sel("GPU-1")).unwrap_err();
    assert_eq!(
        none.to_string(),
        "no device matches GPU-1 (no device found)"
    );
}

#[test]
fn a_selection_matches_its_rows() {
    use crate::types::{GpuProcess, ProcessKind};
    let mut row = GpuProcess::new(1, 3, ProcessKind::Compute, Source::Nvml);
    row.mig_index = Some(1);
    assert!(
        Selected::device(3).matches(&row),
        "a whole GPU holds its MIG rows"
    );
    assert!(Selected::mig(3, 1).matches(&row));
    assert!(!Selected::mig(3, 0).matches(&row));
    assert!(!Selected::device(0).matches(&row));
    let d = devices();
    assert_eq!(
        Selected::mig(3, 1).describe(&d),
        "GPU 3 MIG 1g.10gb (MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3)"
    );
    assert_eq!(Selected::device(0).describe(&d), "GPU 0");
    let all = Resolver::new(&d).resolve_all(&[sel("0"), sel("0000:1a:00.0"), sel("MIG-ee")]);
    assert_eq!(all, Ok(vec![Selected::device(0), Selected::mig(3, 1)]));
}

fn view(visible: Option<&str>, order: Option<&str>, d: &[Device]) -> CudaView {
    cuda_view(visible, order, d)
}

/// The same model everywhere, without MIG: indices 0 (0x3a), 1 (0x1a), 2 (0x5a).
fn plain() -> Vec<Device> {
    let mut d: Vec<Device> = devices().into_iter().take(2).collect();
    d[0].pci_bus_id = Some("0000:3a:00.0".parse().unwrap());
    d[1].pci_bus_id = Some("0000:1a:00.0".parse().unwrap());
    let mut third = d[0].clone();
    third.index = 2;
    third.uuid = Some("GPU-5555".into());
    third.pci_bus_id = Some("0000:5a:00.0".parse().unwrap());
    d.push(third);
    d
}

#[test]
fn cuda_order_is_pci_order_for_one_model_and_a_guess_otherwise() {
    let d = plain();
    let v = view(None, None, &d);
    assert_eq!(v.basis, OrderBasis::SameModel);
    assert_eq!(
        v.devices,
        [
            Selected::device(1),
            Selected::device(0),
            Selected::device(2)
        ]
    );
    assert_eq!(v.ordinal(0), Ok(Selected::device(1)));
    let v = view(None, Some("PCI_BUS_ID"), &d);
    assert_eq!(v.basis, OrderBasis::PciBusId);
    let mut mixed = d.clone();
    mixed[2].name = Some("NVIDIA GeForce RTX 4090".into());
    let v = view(None, None, &mixed);
    assert_eq!(v.basis, OrderBasis::Guess);
    assert!(v.summary().contains("guess"), "{}", v.summary());
    let v = view(None, Some("fastest"), &d);
    assert_eq!(v.order, CudaDeviceOrder::FastestFirst);
    assert!(
        v.notes[0].contains("FASTEST_FIRST assumed"),
        "{:?}",
        v.notes
    );
}

#[test]
fn cuda_visible_devices_selects_reorders_and_truncates() {
    let d = plain();
    let pick = |v: &str| view(Some(v), Some("PCI_BUS_ID"), &d).devices;
    // PCI order: ordinal 0 = index 1 (0x1a), 1 = index 0 (0x3a), 2 = index 2 (0x5a).
    assert_eq!(pick("2,0"), [Selected::device(2), Selected::device(1)]);
    assert_eq!(
        pick("0,2,-1,1"),
        [Selected::device(1), Selected::device(2)],
        "the guide's example"
    );
    assert_eq!(pick("1abc"), [Selected::device(0)], "a leading digit run");
    assert_eq!(
        pick("0,7,1"),
        [Selected::device(1)],
        "out of range ends the list"
    );
    assert_eq!(
        pick("GPU-5555, GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000"),
        [Selected::device(2), Selected::device(0)]
    );
    assert_eq!(
        pick("GPU-5555,1"),
        [Selected::device(2)],
        "the kind is fixed by the first"
    );
    assert_eq!(
        pick("GPU-3a1f,1"),
        [],
        "an ambiguous prefix names no device"
    );
    assert!(
        pick("0,1,0").is_empty(),
        "a repeated entry hides everything"
    );
    assert!(pick("").is_empty());
    let v = view(Some("0,9"), None, &d);
    assert!(v.notes[0].contains("\"9\""), "{:?}", v.notes);
    let e = v.ordinal(1).unwrap_err();
    assert!(
        e.to_string()
            .starts_with("no CUDA device 1: 1 visible (CUDA_VISIBLE_DEVICES=\"0,9\""),
        "{e}"
    );
}

#[test]
fn only_one_mig_device_is_visible() {
    let d = devices();
    let pick = |v: Option<&str>| view(v, Some("PCI_BUS_ID"), &d);
    // Unset: the MIG GPU (first in PCI order, bus 0x09) stands for its first MIG device.
    let v = pick(None);
    assert_eq!(v.devices, [Selected::mig(3, 0)]);
    assert!(v.notes.iter().any(|n| n.contains("at most one MIG device")));
    let v = pick(Some("MIG-ee6996fb,MIG-8443519f"));
    assert_eq!(v.devices, [Selected::mig(3, 1)]);
    assert_eq!(
        pick(Some("MIG-GPU-0d0831da/11/0")).devices,
        [Selected::mig(3, 0)]
    );
    let v = pick(Some("MIG-ee6996fb"));
    assert_eq!(v.devices, [Selected::mig(3, 1)]);
    assert!(v.notes.is_empty(), "nothing dropped: {:?}", v.notes);
    // Without MIG in the list, GPUs stay.
    assert_eq!(
        pick(Some("1,2")).devices,
        [Selected::device(0), Selected::device(1)]
    );
    // Integers become CUDA ordinals through the resolver.
    let v = pick(Some("2,1"));
    let r = Resolver::new(&d).with_cuda(Some(&v));
    assert_eq!(r.resolve(&sel("0")), Ok(Selected::device(1)));
    assert_eq!(
        r.resolve(&sel("MIG-ee")),
        Ok(Selected::mig(3, 1)),
        "UUIDs are not ordinals"
    );
}
