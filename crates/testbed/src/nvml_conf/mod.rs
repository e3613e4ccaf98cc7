//! The fake NVML's configuration, one definition for both sides: the scenario model
//! (`model.rs`), every key of `fake-nvml.conf` (`keys.rs`) and their spelling (`text.rs`), the
//! built-in MIG profile tables (`profiles.rs`). The test bed compiles this folder as its
//! `nvml_conf` module and writes a scenario with [`FakeNvml::to_conf`]; the fake library
//! (`fake-nvml/lib.rs`, built by `build.rs` with plain `rustc`) includes the same folder by
//! `#[path]` and reads the file back with [`FakeNvml::from_conf`]. Nothing here may use a crate
//! or a path outside this folder.
//!
//! The file is INI-like: `key = value` lines, `#` starts a comment (at the start of a line or
//! after whitespace), and `[device]`, `[process]`, `[gpu_instance]`, `[compute_instance]`,
//! `[sample]` and `[event]` start new sections. Anything the reader does not understand is an error, which
//! makes `nvmlInit*` return `NVML_ERROR_UNKNOWN` (999), so that a typo in a scenario is noticed
//! at once. Numbers are decimal or `0x` hex (`max` is 2^64 − 1, NVML's "not available" for a
//! process's memory); sequences (`memory_used = 1,2,3`) give one value per call, the last one
//! repeating; flags are `0` or `1`.
//!
//! ```text
//! driver_version = 550.54.15
//! error = nvmlDeviceGetCount_v2:999   # Symbol:code, repeatable (also per device / MIG device)
//!
//! [device]                # defaults: NVIDIA Fake GPU, a UUID and bus id from the index
//! name = NVIDIA H100 80GB HBM3    # or name_hex = 4e56…
//! memory_total = 85520809984
//! memory_used = 4194304
//! mig_mode = 1            # or unsupported (the default); mig_pending = 0|1
//! persistence_mode = 0    # or 1, or unsupported
//! compute_mode = 3        # nvmlComputeMode_t (0 the default), or unsupported
//! mig_profiles = h100_80gb
//!
//! [process]
//! device = 0
//! list = compute          # graphics, mps
//! pid = 4242              # or child_of_caller / caller (resolved at each call)
//! used = 1073741824,max
//!
//! [gpu_instance]          # one GPU instance (memory is per GI: its CIs share it)
//! device = 0
//! id = 11                 # the NVML GI id (not dense: 1, 11, 13 on a real H100)
//! profile_id = 19         # the profile *id* (`nvidia-smi mig -lgip`), not the enum
//! placement = 4:1         # start:size in memory slices
//! memory_used = 4414504960
//!
//! [compute_instance]      # one MIG device (what CUDA sees), of the GI `device`/`gi` name
//! device = 0
//! gi = 11
//! name = 1g.10gb          # device-level profile; NVML's name is "<parent> MIG <name>"
//! uuid = MIG-8443519f-66f7-5962-8955-60dba0866f3a
//! gone_after_calls = 3    # the handle answers 3 calls, then INVALID_ARGUMENT; slot NOT_FOUND
//!
//! [device]                # memory health (every key absent: NOT_SUPPORTED)
//! ecc_mode = 1            # ecc_pending = 0|1
//! ecc_uncorrected_volatile = 0,0,2    # also ecc_corrected_volatile, ecc_*_aggregate
//! remapped_rows = 0,0,1,0 # corr,unc,pending,failure (NOT_SUPPORTED under MIG)
//! retired_sbe = 2         # retired_dbe, retired_pending = 0|1
//! events_supported = 0xff9f
//!
//! [event]                 # one XID event, delivered to every set that registered its device
//! device = 0
//! xid = 79
//! after_waits = 3         # at the set's 4th wait
//!
//! [sample]                # one nvmlDeviceGetProcessUtilization sample
//! device = 0
//! pid = 4242
//! sm = 37                 # values above 100 are allowed (a driver's inconsistent sample)
//! from_round = 0          # visible in answered rounds from..until
//! until_round = 5
//! ```
//!
//! The full list of keys, with what each means, is `keys.rs` beside the model's field docs.

pub(crate) mod keys;
pub(crate) mod model;
pub(crate) mod profiles;
#[cfg(test)]
mod tests;
pub(crate) mod text;

use keys::{COMPUTE_INSTANCE, DEVICE, EVENT, GLOBAL, GPU_INSTANCE, PROCESS, PlacedCi, SAMPLE};
use model::{
    FakeComputeInstance, FakeDevice, FakeEvent, FakeGpuInstance, FakeNvml, FakeProcess, FakeSample,
};
use text::{read_key, strip_comment, write_section};

impl FakeNvml {
    /// The scenario file's text.
    pub fn to_conf(&self) -> String {
        let mut s = String::from("# hmn fake NVML scenario\n");
        write_section(&mut s, "", GLOBAL, self);
        for d in &self.devices {
            write_section(&mut s, "device", DEVICE, d);
        }
        for p in &self.processes {
            write_section(&mut s, "process", PROCESS, p);
        }
        for g in &self.gpu_instances {
            write_section(&mut s, "gpu_instance", GPU_INSTANCE, g);
            for c in &g.compute_instances {
                let (device, gi, ci) = (g.device, g.id, c.clone());
                write_section(
                    &mut s,
                    "compute_instance",
                    COMPUTE_INSTANCE,
                    &PlacedCi { device, gi, ci },
                );
            }
        }
        for x in &self.samples {
            write_section(&mut s, "sample", SAMPLE, x);
        }
        for e in &self.events {
            write_section(&mut s, "event", EVENT, e);
        }
        s
    }

    /// Reads a scenario file's text (the [`Driver`](model::Driver) is the default: the file
    /// does not name it).
    ///
    /// # Errors
    /// The first line the reader does not understand, a `[process]` without a `pid`, or a
    /// `[compute_instance]` of a GPU instance no `[gpu_instance]` defines.
    pub fn from_conf(text: &str) -> Result<FakeNvml, String> {
        let mut f = FakeNvml::omitted();
        let mut cis: Vec<PlacedCi> = Vec::new();
        let mut section = "";
        let mut pid_missing = false;
        for raw in text.lines() {
            let line = strip_comment(raw).trim();
            if line.is_empty() {
                continue;
            }
            if line.starts_with('[') {
                if pid_missing {
                    return Err(String::from("[process] without pid"));
                }
                match line {
                    "[device]" => f.devices.push(FakeDevice::omitted(f.devices.len())),
                    "[process]" => {
                        let list = model::ProcessListKind::Compute;
                        f.processes.push(FakeProcess::new(0, list, 0, 0));
                        pid_missing = true;
                    }
                    "[gpu_instance]" => {
                        let used = 15 << 20;
                        f.gpu_instances
                            .push(FakeGpuInstance::new(0, 0, 19, (0, 1), used));
                    }
                    "[compute_instance]" => cis.push(PlacedCi {
                        device: 0,
                        gi: 0,
                        ci: FakeComputeInstance::new(0, "1g.10gb", ""),
                    }),
                    "[sample]" => f.samples.push(FakeSample::new(0, 0, [0; 4])),
                    "[event]" => f.events.push(FakeEvent::xid(0, 0)),
                    _ => return Err(format!("unknown section {line:?}")),
                }
                section = line;
                continue;
            }
            let (key, v) = line
                .split_once('=')
                .ok_or_else(|| format!("expected key = value, got {line:?}"))?;
            let (key, v) = (key.trim(), v.trim());
            let none = || format!("internal: no current {section}");
            match section {
                "" => read_key(GLOBAL, "global", &mut f, key, v)?,
                "[device]" => {
                    let d = f.devices.last_mut().ok_or_else(none)?;
                    read_key(DEVICE, section, d, key, v)?;
                }
                "[process]" => {
                    let p = f.processes.last_mut().ok_or_else(none)?;
                    read_key(PROCESS, section, p, key, v)?;
                    pid_missing &= key != "pid";
                }
                "[gpu_instance]" => {
                    let g = f.gpu_instances.last_mut().ok_or_else(none)?;
                    read_key(GPU_INSTANCE, section, g, key, v)?;
                }
                "[compute_instance]" => {
                    let c = cis.last_mut().ok_or_else(none)?;
                    read_key(COMPUTE_INSTANCE, section, c, key, v)?;
                }
                "[event]" => {
                    let e = f.events.last_mut().ok_or_else(none)?;
                    read_key(EVENT, section, e, key, v)?;
                }
                _ => {
                    let s = f.samples.last_mut().ok_or_else(none)?;
                    read_key(SAMPLE, section, s, key, v)?;
                }
            }
        }
        if pid_missing {
            return Err(String::from("[process] without pid"));
        }
        for c in cis {
            let g = f
                .gpu_instances
                .iter_mut()
                .find(|g| g.device == c.device && g.id == c.gi)
                .ok_or_else(|| {
                    format!(
                        "[compute_instance] of GPU instance {} on device {}, which no \
                         [gpu_instance] defines",
                        c.gi, c.device
                    )
                })?;
            g.compute_instances.push(c.ci);
        }
        Ok(f)
    }
}
