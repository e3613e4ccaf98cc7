//! `hmn serve`'s series rules: which figures get a series of their own and what the rest sums
//! to, per device — every such rule of the exporter, in one place (ARCHITECTURE.md's rule
//! table names it). `metrics.rs` only registers and encodes what these return.
//!
//! | Rule | Function |
//! |---|---|
//! | per-process series: device's processes with a known figure (its share of the device's pool: on an AMD APU its VRAM + GTT), largest first (ties by pid), the first N each a series | [`processes`] |
//! | `pid="other"`: the sum of the rest, an MPS server counted once (absent when nothing of the rest counts) | [`processes`] |
//! | per-workload sums: each workload's processes on the device, an MPS server counted once; the [`MAX_CGROUP_SERIES`] largest (ties by workload) each a series, the rest one `other` | [`workloads`] |
//!
//! Why here and not in the library: the cuts are the exporter's series budget (what a
//! Prometheus server can hold per target), and the workload key is serve's own coarse one. The
//! memory rule inside them — which rows a sum counts, unknown kept apart from zero — is the
//! library's ([`VramSum`], `GpuProcess::counts_in_sums`), as for `hmn ps`'s totals.

use std::collections::BTreeMap;

use hypomnesis::{GpuProcess, PoolKind, ProcessList, VramSum};

/// Series cap per device for the per-workload family (the rest goes to an `other` series).
pub const MAX_CGROUP_SERIES: usize = 100;

/// The figures with a series of their own, largest first, and the sum of the rest (`None`
/// when nothing of the rest counts: no `other` series).
#[derive(Debug, PartialEq, Eq)]
pub struct Cut<T> {
    pub top: Vec<T>,
    pub other: Option<u64>,
}

/// Device `index`'s processes whose figure is known — each its share of the device's pool,
/// the pool being of `kind` ([`GpuProcess::pool_bytes`]) — largest first (ties by pid): the
/// first `n` each a series, with its figure; the rest summed ([`VramSum`]: an MPS server that
/// may hold its clients' memory is not added again). A process with an unknown figure has no
/// series and is in no sum.
pub fn processes(
    list: &ProcessList,
    index: u32,
    kind: Option<PoolKind>,
    n: usize,
) -> Cut<(&GpuProcess, u64)> {
    let mut rows: Vec<(&GpuProcess, u64)> = list
        .processes
        .iter()
        .filter(|p| p.device_index == index)
        .filter_map(|p| p.pool_bytes(kind).map(|b| (p, b)))
        .collect();
    rows.sort_by_key(|(p, b)| (std::cmp::Reverse(*b), p.pid));
    let rest = rows.split_off(n.min(rows.len()));
    let other = VramSum::of_pools(rest.into_iter().map(|(p, _)| p), |_| kind);
    Cut {
        top: rows,
        other: (other.counted_rows > 0).then_some(other.known_bytes),
    }
}

/// The VRAM of `rows` (on a device whose pool is of `kind`: each row's share of it) summed per
/// workload (`workload_of` a row; `None`: in no workload), each
/// sum a [`VramSum`] (an MPS server counted once, unknown figures left out); a workload with
/// nothing counted has no sum. Largest first (ties by workload): the first `cap` each a series,
/// the rest summed into one.
pub fn workloads<'a, K: Ord + Clone>(
    rows: impl IntoIterator<Item = &'a GpuProcess>,
    kind: Option<PoolKind>,
    workload_of: impl Fn(&GpuProcess) -> Option<K>,
    cap: usize,
) -> Cut<(K, u64)> {
    let mut sums: BTreeMap<K, VramSum> = BTreeMap::new();
    for p in rows {
        if let Some(w) = workload_of(p) {
            sums.entry(w).or_default().add_in_pool(p, kind);
        }
    }
    let mut sorted: Vec<(K, u64)> = sums
        .into_iter()
        .filter(|(_, s)| s.counted_rows > 0)
        .map(|(w, s)| (w, s.known_bytes))
        .collect();
    sorted.sort_by_key(|(w, u)| (std::cmp::Reverse(*u), w.clone()));
    let rest = sorted.split_off(cap.min(sorted.len()));
    Cut {
        top: sorted,
        other: (!rest.is_empty()).then(|| rest.iter().map(|(_, u)| u).sum()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::test_helpers::GpuProcessBuilder;

    fn list(rows: Vec<GpuProcess>) -> ProcessList {
        let mut l = ProcessList::default();
        l.processes = rows;
        l
    }

    fn row(pid: u32, device: u32, used: Option<u64>) -> GpuProcess {
        GpuProcessBuilder::new(pid, device).used_bytes(used).build()
    }

    #[test]
    fn the_top_n_of_a_device_and_the_rest_in_other() {
        let mut server = row(7, 0, Some(5));
        server.may_include_clients = true;
        let l = list(vec![
            row(1, 0, Some(10)),
            row(2, 0, Some(30)),
            row(3, 0, Some(30)),
            row(4, 0, None),
            row(5, 1, Some(99)),
            server,
        ]);
        let cut = processes(&l, 0, None, 2);
        let pids: Vec<u32> = cut.top.iter().map(|(p, _)| p.pid).collect();
        assert_eq!(
            pids,
            [2, 3],
            "largest first, ties by pid; device 1 not here"
        );
        assert_eq!(cut.other, Some(10), "the MPS server is not added again");
        let all = processes(&l, 0, None, 10);
        assert_eq!(all.top.len(), 4, "the unknown row has no series");
        assert_eq!(all.other, None, "nothing left: no other series");
        // Only the MPS server beyond the cut: nothing of the rest counts.
        assert_eq!(processes(&l, 0, None, 3).other, None);
    }

    #[test]
    fn on_an_apu_a_process_is_its_vram_and_gtt() {
        use hypomnesis::types::{ProcessRegions, RegionUsage};
        let mut hip = row(1, 0, Some(5 << 20));
        let resident = |b: u64| {
            let mut r = RegionUsage::default();
            r.resident_bytes = Some(b);
            r
        };
        let mut regions = ProcessRegions::default();
        regions.vram = Some(resident(5 << 20));
        regions.gtt = Some(resident(24 << 30));
        hip.regions = Some(regions);
        let l = list(vec![hip, row(2, 0, Some(1 << 30))]);
        let apu = Some(PoolKind::CarveOutPlusGtt);
        let cut = processes(&l, 0, apu, 1);
        assert_eq!(
            cut.top[0].1,
            (24 << 30) + (5 << 20),
            "its GTT is its memory"
        );
        assert_eq!(cut.other, Some(1 << 30));
        let by = workloads(&l.processes, apu, |p: &GpuProcess| Some(p.pid), 10);
        assert_eq!(by.top[0], (1, (24 << 30) + (5 << 20)));
        // A discrete card: the VRAM figure alone.
        assert_eq!(processes(&l, 0, None, 1).top[0].1, 1 << 30);
    }

    #[test]
    fn workload_sums_count_an_mps_server_once_and_cap_the_series() {
        let mut server = row(9, 0, Some(1000));
        server.may_include_clients = true;
        let rows = [
            row(1, 0, Some(10)),
            row(2, 0, Some(20)),
            row(3, 0, Some(5)),
            row(4, 0, None),
            server,
        ];
        let of = |p: &GpuProcess| match p.pid {
            1 | 2 => Some("a"),
            3 => Some("b"),
            4 | 9 => Some("c"),
            _ => None,
        };
        let cut = workloads(&rows, None, of, 10);
        assert_eq!(
            cut.top,
            [("a", 30), ("b", 5)],
            "c counts nothing: no series"
        );
        assert_eq!(cut.other, None);
        let cut = workloads(&rows, None, of, 1);
        assert_eq!((cut.top, cut.other), (vec![("a", 30)], Some(5)));
        let tie = [row(1, 0, Some(5)), row(3, 0, Some(5))];
        assert_eq!(
            workloads(&tie, None, of, 1).top,
            [("a", 5)],
            "ties by workload"
        );
    }
}
