//! Every contract value has one spelling: `Display`, `as_str`, serde's string and `FromStr`
//! agree for every variant of every enum (`types::spelling::spelled!` defines them from one
//! list), and an unknown spelling is refused naming the type.

use std::fmt::{Debug, Display};
use std::str::FromStr;

use serde::Serialize;
use serde::de::DeserializeOwned;

/// For each value: `Display` is `text(v)`, JSON is that string, and both read back to `v`.
fn one_spelling<T>(values: &[T], text: impl Fn(&T) -> &str)
where
    T: Display + FromStr + Serialize + DeserializeOwned + PartialEq + Debug,
    T::Err: Debug,
{
    assert!(!values.is_empty());
    let mut seen = std::collections::HashSet::new();
    for v in values {
        let s = text(v);
        assert!(seen.insert(s.to_string()), "{s:?} spells two variants");
        assert_eq!(v.to_string(), s, "Display of {v:?}");
        let json = serde_json::to_string(v).unwrap();
        assert_eq!(json, serde_json::to_string(s).unwrap(), "JSON of {v:?}");
        assert_eq!(&s.parse::<T>().unwrap(), v, "FromStr of {s:?}");
        assert_eq!(&serde_json::from_str::<T>(&json).unwrap(), v, "JSON {json}");
    }
}

macro_rules! closed {
    ($($t:ty),+ $(,)?) => {$(
        one_spelling(<$t>::ALL, |v| v.as_str());
        let e = "no such spelling".parse::<$t>().unwrap_err().to_string();
        assert!(e.contains(stringify!($t)) && e.contains("no such spelling"), "{e}");
        assert!(serde_json::from_str::<$t>("\"no such spelling\"").is_err());
    )+};
}

#[test]
fn every_contract_enum_has_one_spelling() {
    use hypomnesis::doctor::Status;
    use hypomnesis::estimate::llama_graph::Phase;
    use hypomnesis::estimate::{
        BudgetSource, Fit, FlashAttn, KvDtype, KvHeadsFrom, LlamaApi, Memory, Placement, Runtime,
        TargetKind,
    };
    use hypomnesis::growth::Rejection;
    use hypomnesis::peaks::{AccountingState, PeakMethod, PeakRamSource};
    use hypomnesis::pidns::ProcRootNamespace;
    use hypomnesis::select::{CudaDeviceOrder, OrderBasis};
    use hypomnesis::types::{Bound, Severity, XidClass};
    use hypomnesis::workload::{ContainerRuntime, NameSource, WorkloadKind};
    use hypomnesis::{
        Backend, BackendCause, ComputeMode, EngineClass, Field, MigMode, PoolKind, PoolSource,
        Source, UnknownReason,
    };
    closed!(
        Source,
        ComputeMode,
        Field,
        Backend,
        BackendCause,
        UnknownReason,
        MigMode,
        EngineClass,
        ContainerRuntime,
        WorkloadKind,
        ProcRootNamespace,
        CudaDeviceOrder,
        OrderBasis,
        PeakMethod,
        PeakRamSource,
        AccountingState,
        Status,
        BudgetSource,
        Fit,
        Memory,
        KvDtype,
        Runtime,
        FlashAttn,
        LlamaApi,
        Phase,
        KvHeadsFrom,
        Placement,
        TargetKind,
        Severity,
        XidClass,
        Bound,
        NameSource,
        Rejection,
        PoolKind,
        PoolSource,
    );
}

/// The spellings of a memory pool's kind and sources, and of the budget sources a pool adds,
/// are the JSON contract (docs/json.md, "Memory pools").
#[test]
fn pool_spellings_are_the_json_contract() {
    use hypomnesis::estimate::BudgetSource;
    use hypomnesis::{Field, PoolKind, PoolSource};
    assert_eq!(
        PoolKind::ALL.iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        ["dedicated", "carve_out_plus_gtt", "unified_host"]
    );
    assert_eq!(
        PoolSource::ALL
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>(),
        [
            "device",
            "vram_plus_gtt",
            "vram_plus_gtt_host_bound",
            "host_total",
            "host_available",
            "process_sum",
            "client_sum",
            "vram_size_file",
            "total_minus_used",
            "metal_working_set",
            "iokit_alloc",
            "working_set_minus_alloc_host_bound",
        ]
    );
    assert_eq!(BudgetSource::GttPool.as_str(), "gtt_pool");
    assert_eq!(BudgetSource::MetalWorkingSet.as_str(), "metal_working_set");
    for (f, s) in [
        (Field::Integrated, "integrated"),
        (Field::PoolTotalBytes, "pool.total_bytes"),
        (Field::PoolUsedBytes, "pool.used_bytes"),
        (Field::PoolFreeBytes, "pool.free_bytes"),
    ] {
        assert_eq!(f.as_str(), s);
    }
}

#[test]
fn open_sets_keep_any_other_text() {
    use hypomnesis::{RuntimeStatus, Vendor};
    one_spelling(Vendor::ALL, Vendor::as_str);
    one_spelling(RuntimeStatus::ALL, RuntimeStatus::as_str);
    let other = [
        Vendor::Other("panfrost".into()),
        Vendor::Other(String::new()),
    ];
    one_spelling(&other, Vendor::as_str);
    one_spelling(
        &[RuntimeStatus::Other("frozen".into())],
        RuntimeStatus::as_str,
    );
}

#[test]
fn every_process_kind_has_one_spelling() {
    use hypomnesis::{EngineClasses, ProcessKind};
    let mut kinds: Vec<ProcessKind> = (0u8..32)
        .map(|b| ProcessKind::from_engines(EngineClasses::from_bits(b)))
        .collect();
    kinds.extend([
        ProcessKind::Unreported,
        ProcessKind::Mps,
        ProcessKind::MpsServer,
    ]);
    one_spelling(&kinds, |k| k.as_str());
    assert_eq!(
        "compute".parse::<ProcessKind>().unwrap(),
        ProcessKind::Compute
    );
    for bad in ["", "idle+compute", "graphics+compute", "gfx", "mps+compute"] {
        assert!(bad.parse::<ProcessKind>().is_err(), "{bad:?}");
    }
    for bits in 0u8..32 {
        let set = EngineClasses::from_bits(bits);
        assert_eq!(set.as_str().parse::<EngineClasses>().unwrap(), set);
    }
}
