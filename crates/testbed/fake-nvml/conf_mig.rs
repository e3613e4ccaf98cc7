//! The MIG, MPS and utilization parts of `fake-nvml.conf`: the `[gpu_instance]`,
//! `[compute_instance]` and `[sample]` sections, and the built-in GPU-instance profile tables
//! (`mig_profiles = h100_80gb | h200_141gb` on a `[device]`), copied from `nvidia-smi mig
//! -lgip` on real cards (see `/work/notes/nvml-depth.md` §1.4).
//!
//! ```text
//! [gpu_instance]          # one GPU instance (memory is per GI: its CIs share it)
//! device = 0
//! id = 11                 # the NVML GI id (not dense: 1, 11, 13 on a real H100)
//! profile_id = 19         # the profile *id* (`nvidia-smi mig -lgip`), not the enum
//! placement = 4:1         # start:size in memory slices
//! memory_total = 10468982784    # default: the profile's memory
//! memory_used = 4414504960      # a sequence per memory call, as for devices
//!
//! [compute_instance]      # one compute instance = one MIG device (what CUDA sees)
//! device = 0
//! gi = 11
//! id = 0
//! name = 1g.10gb          # device-level profile; NVML's name is "<parent> MIG <name>"
//! uuid = MIG-8443519f-66f7-5962-8955-60dba0866f3a
//! slot = 0                # MIG device index (default: the order of the sections)
//! gone_after_calls = 3    # the handle answers 3 calls, then INVALID_ARGUMENT; slot NOT_FOUND
//! gone_from_enum = 1      # slot NOT_FOUND from the 2nd handle lookup on (0-based count)
//! error = nvmlDeviceGetUUID:999
//!
//! [sample]                # one nvmlDeviceGetProcessUtilization sample
//! device = 0
//! pid = 4242              # or child_of_caller / caller
//! age_ms = 100            # timestamp = now - age
//! sm = 37                 # values above 100 are allowed (a driver's inconsistent sample)
//! mem = 12
//! enc = 0
//! dec = 0
//! from_round = 0          # visible in answered rounds from..until (an answered round is a
//! until_round = 5         # call that returned SUCCESS or NOT_FOUND)
//! late = 1                # missing from the sizing call, present in the fill (growth)
//! ```

use super::conf::{parse_error, parse_seq, parse_u32, parse_u64};

/// One GPU-instance profile: `nvmlGpuInstanceProfileInfo_v2_t`'s fields we serve.
#[derive(Clone, Copy, Debug)]
pub struct Profile {
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

const fn p(
    profile_enum: u32,
    id: u32,
    name: &'static str,
    slices: u32,
    instances: u32,
    sm: u32,
    engines: [u32; 5],
    memory_mib: u64,
) -> Profile {
    Profile {
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
pub const H100_80GB: &[Profile] = &[
    p(0, 19, "MIG 1g.10gb", 1, 7, 16, [1, 1, 0, 1, 0], 9984),
    p(7, 20, "MIG 1g.10gb+me", 1, 1, 16, [1, 1, 0, 1, 1], 9984),
    p(9, 15, "MIG 1g.20gb", 1, 4, 26, [1, 1, 0, 1, 0], 20096),
    p(1, 14, "MIG 2g.20gb", 2, 3, 32, [2, 2, 0, 2, 0], 20096),
    p(2, 9, "MIG 3g.40gb", 3, 2, 60, [3, 3, 0, 3, 0], 40448),
    p(3, 5, "MIG 4g.40gb", 4, 1, 64, [4, 4, 0, 4, 0], 40448),
    p(4, 0, "MIG 7g.80gb", 7, 1, 132, [8, 7, 0, 7, 1], 81152),
];

/// H200 141GB: the same die and ids, larger memory (`1g.18gb` holds 16384 MiB).
pub const H200_141GB: &[Profile] = &[
    p(0, 19, "MIG 1g.18gb", 1, 7, 16, [1, 1, 0, 1, 0], 16384),
    p(7, 20, "MIG 1g.18gb+me", 1, 1, 16, [1, 1, 0, 1, 1], 16384),
    p(9, 15, "MIG 1g.35gb", 1, 4, 26, [1, 1, 0, 1, 0], 33280),
    p(1, 14, "MIG 2g.35gb", 2, 3, 32, [2, 2, 0, 2, 0], 33280),
    p(2, 9, "MIG 3g.71gb", 3, 2, 60, [3, 3, 0, 3, 0], 71424),
    p(3, 5, "MIG 4g.71gb", 4, 1, 64, [4, 4, 0, 4, 0], 71424),
    p(4, 0, "MIG 7g.141gb", 7, 1, 132, [8, 7, 0, 7, 1], 143360),
];

/// `mig_profiles = …` on a `[device]`.
pub fn profile_table(v: &str) -> Result<&'static [Profile], String> {
    match v {
        "h100_80gb" => Ok(H100_80GB),
        "h200_141gb" => Ok(H200_141GB),
        "none" => Ok(&[]),
        _ => Err(format!("mig_profiles must be h100_80gb, h200_141gb or none, got {v:?}")),
    }
}

/// One `[gpu_instance]` section.
#[derive(Clone, Debug)]
pub struct GpuInstance {
    pub device: u32,
    pub id: u32,
    pub profile_id: u32,
    pub placement: (u32, u32),
    /// Bytes; `None`: the profile's memory.
    pub memory_total: Option<u64>,
    pub memory_reserved: u64,
    /// Never empty; indexed by the GI's memory-call count, the last value repeats.
    pub memory_used: Vec<u64>,
}

impl GpuInstance {
    pub fn new() -> GpuInstance {
        GpuInstance {
            device: 0,
            id: 0,
            profile_id: 19,
            placement: (0, 1),
            memory_total: None,
            memory_reserved: 0,
            memory_used: vec![15 << 20],
        }
    }
}

/// One `[compute_instance]` section: a MIG device.
#[derive(Clone, Debug)]
pub struct ComputeInstance {
    pub device: u32,
    pub gi: u32,
    pub id: u32,
    /// The device-level profile name without `MIG ` (`1g.10gb`, `1c.3g.40gb`).
    pub name: String,
    pub uuid: String,
    /// `None`: the order of the device's compute-instance sections.
    pub slot: Option<u32>,
    pub gone_after_calls: Option<u64>,
    pub gone_from_enum: Option<u64>,
    pub errors: Vec<(String, u32)>,
    /// Compute slices of this CI (attributes' `computeInstanceSliceCount`).
    pub slices: u32,
    /// SMs of this CI; `None`: the GI profile's.
    pub sm: Option<u32>,
}

impl ComputeInstance {
    pub fn new() -> ComputeInstance {
        ComputeInstance {
            device: 0,
            gi: 0,
            id: 0,
            name: String::from("1g.10gb"),
            uuid: String::new(),
            slot: None,
            gone_after_calls: None,
            gone_from_enum: None,
            errors: Vec::new(),
            slices: 1,
            sm: None,
        }
    }
}

/// One `[sample]` section.
#[derive(Clone, Debug)]
pub struct Sample {
    pub device: u32,
    pub pid: u32,
    pub child_of_caller: bool,
    pub caller: bool,
    pub age_ms: u64,
    /// sm, mem, enc, dec.
    pub values: [u32; 4],
    pub from_round: u64,
    pub until_round: u64,
    pub late: bool,
}

impl Sample {
    pub fn new() -> Sample {
        Sample {
            device: 0,
            pid: 0,
            child_of_caller: false,
            caller: false,
            age_ms: 100,
            values: [0; 4],
            from_round: 0,
            until_round: u64::MAX,
            late: false,
        }
    }
}

fn flag(key: &str, v: &str) -> Result<bool, String> {
    match v {
        "0" => Ok(false),
        "1" => Ok(true),
        _ => Err(format!("{key} must be 0 or 1, got {v:?}")),
    }
}

pub fn gpu_instance_key(g: &mut GpuInstance, key: &str, v: &str) -> Result<(), String> {
    match key {
        "device" => g.device = parse_u32(v)?,
        "id" => g.id = parse_u32(v)?,
        "profile_id" => g.profile_id = parse_u32(v)?,
        "placement" => {
            let (s, n) = v
                .split_once(':')
                .ok_or_else(|| format!("placement must be start:size, got {v:?}"))?;
            g.placement = (parse_u32(s.trim())?, parse_u32(n.trim())?);
        }
        "memory_total" => g.memory_total = Some(parse_u64(v)?),
        "memory_reserved" => g.memory_reserved = parse_u64(v)?,
        "memory_used" => g.memory_used = parse_seq(v)?,
        _ => return Err(format!("unknown [gpu_instance] key {key:?}")),
    }
    Ok(())
}

pub fn compute_instance_key(c: &mut ComputeInstance, key: &str, v: &str) -> Result<(), String> {
    match key {
        "device" => c.device = parse_u32(v)?,
        "gi" => c.gi = parse_u32(v)?,
        "id" => c.id = parse_u32(v)?,
        "name" => c.name = String::from(v),
        "uuid" => c.uuid = String::from(v),
        "slot" => c.slot = Some(parse_u32(v)?),
        "gone_after_calls" => c.gone_after_calls = Some(parse_u64(v)?),
        "gone_from_enum" => c.gone_from_enum = Some(parse_u64(v)?),
        "error" => c.errors.push(parse_error(v)?),
        "slices" => c.slices = parse_u32(v)?,
        "sm" => c.sm = Some(parse_u32(v)?),
        _ => return Err(format!("unknown [compute_instance] key {key:?}")),
    }
    Ok(())
}

pub fn sample_key(s: &mut Sample, key: &str, v: &str) -> Result<(), String> {
    match key {
        "device" => s.device = parse_u32(v)?,
        "pid" if v == "child_of_caller" => s.child_of_caller = true,
        "pid" if v == "caller" => s.caller = true,
        "pid" => s.pid = parse_u32(v)?,
        "age_ms" => s.age_ms = parse_u64(v)?,
        "sm" => s.values[0] = parse_u32(v)?,
        "mem" => s.values[1] = parse_u32(v)?,
        "enc" => s.values[2] = parse_u32(v)?,
        "dec" => s.values[3] = parse_u32(v)?,
        "from_round" => s.from_round = parse_u64(v)?,
        "until_round" => s.until_round = parse_u64(v)?,
        "late" => s.late = flag(key, v)?,
        _ => return Err(format!("unknown [sample] key {key:?}")),
    }
    Ok(())
}

/// Gives every compute instance without a `slot` the next free one on its device, in section
/// order, and checks that no two share a slot.
pub fn assign_slots(cis: &mut [ComputeInstance]) -> Result<(), String> {
    let mut taken: Vec<(u32, u32)> = cis
        .iter()
        .filter_map(|c| c.slot.map(|s| (c.device, s)))
        .collect();
    for c in cis.iter_mut() {
        if c.slot.is_none() {
            let mut s = 0;
            while taken.contains(&(c.device, s)) {
                s += 1;
            }
            c.slot = Some(s);
            taken.push((c.device, s));
        }
    }
    let mut seen: Vec<(u32, u32)> = Vec::new();
    for c in cis.iter() {
        let key = (c.device, c.slot.unwrap_or(0));
        if seen.contains(&key) {
            return Err(format!("two compute instances in slot {} of device {}", key.1, key.0));
        }
        seen.push(key);
    }
    Ok(())
}
