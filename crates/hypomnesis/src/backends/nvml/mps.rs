//! MPS (the CUDA Multi-Process Service): which rows are the MPS server, and the rule that keeps
//! a device's process rows from counting the same memory twice.
//!
//! On Volta and later an MPS client is listed by `nvmlDeviceGetMPSComputeRunningProcesses`
//! (and usually in the compute list too: `M+C` in `nvidia-smi pmon`); merging by pid
//! ([`super::convert::merge_rows`], the larger figure) makes it one row of kind `mps`. The
//! server (`nvidia-cuda-mps-server`, `comm` `nvidia-cuda-mps`) is in the compute list only; it
//! is named by its process name. Its own figure is normally small (its context); when it is at
//! least the sum of its clients' it may include their memory, so it is marked
//! `may_include_clients` and left out of sums. Before Volta no client is listed and the server
//! holds everything: its row is then the only record of that memory and stays counted.

use std::collections::BTreeMap;

use crate::types::{GpuProcess, ProcessKind, Source};

/// The MPS server's executable name.
pub(crate) const SERVER_EXE: &str = "nvidia-cuda-mps-server";
/// Its `comm` (the kernel keeps 15 bytes).
pub(crate) const SERVER_COMM: &str = "nvidia-cuda-mps";

/// Whether a process name is the MPS server's (its `comm` or its executable's name).
pub(crate) fn is_server_name(name: &[u8]) -> bool {
    name == SERVER_EXE.as_bytes() || name == SERVER_COMM.as_bytes()
}

/// Whether any NVML row is an MPS client (then the server is worth looking for).
pub(crate) fn has_clients(rows: &[GpuProcess]) -> bool {
    rows.iter().any(|r| r.kind == ProcessKind::Mps)
}

/// Marks the NVML compute rows `is_server` names as the MPS server, then applies the
/// double-count rule per device and MIG instance: a server whose known figure is at least its
/// clients' known sum (with at least one client listed) may include their memory.
pub(crate) fn classify(rows: &mut [GpuProcess], is_server: impl Fn(&GpuProcess) -> bool) {
    for r in rows.iter_mut() {
        let compute = matches!(r.kind, ProcessKind::Compute | ProcessKind::ComputeGraphics);
        if r.source == Source::Nvml && compute && is_server(r) {
            r.kind = ProcessKind::MpsServer;
        }
    }
    let mut clients: BTreeMap<(u32, Option<u32>), u64> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.kind == ProcessKind::Mps) {
        *clients.entry((r.device_index, r.mig_index)).or_default() += r.used_bytes.unwrap_or(0);
    }
    for r in rows.iter_mut().filter(|r| r.kind == ProcessKind::MpsServer) {
        let sum = clients
            .get(&(r.device_index, r.mig_index))
            .copied()
            .unwrap_or(0);
        r.may_include_clients = sum > 0 && r.used_bytes.is_some_and(|u| u >= sum);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(pid: u32, kind: ProcessKind, used: Option<u64>) -> GpuProcess {
        let mut r = GpuProcess::new(pid, 0, kind, Source::Nvml);
        r.used_bytes = used;
        r
    }

    #[test]
    fn the_server_is_named_and_counted_unless_it_covers_its_clients() {
        let mut rows = vec![
            row(10, ProcessKind::Compute, Some(30 << 20)),
            row(11, ProcessKind::Mps, Some(6 << 30)),
            row(12, ProcessKind::Mps, Some(2 << 30)),
        ];
        classify(&mut rows, |r| r.pid == 10);
        assert_eq!(rows[0].kind, ProcessKind::MpsServer);
        assert!(
            !rows[0].may_include_clients,
            "a small server is its own context"
        );
        rows[0].used_bytes = Some(8 << 30);
        classify(&mut rows, |r| r.pid == 10);
        assert!(rows[0].may_include_clients, "≥ the clients' sum");
    }

    #[test]
    fn without_listed_clients_the_server_holds_the_only_figure() {
        let mut rows = vec![row(10, ProcessKind::Compute, Some(8 << 30))];
        classify(&mut rows, |r| r.pid == 10);
        assert_eq!(rows[0].kind, ProcessKind::MpsServer);
        assert!(!rows[0].may_include_clients);
    }

    #[test]
    fn instances_are_judged_apart() {
        let mut a = row(10, ProcessKind::Compute, Some(5));
        a.mig_index = Some(0);
        let mut b = row(11, ProcessKind::Mps, Some(4));
        b.mig_index = Some(0);
        let mut c = row(12, ProcessKind::Mps, Some(100));
        c.mig_index = Some(1);
        let mut rows = vec![a, b, c];
        classify(&mut rows, |r| r.pid == 10);
        assert!(rows[0].may_include_clients, "5 ≥ 4 in instance 0");
        assert!(is_server_name(b"nvidia-cuda-mps"));
        assert!(is_server_name(b"nvidia-cuda-mps-server"));
        assert!(!is_server_name(b"python3"));
        assert!(has_clients(&rows));
    }

    #[test]
    fn drm_and_graphics_rows_are_never_servers() {
        let mut g = row(10, ProcessKind::Graphics, Some(5));
        let mut d = row(11, ProcessKind::Compute, Some(5));
        d.source = Source::Fdinfo;
        g.name = Some(SERVER_COMM.into());
        let mut rows = vec![g, d];
        classify(&mut rows, |_| true);
        assert_eq!(rows[0].kind, ProcessKind::Graphics);
        assert_eq!(rows[1].kind, ProcessKind::Compute);
    }
}
