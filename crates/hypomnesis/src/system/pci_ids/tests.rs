//! Lookups in excerpts of the real databases (`tests/fixtures/ids`, provenance in the README).

use super::*;

const PCI_IDS: &str = include_str!("../../../tests/fixtures/ids/pci.ids");
const AMDGPU_IDS: &str = include_str!("../../../tests/fixtures/ids/amdgpu.ids");

fn pci(vendor: u16, device: u16, subsystem: Option<(u16, u16)>) -> PciNames {
    lookup_pci_ids(PCI_IDS, &PciIdentity::new(vendor, device, subsystem, None))
}

#[test]
fn pci_ids_device_and_subsystem_lines() {
    let n = pci(0x1002, 0x73bf, Some((0x1002, 0x0e3a)));
    assert_eq!(
        n.vendor.as_deref(),
        Some("Advanced Micro Devices, Inc. [AMD/ATI]")
    );
    assert_eq!(
        n.device.as_deref(),
        Some("Navi 21 [Radeon RX 6800/6800 XT / 6900 XT]")
    );
    assert_eq!(n.subsystem.as_deref(), Some("Radeon RX 6900 XT"));
    assert_eq!(
        marketing_name(None, &n).as_deref(),
        Some("Radeon RX 6900 XT")
    );
    // Another board: the device line's bracketed part.
    let n = pci(0x1002, 0x73bf, Some((0x1da2, 0xe445)));
    assert_eq!(n.subsystem, None);
    assert_eq!(
        marketing_name(None, &n).as_deref(),
        Some("Radeon RX 6800/6800 XT / 6900 XT")
    );
    // The real quirk without a space, a device after a comment line, a line with no brackets.
    assert_eq!(
        marketing_name(None, &pci(0x10de, 0x2330, None)).as_deref(),
        Some("H100 SXM5 80GB")
    );
    assert_eq!(
        marketing_name(None, &pci(0x10de, 0x2204, Some((0x147d, 0x10de)))).as_deref(),
        Some("NVIDIA Geforce RTX 3090 Founders Edition")
    );
    assert_eq!(
        marketing_name(None, &pci(0x8086, 0xa780, None)).as_deref(),
        Some("UHD Graphics 770")
    );
    assert_eq!(bracketed("PCI to EISA Bridge"), "PCI to EISA Bridge");
    assert_eq!(bracketed("A [B [C]]"), "B [C]");
}

#[test]
fn pci_ids_misses() {
    // An unknown device of a known vendor, an unknown vendor, and the class section (`C 03`
    // with `\t02  3D controller`) never read as vendor `C` or device 0x0002.
    assert_eq!(pci(0x10de, 0xffff, None).device, None);
    assert_eq!(
        pci(0x10de, 0xffff, None).vendor.as_deref(),
        Some("NVIDIA Corporation")
    );
    assert_eq!(pci(0x1234, 0x0001, None), PciNames::default());
    assert_eq!(pci(0x0003, 0x0002, None), PciNames::default());
    assert_eq!(marketing_name(None, &PciNames::default()), None);
    assert_eq!(
        lookup_pci_ids("", &PciIdentity::new(1, 2, None, None)),
        PciNames::default()
    );
    // Malformed lines are skipped.
    let odd = "10de\n\tzz  x\n\t2330\n\t2330  Good\n";
    assert_eq!(
        lookup_pci_ids(odd, &PciIdentity::new(0x10de, 0x2330, None, None)).device,
        None,
        "a vendor line without a name is not the vendor"
    );
}

#[test]
fn amdgpu_ids_need_the_revision() {
    assert_eq!(
        lookup_amdgpu_ids(AMDGPU_IDS, 0x73bf, 0xc0).as_deref(),
        Some("AMD Radeon RX 6900 XT")
    );
    assert_eq!(
        lookup_amdgpu_ids(AMDGPU_IDS, 0x73bf, 0xc1).as_deref(),
        Some("AMD Radeon RX 6800 XT")
    );
    assert_eq!(
        lookup_amdgpu_ids(AMDGPU_IDS, 0x73bf, 0xc3).as_deref(),
        Some("AMD Radeon RX 6800")
    );
    assert_eq!(lookup_amdgpu_ids(AMDGPU_IDS, 0x73bf, 0xc2), None);
    // Listed twice: the first, as libdrm takes it.
    assert_eq!(
        lookup_amdgpu_ids(AMDGPU_IDS, 0x15d8, 0x91).as_deref(),
        Some("AMD Radeon Vega 3 Graphics")
    );
    // The version line and comments are not entries.
    assert_eq!(
        lookup_amdgpu_ids("1.0.0\n# 73BF,\tC0,\tx\n", 0x73bf, 0xc0),
        None
    );
    assert_eq!(
        marketing_name(
            Some("AMD Instinct MI210".into()),
            &pci(0x1002, 0x740f, None)
        )
        .as_deref(),
        Some("AMD Instinct MI210"),
        "amdgpu.ids wins"
    );
}

#[test]
fn names_from_a_share_root() {
    let dir = tempfile::tempdir().unwrap();
    let roots = Roots::system().with_share(dir.path());
    let rx = PciIdentity::new(0x1002, 0x73bf, Some((0x1da2, 0xe445)), Some(0xc1));
    assert_eq!(name_of(&roots, &rx), None, "no databases");
    std::fs::create_dir_all(dir.path().join("misc")).unwrap();
    std::fs::write(dir.path().join("misc/pci.ids"), PCI_IDS).unwrap();
    assert_eq!(
        name_of(&roots, &rx).as_deref(),
        Some("Radeon RX 6800/6800 XT / 6900 XT")
    );
    std::fs::create_dir_all(dir.path().join("libdrm")).unwrap();
    std::fs::write(dir.path().join("libdrm/amdgpu.ids"), AMDGPU_IDS).unwrap();
    assert_eq!(
        name_of(&roots, &rx).as_deref(),
        Some("AMD Radeon RX 6800 XT")
    );
    // hwdata's path first, and non-UTF-8 bytes read lossily.
    std::fs::create_dir_all(dir.path().join("hwdata")).unwrap();
    let mut bytes = b"10de  NVIDIA \xff\n\t2331  GH100 [H100 PCIe \xb2]\n".to_vec();
    bytes.extend_from_slice(b"\n");
    std::fs::write(dir.path().join("hwdata/pci.ids"), bytes).unwrap();
    let h100 = PciIdentity::new(0x10de, 0x2331, None, None);
    assert_eq!(
        name_of(&roots, &h100).as_deref(),
        Some("H100 PCIe \u{fffd}")
    );
    let (pci, amd) = database_paths(&roots);
    assert_eq!(pci.unwrap(), dir.path().join("hwdata/pci.ids"));
    assert_eq!(amd.unwrap(), dir.path().join("libdrm/amdgpu.ids"));
}
