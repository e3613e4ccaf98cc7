//! Process-list symbols of the fake NVML: the sizing/fill protocol, the three record layouts,
//! ticks and the `late_processes` growth race, for the compute, graphics and MPS lists of GPUs
//! and MIG devices. A MIG device lists the processes of its (GI, CI) and no graphics list; a
//! GPU in MIG mode lists every instance's processes to a privileged caller only.

use super::*;

// ---------------------------------------------------------------------------------------
// Running processes
// ---------------------------------------------------------------------------------------

/// Layout of the entries a process-list function writes.
#[derive(Clone, Copy)]
enum Layout {
    /// `nvmlProcessInfo_v1_t`: 16 bytes.
    V1,
    /// `nvmlProcessInfo_v2_t`: 24 bytes.
    V2,
    /// `_v3` functions: the scenario's `process_stride` (24, or 32 with
    /// `usedGpuCcProtectedMemory`).
    #[cfg_attr(legacy_driver, allow(dead_code))]
    V3,
}

struct Entry {
    pid: u32,
    used: u64,
    gpu_instance_id: u32,
    compute_instance_id: u32,
}

fn process_list(
    sym: &str,
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
    list: List,
    layout: Layout,
) -> nvmlReturn_t {
    with_handle(sym, device, |st, t| {
        if info_count.is_null() {
            return INVALID_ARGUMENT;
        }
        let (i, instance) = match t {
            Target::Physical(i) => (i, None),
            Target::Mig { parent, ci } => {
                let Some((g, c)) = st.ci(ci) else {
                    return INVALID_ARGUMENT;
                };
                (parent, Some((g.id, c.id)))
            }
        };
        let Some(d) = st.cfg.devices.get(i) else {
            return INVALID_ARGUMENT;
        };
        if list == List::Mps && !d.extras.mps_supported {
            return NOT_SUPPORTED;
        }
        if instance.is_some() && list == List::Graphics {
            return NOT_SUPPORTED;
        }
        if instance.is_none() && st.mig_on(i) && !d.extras.privileged {
            return NO_PERMISSION;
        }
        let record_ids = d.extras.mig_record_ids;
        // SAFETY: non-null; NVML contract: points to a readable and writable uint.
        let capacity = unsafe { info_count.read_unaligned() };
        let stride: usize = match layout {
            Layout::V1 => 16,
            Layout::V2 => 24,
            Layout::V3 => st.cfg.process_stride as usize,
        };
        let late = st.cfg.late_processes as usize;
        let key = device as usize;
        let ls = &mut st.lists.entry(key).or_default()[list.index()];
        let tick = ls.tick;
        let first = !ls.called;
        ls.called = true;

        let configured: Vec<(usize, &FakeProcess)> = st
            .cfg
            .processes
            .iter()
            .enumerate()
            .filter(|(_, p)| p.device as usize == i && p.list == list)
            .filter(|(_, p)| {
                instance.is_none_or(|(gi, ci)| {
                    p.gpu_instance_id.unwrap_or(u32::MAX) == gi
                        && p.compute_instance_id.unwrap_or(u32::MAX) == ci
                })
            })
            .collect();
        let shown = if first {
            configured.len().saturating_sub(late)
        } else {
            configured.len()
        };
        let at = usize::try_from(tick).unwrap_or(usize::MAX);
        let listed: Vec<(usize, u32)> = configured
            .iter()
            .take(shown)
            .filter(|(_, p)| {
                p.from_tick.unwrap_or(0) <= tick && tick < p.until_tick.unwrap_or(u64::MAX)
            })
            .filter_map(|(k, p)| {
                let pid = if p.child_of_caller {
                    child_of_caller()?
                } else if p.caller {
                    std::process::id()
                } else {
                    p.pid
                };
                Some((*k, pid))
            })
            .collect();
        let hide_ids = instance.is_some() && !record_ids;
        let entries: Vec<Entry> = listed
            .iter()
            .filter_map(|(k, pid)| Some((st.cfg.processes.get(*k)?, *pid)))
            .map(|(p, pid)| Entry {
                pid,
                used: p.used.get(at).or_else(|| p.used.last()).map_or(0, |u| u.raw()),
                gpu_instance_id: match hide_ids {
                    true => u32::MAX,
                    false => p.gpu_instance_id.unwrap_or(u32::MAX),
                },
                compute_instance_id: match hide_ids {
                    true => u32::MAX,
                    false => p.compute_instance_id.unwrap_or(u32::MAX),
                },
            })
            .collect();
        let n = u32::try_from(entries.len()).unwrap_or(u32::MAX);

        if capacity < n {
            // SAFETY: checked non-null above.
            unsafe { info_count.write_unaligned(n) };
            return INSUFFICIENT_SIZE;
        }
        if n > 0 && infos.is_null() {
            return INVALID_ARGUMENT;
        }
        for (k, e) in entries.iter().enumerate() {
            let base = k.saturating_mul(stride);
            // SAFETY: NVML contract: `infos` holds `capacity` entries of `stride` bytes and
            // `k < n <= capacity`; every write is inside entry `k`.
            unsafe {
                put(infos, base, e.pid);
                put(infos, base + 4, 0u32);
                put(infos, base + 8, e.used);
                if !matches!(layout, Layout::V1) {
                    put(infos, base + 16, e.gpu_instance_id);
                    put(infos, base + 20, e.compute_instance_id);
                }
                if stride >= 32 {
                    put(infos, base + 24, 0u64);
                }
            }
        }
        // SAFETY: checked non-null above.
        unsafe { info_count.write_unaligned(n) };
        let now = accounting::now_us();
        for (k, pid) in listed {
            if let Some(slot) = st.listed.get_mut(k) {
                // The first listing fixes the record's start time; a re-resolved pid replaces it.
                match slot {
                    Some((p, _)) if *p == pid => {}
                    _ => *slot = Some((pid, now)),
                }
            }
        }
        if let Some(ls) = st.lists.get_mut(&key) {
            ls[list.index()].tick = ls[list.index()].tick.saturating_add(1);
        }
        SUCCESS
    })
}

#[cfg(not(legacy_driver))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetComputeRunningProcesses_v3",
        device,
        info_count,
        infos,
        List::Compute,
        Layout::V3,
    )
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses_v2(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetComputeRunningProcesses_v2",
        device,
        info_count,
        infos,
        List::Compute,
        Layout::V2,
    )
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetComputeRunningProcesses(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetComputeRunningProcesses",
        device,
        info_count,
        infos,
        List::Compute,
        Layout::V1,
    )
}

#[cfg(not(legacy_driver))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetGraphicsRunningProcesses_v3",
        device,
        info_count,
        infos,
        List::Graphics,
        Layout::V3,
    )
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses_v2(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetGraphicsRunningProcesses_v2",
        device,
        info_count,
        infos,
        List::Graphics,
        Layout::V2,
    )
}

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetGraphicsRunningProcesses(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetGraphicsRunningProcesses",
        device,
        info_count,
        infos,
        List::Graphics,
        Layout::V1,
    )
}

#[cfg(not(any(legacy_driver, no_mps)))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v3(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetMPSComputeRunningProcesses_v3",
        device,
        info_count,
        infos,
        List::Mps,
        Layout::V3,
    )
}

#[cfg(not(no_mps))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses_v2(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetMPSComputeRunningProcesses_v2",
        device,
        info_count,
        infos,
        List::Mps,
        Layout::V2,
    )
}

#[cfg(not(no_mps))]
#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetMPSComputeRunningProcesses(
    device: nvmlDevice_t,
    info_count: *mut c_uint,
    infos: *mut c_void,
) -> nvmlReturn_t {
    process_list(
        "nvmlDeviceGetMPSComputeRunningProcesses",
        device,
        info_count,
        infos,
        List::Mps,
        Layout::V1,
    )
}

/// The command of the `hmn run` that loaded this library: its first child (the first
/// `/proc/<pid>/stat` whose parent it is) and, while that child is `hmn` itself (or its guard,
/// `hmn-guard`) and has a child in turn, that one — through `hmn run`'s guard, and the command's
/// `hmn __exec` step before it executes the command (the same pid).
pub(crate) fn child_of_caller() -> Option<u32> {
    let mut pid = first_child(std::process::id())?;
    while matches!(comm(pid).as_deref(), Some("hmn" | "hmn-guard")) {
        match first_child(pid) {
            Some(c) => pid = c,
            None => break,
        }
    }
    Some(pid)
}

/// The fields of `/proc/<pid>/stat` after `comm`, and `comm`.
fn stat(pid: u32) -> Option<(String, String)> {
    let t = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let (open, close) = (t.find('(')?, t.rfind(')')?);
    Some((t.get(open + 1..close)?.to_string(), t.get(close + 1..)?.to_string()))
}

fn comm(pid: u32) -> Option<String> {
    stat(pid).map(|(c, _)| c)
}

/// The lowest pid whose parent is `parent`.
fn first_child(parent: u32) -> Option<u32> {
    let dir = std::fs::read_dir("/proc").ok()?;
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            stat(*pid).and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
                == Some(parent)
        })
        .min()
}
