//! Builders of MIG, MPS and per-process utilization for the fake NVML: device settings
//! (`DeviceExtras`), GPU and compute instances ([`FakeGpuInstance`], [`FakeComputeInstance`]),
//! utilization samples ([`FakeSample`]), and presets copied from real H100/H200 MIG captures
//! (`nvidia-smi` on driver 580.173.02, `starkdrift/prickle-exporter` testdata) and MPS layouts.

use crate::nvml_conf::model::{
    FakeComputeInstance, FakeDevice, FakeGpuInstance, FakeNvml, FakeProcess, FakeSample,
};

const MIB: u64 = 1 << 20;

impl FakeComputeInstance {
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

impl FakeGpuInstance {
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
}

impl FakeSample {
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
}

impl FakeDevice {
    /// MIG mode: current and pending (pending takes effect after a GPU reset).
    #[must_use]
    pub fn mig(mut self, current: bool, pending: bool) -> Self {
        self.extras.mig_mode = Some(current);
        self.extras.mig_pending = Some(pending);
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
