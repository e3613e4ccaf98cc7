//! The `memory-pool` check: which memory each GPU allocates from, and why hmn thinks so
//! ([`PoolFacts`] from the device list, the verdict pure). It warns where the kind cannot be
//! told (an amdgpu without hwmon: APU or not is unknown, and its pool is then taken as its
//! VRAM alone), with the remedy its driver table entry gives (`drm::driver::Integrated`).

use super::model::Check;
use crate::backends::drm::driver as drm;
use crate::types::{Device, Field, PoolKind};

/// One device's pool, as the check needs it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct PoolFacts {
    /// The device's index.
    pub index: u32,
    /// Its kernel driver.
    pub driver: Option<String>,
    /// Its pool's kind, when known.
    pub kind: Option<PoolKind>,
    /// Why the pool is of that kind (the pool's evidence), or why the kind is unknown.
    pub why: Option<String>,
}

impl PoolFacts {
    /// The facts of one device of a device list.
    pub fn of(d: &Device) -> PoolFacts {
        let why = match &d.pool {
            Some(p) => Some(p.evidence.clone()),
            None => d
                .unknown
                .iter()
                .find(|u| u.field == Field::Integrated)
                .map(|u| u.detail.clone()),
        };
        PoolFacts {
            index: d.index,
            driver: d.driver.clone(),
            kind: d.pool_kind(),
            why,
        }
    }
}

/// The verdict over every device's pool.
pub(super) fn memory_pool(pools: &[PoolFacts]) -> Check {
    const ID: &str = "memory-pool";
    if pools.is_empty() {
        return Check::ok(ID, "no GPU");
    }
    let saw: Vec<String> = pools
        .iter()
        .map(|p| {
            let kind = p.kind.map_or("pool unknown", PoolKind::label);
            // A discrete GPU without a pool record is its own VRAM: nothing to explain.
            match &p.why {
                Some(why) => format!("GPU {}: {kind} ({why})", p.index),
                None => format!("GPU {}: {kind}", p.index),
            }
        })
        .collect();
    // Devices whose kind is unknown where their driver's integrated test says what would
    // decide it (the driver table: amdgpu's hwmon).
    let mut remedies: Vec<&str> = Vec::new();
    for p in pools.iter().filter(|p| p.kind.is_none()) {
        let entry = drm::by_sysfs_name(p.driver.as_deref());
        if let Some(r) = entry.integrated.undecided_remedy() {
            if !remedies.contains(&r) {
                remedies.push(r);
            }
        }
    }
    if remedies.is_empty() {
        return Check::ok(ID, saw.join("; "));
    }
    Check::warn(ID, saw.join("; "), Some(remedies.join("; ")))
}

#[cfg(test)]
mod tests {
    use super::super::model::Status;
    use super::*;
    use crate::types::{MemoryPool, PoolSource, Source, Unknown, UnknownReason, Vendor};

    #[test]
    fn each_device_says_its_pool_and_why() {
        assert_eq!(memory_pool(&[]).saw, "no GPU");
        let mut gb10 = Device::new(0, Vendor::Nvidia, Source::Nvml);
        gb10.pool = Some(MemoryPool::host_ram(
            PoolSource::ProcessSum,
            "NVML memory NOT_SUPPORTED",
        ));
        let mut h100 = Device::new(1, Vendor::Nvidia, Source::Nvml);
        h100.memory.total_bytes = Some(80);
        let c = memory_pool(&[PoolFacts::of(&gb10), PoolFacts::of(&h100)]);
        assert_eq!(c.status, Status::Ok);
        assert_eq!(
            c.saw,
            "GPU 0: unified with host RAM (NVML memory NOT_SUPPORTED); GPU 1: dedicated VRAM"
        );
    }

    #[test]
    fn an_amdgpu_that_cannot_tell_warns_with_the_remedy() {
        let mut amd = Device::new(2, Vendor::Amd, Source::Sysfs);
        amd.driver = Some("amdgpu".into());
        amd.unknown.push(Unknown::new(
            Field::Integrated,
            UnknownReason::Unsupported,
            "amdgpu registered no hwmon",
        ));
        let c = memory_pool(&[PoolFacts::of(&amd)]);
        assert_eq!(c.status, Status::Warn);
        assert_eq!(c.saw, "GPU 2: pool unknown (amdgpu registered no hwmon)");
        assert!(c.remedy.unwrap().contains("amdgpu.dpm=0"));
        // Two of them: the remedy once.
        let mut amd2 = amd.clone();
        amd2.index = 4;
        let two = memory_pool(&[PoolFacts::of(&amd), PoolFacts::of(&amd2)]);
        assert_eq!(two.remedy.unwrap().matches("amdgpu.dpm=0").count(), 1);
        // Another driver without a kind (an unlisted DRM driver) is not a warning.
        let mut other = Device::new(3, Vendor::Other("virtio_gpu".into()), Source::Sysfs);
        other.driver = Some("virtio_gpu".into());
        assert_eq!(memory_pool(&[PoolFacts::of(&other)]).status, Status::Ok);
    }
}
