//! Parser for `fake-nvml.conf`, the scenario file read by the fake NVML library.
//!
//! The format is INI-like: `key = value` lines, `#` starts a comment (at the start of a
//! line or after whitespace), `[device]`, `[process]`, `[gpu_instance]`, `[compute_instance]`
//! and `[sample]` start new sections (the last three in `conf_mig.rs`). Anything the
//! parser does not understand is an error, which makes `nvmlInit*` return
//! `NVML_ERROR_UNKNOWN` (999) so that a typo in a test scenario is noticed at once.

use crate::conf_mig::{
    assign_slots, compute_instance_key, gpu_instance_key, sample_key, ComputeInstance,
    GpuInstance, Sample,
};

/// Which process list an entry belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum List {
    Compute = 0,
    Graphics = 1,
    /// `nvmlDeviceGetMPSComputeRunningProcesses*`: MPS clients.
    Mps = 2,
}

/// A parsed PCI address.
#[derive(Clone, Copy, Debug, Default)]
pub struct Pci {
    pub domain: u32,
    pub bus: u32,
    pub device: u32,
    pub function: u32,
}

/// One `[device]` section.
#[derive(Clone, Debug)]
pub struct Device {
    pub name: Vec<u8>,
    pub uuid: Vec<u8>,
    pub pci: Pci,
    pub pci_device_id: u32,
    pub pci_subsystem_id: u32,
    pub memory_total: u64,
    pub memory_reserved: u64,
    /// Never empty.
    pub memory_used: Vec<u64>,
    pub utilization_gpu: Option<u32>,
    pub utilization_memory: Option<u32>,
    pub temperature_c: Option<u32>,
    pub power_mw: Option<u32>,
    pub energy_mj: Option<u64>,
    /// Indexed by NVML clock type: 0 graphics, 1 SM, 2 memory.
    pub clocks: [Option<u32>; 3],
    pub max_clocks: [Option<u32>; 3],
    pub handle_error: Option<u32>,
    pub errors: Vec<(String, u32)>,
    /// `nvmlDeviceGetAccountingMode`: accounting on (off by default, as on a real driver).
    pub accounting_mode: bool,
    /// `nvmlDeviceGetMigMode` current mode; `None`: NOT_SUPPORTED (no MIG on this device).
    pub mig_mode: Option<u32>,
    /// Pending mode (after the next reset); `None`: the current one.
    pub mig_pending: Option<u32>,
    /// `nvmlDeviceGetMaxMigDeviceCount` while MIG is on.
    pub mig_max_devices: u32,
    /// GPU-instance profiles (`…GetGpuInstanceProfileInfo(V)`).
    pub mig_profiles: &'static [crate::conf_mig::Profile],
    /// Whether the caller may use the "Requires privileged user" calls and the whole-GPU
    /// memory and process queries under MIG.
    pub privileged: bool,
    /// Whether the MPS process list is supported (Volta+).
    pub mps_supported: bool,
    /// Whether MIG-handle process records carry the GI/CI ids (else 0xFFFFFFFF).
    pub mig_record_ids: bool,
    /// `nvmlDeviceGetPersistenceMode`: `None` answers NOT_SUPPORTED (off by default).
    pub persistence_mode: Option<u32>,
    /// `unified_memory = 1`: a GB10-class part without a framebuffer of its own. Both memory
    /// calls (`nvmlDeviceGetMemoryInfo` and `_v2`) zero the caller's struct and answer
    /// NOT_SUPPORTED (3), as nvml.h documents for an iGPU sharing the system's memory; the
    /// process lists still answer (the `[process]` sections). `memory_*` keys are ignored.
    pub unified_memory: bool,
}

impl Device {
    fn new(index: usize) -> Device {
        let n = index as u32;
        Device {
            name: b"NVIDIA Fake GPU".to_vec(),
            uuid: format!("GPU-00000000-0000-0000-0000-{:012x}", n).into_bytes(),
            pci: Pci {
                domain: 0,
                bus: n.wrapping_add(1) & 0xff,
                device: 0,
                function: 0,
            },
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
            clocks: [None; 3],
            max_clocks: [None; 3],
            handle_error: None,
            errors: Vec::new(),
            persistence_mode: Some(0),
            accounting_mode: false,
            mig_mode: None,
            mig_pending: None,
            mig_max_devices: 7,
            mig_profiles: &[],
            privileged: true,
            mps_supported: true,
            mig_record_ids: true,
            unified_memory: false,
        }
    }
}

/// One `[process]` section.
#[derive(Clone, Debug)]
pub struct Process {
    pub device: u32,
    pub list: List,
    pub pid: u32,
    /// `pid = child_of_caller`: the pid is resolved at each call to the command of the `hmn run`
    /// that loaded the library (its first child, through hmn's guard; for tests of `hmn run`,
    /// whose command's pid is not known in advance).
    pub child_of_caller: bool,
    /// `pid = caller`: the pid is the process that loaded the library itself (for tests of a
    /// library call that looks up its own process).
    pub caller: bool,
    /// Never empty; indexed by the list's tick, the last value repeats.
    pub used: Vec<u64>,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
    pub from_tick: u64,
    pub until_tick: u64,
    /// Accounting record's `maxMemoryUsage` (`u64::MAX` = not available); by default the
    /// largest value of `used`.
    pub accounting_max: Option<u64>,
    /// Accounting record's `startTime` (µs since the epoch); by default the time the process
    /// was first listed.
    pub accounting_start_us: Option<u64>,
    /// Accounting record's `gpuUtilization` and `memoryUtilization` (percent).
    pub accounting_util: [u32; 2],
}

/// The whole scenario.
#[derive(Clone, Debug)]
pub struct Config {
    pub init_error: Option<u32>,
    pub driver_version: Option<Vec<u8>>,
    pub nvml_version: Option<Vec<u8>>,
    pub cuda_driver_version: Option<i32>,
    pub process_stride: u32,
    pub late_processes: u32,
    pub device_count: Option<u32>,
    pub errors: Vec<(String, u32)>,
    pub devices: Vec<Device>,
    pub processes: Vec<Process>,
    pub gpu_instances: Vec<GpuInstance>,
    pub compute_instances: Vec<ComputeInstance>,
    pub samples: Vec<Sample>,
}

enum Section {
    Global,
    Device,
    Process,
    GpuInstance,
    ComputeInstance,
    Sample,
}

/// A `[process]` section while it is being read (`pid` is mandatory).
struct ProcessDraft {
    device: u32,
    list: List,
    pid: Option<u32>,
    child_of_caller: bool,
    caller: bool,
    used: Vec<u64>,
    gpu_instance_id: u32,
    compute_instance_id: u32,
    from_tick: u64,
    until_tick: u64,
    accounting_max: Option<u64>,
    accounting_start_us: Option<u64>,
    accounting_util: [u32; 2],
}

impl ProcessDraft {
    fn new() -> ProcessDraft {
        ProcessDraft {
            device: 0,
            list: List::Compute,
            pid: None,
            child_of_caller: false,
            caller: false,
            used: vec![0],
            gpu_instance_id: 0xFFFF_FFFF,
            compute_instance_id: 0xFFFF_FFFF,
            from_tick: 0,
            until_tick: u64::MAX,
            accounting_max: None,
            accounting_start_us: None,
            accounting_util: [0; 2],
        }
    }

    fn finish(self) -> Result<Process, String> {
        let pid = self.pid.ok_or_else(|| String::from("[process] without pid"))?;
        Ok(Process {
            device: self.device,
            list: self.list,
            pid,
            child_of_caller: self.child_of_caller,
            caller: self.caller,
            used: self.used,
            gpu_instance_id: self.gpu_instance_id,
            compute_instance_id: self.compute_instance_id,
            from_tick: self.from_tick,
            until_tick: self.until_tick,
            accounting_max: self.accounting_max,
            accounting_start_us: self.accounting_start_us,
            accounting_util: self.accounting_util,
        })
    }
}

pub fn parse_u64(v: &str) -> Result<u64, String> {
    let r = if let Some(hex) = v.strip_prefix("0x").or_else(|| v.strip_prefix("0X")) {
        u64::from_str_radix(hex, 16)
    } else {
        v.parse::<u64>()
    };
    r.map_err(|_| format!("not a number: {v:?}"))
}

pub fn parse_u32(v: &str) -> Result<u32, String> {
    let n = parse_u64(v)?;
    u32::try_from(n).map_err(|_| format!("out of range for u32: {v:?}"))
}

fn parse_i32(v: &str) -> Result<i32, String> {
    v.parse::<i32>().map_err(|_| format!("not an i32: {v:?}"))
}

/// `1,2,3` or `max` or `1,max`; never returns an empty vector.
pub fn parse_seq(v: &str) -> Result<Vec<u64>, String> {
    let mut out = Vec::new();
    for part in v.split(',') {
        let part = part.trim();
        if part.eq_ignore_ascii_case("max") {
            out.push(u64::MAX);
        } else {
            out.push(parse_u64(part)?);
        }
    }
    if out.is_empty() {
        return Err(String::from("empty sequence"));
    }
    Ok(out)
}

fn parse_hex_bytes(v: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = v.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if digits.len() % 2 != 0 {
        return Err(format!("odd number of hex digits: {v:?}"));
    }
    let mut out = Vec::with_capacity(digits.len() / 2);
    for pair in digits.chunks(2) {
        let s = std::str::from_utf8(pair).map_err(|_| format!("bad hex: {v:?}"))?;
        out.push(u8::from_str_radix(s, 16).map_err(|_| format!("bad hex: {v:?}"))?);
    }
    Ok(out)
}

/// `SymbolName:code`.
pub fn parse_error(v: &str) -> Result<(String, u32), String> {
    let (sym, code) = v
        .rsplit_once(':')
        .ok_or_else(|| format!("error must be Symbol:code, got {v:?}"))?;
    let sym = sym.trim();
    if sym.is_empty() {
        return Err(format!("error without a symbol name: {v:?}"));
    }
    Ok((String::from(sym), parse_u32(code.trim())?))
}

/// `DDDDDDDD:BB:DD.F` (NVML form), `DDDD:BB:DD.F` (sysfs form) or `BB:DD.F`.
pub fn parse_pci(v: &str) -> Result<Pci, String> {
    let bad = || format!("bad pci_bus_id: {v:?}");
    let parts: Vec<&str> = v.split(':').collect();
    let (domain, bus, rest) = match parts.as_slice() {
        [d, b, r] => (*d, *b, *r),
        [b, r] => ("0", *b, *r),
        _ => return Err(bad()),
    };
    let (dev, func) = rest.split_once('.').ok_or_else(bad)?;
    let hex = |s: &str| u32::from_str_radix(s, 16).map_err(|_| bad());
    let pci = Pci {
        domain: hex(domain)?,
        bus: hex(bus)?,
        device: hex(dev)?,
        function: hex(func)?,
    };
    if pci.bus > 0xff || pci.device > 0x1f || pci.function > 7 {
        return Err(bad());
    }
    Ok(pci)
}

/// Removes a trailing comment: `#` at the start or after whitespace.
fn strip_comment(line: &str) -> &str {
    let bytes = line.as_bytes();
    for (i, b) in bytes.iter().enumerate() {
        if *b == b'#' && (i == 0 || bytes.get(i - 1).is_some_and(|p| p.is_ascii_whitespace())) {
            return line.get(..i).unwrap_or("");
        }
    }
    line
}

fn global_key(cfg: &mut Config, key: &str, v: &str) -> Result<(), String> {
    match key {
        "init_error" => cfg.init_error = Some(parse_u32(v)?),
        "driver_version" => cfg.driver_version = Some(v.as_bytes().to_vec()),
        "nvml_version" => cfg.nvml_version = Some(v.as_bytes().to_vec()),
        "cuda_driver_version" => cfg.cuda_driver_version = Some(parse_i32(v)?),
        "process_stride" => {
            let s = parse_u32(v)?;
            if s != 24 && s != 32 {
                return Err(format!("process_stride must be 24 or 32, got {s}"));
            }
            cfg.process_stride = s;
        }
        "late_processes" => cfg.late_processes = parse_u32(v)?,
        "device_count" => cfg.device_count = Some(parse_u32(v)?),
        "error" => cfg.errors.push(parse_error(v)?),
        _ => return Err(format!("unknown global key {key:?}")),
    }
    Ok(())
}

fn zero_one(key: &str, v: &str) -> Result<u32, String> {
    match v {
        "0" => Ok(0),
        "1" => Ok(1),
        _ => Err(format!("{key} must be 0 or 1, got {v:?}")),
    }
}

fn device_key(d: &mut Device, key: &str, v: &str) -> Result<(), String> {
    match key {
        "name" => d.name = v.as_bytes().to_vec(),
        "name_hex" => d.name = parse_hex_bytes(v)?,
        "uuid" => d.uuid = v.as_bytes().to_vec(),
        "pci_bus_id" => d.pci = parse_pci(v)?,
        "pci_device_id" => d.pci_device_id = parse_u32(v)?,
        "pci_subsystem_id" => d.pci_subsystem_id = parse_u32(v)?,
        "memory_total" => d.memory_total = parse_u64(v)?,
        "memory_reserved" => d.memory_reserved = parse_u64(v)?,
        "memory_used" => d.memory_used = parse_seq(v)?,
        "utilization_gpu" => d.utilization_gpu = Some(parse_u32(v)?),
        "utilization_memory" => d.utilization_memory = Some(parse_u32(v)?),
        "temperature_c" => d.temperature_c = Some(parse_u32(v)?),
        "power_mw" => d.power_mw = Some(parse_u32(v)?),
        "energy_mj" => d.energy_mj = Some(parse_u64(v)?),
        "clock_graphics_mhz" => d.clocks[0] = Some(parse_u32(v)?),
        "clock_sm_mhz" => d.clocks[1] = Some(parse_u32(v)?),
        "clock_memory_mhz" => d.clocks[2] = Some(parse_u32(v)?),
        "max_clock_graphics_mhz" => d.max_clocks[0] = Some(parse_u32(v)?),
        "max_clock_sm_mhz" => d.max_clocks[1] = Some(parse_u32(v)?),
        "max_clock_memory_mhz" => d.max_clocks[2] = Some(parse_u32(v)?),
        "handle_error" => d.handle_error = Some(parse_u32(v)?),
        "accounting_mode" => {
            d.accounting_mode = match v {
                "0" => false,
                "1" => true,
                _ => return Err(format!("accounting_mode must be 0 or 1, got {v:?}")),
            }
        }
        "persistence_mode" => {
            d.persistence_mode = match v {
                "0" => Some(0),
                "1" => Some(1),
                "unsupported" => None,
                _ => return Err(format!("persistence_mode must be 0, 1 or unsupported, got {v:?}")),
            }
        }
        "error" => d.errors.push(parse_error(v)?),
        "mig_mode" if v == "unsupported" => d.mig_mode = None,
        "mig_mode" => d.mig_mode = Some(zero_one(key, v)?),
        "mig_pending" => d.mig_pending = Some(zero_one(key, v)?),
        "mig_max_devices" => d.mig_max_devices = parse_u32(v)?,
        "mig_profiles" => d.mig_profiles = crate::conf_mig::profile_table(v)?,
        "privileged" => d.privileged = zero_one(key, v)? == 1,
        "mps_supported" => d.mps_supported = zero_one(key, v)? == 1,
        "mig_record_ids" => d.mig_record_ids = zero_one(key, v)? == 1,
        "unified_memory" => d.unified_memory = zero_one(key, v)? == 1,
        _ => return Err(format!("unknown [device] key {key:?}")),
    }
    Ok(())
}

fn process_key(p: &mut ProcessDraft, key: &str, v: &str) -> Result<(), String> {
    match key {
        "device" => p.device = parse_u32(v)?,
        "list" => {
            p.list = match v {
                "compute" => List::Compute,
                "graphics" => List::Graphics,
                "mps" => List::Mps,
                _ => return Err(format!("list must be compute, graphics or mps, got {v:?}")),
            }
        }
        "pid" if v == "child_of_caller" => {
            p.pid = Some(0);
            p.child_of_caller = true;
        }
        "pid" if v == "caller" => {
            p.pid = Some(0);
            p.caller = true;
        }
        "pid" => p.pid = Some(parse_u32(v)?),
        "used" => p.used = parse_seq(v)?,
        "gpu_instance_id" => p.gpu_instance_id = parse_u32(v)?,
        "compute_instance_id" => p.compute_instance_id = parse_u32(v)?,
        "from_tick" => p.from_tick = parse_u64(v)?,
        "until_tick" => p.until_tick = parse_u64(v)?,
        "accounting_max" if v.eq_ignore_ascii_case("max") => p.accounting_max = Some(u64::MAX),
        "accounting_max" => p.accounting_max = Some(parse_u64(v)?),
        "accounting_start_us" => p.accounting_start_us = Some(parse_u64(v)?),
        "accounting_gpu_util" => p.accounting_util[0] = parse_u32(v)?,
        "accounting_mem_util" => p.accounting_util[1] = parse_u32(v)?,
        _ => return Err(format!("unknown [process] key {key:?}")),
    }
    Ok(())
}

/// Parses a whole scenario file.
pub fn parse(text: &str) -> Result<Config, String> {
    let mut cfg = Config {
        init_error: None,
        driver_version: None,
        nvml_version: None,
        cuda_driver_version: None,
        process_stride: 24,
        late_processes: 0,
        device_count: None,
        errors: Vec::new(),
        devices: Vec::new(),
        processes: Vec::new(),
        gpu_instances: Vec::new(),
        compute_instances: Vec::new(),
        samples: Vec::new(),
    };
    let mut section = Section::Global;
    let mut draft: Option<ProcessDraft> = None;
    for raw in text.lines() {
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if line.starts_with('[') {
            if let Some(p) = draft.take() {
                cfg.processes.push(p.finish()?);
            }
            section = match line {
                "[device]" => {
                    let index = cfg.devices.len();
                    cfg.devices.push(Device::new(index));
                    Section::Device
                }
                "[process]" => {
                    draft = Some(ProcessDraft::new());
                    Section::Process
                }
                "[gpu_instance]" => {
                    cfg.gpu_instances.push(GpuInstance::new());
                    Section::GpuInstance
                }
                "[compute_instance]" => {
                    cfg.compute_instances.push(ComputeInstance::new());
                    Section::ComputeInstance
                }
                "[sample]" => {
                    cfg.samples.push(Sample::new());
                    Section::Sample
                }
                _ => return Err(format!("unknown section {line:?}")),
            };
            continue;
        }
        let (key, value) = line
            .split_once('=')
            .ok_or_else(|| format!("expected key = value, got {line:?}"))?;
        let (key, value) = (key.trim(), value.trim());
        match section {
            Section::Global => global_key(&mut cfg, key, value)?,
            Section::Device => match cfg.devices.last_mut() {
                Some(d) => device_key(d, key, value)?,
                None => return Err(String::from("internal: no current device")),
            },
            Section::Process => match draft.as_mut() {
                Some(p) => process_key(p, key, value)?,
                None => return Err(String::from("internal: no current process")),
            },
            Section::GpuInstance => match cfg.gpu_instances.last_mut() {
                Some(g) => gpu_instance_key(g, key, value)?,
                None => return Err(String::from("internal: no current GPU instance")),
            },
            Section::ComputeInstance => match cfg.compute_instances.last_mut() {
                Some(c) => compute_instance_key(c, key, value)?,
                None => return Err(String::from("internal: no current compute instance")),
            },
            Section::Sample => match cfg.samples.last_mut() {
                Some(s) => sample_key(s, key, value)?,
                None => return Err(String::from("internal: no current sample")),
            },
        }
    }
    if let Some(p) = draft.take() {
        cfg.processes.push(p.finish()?);
    }
    assign_slots(&mut cfg.compute_instances)?;
    Ok(cfg)
}
