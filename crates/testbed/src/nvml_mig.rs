//! MIG, MPS and per-process utilization for the fake NVML: device settings
//! ([`DeviceExtras`]), GPU and compute instances ([`FakeGpuInstance`], [`FakeComputeInstance`]),
//! utilization samples ([`FakeSample`]), and presets copied from real H100/H200 MIG captures
//! (`nvidia-smi` on driver 580.173.02, `starkdrift/prickle-exporter` testdata) and MPS layouts.

use std::fmt::Write as _;

use crate::nvml::{FakeDevice, FakeNvml, FakeProcess};

const MIB: u64 = 1 << 20;

/// MIG mode, privileges and MPS support of one fake GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceExtras {
    /// `nvmlDeviceGetMigMode`: `None` = NOT_SUPPORTED (no MIG), else (current, pending).
    pub mig_mode: Option<(bool, bool)>,
    /// `nvmlDeviceGetMaxMigDeviceCount` while MIG is on.
    pub mig_max_devices: u32,
    /// Built-in GPU-instance profile table: `h100_80gb`, `h200_141gb` or none.
    pub mig_profiles: Option<&'static str>,
    /// Whether the caller counts as privileged (the GPU-instance queries, and the whole-GPU
    /// memory and process lists under MIG, answer NO_PERMISSION otherwise).
    pub privileged: bool,
    /// Whether the MPS process list is supported (Volta+; NOT_SUPPORTED otherwise).
    pub mps_supported: bool,
    /// Whether records from a MIG device's process list carry the GI/CI ids (else
    /// `0xFFFFFFFF`).
    pub mig_record_ids: bool,
    /// A GB10-class part without a framebuffer of its own: both memory calls answer
    /// NOT_SUPPORTED (`unified_memory = 1`), the process lists still answer.
    pub unified_memory: bool,
}

impl Default for DeviceExtras {
    fn default() -> Self {
        DeviceExtras {
            mig_mode: None,
            mig_max_devices: 7,
            mig_profiles: None,
            privileged: true,
            mps_supported: true,
            mig_record_ids: true,
            unified_memory: false,
        }
    }
}

impl DeviceExtras {
    pub(crate) fn write(&self, s: &mut String) {
        let mut kv = |k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(s, "{k} = {v}");
        };
        match self.mig_mode {
            None => {}
            Some((cur, pend)) => {
                kv("mig_mode", &u8::from(cur));
                kv("mig_pending", &u8::from(pend));
            }
        }
        kv("mig_max_devices", &self.mig_max_devices);
        if let Some(p) = self.mig_profiles {
            kv("mig_profiles", &p);
        }
        kv("privileged", &u8::from(self.privileged));
        kv("mps_supported", &u8::from(self.mps_supported));
        kv("mig_record_ids", &u8::from(self.mig_record_ids));
        if self.unified_memory {
            kv("unified_memory", &1);
        }
    }
}

/// One MIG compute instance: a MIG device, what CUDA sees.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeComputeInstance {
    /// Compute-instance id (unique within its GPU instance).
    pub id: u32,
    /// Device-level profile name without `MIG ` (`1g.10gb`, `1c.3g.40gb`).
    pub name: String,
    /// `MIG-…` UUID.
    pub uuid: String,
    /// MIG device index (`nvmlDeviceGetMigDeviceHandleByIndex`); default: section order.
    pub slot: Option<u32>,
    /// The handle answers this many calls, then INVALID_ARGUMENT, and its slot NOT_FOUND.
    pub gone_after_calls: Option<u64>,
    /// Its slot answers NOT_FOUND from this (0-based) lookup on.
    pub gone_from_enum: Option<u64>,
    /// `(symbol, code)`: that symbol fails with that code on this MIG device.
    pub errors: Vec<(String, u32)>,
    /// Compute slices.
    pub slices: u32,
    /// SMs (default: the GPU-instance profile's).
    pub sm: Option<u32>,
}

impl FakeComputeInstance {
    /// Compute instance `id` named `name` with `uuid`.
    pub fn new(id: u32, name: &str, uuid: &str) -> Self {
        FakeComputeInstance {
            id,
            name: name.to_string(),
            uuid: uuid.to_string(),
            slot: None,
            gone_after_calls: None,
            gone_from_enum: None,
            errors: Vec::new(),
            slices: 1,
            sm: None,
        }
    }

    /// Sets the MIG device index.
    #[must_use]
    pub fn slot(mut self, slot: u32) -> Self {
        self.slot = Some(slot);
        self
    }

    /// Destroyed after its handle answered `n` calls.
    #[must_use]
    pub fn gone_after_calls(mut self, n: u64) -> Self {
        self.gone_after_calls = Some(n);
        self
    }

    /// Destroyed from the `k`-th (0-based) lookup of its slot on.
    #[must_use]
    pub fn gone_from_enum(mut self, k: u64) -> Self {
        self.gone_from_enum = Some(k);
        self
    }

    /// Makes `symbol` fail with `code` on this MIG device.
    #[must_use]
    pub fn error(mut self, symbol: &str, code: u32) -> Self {
        self.errors.push((symbol.to_string(), code));
        self
    }
}

/// One MIG GPU instance and its compute instances.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeGpuInstance {
    /// Parent GPU index.
    pub device: u32,
    /// NVML GPU-instance id (`GPU_I_ID`).
    pub id: u32,
    /// Profile id (`nvidia-smi mig -lgip`'s ID column).
    pub profile_id: u32,
    /// Placement (start, size) in memory slices.
    pub placement: (u32, u32),
    /// Bytes (default: the profile's).
    pub memory_total: Option<u64>,
    /// Bytes used, per memory-info call (the last value repeats).
    pub memory_used: Vec<u64>,
    /// The compute instances (MIG devices).
    pub compute_instances: Vec<FakeComputeInstance>,
}

impl FakeGpuInstance {
    /// GPU instance `id` of profile `profile_id` on GPU `device`, `used` bytes in use.
    pub fn new(device: u32, id: u32, profile_id: u32, placement: (u32, u32), used: u64) -> Self {
        FakeGpuInstance {
            device,
            id,
            profile_id,
            placement,
            memory_total: None,
            memory_used: vec![used],
            compute_instances: Vec::new(),
        }
    }

    /// Adds a compute instance.
    #[must_use]
    pub fn ci(mut self, ci: FakeComputeInstance) -> Self {
        self.compute_instances.push(ci);
        self
    }

    /// Sets the total bytes.
    #[must_use]
    pub fn total(mut self, bytes: u64) -> Self {
        self.memory_total = Some(bytes);
        self
    }

    pub(crate) fn write(&self, s: &mut String) {
        let kv = |s: &mut String, k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(s, "{k} = {v}");
        };
        s.push_str("\n[gpu_instance]\n");
        kv(s, "device", &self.device);
        kv(s, "id", &self.id);
        kv(s, "profile_id", &self.profile_id);
        kv(
            s,
            "placement",
            &format!("{}:{}", self.placement.0, self.placement.1),
        );
        if let Some(t) = self.memory_total {
            kv(s, "memory_total", &t);
        }
        kv(s, "memory_used", &crate::nvml_conf::seq(&self.memory_used));
        for c in &self.compute_instances {
            s.push_str("\n[compute_instance]\n");
            kv(s, "device", &self.device);
            kv(s, "gi", &self.id);
            kv(s, "id", &c.id);
            kv(s, "name", &c.name);
            kv(s, "uuid", &c.uuid);
            kv(s, "slices", &c.slices);
            for (k, v) in [
                ("slot", c.slot.map(u64::from)),
                ("gone_after_calls", c.gone_after_calls),
                ("gone_from_enum", c.gone_from_enum),
                ("sm", c.sm.map(u64::from)),
            ] {
                if let Some(v) = v {
                    kv(s, k, &v);
                }
            }
            for (sym, code) in &c.errors {
                kv(s, "error", &format!("{sym}:{code}"));
            }
        }
    }
}

/// One `nvmlDeviceGetProcessUtilization` sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeSample {
    /// Device index.
    pub device: u32,
    /// Process id (ignored when `child_of_caller`).
    pub pid: u32,
    /// The pid is resolved at each call to a child of the caller (`hmn run`'s command).
    pub child_of_caller: bool,
    /// Age of the sample's timestamp at each call, ms.
    pub age_ms: u64,
    /// SM, memory, encoder, decoder percent (values above 100 imitate a driver's bad sample).
    pub values: [u32; 4],
    /// Visible in answered rounds `from..until`.
    pub rounds: Option<(u64, u64)>,
    /// Missing from the sizing call, present in the fill (a process that starts in between).
    pub late: bool,
}

impl FakeSample {
    /// A sample of `pid` on `device`: SM, memory, encoder and decoder percent.
    pub fn new(device: u32, pid: u32, values: [u32; 4]) -> Self {
        FakeSample {
            device,
            pid,
            child_of_caller: false,
            age_ms: 100,
            values,
            rounds: None,
            late: false,
        }
    }

    /// A sample of the caller's child (the command `hmn run` started).
    pub fn child_of_caller(device: u32, values: [u32; 4]) -> Self {
        let mut s = FakeSample::new(device, 0, values);
        s.child_of_caller = true;
        s
    }

    /// Visible only in answered rounds `from..until`.
    #[must_use]
    pub fn rounds(mut self, from: u64, until: u64) -> Self {
        self.rounds = Some((from, until));
        self
    }

    /// Its timestamp is `ms` old at each call.
    #[must_use]
    pub fn age_ms(mut self, ms: u64) -> Self {
        self.age_ms = ms;
        self
    }

    /// Missing from the sizing call.
    #[must_use]
    pub fn late(mut self) -> Self {
        self.late = true;
        self
    }

    pub(crate) fn write(&self, s: &mut String) {
        s.push_str("\n[sample]\n");
        let mut kv = |k: &str, v: &dyn std::fmt::Display| {
            let _ = writeln!(s, "{k} = {v}");
        };
        kv("device", &self.device);
        if self.child_of_caller {
            kv("pid", &"child_of_caller");
        } else {
            kv("pid", &self.pid);
        }
        kv("age_ms", &self.age_ms);
        for (k, v) in ["sm", "mem", "enc", "dec"].iter().zip(self.values) {
            kv(k, &v);
        }
        if let Some((f, u)) = self.rounds {
            kv("from_round", &f);
            kv("until_round", &u);
        }
        if self.late {
            kv("late", &1);
        }
    }
}

impl FakeDevice {
    /// MIG mode: current and pending (pending takes effect after a GPU reset).
    #[must_use]
    pub fn mig(mut self, current: bool, pending: bool) -> Self {
        self.extras.mig_mode = Some((current, pending));
        self
    }

    /// The built-in profile table (`h100_80gb`, `h200_141gb`).
    #[must_use]
    pub fn mig_profiles(mut self, table: &'static str) -> Self {
        self.extras.mig_profiles = Some(table);
        self
    }

    /// An unprivileged caller: NO_PERMISSION for the GPU-instance queries, and for the
    /// whole-GPU memory and process lists while MIG is on.
    #[must_use]
    pub fn unprivileged(mut self) -> Self {
        self.extras.privileged = false;
        self
    }

    /// No MPS process list (pre-Volta): NOT_SUPPORTED.
    #[must_use]
    pub fn no_mps(mut self) -> Self {
        self.extras.mps_supported = false;
        self
    }

    /// MIG-device process records carry `0xFFFFFFFF` for the GI/CI ids.
    #[must_use]
    pub fn mig_records_without_ids(mut self) -> Self {
        self.extras.mig_record_ids = false;
        self
    }
}

impl FakeNvml {
    /// Adds a GPU instance (with its compute instances).
    #[must_use]
    pub fn gpu_instance(mut self, gi: FakeGpuInstance) -> Self {
        self.gpu_instances.push(gi);
        self
    }

    /// Adds a utilization sample.
    #[must_use]
    pub fn sample(mut self, sample: FakeSample) -> Self {
        self.samples.push(sample);
        self
    }

    /// The H100 of the captures: `NVIDIA H100 80GB HBM3`, 81559 MiB, bus `00000000:00:09.0`,
    /// `GPU-0d0831da-…`, MIG on with the H100 profile table and no instance yet.
    pub fn h100_mig_parent() -> FakeDevice {
        let mut d = FakeDevice::h100_bare(0)
            .mig(true, true)
            .mig_profiles("h100_80gb");
        d.uuid = "GPU-0d0831da-0c98-2717-6446-8acd91d39b65".to_string();
        d.pci_bus_id = "00000000:00:09.0".to_string();
        d.memory_total = 81_559 * MIB;
        d
    }

    /// Capture `h100-mig`: two `1g.10gb` instances (profile 19) — GI 11 at 4:1 using 4210 MiB
    /// with pid 10385 holding 4188 MiB, GI 13 at 6:1 using 15 MiB; CI 0 in each; MIG devices
    /// 0 and 1 follow placement.
    pub fn h100_mig_two_1g10gb() -> FakeNvml {
        FakeNvml::new()
            .device(FakeNvml::h100_mig_parent())
            .gpu_instance(FakeGpuInstance::new(0, 11, 19, (4, 1), 4210 * MIB).ci(
                FakeComputeInstance::new(0, "1g.10gb", "MIG-8443519f-66f7-5962-8955-60dba0866f3a"),
            ))
            .gpu_instance(FakeGpuInstance::new(0, 13, 19, (6, 1), 15 * MIB).ci(
                FakeComputeInstance::new(0, "1g.10gb", "MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
            ))
            .process(FakeProcess::compute(0, 10385, 4188 * MIB).mig(11, 0))
    }

    /// Capture `h100-mig-mixed`: GI 1 (`3g.40gb`, profile 9, 0:4) using 12627 of 40448 MiB
    /// with pids 23804, 23806, 23808 at 4188 MiB each, its CI named `1c.3g.40gb`; GI 11
    /// (`1g.10gb+me`, profile 20, 4:1) whose MIG device is named `1g.10gb`; GI 13 (`1g.10gb`,
    /// profile 19, 6:1). Parent used 12657 MiB = the instances' sum.
    pub fn h100_mig_mixed() -> FakeNvml {
        let mut f = FakeNvml::new()
            .device(FakeNvml::h100_mig_parent())
            .gpu_instance(FakeGpuInstance::new(0, 1, 9, (0, 4), 12627 * MIB).ci({
                let mut c = FakeComputeInstance::new(
                    0,
                    "1c.3g.40gb",
                    "MIG-5ff0d535-9a82-5af6-80df-768b9d3ac092",
                );
                c.sm = Some(16);
                c
            }))
            .gpu_instance(FakeGpuInstance::new(0, 11, 20, (4, 1), 15 * MIB).ci(
                FakeComputeInstance::new(0, "1g.10gb", "MIG-8443519f-66f7-5962-8955-60dba0866f3a"),
            ))
            .gpu_instance(FakeGpuInstance::new(0, 13, 19, (6, 1), 15 * MIB).ci(
                FakeComputeInstance::new(0, "1g.10gb", "MIG-ee6996fb-86fb-5405-83f0-b20887da1bb3"),
            ));
        for pid in [23804, 23806, 23808] {
            f = f.process(FakeProcess::compute(0, pid, 4188 * MIB).mig(1, 0));
        }
        f
    }

    /// Capture `h200-mig`: `NVIDIA H200`, 143771 MiB, bus `00000000:83:00.0`; two `1g.18gb`
    /// instances (profile 19) whose memory is 16384 MiB (the name does not give the size): GI 11
    /// using 624 MiB with pid 12648 holding 602 MiB, GI 13 using 15 MiB.
    pub fn h200_mig() -> FakeNvml {
        let mut d = FakeDevice::h100_bare(0)
            .mig(true, true)
            .mig_profiles("h200_141gb");
        d.name = Some("NVIDIA H200".to_string());
        d.uuid = "GPU-2af1c335-11fb-c9d3-4de3-27a25697fc35".to_string();
        d.pci_bus_id = "00000000:83:00.0".to_string();
        d.memory_total = 143_771 * MIB;
        FakeNvml::new()
            .device(d)
            .gpu_instance(FakeGpuInstance::new(0, 11, 19, (4, 1), 624 * MIB).ci(
                FakeComputeInstance::new(0, "1g.18gb", "MIG-30366fdf-6105-5648-968d-679e250aa830"),
            ))
            .gpu_instance(FakeGpuInstance::new(0, 13, 19, (6, 1), 15 * MIB).ci(
                FakeComputeInstance::new(0, "1g.18gb", "MIG-7138b2c5-cb05-5700-b65a-5fdec910f0f4"),
            ))
            .process(FakeProcess::compute(0, 12648, 602 * MIB).mig(11, 0))
    }

    /// MPS on Volta+: the server (`server`, ~30 MiB of its own) in the compute list only, two
    /// clients in both the compute and the MPS lists (`M+C`), 6 GiB and 2 GiB.
    pub fn mps_volta(server: u32, clients: [u32; 2]) -> FakeNvml {
        FakeNvml::h100s(1)
            .process(FakeProcess::compute(0, server, 30 * MIB))
            .process(FakeProcess::compute(0, clients[0], 6 << 30))
            .process(FakeProcess::mps(0, clients[0], 6 << 30))
            .process(FakeProcess::compute(0, clients[1], 2 << 30))
            .process(FakeProcess::mps(0, clients[1], 2 << 30))
    }

    /// MPS whose clients are listed only in the MPS list (not the compute one).
    pub fn mps_clients_only_in_mps_list(server: u32, clients: [u32; 2]) -> FakeNvml {
        FakeNvml::h100s(1)
            .process(FakeProcess::compute(0, server, 30 * MIB))
            .process(FakeProcess::mps(0, clients[0], 6 << 30))
            .process(FakeProcess::mps(0, clients[1], 2 << 30))
    }

    /// MPS before Volta: no MPS list (NOT_SUPPORTED), the server holds its clients' memory.
    pub fn mps_pre_volta(server: u32) -> FakeNvml {
        FakeNvml::new()
            .device(FakeDevice::h100(0).no_mps())
            .process(FakeProcess::compute(0, server, 8 << 30))
    }
}
