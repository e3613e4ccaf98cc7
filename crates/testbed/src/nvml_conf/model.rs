//! The fake NVML's scenario as data: what a test builds (the builders are in `nvml.rs` and
//! `nvml_mig.rs`), what `fake-nvml.conf` holds, and what the fake library answers from. Every
//! field is one key of the file (`keys.rs`); a section's defaults here are what an omitted key
//! means to the fake.

/// Which driver generation the fake imitates (which built library a scenario installs; not a
/// key of the file).
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

/// A per-process memory figure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Used {
    /// Bytes.
    Bytes(u64),
    /// `NVML_VALUE_NOT_AVAILABLE` (`ULLONG_MAX`).
    NotAvailable,
}

impl Used {
    /// The value NVML writes: the bytes, or `ULLONG_MAX`.
    pub fn raw(self) -> u64 {
        match self {
            Used::Bytes(b) => b,
            Used::NotAvailable => u64::MAX,
        }
    }
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

impl ProcessListKind {
    /// The list's slot in the fake's per-handle counters.
    pub fn index(self) -> usize {
        match self {
            ProcessListKind::Compute => 0,
            ProcessListKind::Graphics => 1,
            ProcessListKind::Mps => 2,
        }
    }
}

/// One fake GPU (a `[device]` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeDevice {
    /// UTF-8 name (`name_bytes` wins when both are set; neither: `NVIDIA Fake GPU`).
    pub name: Option<String>,
    /// Raw name bytes, for non-UTF-8 names.
    pub name_bytes: Option<Vec<u8>>,
    /// `GPU-…` UUID.
    pub uuid: String,
    /// NVML spelling, e.g. `00000000:1A:00.0` (`DDDD:BB:DD.F` and `BB:DD.F` are read too).
    pub pci_bus_id: String,
    /// PCI device id (the upper half of `pciDeviceId`; the vendor is NVIDIA's).
    pub pci_device_id: u32,
    /// PCI subsystem id.
    pub pci_subsystem_id: u32,
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
    /// Graphics, SM, memory clocks in MHz (indexed by NVML's clock type).
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
    /// `nvmlDeviceGetComputeMode`'s value (0 default, 1 exclusive thread, 2 prohibited, 3
    /// exclusive process; any other number as a driver might answer it), or `None` for
    /// NOT_SUPPORTED.
    pub compute_mode: Option<u32>,
    /// ECC, remapped rows, retired pages and event support ([`FakeHealth`]; every reading
    /// NOT_SUPPORTED by default).
    pub health: FakeHealth,
}

/// Memory health and event support of one fake GPU. `None` (or an empty sequence) is
/// NOT_SUPPORTED, the default, so scenarios that do not name these keys answer as before.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeHealth {
    /// `nvmlDeviceGetEccMode`'s current mode.
    pub ecc_mode: Option<bool>,
    /// Its pending mode (`None`: the current one).
    pub ecc_pending: Option<bool>,
    /// `nvmlDeviceGetTotalEccErrors` per call (the last value repeats), in the order corrected
    /// volatile, uncorrected volatile, corrected aggregate, uncorrected aggregate; answered
    /// only while ECC is on.
    pub ecc_counts: [Vec<u64>; 4],
    /// `nvmlDeviceGetRemappedRows`: correctable, uncorrectable, pending, failure (NOT_SUPPORTED
    /// too while MIG is on, as the driver answers).
    pub remapped_rows: Option<[u32; 4]>,
    /// Pages retired after multiple single-bit errors, after a double-bit error.
    pub retired: [Option<u32>; 2],
    /// `nvmlDeviceGetRetiredPagesPendingStatus`.
    pub retired_pending: Option<bool>,
    /// `nvmlDeviceGetSupportedEventTypes` (`0xff9f` on an H200).
    pub events_supported: Option<u64>,
}

impl FakeDevice {
    /// A `[device]` section at `index` before any key is read.
    pub(crate) fn omitted(index: usize) -> FakeDevice {
        FakeDevice {
            name: None,
            name_bytes: None,
            uuid: format!("GPU-00000000-0000-0000-0000-{index:012x}"),
            pci_bus_id: format!("00000000:{:02X}:00.0", index.wrapping_add(1) & 0xff),
            pci_device_id: 0x2330,
            pci_subsystem_id: 0x16C1_10DE,
            memory_total: 0,
            memory_reserved: 0,
            memory_used: vec![0],
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
            compute_mode: Some(0),
            health: FakeHealth::default(),
        }
    }

    /// The name NVML answers: the raw bytes, else the UTF-8 name, else `NVIDIA Fake GPU`.
    pub fn name_for_nvml(&self) -> Vec<u8> {
        match (&self.name_bytes, &self.name) {
            (Some(b), _) => b.clone(),
            (None, Some(n)) => n.as_bytes().to_vec(),
            (None, None) => b"NVIDIA Fake GPU".to_vec(),
        }
    }
}

/// MIG mode, privileges and MPS support of one fake GPU.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceExtras {
    /// `nvmlDeviceGetMigMode`'s current mode; `None` = NOT_SUPPORTED (no MIG).
    pub mig_mode: Option<bool>,
    /// The pending mode (takes effect after a GPU reset); `None`: the current one.
    pub mig_pending: Option<bool>,
    /// `nvmlDeviceGetMaxMigDeviceCount` while MIG is on.
    pub mig_max_devices: u32,
    /// Built-in GPU-instance profile table (`profiles.rs`): `h100_80gb`, `h200_141gb` or none.
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
    /// NOT_SUPPORTED with the struct zeroed (`unified_memory = 1`; the `memory_*` keys are
    /// ignored), the process lists still answer.
    pub unified_memory: bool,
}

impl Default for DeviceExtras {
    fn default() -> Self {
        DeviceExtras {
            mig_mode: None,
            mig_pending: None,
            mig_max_devices: 7,
            mig_profiles: None,
            privileged: true,
            mps_supported: true,
            mig_record_ids: true,
            unified_memory: false,
        }
    }
}

/// One process in a fake process list (a `[process]` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProcess {
    /// Device index.
    pub device: u32,
    /// Compute, graphics or MPS list.
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
    /// MIG GPU instance (`None`: `0xFFFFFFFF`).
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance (`None`: `0xFFFFFFFF`).
    pub compute_instance_id: Option<u32>,
    /// First tick at which the process is listed (`None`: 0).
    pub from_tick: Option<u64>,
    /// First tick at which it is no longer listed (`None`: never).
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
    /// A process of `list` on `device` using `used` bytes.
    pub(crate) fn new(device: u32, list: ProcessListKind, pid: u32, used: u64) -> Self {
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
}

/// One MIG compute instance: a MIG device, what CUDA sees (a `[compute_instance]` section,
/// whose `device` and `gi` keys name the GPU instance it belongs to).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeComputeInstance {
    /// Compute-instance id (unique within its GPU instance).
    pub id: u32,
    /// Device-level profile name without `MIG ` (`1g.10gb`, `1c.3g.40gb`).
    pub name: String,
    /// `MIG-…` UUID.
    pub uuid: String,
    /// MIG device index (`nvmlDeviceGetMigDeviceHandleByIndex`); default: the next free one
    /// on its GPU, in the order of the instances.
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
}

/// One MIG GPU instance and its compute instances (a `[gpu_instance]` section; memory is per
/// GPU instance: its compute instances share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeGpuInstance {
    /// Parent GPU index.
    pub device: u32,
    /// NVML GPU-instance id (`GPU_I_ID`; not dense: 1, 11, 13 on a real H100).
    pub id: u32,
    /// Profile id (`nvidia-smi mig -lgip`'s ID column, not the profile enum).
    pub profile_id: u32,
    /// Placement (start, size) in memory slices.
    pub placement: (u32, u32),
    /// Bytes (default: the profile's).
    pub memory_total: Option<u64>,
    /// Bytes.
    pub memory_reserved: u64,
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
            memory_reserved: 0,
            memory_used: vec![used],
            compute_instances: Vec::new(),
        }
    }
}

/// One `nvmlDeviceGetProcessUtilization` sample (a `[sample]` section).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeSample {
    /// Device index.
    pub device: u32,
    /// Process id (ignored when `child_of_caller` or `caller`).
    pub pid: u32,
    /// The pid is resolved at each call to a child of the caller (`hmn run`'s command).
    pub child_of_caller: bool,
    /// The pid is the caller's own.
    pub caller: bool,
    /// Age of the sample's timestamp at each call, ms.
    pub age_ms: u64,
    /// SM, memory, encoder, decoder percent (values above 100 imitate a driver's bad sample).
    pub values: [u32; 4],
    /// Visible in answered rounds `from..until` (an answered round is a call that returned
    /// SUCCESS or NOT_FOUND).
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
            caller: false,
            age_ms: 100,
            values,
            rounds: None,
            late: false,
        }
    }
}

/// One event the fake delivers through `nvmlEventSetWait*` (an `[event]` section): to every
/// set that registered its device for its type, once that set has been waited on
/// `after_waits` times.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeEvent {
    /// Device index.
    pub device: u32,
    /// `nvmlEventType*` bit (default `0x8`, a critical XID error).
    pub event_type: u64,
    /// The event data: the XID.
    pub xid: u64,
    /// Waits on a set before the event is delivered to it.
    pub after_waits: u64,
    /// MIG GPU instance (`None`: `0xFFFFFFFF`).
    pub gpu_instance_id: Option<u32>,
    /// MIG compute instance (`None`: `0xFFFFFFFF`).
    pub compute_instance_id: Option<u32>,
}

impl FakeEvent {
    /// XID `xid` on `device`, delivered at a set's first wait.
    pub fn xid(device: u32, xid: u64) -> Self {
        FakeEvent {
            device,
            event_type: 0x8,
            xid,
            after_waits: 0,
            gpu_instance_id: None,
            compute_instance_id: None,
        }
    }
}

/// A scenario for the fake NVML (the file's global keys, then its sections).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FakeNvml {
    /// Which library variant (not in the file: which library is installed).
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
    /// Every call appends its symbol, one line per call, to `fake-nvml.calls` beside the
    /// library ([`crate::nvml_calls`]): how many driver calls a query makes.
    pub log_calls: bool,
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
    /// Events (`[event]` sections).
    pub events: Vec<FakeEvent>,
}

impl FakeNvml {
    /// A file before any key is read.
    pub(crate) fn omitted() -> FakeNvml {
        FakeNvml {
            process_stride: 24,
            ..FakeNvml::default()
        }
    }
}
