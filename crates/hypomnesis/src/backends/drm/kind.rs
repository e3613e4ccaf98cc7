//! The KIND of a DRM row: which engine classes its clients used (pure).
//!
//! A class is used when one of its engines has a nonzero counter in the client's fdinfo:
//! `drm-engine-<e>` busy time, `drm-cycles-<e>`, or (amdgpu before 5.19) a busy percent. The
//! counters are cumulative since the client opened the device, so a row's kind is what it ever
//! ran, not what it runs now (`hmn ps --util` shows that). A row whose clients print no engine
//! keys at all is [`ProcessKind::Unreported`]; one whose counters are all zero is `idle`.

use std::collections::BTreeMap;

use super::driver;
use super::fdinfo::ClientStats;
use super::model::SeenClient;
use crate::types::{EngineClasses, ProcessKind};

/// The classes one client used, or `None` when it prints no engine counters. An engine name is
/// classed by its driver's entry in the table ([`driver::DrmDriver::engine_class`]).
pub(crate) fn classes_of(stats: &ClientStats) -> Option<EngineClasses> {
    if stats.engines.is_empty() {
        return None;
    }
    let drv = driver::by_fdinfo_name(stats.driver.as_deref());
    let mut set = EngineClasses::default();
    for (name, e) in &stats.engines {
        let used = e.busy_ns.is_some_and(|n| n > 0)
            || e.cycles.is_some_and(|n| n > 0)
            || e.instant_percent.is_some_and(|p| p > 0.0);
        if used {
            set.insert(drv.engine_class(name));
        }
    }
    Some(set)
}

/// The kind of every (pid, device) among `clients`: the union of its clients' classes.
pub(crate) fn kinds(clients: &[SeenClient]) -> BTreeMap<(u32, u32), ProcessKind> {
    let mut out: BTreeMap<(u32, u32), ProcessKind> = BTreeMap::new();
    for c in clients {
        let kind = classes_of(&c.stats).map_or(ProcessKind::Unreported, ProcessKind::from_engines);
        out.entry((c.pid, c.key.device))
            .and_modify(|k| *k = k.merge(kind))
            .or_insert(kind);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backends::drm::fdinfo::parse;

    fn kind(text: &str) -> ProcessKind {
        classes_of(&parse(text)).map_or(ProcessKind::Unreported, ProcessKind::from_engines)
    }

    #[test]
    fn classes_from_nonzero_counters() {
        assert_eq!(
            kind("drm-driver: amdgpu\ndrm-engine-gfx: 1000 ns\ndrm-engine-dec: 0 ns\n"),
            ProcessKind::Graphics
        );
        let video = kind(
            "drm-driver: amdgpu\ndrm-engine-gfx: 0 ns\ndrm-engine-dec: 5 ns\ndrm-engine-enc_1: 7 ns\n",
        );
        assert_eq!(video.as_str(), "video");
        let xe = kind(
            "drm-driver: xe\ndrm-cycles-rcs: 28257900\ndrm-total-cycles-rcs: 7655183225\ndrm-cycles-bcs: 4\ndrm-cycles-ccs: 9\ndrm-cycles-vcs: 0\n",
        );
        assert_eq!(xe.as_str(), "compute+graphics+copy");
        assert_eq!(
            kind("drm-driver: i915\ndrm-engine-render: 0 ns\ndrm-engine-copy: 0 ns\n").as_str(),
            "idle"
        );
        assert_eq!(
            kind("drm-driver: msm\ndrm-engine-gpu: 12 ns\n").as_str(),
            "other"
        );
        assert_eq!(
            kind("drm-driver: amdgpu\ndrm-memory-vram: 4 KiB\n"),
            ProcessKind::Unreported
        );
        // amdgpu 5.14–5.18 percentages.
        assert_eq!(
            kind("pdev:\t0000:03:00.0\nvram mem:\t4 kB\ngfx0:\t0.0%\ncompute0:\t3.50%\n"),
            ProcessKind::Compute
        );
    }
}
