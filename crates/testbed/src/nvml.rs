//! The fake NVML library and its scenario file (`fake-nvml.conf`, documented in
//! `fake-nvml/conf.rs`).
//!
//! [`FakeNvml::install`] copies the built library into a directory of the test's own together
//! with the scenario; the library finds the scenario next to itself (through `dladdr`), so
//! tests running in parallel in one process never share state.

use std::path::{Path, PathBuf};

pub use crate::nvml_mig::{DeviceExtras, FakeComputeInstance, FakeGpuInstance, FakeSample};

/// Which driver generation the fake imitates.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Driver {
    /// An R535+ driver: every symbol.
    #[default]
    Modern,
    /// A pre-R510 driver: no `nvmlDeviceGetMemoryInfo_v2`, no `_v3` process lists, no
    /// `nvmlDeviceGetPciInfo_v3`.
    Legacy,
    /// An R450/R460-like driver: [`Driver::Legacy`] without the MPS process lists and
    /// `nvmlDeviceGetGpuInstanceProfileInfoV` (MIG devices, but no profile names).
    PreR470,
    /// A pre-MIG (R440-like) driver: [`Driver::PreR470`] without any MIG symbol.
    PreMig,
}

/// The path of the built fake library for `driver`.
pub fn fake_nvml_path(driver: Driver) -> &'static Path {
    match driver {
        Driver::Modern => Path::new(env!("HMN_FAKE_NVML_MODERN")),
        Driver::Legacy => Path::new(env!("HMN_FAKE_NVML_LEGACY")),
        Driver::PreR470 => Path::new(env!("HMN_FAKE_NVML_PRE_R470")),
        Driver::PreMig => Path::new(env!("HMN_FAKE_NVML_PRE_MIG")),
    }
}

/// A per-process memory figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Used {
    /// Bytes.
    Bytes(u64),
    /// `NVML_VALUE_NOT_AVAILABLE` (`ULLONG_MAX`).
    NotAvailable,
}

/// Which NVML process list a process is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProcessListKind {
    /// `nvmlDeviceGetComputeRunningProcesses*`.
    Compute,
    /// `nvmlDeviceGetGraphicsRunningProcesses*`.
    Graphics,
    /// `nvmlDeviceGetMPSComputeRunningProcesses*`: an MPS client.
    Mps,
}

/// One fake GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeDevice {
    /// UTF-8 name (ignored when `name_bytes` is set).
    pub name: Option<String>,
    /// Raw name bytes, for non-UTF-8 names.
    pub name_bytes: Option<Vec<u8>>,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// NVML spelling, e.g. `00000000:1A:00.0`.
    pub pci_bus_id: String,
    /// Bytes.
    pub memory_total: u64,
    /// Bytes.
    pub memory_reserved: u64,
    /// Bytes used, per memory-info call (the last value repeats).
    pub memory_used: Vec<u64>,
    /// Percent.
    pub utilization_gpu: Option<u32>,
    /// Percent.
    pub utilization_memory: Option<u32>,
    /// Degrees Celsius.
    pub temperature_c: Option<u32>,
    /// Milliwatts.
    pub power_mw: Option<u32>,
    /// Millijoules since driver load.
    pub energy_mj: Option<u64>,
    /// Graphics, SM, memory clocks in MHz.
    pub clocks_mhz: [Option<u32>; 3],
    /// Maximum graphics, SM, memory clocks in MHz.
    pub max_clocks_mhz: [Option<u32>; 3],
    /// `nvmlDeviceGetHandleByIndex_v2` fails with this code.
    pub handle_error: Option<u32>,
    /// `(symbol, code)`: that symbol fails with that code on this device.
    pub errors: Vec<(String, u32)>,
    /// Accounting mode on (`nvidia-smi -am 1`): the driver keeps each process's peak memory.
    pub accounting: bool,
    /// MIG mode, privilege and MPS support ([`DeviceExtras`]).
    pub extras: DeviceExtras,
    /// Persistence mode: `Some(on)`, or `None` for a device that does not support it.
    pub persistence: Option<bool>,
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
            name_bytes: None,
            uuid: format!("GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e{index:04x}"),
            pci_bus_id: format!("00000000:{:02X}:00.0", 0x1A + 0x20 * (index % 7)),
            memory_total: 85_520_809_984,
            memory_reserved: 566_231_040,
            memory_used: vec![4 << 20],
            utilization_gpu: None,
            utilization_memory: None,
            temperature_c: None,
            power_mw: None,
            energy_mj: None,
            clocks_mhz: [None; 3],
            max_clocks_mhz: [None; 3],
            handle_error: None,
            errors: Vec::new(),
            accounting: false,
            extras: DeviceExtras::default(),
            persistence: Some(false),
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

    /// Makes `symbol` fail with `code` on this device.
    #[must_use]
    pub fn error(mut self, symbol: &str, code: u32) -> Self {
        self.errors.push((symbol.to_string(), code));
        self
    }
}

/// One process in a fake process list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProcess {
    /// Device index.
    pub device: u32,
    /// Compute or graphics list.
    pub list: ProcessListKind,
    /// Process id (ignored when `child_of_caller` or `caller`).
    pub pid: u32,
    /// Resolve the pid at each call to the command `hmn run` started, whose pid a test cannot
    /// know in advance: the first child of the process that loaded the fake, through `hmn`'s
    /// own processes between them (`hmn run`'s guard).
    pub child_of_caller: bool,
    /// Resolve the pid at each call to the process that loaded the fake itself (a library
    /// call looking up its own row, such as `process_gpu_info`).
    pub caller: bool,
    /// Memory per list call (indexed by the list's tick, the last value repeats).
    pub used: Vec<Used>,
    /// MIG GPU instance.
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance.
    pub compute_instance_id: Option<u32>,
    /// First tick at which the process is listed.
    pub from_tick: Option<u64>,
    /// First tick at which it is no longer listed.
    pub until_tick: Option<u64>,
    /// Its accounting record's peak memory (default: the largest of `used`).
    pub accounting_max: Option<Used>,
    /// Its accounting record's start time, µs since the epoch (default: when first listed);
    /// when set, the record exists even if the process is never listed.
    pub accounting_start_us: Option<u64>,
    /// Its accounting record's GPU and memory utilization over its life (percent).
    pub accounting_util: Option<(u32, u32)>,
}

impl FakeProcess {
    fn new(device: u32, list: ProcessListKind, pid: u32, used: u64) -> Self {
        FakeProcess {
            device,
            list,
            pid,
            child_of_caller: false,
            caller: false,
            used: vec![Used::Bytes(used)],
            gpu_instance_id: None,
            compute_instance_id: None,
            from_tick: None,
            until_tick: None,
            accounting_max: None,
            accounting_start_us: None,
            accounting_util: None,
        }
    }

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

/// A scenario for the fake NVML.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeNvml {
    /// Which library variant.
    pub driver: Driver,
    /// `nvmlInit*` fails with this code.
    pub init_error: Option<u32>,
    /// `nvmlSystemGetDriverVersion`; `None` → NOT_SUPPORTED.
    pub driver_version: Option<String>,
    /// `nvmlSystemGetNVMLVersion`.
    pub nvml_version: Option<String>,
    /// `nvmlSystemGetCudaDriverVersion`.
    pub cuda_driver_version: Option<i32>,
    /// Stride the `_v3` process calls write: 24 or 32.
    pub process_stride: u32,
    /// The first call of each process list hides this many of its last entries.
    pub late_processes: u32,
    /// Overrides the device count.
    pub device_count: Option<u32>,
    /// `(symbol, code)` for non-device calls.
    pub errors: Vec<(String, u32)>,
    /// The devices, in index order.
    pub devices: Vec<FakeDevice>,
    /// The processes.
    pub processes: Vec<FakeProcess>,
    /// MIG GPU instances, each with its compute instances (MIG devices).
    pub gpu_instances: Vec<FakeGpuInstance>,
    /// `nvmlDeviceGetProcessUtilization` samples.
    pub samples: Vec<FakeSample>,
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
