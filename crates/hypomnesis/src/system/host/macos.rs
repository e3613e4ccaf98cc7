//! Host and process memory on macOS (FFI, compile-checked from Linux): the machine's RAM from
//! `sysctl hw.memsize` and `host_statistics64(HOST_VM_INFO64)`, any process's footprint and
//! lifetime peak from `proc_pid_rusage(RUSAGE_INFO_V4)`, and this process's footprint (the
//! own-RSS fast path).
//!
//! Figures, mapped onto [`super::ProcessMemory`]:
//! - `rss_bytes` = `ri_phys_footprint`: the physical footprint Activity Monitor's "Memory"
//!   column shows (the kernel ledger upstream reads with `task_info(TASK_VM_INFO)` for the
//!   caller; the same ledger, read here through `proc_pid_rusage` for any pid), not `ri_resident_size`;
//! - `peak_rss_bytes` = `ri_lifetime_max_phys_footprint` (V4 onward);
//! - swap and PSS do not exist per process on macOS (`None`, with `Unsupported`).
//!
//! A pid the sandbox refuses (`EPERM`) is [`Error::PermissionDenied`] — on macOS the sandbox,
//! not the owner, decides (upstream's field check); `ESRCH` is [`Error::NotFound`].

use std::path::PathBuf;

use super::memory::{HostMemory, MemoryDetail, ProcessMemory};
use crate::types::error::Error;
use crate::types::{Field, Unknown, UnknownReason};

/// `proc_pid_rusage(pid, RUSAGE_INFO_V4)`.
pub(crate) fn rusage_v4(pid: u32) -> Result<libc::rusage_info_v4, Error> {
    let what = || PathBuf::from(format!("proc_pid_rusage(pid {pid})"));
    let Ok(ipid) = i32::try_from(pid) else {
        return Err(Error::NotFound { path: what() });
    };
    // SAFETY: all-zero is a valid rusage_info_v4 (plain integers and arrays of them).
    let mut info: libc::rusage_info_v4 = unsafe { std::mem::zeroed() };
    // SAFETY: `info` is a live rusage_info_v4, the struct the V4 flavor writes.
    let rc = unsafe {
        libc::proc_pid_rusage(
            ipid,
            libc::RUSAGE_INFO_V4,
            (&raw mut info).cast::<libc::rusage_info_t>(),
        )
    };
    if rc != 0 {
        let err = std::io::Error::last_os_error();
        return Err(match err.raw_os_error() {
            Some(libc::EPERM) => Error::PermissionDenied { path: what() },
            Some(libc::ESRCH) => Error::NotFound { path: what() },
            _ => Error::from_io(what(), err),
        });
    }
    Ok(info)
}

/// `sysctlbyname(name)` as a `u64`.
pub(crate) fn sysctl_u64(name: &std::ffi::CStr) -> Result<u64, Error> {
    let mut value: u64 = 0;
    let mut len = std::mem::size_of::<u64>();
    // SAFETY: `value` is a live u64 and `len` states its size; no new value is written.
    let rc = unsafe {
        libc::sysctlbyname(
            name.as_ptr(),
            (&raw mut value).cast::<libc::c_void>(),
            &raw mut len,
            std::ptr::null_mut(),
            0,
        )
    };
    if rc != 0 {
        return Err(Error::from_io(
            format!("sysctlbyname({})", name.to_string_lossy()),
            std::io::Error::last_os_error(),
        ));
    }
    Ok(value)
}

/// The machine's RAM: total from `hw.memsize`; free = free + speculative pages, available =
/// free + inactive + purgeable (pages the kernel hands out without compressing or swapping),
/// from `host_statistics64`; swap from `vm.swapusage` is not read (`None`, stated).
pub(crate) fn host_memory() -> Result<HostMemory, Error> {
    let total = sysctl_u64(c"hw.memsize")?;
    // SAFETY: all-zero is a valid vm_statistics64 (plain integers).
    let mut vm: libc::vm_statistics64 = unsafe { std::mem::zeroed() };
    let mut count = libc::HOST_VM_INFO64_COUNT;
    // SAFETY: `vm` is a live vm_statistics64 and `count` its size in integers, as
    // HOST_VM_INFO64 requires; mach_host_self returns this task's send right to the host port.
    #[allow(deprecated)]
    let kr = unsafe {
        libc::host_statistics64(
            libc::mach_host_self(),
            libc::HOST_VM_INFO64,
            (&raw mut vm).cast::<libc::integer_t>(),
            &raw mut count,
        )
    };
    if kr != libc::KERN_SUCCESS {
        return Err(Error::from_io(
            "host_statistics64(HOST_VM_INFO64)",
            std::io::Error::other(format!("kern_return {kr}")),
        ));
    }
    let page = crate::system::roots::SystemInfo::current().page_size;
    let pages = |n: u32| u64::from(n).saturating_mul(page);
    let free = pages(vm.free_count).saturating_add(pages(vm.speculative_count));
    let available = free
        .saturating_add(pages(vm.inactive_count))
        .saturating_add(pages(vm.purgeable_count))
        .min(total);
    Ok(HostMemory {
        memory_total_bytes: total,
        memory_available_bytes: available,
        memory_free_bytes: free.min(total),
        swap_total_bytes: None,
        swap_free_bytes: None,
    })
}

/// One process's footprint and lifetime peak.
pub(crate) fn process_memory(pid: u32, detail: MemoryDetail) -> Result<ProcessMemory, Error> {
    let ri = rusage_v4(pid)?;
    let mut unknown = vec![Unknown::new(
        Field::SwapBytes,
        UnknownReason::Unsupported,
        "macOS gives no per-process swap figure",
    )];
    if detail == MemoryDetail::WithPss {
        unknown.push(Unknown::new(
            Field::PssBytes,
            UnknownReason::Unsupported,
            "macOS has no proportional set size",
        ));
    }
    Ok(ProcessMemory {
        pid,
        rss_bytes: Some(ri.ri_phys_footprint),
        peak_rss_bytes: Some(ri.ri_lifetime_max_phys_footprint),
        swap_bytes: None,
        pss_bytes: None,
        private_bytes: None,
        unknown,
    })
}

/// This process's physical footprint.
pub(crate) fn own_rss() -> Result<u64, Error> {
    Ok(rusage_v4(std::process::id())?.ri_phys_footprint)
}
