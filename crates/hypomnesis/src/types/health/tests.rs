use super::*;

#[test]
fn a_clean_device_has_no_findings_and_zeros_are_zeros() {
    let h = MemoryHealth {
        ecc: Some(EccMode::new(true, true)),
        ecc_errors: EccErrors {
            corrected_volatile: Some(0),
            uncorrected_volatile: Some(0),
            corrected_aggregate: Some(12),
            uncorrected_aggregate: Some(0),
        },
        remapped_rows: Some(RemappedRows::new(0, 0, false, false)),
        ..MemoryHealth::default()
    };
    assert!(h.is_clean() && h.any_reading() && h.counters_meaningful());
    assert!(
        !MemoryHealth::default().any_reading(),
        "nothing read is not clean-by-zero"
    );
}

#[test]
fn findings_rank_failures_first_with_their_remedies() {
    let mut h = MemoryHealth {
        remapped_rows: Some(RemappedRows::new(3, 1, true, false)),
        ..MemoryHealth::default()
    };
    let f = h.findings();
    assert_eq!(f.len(), 2, "{f:?}");
    assert_eq!(f[0].severity, Severity::Warn);
    assert_eq!(f[0].remedy, REMEDY_RESET);
    assert_eq!(f[1].what, "1 row remapped after uncorrectable errors");
    h.ecc_errors.uncorrected_volatile = Some(2);
    h.remapped_rows = Some(RemappedRows::new(0, 0, false, true));
    let f = h.findings();
    assert!(f.iter().all(|x| x.severity == Severity::Fail), "{f:?}");
    assert_eq!(
        f[0].what,
        "2 uncorrectable ECC errors since the driver loaded"
    );
    // Only lifetime errors: a warning, not a failure.
    h = MemoryHealth::default();
    h.ecc_errors.uncorrected_aggregate = Some(1);
    assert_eq!(h.findings()[0].severity, Severity::Warn);
    // Retired pages pending: reboot.
    h = MemoryHealth {
        retired_pages: Some(RetiredPages {
            single_bit: Some(0),
            double_bit: Some(0),
            pending: Some(true),
        }),
        ..MemoryHealth::default()
    };
    assert_eq!(h.findings()[0].remedy, REMEDY_RESET);
}

#[test]
fn amd_ras_and_bad_pages() {
    let mut h = MemoryHealth {
        ras: vec![RasCount::new("umc", 0, 3), RasCount::new("gfx", 0, 0)],
        bad_pages: Some(BadPages {
            reserved: 1,
            pending: 1,
            failed: 0,
        }),
        ..MemoryHealth::default()
    };
    let f = h.findings();
    assert_eq!(f.len(), 1);
    assert_eq!(f[0].remedy, REMEDY_REBOOT_AMD);
    h.ras[0].uncorrectable = 1;
    assert_eq!(h.findings()[0].severity, Severity::Fail);
    assert!(h.counters_meaningful());
}

#[test]
fn xid_tallies_count_per_device_and_class() {
    let mut t = XidTally::new(5);
    t.add(XidEvent::new(0, 79, 10));
    t.add(XidEvent::new(0, 48, 11));
    t.add(XidEvent::new(0, 48, 12));
    assert_eq!(t.total_on(0), Some(3));
    assert_eq!(t.total_on(1), Some(0));
    assert_eq!(t.memory_events_on(0), 2);
    assert_eq!(t.last[&0].unix_ms, 12);
    t.unknown.insert(1, XidUncounted::NoXidEvents);
    assert_eq!(t.total_on(1), None, "unknown is not 0");
    assert_eq!(t.count_on(1), Err(&XidUncounted::NoXidEvents));
    assert_eq!(t.count_on(0), Ok(3));
    t.unavailable = Some(XidUncounted::NotLinux);
    assert_eq!(
        t.count_on(0),
        Err(&XidUncounted::NotLinux),
        "the whole tally's reason first"
    );
    assert_eq!(xid_meaning(79).1, XidClass::DeviceLost);
    assert_eq!(xid_meaning(12345).1, XidClass::Other);
}

#[cfg(feature = "serde")]
#[test]
fn xid_reasons_are_values_shown_and_serialized_as_their_text() {
    let refused = XidUncounted::Refused {
        call: "nvmlDeviceRegisterEvents",
        error: crate::types::QueryError::NoPermission,
    };
    assert_eq!(
        refused.to_string(),
        "nvmlDeviceRegisterEvents: no permission"
    );
    let mut t = XidTally::new(5);
    t.unknown.insert(1, refused);
    t.unavailable = Some(XidUncounted::Starting);
    let v = serde_json::to_value(&t).unwrap();
    assert_eq!(v["unknown"]["1"], "nvmlDeviceRegisterEvents: no permission");
    assert_eq!(v["unavailable"], "the XID counter is starting");
}
