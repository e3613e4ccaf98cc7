//! The built-in GPU-instance profile tables of the fake NVML (`mig_profiles = h100_80gb |
//! h200_141gb` on a `[device]`), copied from `nvidia-smi mig -lgip` on real cards (see
//! `/work/notes/nvml-depth.md` §1.4).

/// One GPU-instance profile: `nvmlGpuInstanceProfileInfo_v2_t`'s fields we serve.
#[derive(Clone, Copy, Debug)]
pub struct MigProfile {
    /// `NVML_GPU_INSTANCE_PROFILE_*` enum value (the argument of `…ProfileInfo(V)`).
    pub profile_enum: u32,
    /// The profile id (`info.id`, `nvmlGpuInstanceInfo_t.profileId`).
    pub id: u32,
    pub name: &'static str,
    pub slices: u32,
    pub instances: u32,
    pub sm: u32,
    /// copy engines, decoders, encoders, JPEG, OFA.
    pub engines: [u32; 5],
    pub memory_mib: u64,
}

#[allow(clippy::too_many_arguments)]
const fn p(
    profile_enum: u32,
    id: u32,
    name: &'static str,
    slices: u32,
    instances: u32,
    sm: u32,
    engines: [u32; 5],
    memory_mib: u64,
) -> MigProfile {
    MigProfile {
        profile_enum,
        id,
        name,
        slices,
        instances,
        sm,
        engines,
        memory_mib,
    }
}

/// H100 80GB HBM3 (`nvidia-smi mig -lgip`, driver 580.173.02).
pub const H100_80GB: &[MigProfile] = &[
    p(0, 19, "MIG 1g.10gb", 1, 7, 16, [1, 1, 0, 1, 0], 9984),
    p(7, 20, "MIG 1g.10gb+me", 1, 1, 16, [1, 1, 0, 1, 1], 9984),
    p(9, 15, "MIG 1g.20gb", 1, 4, 26, [1, 1, 0, 1, 0], 20096),
    p(1, 14, "MIG 2g.20gb", 2, 3, 32, [2, 2, 0, 2, 0], 20096),
    p(2, 9, "MIG 3g.40gb", 3, 2, 60, [3, 3, 0, 3, 0], 40448),
    p(3, 5, "MIG 4g.40gb", 4, 1, 64, [4, 4, 0, 4, 0], 40448),
    p(4, 0, "MIG 7g.80gb", 7, 1, 132, [8, 7, 0, 7, 1], 81152),
];

/// H200 141GB: the same die and ids, larger memory (`1g.18gb` holds 16384 MiB).
pub const H200_141GB: &[MigProfile] = &[
    p(0, 19, "MIG 1g.18gb", 1, 7, 16, [1, 1, 0, 1, 0], 16384),
    p(7, 20, "MIG 1g.18gb+me", 1, 1, 16, [1, 1, 0, 1, 1], 16384),
    p(9, 15, "MIG 1g.35gb", 1, 4, 26, [1, 1, 0, 1, 0], 33280),
    p(1, 14, "MIG 2g.35gb", 2, 3, 32, [2, 2, 0, 2, 0], 33280),
    p(2, 9, "MIG 3g.71gb", 3, 2, 60, [3, 3, 0, 3, 0], 71424),
    p(3, 5, "MIG 4g.71gb", 4, 1, 64, [4, 4, 0, 4, 0], 71424),
    p(4, 0, "MIG 7g.141gb", 7, 1, 132, [8, 7, 0, 7, 1], 143360),
];

/// The built-in tables by the name `mig_profiles` gives them.
pub const MIG_PROFILE_TABLES: &[(&str, &[MigProfile])] =
    &[("h100_80gb", H100_80GB), ("h200_141gb", H200_141GB)];

/// The table named `name` (with its name, as the model keeps it).
///
/// # Errors
/// When no built-in table has that name.
pub fn profile_table(name: &str) -> Result<(&'static str, &'static [MigProfile]), String> {
    MIG_PROFILE_TABLES
        .iter()
        .find(|(n, _)| *n == name)
        .copied()
        .ok_or_else(|| format!("must be h100_80gb, h200_141gb or none, got {name:?}"))
}
