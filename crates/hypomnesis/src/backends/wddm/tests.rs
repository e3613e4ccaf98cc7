//! The WDDM logic against fakes of the two sources (run on every platform).

use super::*;
use crate::backends::spill::Reading;

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;

fn adapter(high: i32, low: u32, vendor: u32, dedicated: u64) -> Adapter {
    Adapter {
        luid: Luid { high, low },
        vendor_id: vendor,
        description: Some(format!("GPU {low:x}")),
        dedicated_bytes: dedicated,
        shared_bytes: 32 * GIB,
        software: false,
    }
}

pub(crate) fn sample(instance: &str, dedicated: Option<u64>, shared: Option<u64>) -> CounterSample {
    CounterSample {
        instance: instance.to_string(),
        dedicated_bytes: dedicated,
        shared_bytes: shared,
    }
}

/// A PDH that answers a script of adapter samples, one per call, then fails.
pub(crate) struct FakePdh {
    pub process: Vec<CounterSample>,
    pub adapter: Vec<Result<Vec<CounterSample>, String>>,
}

impl CounterSource for FakePdh {
    fn process_memory(&mut self) -> Result<Vec<CounterSample>, String> {
        Ok(self.process.clone())
    }
    fn adapter_memory(&mut self) -> Result<Vec<CounterSample>, String> {
        if self.adapter.is_empty() {
            return Err("PdhCollectQueryData failed (PDH_STATUS = 0xC0000BC6)".to_string());
        }
        self.adapter.remove(0)
    }
}

#[test]
fn software_and_basic_render_adapters_are_not_gpus() {
    assert!(adapter(0, 1, 0x10DE, 16 * GIB).is_gpu());
    assert!(!adapter(0, 2, VENDOR_MICROSOFT, 0).is_gpu());
    let mut sw = adapter(0, 3, 0x8086, 0);
    assert!(sw.is_gpu(), "an iGPU with shared memory only");
    sw.software = true;
    assert!(!sw.is_gpu());
}

#[test]
fn processes_are_summed_over_segments_and_joined_by_luid_not_order() {
    // Listed in the opposite order of the LUIDs in the counters.
    let adapters = [
        adapter(0, 0xB, 0x1002, 8 * GIB),
        adapter(0, 0xA, 0x10DE, 16 * GIB),
    ];
    let pdh = FakePdh {
        process: vec![
            sample(
                "pid_10_luid_0x00000000_0x0000000A_phys_0",
                Some(GIB),
                Some(MIB),
            ),
            sample(
                "pid_10_luid_0x00000000_0x0000000A_phys_1",
                Some(GIB),
                Some(MIB),
            ),
            sample(
                "pid_10_luid_0x00000000_0x0000000B_phys_0",
                Some(5 * MIB),
                Some(0),
            ),
            sample("pid_11_luid_0x00000000_0x0000000A_phys_0", Some(MIB), None),
            sample("pid_12_luid_0x00000000_0x0000000A_phys_0", None, Some(MIB)),
            sample(
                "pid_13_luid_0x00000000_0x000000FF_phys_0",
                Some(MIB),
                Some(0),
            ),
            sample("_Total", Some(99 * GIB), Some(0)),
        ],
        adapter: Vec::new(),
    };
    let mut pdh = pdh;
    let rows = process_rows(&pdh.process_memory().unwrap(), &adapters);
    assert_eq!(
        rows,
        vec![
            ProcessRow {
                pid: 10,
                adapter: 0,
                dedicated_bytes: 5 * MIB,
                shared_bytes: Some(0)
            },
            ProcessRow {
                pid: 10,
                adapter: 1,
                dedicated_bytes: 2 * GIB,
                shared_bytes: Some(2 * MIB)
            },
            ProcessRow {
                pid: 11,
                adapter: 1,
                dedicated_bytes: MIB,
                shared_bytes: None
            },
        ],
        "pid 12 (dedicated unreadable), pid 13 (unknown LUID) and _Total give no row"
    );
}

#[test]
fn an_adapter_reading_is_all_or_nothing() {
    let luid = Luid { high: 0, low: 0xA };
    let ok = [
        sample(
            "luid_0x00000000_0x0000000A_phys_0",
            Some(10 * GIB),
            Some(100 * MIB),
        ),
        sample("luid_0x00000000_0x0000000A_phys_1", Some(GIB), Some(MIB)),
        sample("luid_0x00000000_0x0000000B_phys_0", Some(GIB), Some(GIB)),
    ];
    assert_eq!(
        adapter_reading(&ok, luid, 16 * GIB),
        Some(Reading {
            dedicated_bytes: 11 * GIB,
            shared_bytes: 101 * MIB,
            limit_bytes: 16 * GIB
        })
    );
    let mut one_bad = ok.to_vec();
    one_bad[1].shared_bytes = None;
    assert_eq!(
        adapter_reading(&one_bad, luid, 16 * GIB),
        None,
        "never zeroed"
    );
    assert_eq!(
        adapter_reading(&ok, Luid { high: 1, low: 0xA }, 16 * GIB),
        None
    );
}
