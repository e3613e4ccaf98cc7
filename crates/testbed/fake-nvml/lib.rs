//! A fake `libnvidia-ml.so.1` for tests that run without a GPU.
//!
//! Built by `crates/testbed/build.rs` with plain `rustc` (no Cargo, no crates) in four
//! variants: the default "modern" one (an R535+ driver); with `--cfg legacy_driver`, a
//! pre-R510 driver that lacks `nvmlDeviceGetMemoryInfo_v2`, the `_v3` process-list functions
//! and `nvmlDeviceGetPciInfo_v3`; adding `--cfg no_mps --cfg no_profile_v`, an R450/R460-like
//! driver without the MPS process lists and `nvmlDeviceGetGpuInstanceProfileInfoV`; adding
//! `--cfg no_mig`, a pre-MIG (R440-like) driver without any MIG symbol.
//!
//! Handles are opaque numbers, never pointers: a GPU is `index + 1`, a MIG device
//! `0x0100_0000 | parent << 8 | slot`, a GPU instance `0x0200_0000 | parent << 8 | id`, an
//! event set `0x0300_0000 | n`. A MIG handle counts every call made with it
//! (`gone_after_calls`).
//!
//! The scenario — its model, every key of `fake-nvml.conf` and their spelling — is one
//! definition shared with the test bed that writes it: `crates/testbed/src/nvml_conf/`,
//! included here by path.
//!
//! The library finds its scenario without environment variables: it asks the dynamic
//! loader (`dladdr`) for the path of its own file and reads `fake-nvml.conf` from the same
//! directory when `nvmlInit*` is first called. Every test installs its own copy of the
//! library into its own directory, so copies loaded at the same time in one process each
//! have their own state.
//!
//! A hung driver: while a file `fake-nvml.hang` exists beside the library, every device and
//! state call blocks (checking every 20 ms), as a driver stuck in the kernel would.
//!
//! Rules: never panic (the library is built with `panic=abort`), never print, never read
//! or write outside the buffers the caller described.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]
#![allow(non_snake_case, non_camel_case_types)]
// The older variants leave the MIG parts of the scenario unread.
#![cfg_attr(any(no_mig, no_profile_v), allow(dead_code))]
// Exported functions are `unsafe extern "C"`; their contract is NVML's documentation.
#![allow(clippy::missing_safety_doc)]

mod accounting;
mod handles;
mod health;
mod memory;
#[cfg(not(no_mig))]
mod mig;
mod processes;
mod telemetry;
mod utilization;
// The test bed's builders of the shared model are not here, so parts of it go unused.
#[allow(dead_code)]
#[path = "../src/nvml_conf/mod.rs"]
mod nvml_conf;

use std::collections::BTreeMap;
#[cfg(unix)]
use std::ffi::CStr;
use std::ffi::{c_char, c_int, c_uint, c_ulonglong, c_void};
#[cfg(unix)]
use std::os::unix::ffi::OsStrExt;
use std::path::PathBuf;
use std::ptr;
use std::sync::{Mutex, MutexGuard};

#[cfg(not(no_mig))]
use handles::mig_handle;
use handles::{with_device, with_handle, MigSlot};
use nvml_conf::model::{
    FakeComputeInstance, FakeGpuInstance, FakeNvml, FakeProcess, ProcessListKind as List,
};
use nvml_conf::profiles::{profile_table, MigProfile};

type nvmlReturn_t = c_uint;
type nvmlDevice_t = *mut c_void;

const SUCCESS: nvmlReturn_t = 0;
const UNINITIALIZED: nvmlReturn_t = 1;
const INVALID_ARGUMENT: nvmlReturn_t = 2;
const NOT_SUPPORTED: nvmlReturn_t = 3;
const NO_PERMISSION: nvmlReturn_t = 4;
const NOT_FOUND: nvmlReturn_t = 6;
const INSUFFICIENT_SIZE: nvmlReturn_t = 7;
#[cfg(not(legacy_driver))]
const ARGUMENT_VERSION_MISMATCH: nvmlReturn_t = 25;
const UNKNOWN: nvmlReturn_t = 999;

/// `NVML_STRUCT_VERSION(Memory, 2)`: `sizeof(nvmlMemory_v2_t) | (2 << 24)`.
#[cfg(not(legacy_driver))]
const MEMORY_V2_VERSION: u32 = 0x0200_0028;

/// Tag of a MIG device handle (bits 24..32).
const MIG_TAG: usize = 0x0100_0000;
/// Tag of a GPU-instance handle.
#[cfg(not(no_mig))]
const GI_TAG: usize = 0x0200_0000;

/// What a device handle names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// A physical GPU (configured device index).
    Physical(usize),
    /// A MIG device: its parent's index and the compute instance's index in the config.
    Mig { parent: usize, ci: usize },
}

/// Per (handle, list) counters for the process-list functions.
#[derive(Clone, Copy, Default)]
struct ListState {
    /// Number of process-list calls on this (device, list) that returned SUCCESS.
    tick: u64,
    /// Whether the first call (the one `late_processes` affects) has happened.
    called: bool,
}

struct State {
    cfg: FakeNvml,
    /// The compute instances (MIG devices) in scenario order, with their slots.
    slots: Vec<MigSlot>,
    /// Reference count of successful `nvmlInit*` calls not yet matched by `nvmlShutdown`.
    refs: u32,
    /// Per device: number of successful memory-info calls (v1 and v2 share it).
    mem_calls: Vec<u64>,
    /// Per GPU instance: number of memory-info calls answered with its figures.
    gi_mem_calls: Vec<u64>,
    /// Per handle (its raw value): [compute, graphics, MPS].
    lists: BTreeMap<usize, [ListState; 3]>,
    /// Per compute instance: calls made with its MIG handle.
    ci_calls: Vec<u64>,
    /// Per compute instance: lookups of its slot (`nvmlDeviceGetMigDeviceHandleByIndex`).
    ci_fetches: Vec<u64>,
    /// Per device: answered `nvmlDeviceGetProcessUtilization` rounds.
    util_rounds: Vec<u64>,
    /// Per configured process: the pid it was listed under (resolved for `child_of_caller`)
    /// and when it was first listed (µs since the epoch), for its accounting record.
    listed: Vec<Option<(u32, u64)>>,
    /// Per device: `nvmlDeviceGetTotalEccErrors` calls per counter.
    ecc_calls: Vec<[u64; 4]>,
    /// Event sets, by handle number.
    event_sets: Vec<health::EventSet>,
}

static STATE: Mutex<Option<State>> = Mutex::new(None);

fn lock() -> MutexGuard<'static, Option<State>> {
    match STATE.lock() {
        Ok(g) => g,
        Err(poisoned) => poisoned.into_inner(),
    }
}

fn find_error(errors: &[(String, u32)], sym: &str) -> Option<u32> {
    errors.iter().find(|(s, _)| s == sym).map(|(_, c)| *c)
}

#[cfg(unix)]
#[repr(C)]
struct DlInfo {
    dli_fname: *const c_char,
    dli_fbase: *mut c_void,
    dli_sname: *const c_char,
    dli_saddr: *mut c_void,
}

#[cfg(unix)]
extern "C" {
    fn dladdr(addr: *const c_void, info: *mut DlInfo) -> c_int;
}

#[cfg(windows)]
#[link(name = "kernel32")]
extern "system" {
    fn GetModuleHandleExW(flags: u32, addr: *const u16, module: *mut *mut c_void) -> i32;
    fn GetModuleFileNameW(module: *mut c_void, name: *mut u16, size: u32) -> u32;
}

/// The path of `fake-nvml.conf` next to this very DLL (Windows).
#[cfg(windows)]
fn config_path() -> Option<PathBuf> {
    // GET_MODULE_HANDLE_EX_FLAG_FROM_ADDRESS | GET_MODULE_HANDLE_EX_FLAG_UNCHANGED_REFCOUNT
    const FLAGS: u32 = 0x4 | 0x2;
    let mut module: *mut c_void = ptr::null_mut();
    let addr = nvmlInit_v2 as *const u16;
    // SAFETY: `addr` is an address inside this DLL and `module` a writable pointer; with
    // UNCHANGED_REFCOUNT no reference is taken that would need releasing.
    if unsafe { GetModuleHandleExW(FLAGS, addr, &mut module) } == 0 {
        return None;
    }
    let mut buf = [0u16; 1024];
    // SAFETY: `buf` is writable for `buf.len()` UTF-16 units; the call writes at most that.
    let n = unsafe { GetModuleFileNameW(module, buf.as_mut_ptr(), buf.len() as u32) } as usize;
    let name = String::from_utf16_lossy(buf.get(..n)?);
    Some(PathBuf::from(name).parent()?.join("fake-nvml.conf"))
}

/// The path of `fake-nvml.conf` next to this very library file.
#[cfg(unix)]
fn config_path() -> Option<PathBuf> {
    let mut info = DlInfo {
        dli_fname: ptr::null(),
        dli_fbase: ptr::null_mut(),
        dli_sname: ptr::null(),
        dli_saddr: ptr::null_mut(),
    };
    let addr = nvmlInit_v2 as *const c_void;
    // SAFETY: `addr` is the address of a function in this object and `info` is a valid,
    // writable `Dl_info`; `dladdr` only writes into it.
    let rc = unsafe { dladdr(addr, &mut info) };
    if rc == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: on success `dli_fname` points to the NUL-terminated path name the loader keeps
    // for this object; it lives as long as the object is loaded, and we copy it right away.
    let fname = unsafe { CStr::from_ptr(info.dli_fname) };
    let lib = PathBuf::from(std::ffi::OsStr::from_bytes(fname.to_bytes()));
    let dir = lib.parent()?.to_path_buf();
    Some(dir.join("fake-nvml.conf"))
}

/// Blocks while `fake-nvml.hang` exists beside the library (a hung driver call).
///
/// The flag's path is found once per load (`dladdr` and a path allocation on every call made
/// each fake call cost ~3 µs, which swamped what the benches measure); its existence is still
/// checked on every call, so a test can raise and lower it at any time.
fn hang_while_flagged() {
    static FLAG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(flag) = FLAG.get_or_init(|| config_path().map(|p| p.with_file_name("fake-nvml.hang")))
    else {
        return;
    };
    while flag.exists() {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

/// Appends `sym` to `fake-nvml.calls` beside the library (a scenario with `log_calls`).
pub(crate) fn log_call(sym: &str) {
    use std::io::Write as _;
    static LOG: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    let Some(path) = LOG.get_or_init(|| config_path().map(|p| p.with_file_name("fake-nvml.calls")))
    else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new().create(true).append(true).open(path) {
        let _ = writeln!(f, "{sym}");
    }
}

fn load_config() -> Option<FakeNvml> {
    let path = config_path()?;
    let bytes = std::fs::read(path).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    FakeNvml::from_conf(&text).ok()
}

fn init(sym: &str) -> nvmlReturn_t {
    let mut g = lock();
    if let Some(st) = g.as_mut() {
        if let Some(code) = find_error(&st.cfg.errors, sym) {
            return code;
        }
        st.refs = st.refs.saturating_add(1);
        return SUCCESS;
    }
    let Some((cfg, slots)) = load_config().and_then(|c| {
        let slots = handles::mig_slots(&c).ok()?;
        Some((c, slots))
    }) else {
        return UNKNOWN;
    };
    if let Some(code) = cfg.init_error {
        return code;
    }
    if let Some(code) = find_error(&cfg.errors, sym) {
        return code;
    }
    let n = cfg.devices.len();
    let listed = vec![None; cfg.processes.len()];
    let (gis, cis) = (cfg.gpu_instances.len(), slots.len());
    *g = Some(State {
        cfg,
        slots,
        refs: 1,
        mem_calls: vec![0; n],
        gi_mem_calls: vec![0; gis],
        lists: BTreeMap::new(),
        listed,
        ci_calls: vec![0; cis],
        ci_fetches: vec![0; cis],
        util_rounds: vec![0; n],
        ecc_calls: vec![[0; 4]; n],
        event_sets: Vec::new(),
    });
    SUCCESS
}

/// Runs `f` on the initialised state, after applying injected global errors for `sym`.
fn with_state(sym: &str, f: impl FnOnce(&mut State) -> nvmlReturn_t) -> nvmlReturn_t {
    hang_while_flagged();
    let mut g = lock();
    let Some(st) = g.as_mut() else {
        return UNINITIALIZED;
    };
    if st.cfg.log_calls {
        log_call(sym);
    }
    if let Some(code) = find_error(&st.cfg.errors, sym) {
        return code;
    }
    f(st)
}

/// Copies `s` plus a NUL into `buf` of `len` bytes.
///
/// # Safety
/// `buf` must be null or valid for writes of `len` bytes.
unsafe fn write_cstr(buf: *mut c_char, len: c_uint, s: &[u8]) -> nvmlReturn_t {
    if buf.is_null() {
        return INVALID_ARGUMENT;
    }
    let needed = s.len().saturating_add(1);
    if needed > len as usize {
        return INSUFFICIENT_SIZE;
    }
    // SAFETY: the caller guarantees `buf` is valid for `len` bytes and we checked that
    // `s.len() + 1 <= len`; `s` is a separate Rust allocation, so they do not overlap.
    unsafe {
        ptr::copy_nonoverlapping(s.as_ptr(), buf.cast::<u8>(), s.len());
        buf.cast::<u8>().add(s.len()).write(0);
    }
    SUCCESS
}

/// Writes `value` at `base + offset` without alignment requirements.
///
/// # Safety
/// `base + offset .. + size_of::<T>()` must be valid for writes.
unsafe fn put<T>(base: *mut c_void, offset: usize, value: T) {
    // SAFETY: guaranteed by the caller.
    unsafe { base.cast::<u8>().add(offset).cast::<T>().write_unaligned(value) }
}

/// Writes a value through an out-pointer, or returns INVALID_ARGUMENT for null.
///
/// # Safety
/// `out` must be null or valid for a (possibly unaligned) write of a `T`.
unsafe fn out<T>(out: *mut T, value: T) -> nvmlReturn_t {
    if out.is_null() {
        return INVALID_ARGUMENT;
    }
    // SAFETY: non-null and valid per the caller's contract.
    unsafe { out.write_unaligned(value) };
    SUCCESS
}

// ---------------------------------------------------------------------------------------
// Initialisation and errors
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn nvmlInit_v2() -> nvmlReturn_t {
    init("nvmlInit_v2")
}

#[no_mangle]
pub unsafe extern "C" fn nvmlInitWithFlags(_flags: c_uint) -> nvmlReturn_t {
    init("nvmlInitWithFlags")
}

#[no_mangle]
pub unsafe extern "C" fn nvmlShutdown() -> nvmlReturn_t {
    let mut g = lock();
    let Some(st) = g.as_mut() else {
        return UNINITIALIZED;
    };
    if let Some(code) = find_error(&st.cfg.errors, "nvmlShutdown") {
        return code;
    }
    st.refs = st.refs.saturating_sub(1);
    if st.refs == 0 {
        *g = None;
    }
    SUCCESS
}

#[no_mangle]
pub unsafe extern "C" fn nvmlErrorString(result: nvmlReturn_t) -> *const c_char {
    let s: &'static [u8] = match result {
        0 => b"Success\0",
        1 => b"Uninitialized\0",
        2 => b"Invalid Argument\0",
        3 => b"Not Supported\0",
        4 => b"Insufficient Permissions\0",
        5 => b"Already Initialized\0",
        6 => b"Not Found\0",
        7 => b"Insufficient Size\0",
        8 => b"Insufficient External Power\0",
        9 => b"Driver Not Loaded\0",
        10 => b"Timeout\0",
        11 => b"Interrupt Request Issue\0",
        12 => b"NVML Shared Library Not Found\0",
        13 => b"Function Not Found\0",
        14 => b"Corrupted infoROM\0",
        15 => b"GPU is lost\0",
        16 => b"GPU requires restart\0",
        17 => b"GPU access blocked by the operating system\0",
        18 => b"RM has detected an NVML/RM version mismatch\0",
        19 => b"In use by another client\0",
        20 => b"Insufficient Memory\0",
        21 => b"No data\0",
        22 => b"vGPU ECC Not Supported\0",
        23 => b"Insufficient resources\0",
        24 => b"Frequency not supported\0",
        25 => b"Argument version mismatch\0",
        26 => b"Deprecated\0",
        27 => b"Not Ready\0",
        28 => b"GPU not found\0",
        29 => b"Invalid state\0",
        _ => b"Unknown Error\0",
    };
    s.as_ptr().cast::<c_char>()
}

// ---------------------------------------------------------------------------------------
// System queries
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetDriverVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_state("nvmlSystemGetDriverVersion", |st| match &st.cfg.driver_version {
        // SAFETY: NVML contract: `version` is valid for `length` bytes (or null).
        Some(v) => unsafe { write_cstr(version, length, v.as_bytes()) },
        None => NOT_SUPPORTED,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetNVMLVersion(
    version: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    // Answers before (or without) a successful init, as the real library does: nvidia-smi
    // prints the library version after "Driver/library version mismatch".
    if lock().is_none() {
        return match load_config().and_then(|c| c.nvml_version) {
            // SAFETY: NVML contract: `version` is valid for `length` bytes (or null).
            Some(v) => unsafe { write_cstr(version, length, v.as_bytes()) },
            None => NOT_SUPPORTED,
        };
    }
    with_state("nvmlSystemGetNVMLVersion", |st| match &st.cfg.nvml_version {
        // SAFETY: NVML contract: `version` is valid for `length` bytes (or null).
        Some(v) => unsafe { write_cstr(version, length, v.as_bytes()) },
        None => NOT_SUPPORTED,
    })
}

fn cuda_version(sym: &str, version: *mut c_int) -> nvmlReturn_t {
    with_state(sym, |st| match st.cfg.cuda_driver_version {
        // SAFETY: NVML contract: `version` is null or points to a writable int.
        Some(v) => unsafe { out(version, v) },
        None => NOT_SUPPORTED,
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion(version: *mut c_int) -> nvmlReturn_t {
    cuda_version("nvmlSystemGetCudaDriverVersion", version)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlSystemGetCudaDriverVersion_v2(version: *mut c_int) -> nvmlReturn_t {
    cuda_version("nvmlSystemGetCudaDriverVersion_v2", version)
}

// ---------------------------------------------------------------------------------------
// Devices
// ---------------------------------------------------------------------------------------

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetCount_v2(device_count: *mut c_uint) -> nvmlReturn_t {
    with_state("nvmlDeviceGetCount_v2", |st| {
        let n = match st.cfg.device_count {
            Some(n) => n,
            None => u32::try_from(st.cfg.devices.len()).unwrap_or(u32::MAX),
        };
        // SAFETY: NVML contract: `device_count` is null or points to a writable uint.
        unsafe { out(device_count, n) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetHandleByIndex_v2(
    index: c_uint,
    device: *mut nvmlDevice_t,
) -> nvmlReturn_t {
    let sym = "nvmlDeviceGetHandleByIndex_v2";
    with_state(sym, |st| {
        if device.is_null() {
            return INVALID_ARGUMENT;
        }
        let count = match st.cfg.device_count {
            Some(n) => n as usize,
            None => st.cfg.devices.len(),
        };
        let idx = index as usize;
        if idx >= count {
            return INVALID_ARGUMENT;
        }
        let Some(d) = st.cfg.devices.get(idx) else {
            // `device_count` claims more devices than the scenario configures.
            return INVALID_ARGUMENT;
        };
        if let Some(code) = d.handle_error.or_else(|| find_error(&d.errors, sym)) {
            return code;
        }
        let handle = idx.wrapping_add(1) as nvmlDevice_t;
        // SAFETY: `device` is non-null and, per NVML, points to a writable handle.
        unsafe { out(device, handle) }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetName(
    device: nvmlDevice_t,
    name: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetName", device, |st, t| {
        let text = match t {
            Target::Physical(i) => st.cfg.devices.get(i).map(|d| d.name_for_nvml()),
            Target::Mig { parent, ci } => {
                match (st.cfg.devices.get(parent), st.ci(ci)) {
                    (Some(d), Some((_, c))) => {
                        let mut n = d.name_for_nvml();
                        n.extend_from_slice(b" MIG ");
                        n.extend_from_slice(c.name.as_bytes());
                        Some(n)
                    }
                    _ => None,
                }
            }
        };
        match text {
            // SAFETY: NVML contract: `name` is valid for `length` bytes (or null).
            Some(n) => unsafe { write_cstr(name, length, &n) },
            None => INVALID_ARGUMENT,
        }
    })
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetUUID(
    device: nvmlDevice_t,
    uuid: *mut c_char,
    length: c_uint,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetUUID", device, |st, t| {
        let text = match t {
            Target::Physical(i) => st.cfg.devices.get(i).map(|d| d.uuid.as_bytes().to_vec()),
            Target::Mig { ci, .. } => st.ci(ci).map(|(_, c)| c.uuid.as_bytes().to_vec()),
        };
        match text {
            // SAFETY: NVML contract: `uuid` is valid for `length` bytes (or null).
            Some(u) => unsafe { write_cstr(uuid, length, &u) },
            None => INVALID_ARGUMENT,
        }
    })
}

/// Fills a fixed-size, NUL-terminated C string field (truncating if needed).
fn fixed_cstr<const N: usize>(s: &str) -> [u8; N] {
    let mut buf = [0u8; N];
    let n = s.len().min(N.saturating_sub(1));
    if let (Some(dst), Some(src)) = (buf.get_mut(..n), s.as_bytes().get(..n)) {
        dst.copy_from_slice(src);
    }
    buf
}

/// `nvmlPciInfo_t`: 68 bytes.
fn pci_info(sym: &str, device: nvmlDevice_t, pci: *mut c_void) -> nvmlReturn_t {
    with_device(sym, device, |st, i| {
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if pci.is_null() {
            return INVALID_ARGUMENT;
        }
        let p = nvml_conf::text::parse_pci(&d.pci_bus_id).unwrap_or_default();
        let legacy: [u8; 16] = fixed_cstr(&format!(
            "{:04X}:{:02X}:{:02X}.{:X}",
            p.domain, p.bus, p.device, p.function
        ));
        let bus_id: [u8; 32] = fixed_cstr(&format!(
            "{:08X}:{:02X}:{:02X}.{:X}",
            p.domain, p.bus, p.device, p.function
        ));
        let device_id = (d.pci_device_id << 16) | 0x10DE;
        // SAFETY: NVML contract: `pci` points to a writable 68-byte nvmlPciInfo_t; every
        // write below stays within those 68 bytes.
        unsafe {
            put(pci, 0, legacy);
            put(pci, 16, p.domain);
            put(pci, 20, p.bus);
            put(pci, 24, p.device);
            put(pci, 28, device_id);
            put(pci, 32, d.pci_subsystem_id);
            put(pci, 36, bus_id);
        }
        SUCCESS
    })
}

#[cfg(not(legacy_driver))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v3(
    device: nvmlDevice_t,
    pci: *mut c_void,
) -> nvmlReturn_t {
    pci_info("nvmlDeviceGetPciInfo_v3", device, pci)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo_v2(
    device: nvmlDevice_t,
    pci: *mut c_void,
) -> nvmlReturn_t {
    pci_info("nvmlDeviceGetPciInfo_v2", device, pci)
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetPciInfo(
    device: nvmlDevice_t,
    pci: *mut c_void,
) -> nvmlReturn_t {
    pci_info("nvmlDeviceGetPciInfo", device, pci)
}

