//! The fake NVML library and the builders of its scenarios (the scenario's model and its file,
//! `fake-nvml.conf`, are one definition shared with the library: `nvml_conf/`).
//!
//! [`FakeNvml::install`] copies the built library into a directory of the test's own together
//! with the scenario; the library finds the scenario next to itself (through `dladdr`), so
//! tests running in parallel in one process never share state.

use std::path::{Path, PathBuf};

pub use crate::nvml_conf::model::{
    DeviceExtras, Driver, FakeComputeInstance, FakeDevice, FakeEvent, FakeGpuInstance, FakeHealth,
    FakeNvml, FakeProcess, FakeSample, ProcessListKind, Used,
};
pub use crate::nvml_conf::profiles::{H100_80GB, H200_141GB, MigProfile, profile_table};

/// The path of the built fake library for `driver`.
pub fn fake_nvml_path(driver: Driver) -> &'static Path {
    match driver {
        Driver::Modern => Path::new(env!("HMN_FAKE_NVML_MODERN")),
        Driver::Legacy => Path::new(env!("HMN_FAKE_NVML_LEGACY")),
        Driver::PreR470 => Path::new(env!("HMN_FAKE_NVML_PRE_R470")),
        Driver::PreMig => Path::new(env!("HMN_FAKE_NVML_PRE_MIG")),
    }
}

impl FakeDevice {
    /// A realistic H100 80GB (HBM3) at index `index`: 81559 MiB total, 540 MiB reserved,
    /// every telemetry reading supported (37 % busy, 41 °C, 71.234 W).
    pub fn h100(index: u32) -> Self {
        FakeDevice::h100_bare(index).telemetry(37, 12, 41, 71_234, 123_456_789)
    }

    /// An H100 whose telemetry calls all return NOT_SUPPORTED.
    pub fn h100_bare(index: u32) -> Self {
        FakeDevice {
            name: Some("NVIDIA H100 80GB HBM3".to_string()),
            uuid: format!("GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e{index:04x}"),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x1A + 0x20 * (index % 7)),
            memory_total: 85_520_809_984,
            memory_reserved: 566_231_040,
            memory_used: vec![4 << 20],
            // The rest as a `[device]` that leaves them out: PCI ids 0x2330 (an H100 SXM5) and
            // 0x16C1_10DE, telemetry unsupported, no MIG, persistence off.
            ..FakeDevice::omitted(index as usize)
        }
    }

    /// An NVIDIA GB10 (DGX Spark) as its driver answers (580.95.05; nvitop #208, marimo #6822,
    /// nvtop #426): name `NVIDIA GB10`, bus id `0000000F:01:00.0`, both memory calls
    /// NOT_SUPPORTED (`unified_memory`), the process lists answering.
    pub fn gb10(index: u32) -> Self {
        let mut d = FakeDevice::h100_bare(index);
        d.name = Some("NVIDIA GB10".to_string());
        d.pci_bus_id = "0000000F:01:00.0".to_string();
        d.memory_total = 0;
        d.memory_reserved = 0;
        d.memory_used = vec![0];
        d.extras.unified_memory = true;
        d
    }

    /// An NVIDIA GH200 (Grace Hopper): host memory is reachable, but the driver reports the
    /// GPU's own HBM, 97871 MiB (`nvidia-smi` `NVIDIA GH200 480GB, 97871 MiB`, public fixtures).
    pub fn gh200(index: u32) -> Self {
        let mut d = FakeDevice::h100_bare(index);
        d.name = Some("NVIDIA GH200 480GB".to_string());
        d.memory_total = 97_871 << 20;
        d.memory_reserved = 0;
        d.memory_used = vec![1 << 30];
        d
    }

    /// A lost device: `nvmlDeviceGetHandleByIndex_v2` fails with 15 (`GPU_IS_LOST`), as for a
    /// GPU that fell off the bus.
    #[must_use]
    pub fn lost(mut self) -> Self {
        self.handle_error = Some(15);
        self
    }

    /// Turns accounting mode on: `nvmlDeviceGetAccountingStats` answers for every process
    /// that has been listed on this device.
    #[must_use]
    pub fn accounting(mut self) -> Self {
        self.accounting = true;
        self
    }

    /// Sets the device-wide used bytes (a sequence advances per memory-info call).
    #[must_use]
    pub fn memory_used(mut self, used: &[u64]) -> Self {
        self.memory_used = used.to_vec();
        self
    }

    /// Sets every telemetry reading.
    #[must_use]
    pub fn telemetry(
        mut self,
        util_gpu: u32,
        util_mem: u32,
        temp_c: u32,
        power_mw: u32,
        energy_mj: u64,
    ) -> Self {
        self.utilization_gpu = Some(util_gpu);
        self.utilization_memory = Some(util_mem);
        self.temperature_c = Some(temp_c);
        self.power_mw = Some(power_mw);
        self.energy_mj = Some(energy_mj);
        self.clocks_mhz = [Some(1980), Some(1980), Some(2619)];
        self.max_clocks_mhz = [Some(1980), Some(1980), Some(2619)];
        self
    }

    /// Sets persistence mode (`None`: the device does not support it).
    #[must_use]
    pub fn persistence(mut self, on: Option<bool>) -> Self {
        self.persistence = on;
        self
    }

    /// Sets `nvmlDeviceGetComputeMode`'s answer (`None`: NOT_SUPPORTED; default 0).
    #[must_use]
    pub fn compute_mode(mut self, mode: Option<u32>) -> Self {
        self.compute_mode = mode;
        self
    }

    /// Makes `symbol` fail with `code` on this device.
    #[must_use]
    pub fn error(mut self, symbol: &str, code: u32) -> Self {
        self.errors.push((symbol.to_string(), code));
        self
    }

    /// ECC on (as a data-centre GPU), every count 0, remapped rows 0 and no pending remap, and
    /// the H200's event mask (`0xff9f`): a healthy Hopper.
    #[must_use]
    pub fn healthy_ecc(mut self) -> Self {
        self.health = FakeHealth {
            ecc_mode: Some(true),
            ecc_counts: [vec![0], vec![0], vec![0], vec![0]],
            remapped_rows: Some([0, 0, 0, 0]),
            events_supported: Some(0xff9f),
            ..FakeHealth::default()
        };
        self
    }

    /// Sets the memory-health readings.
    #[must_use]
    pub fn health(mut self, health: FakeHealth) -> Self {
        self.health = health;
        self
    }
}

impl FakeProcess {
    /// A compute process.
    pub fn compute(device: u32, pid: u32, used: u64) -> Self {
        FakeProcess::new(device, ProcessListKind::Compute, pid, used)
    }

    /// An MPS client (`nvmlDeviceGetMPSComputeRunningProcesses*`); a real client is in the
    /// compute list too (`M+C` in `nvidia-smi pmon`): add it there with
    /// [`FakeProcess::compute`].
    pub fn mps(device: u32, pid: u32, used: u64) -> Self {
        FakeProcess::new(device, ProcessListKind::Mps, pid, used)
    }

    /// A graphics process.
    pub fn graphics(device: u32, pid: u32, used: u64) -> Self {
        FakeProcess::new(device, ProcessListKind::Graphics, pid, used)
    }

    /// A compute process whose pid is the caller's child (see the field).
    pub fn compute_child_of_caller(device: u32, used: u64) -> Self {
        let mut p = FakeProcess::new(device, ProcessListKind::Compute, 0, used);
        p.child_of_caller = true;
        p
    }

    /// A compute process whose pid is the caller's own (see the field).
    pub fn compute_caller(device: u32, used: u64) -> Self {
        let mut p = FakeProcess::new(device, ProcessListKind::Compute, 0, used);
        p.caller = true;
        p
    }

    /// Reports `NVML_VALUE_NOT_AVAILABLE` as its memory.
    #[must_use]
    pub fn not_available(mut self) -> Self {
        self.used = vec![Used::NotAvailable];
        self
    }

    /// Memory that changes per list call.
    #[must_use]
    pub fn used_sequence(mut self, used: &[u64]) -> Self {
        self.used = used.iter().map(|u| Used::Bytes(*u)).collect();
        self
    }

    /// Listed only for ticks in `from..until`.
    #[must_use]
    pub fn visible(mut self, from: u64, until: u64) -> Self {
        self.from_tick = Some(from);
        self.until_tick = Some(until);
        self
    }

    /// The peak its accounting record reports (a spike the process lists never showed).
    #[must_use]
    pub fn accounting_max(mut self, max: Used) -> Self {
        self.accounting_max = Some(max);
        self
    }

    /// The start time its accounting record reports, µs since the epoch (to imitate a record
    /// left by an earlier process with the same pid).
    #[must_use]
    pub fn accounting_start_us(mut self, us: u64) -> Self {
        self.accounting_start_us = Some(us);
        self
    }

    /// Its accounting record's GPU and memory utilization (percent over its life).
    #[must_use]
    pub fn accounting_util(mut self, gpu: u32, memory: u32) -> Self {
        self.accounting_util = Some((gpu, memory));
        self
    }

    /// MIG instance ids.
    #[must_use]
    pub fn mig(mut self, gpu_instance: u32, compute_instance: u32) -> Self {
        self.gpu_instance_id = Some(gpu_instance);
        self.compute_instance_id = Some(compute_instance);
        self
    }
}

impl FakeNvml {
    /// A modern driver (550.54.15) with no devices.
    pub fn new() -> Self {
        FakeNvml {
            driver_version: Some("550.54.15".to_string()),
            nvml_version: Some("12.550.54.15".to_string()),
            cuda_driver_version: Some(12040),
            process_stride: 24,
            ..FakeNvml::default()
        }
    }

    /// A modern driver with `n` H100s.
    pub fn h100s(n: u32) -> Self {
        (0..n).fold(FakeNvml::new(), |f, i| f.device(FakeDevice::h100(i)))
    }

    /// Selects the library variant.
    #[must_use]
    pub fn driver(mut self, driver: Driver) -> Self {
        self.driver = driver;
        self
    }

    /// Adds a device.
    #[must_use]
    pub fn device(mut self, device: FakeDevice) -> Self {
        self.devices.push(device);
        self
    }

    /// Adds a process.
    #[must_use]
    pub fn process(mut self, process: FakeProcess) -> Self {
        self.processes.push(process);
        self
    }

    /// Adds an event (an XID).
    #[must_use]
    pub fn event(mut self, event: FakeEvent) -> Self {
        self.events.push(event);
        self
    }

    /// Makes `nvmlInit*` fail (9 = DRIVER_NOT_LOADED, 4 = NO_PERMISSION, 18 =
    /// LIB_RM_VERSION_MISMATCH, 28 = GPU_NOT_FOUND).
    #[must_use]
    pub fn init_error(mut self, code: u32) -> Self {
        self.init_error = Some(code);
        self
    }

    /// A library that does not match the loaded kernel driver: `nvmlInit*` fails with 18
    /// (`LIB_RM_VERSION_MISMATCH`), the classic state after a driver upgrade without a reboot.
    #[must_use]
    pub fn version_mismatch(self) -> Self {
        self.init_error(18)
    }

    /// `nvmlDeviceGetCount_v2` fails with `code` after a good init (999 = `UNKNOWN`).
    #[must_use]
    pub fn count_error(self, code: u32) -> Self {
        self.error("nvmlDeviceGetCount_v2", code)
    }

    /// Sets the `_v3` process stride.
    #[must_use]
    pub fn stride(mut self, stride: u32) -> Self {
        self.process_stride = stride;
        self
    }

    /// Hides this many processes on each list's first call.
    #[must_use]
    pub fn late_processes(mut self, n: u32) -> Self {
        self.late_processes = n;
        self
    }

    /// Logs every call's symbol to `fake-nvml.calls` beside the library ([`nvml_calls`]).
    #[must_use]
    pub fn log_calls(mut self) -> Self {
        self.log_calls = true;
        self
    }

    /// Overrides the device count.
    #[must_use]
    pub fn device_count(mut self, n: u32) -> Self {
        self.device_count = Some(n);
        self
    }

    /// Makes a non-device `symbol` fail with `code`.
    #[must_use]
    pub fn error(mut self, symbol: &str, code: u32) -> Self {
        self.errors.push((symbol.to_string(), code));
        self
    }

    /// No driver version (the call returns NOT_SUPPORTED).
    #[must_use]
    pub fn no_driver_version(mut self) -> Self {
        self.driver_version = None;
        self
    }

    /// Copies the library into `dir` as `libnvidia-ml.so.1`, writes `dir/fake-nvml.conf`,
    /// and returns the library's path.
    ///
    /// # Errors
    /// When `dir` cannot be created or written.
    pub fn install(&self, dir: &Path) -> std::io::Result<PathBuf> {
        std::fs::create_dir_all(dir)?;
        crate::write_atomic(&dir.join("fake-nvml.conf"), self.to_conf().as_bytes())?;
        let lib = dir.join(if cfg!(windows) {
            "nvml.dll"
        } else {
            "libnvidia-ml.so.1"
        });
        let bytes = std::fs::read(fake_nvml_path(self.driver))?;
        crate::write_atomic(&lib, &bytes)?;
        Ok(lib)
    }
}

/// The flag file that makes the fake NVML installed as `lib` hang: while it exists, every
/// device and state call blocks, as a driver stuck in the kernel would (create it to hang the
/// driver, remove it to let it go).
pub fn nvml_hang_flag(lib: &Path) -> PathBuf {
    lib.with_file_name("fake-nvml.hang")
}

/// The symbols a device's telemetry is read through (utilization, temperature, power, energy,
/// current and maximum clocks): what a query that does not ask for telemetry must not call.
pub const NVML_TELEMETRY_CALLS: [&str; 6] = [
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTotalEnergyConsumption",
    "nvmlDeviceGetClockInfo",
    "nvmlDeviceGetMaxClockInfo",
];

/// The symbols the fake library at `lib` was called through, in order, for a scenario built
/// with [`FakeNvml::log_calls`] (empty before the first call).
pub fn nvml_calls(lib: &Path) -> Vec<String> {
    std::fs::read_to_string(lib.with_file_name("fake-nvml.calls"))
        .map(|t| t.lines().map(str::to_string).collect())
        .unwrap_or_default()
}
