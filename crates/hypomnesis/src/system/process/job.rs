//! Windows Job objects (FFI): a process tree bound to one kernel object, for the `nvidia-smi`
//! runner's deadline (terminate the whole tree) and `hmn run` (the tree's exact peak).
//!
//! Owns [`Job`]: created with `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`, so every process still in it
//! dies when the last handle closes (when the `Job` is dropped, or when this process exits);
//! children a member starts join the job automatically. [`Job::peak_memory_bytes`] is
//! `JOBOBJECT_EXTENDED_LIMIT_INFORMATION.PeakJobMemoryUsed`: the kernel's peak of the committed
//! private memory of all the job's processes together — an exact tree peak, not a sum of
//! per-process peaks.

use std::os::windows::io::AsRawHandle as _;
use std::process::Child;

use windows::Win32::Foundation::{CloseHandle, HANDLE};
use windows::Win32::System::JobObjects::{
    AssignProcessToJobObject, CreateJobObjectW, JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE,
    JOBOBJECT_BASIC_ACCOUNTING_INFORMATION, JOBOBJECT_EXTENDED_LIMIT_INFORMATION,
    JobObjectBasicAccountingInformation, JobObjectExtendedLimitInformation,
    QueryInformationJobObject, SetInformationJobObject, TerminateJobObject,
};
use windows::core::PCWSTR;

use crate::types::error::Error;

/// A kill-on-close Job object. See the [module docs](self).
#[derive(Debug)]
pub struct Job {
    handle: HANDLE,
}

// SAFETY: a job handle is a kernel object handle, usable from any thread; `Job` never hands out
// the raw handle, and closes it once (Drop).
unsafe impl Send for Job {}
// SAFETY: every method takes `&self` and only passes the handle to thread-safe kernel calls.
unsafe impl Sync for Job {}

fn job_error(what: &str, err: &windows::core::Error) -> Error {
    crate::system::host::windows::win_error(what.to_string(), err)
}

impl Job {
    /// A new anonymous job whose processes are killed when it is closed.
    ///
    /// # Errors
    /// The `CreateJobObjectW` / `SetInformationJobObject` failure.
    pub fn kill_on_close() -> Result<Job, Error> {
        // SAFETY: no security attributes and no name: an anonymous job; the handle is owned by
        // the returned Job and closed by its Drop.
        let handle = unsafe { CreateJobObjectW(None, PCWSTR::null()) }
            .map_err(|e| job_error("CreateJobObjectW", &e))?;
        let job = Job { handle };
        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        info.BasicLimitInformation.LimitFlags = JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE;
        // SAFETY: `info` is a live JOBOBJECT_EXTENDED_LIMIT_INFORMATION and the length is its size.
        unsafe {
            SetInformationJobObject(
                job.handle,
                JobObjectExtendedLimitInformation,
                (&raw const info).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
            )
        }
        .map_err(|e| job_error("SetInformationJobObject", &e))?;
        Ok(job)
    }

    /// Puts a spawned child (and so every process it starts from now on) in the job.
    ///
    /// # Errors
    /// The `AssignProcessToJobObject` failure (the child already exited, or access denied).
    pub fn assign(&self, child: &Child) -> Result<(), Error> {
        let process = HANDLE(child.as_raw_handle());
        // SAFETY: both handles are live: the job's (owned by self) and the child's (owned by
        // `child`, borrowed for the call).
        unsafe { AssignProcessToJobObject(self.handle, process) }
            .map_err(|e| job_error("AssignProcessToJobObject", &e))
    }

    /// Starts `cmd` inside the job: created suspended (`CREATE_SUSPENDED`), assigned, then its
    /// one thread resumed — so its first instruction, and every process it starts, runs in the
    /// job (a child assigned after a plain spawn runs briefly outside it, and a process it starts
    /// in that instant escapes). `flags` are the creation flags to start with: std's
    /// `creation_flags` replaces any set on `cmd` before, and cannot report them.
    ///
    /// Returns the running child, and the assignment's error when the child could not join
    /// (it then runs outside the job, as a plain spawn would).
    ///
    /// # Errors
    /// The spawn's error; or, when the child cannot be resumed, that error (the child is
    /// killed first: a process left suspended would never end).
    pub fn spawn_into(
        &self,
        cmd: &mut std::process::Command,
        flags: u32,
    ) -> std::io::Result<(Child, Option<Error>)> {
        use std::os::windows::process::CommandExt as _;
        use windows::Win32::System::Threading::CREATE_SUSPENDED;
        let mut child = cmd.creation_flags(flags | CREATE_SUSPENDED.0).spawn()?;
        let joined = self.assign(&child).err();
        if let Err(e) = resume_only_thread(child.id()) {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other(e.to_string()));
        }
        Ok((child, joined))
    }

    /// Kills every process in the job with `exit_code`.
    pub fn terminate(&self, exit_code: u32) {
        // SAFETY: the job handle is live (owned by self).
        let _ = unsafe { TerminateJobObject(self.handle, exit_code) };
    }

    /// The peak of the committed memory of all the job's processes together, in bytes;
    /// `Ok(None)` when the system reports 0, which no process that ran can have: the counter is
    /// not kept (Wine), so the figure is unknown rather than zero.
    ///
    /// # Errors
    /// The `QueryInformationJobObject` failure.
    pub fn peak_memory_bytes(&self) -> Result<Option<u64>, Error> {
        let mut info = JOBOBJECT_EXTENDED_LIMIT_INFORMATION::default();
        // SAFETY: `info` is a live, writable JOBOBJECT_EXTENDED_LIMIT_INFORMATION and the
        // length is its size.
        unsafe {
            QueryInformationJobObject(
                Some(self.handle),
                JobObjectExtendedLimitInformation,
                (&raw mut info).cast(),
                std::mem::size_of::<JOBOBJECT_EXTENDED_LIMIT_INFORMATION>() as u32,
                None,
            )
        }
        .map_err(|e| job_error("QueryInformationJobObject", &e))?;
        Ok(Some(info.PeakJobMemoryUsed as u64).filter(|b| *b > 0))
    }

    /// How many processes are in the job now.
    ///
    /// # Errors
    /// The `QueryInformationJobObject` failure.
    pub fn active_processes(&self) -> Result<u32, Error> {
        let mut info = JOBOBJECT_BASIC_ACCOUNTING_INFORMATION::default();
        // SAFETY: `info` is a live, writable JOBOBJECT_BASIC_ACCOUNTING_INFORMATION and the
        // length is its size.
        unsafe {
            QueryInformationJobObject(
                Some(self.handle),
                JobObjectBasicAccountingInformation,
                (&raw mut info).cast(),
                std::mem::size_of::<JOBOBJECT_BASIC_ACCOUNTING_INFORMATION>() as u32,
                None,
            )
        }
        .map_err(|e| job_error("QueryInformationJobObject", &e))?;
        Ok(info.ActiveProcesses)
    }
}

/// Resumes the single thread of the just-created, suspended process `pid` (std does not hand
/// out the thread handle `CreateProcessW` returned, so the thread is found with Toolhelp).
fn resume_only_thread(pid: u32) -> Result<(), Error> {
    use windows::Win32::System::Diagnostics::ToolHelp::{
        CreateToolhelp32Snapshot, TH32CS_SNAPTHREAD, THREADENTRY32, Thread32First, Thread32Next,
    };
    use windows::Win32::System::Threading::{OpenThread, ResumeThread, THREAD_SUSPEND_RESUME};
    // SAFETY: plain values in; the snapshot handle is owned here and closed below.
    let snap = unsafe { CreateToolhelp32Snapshot(TH32CS_SNAPTHREAD, 0) }
        .map_err(|e| job_error("CreateToolhelp32Snapshot(THREAD)", &e))?;
    let mut entry = THREADENTRY32 {
        dwSize: std::mem::size_of::<THREADENTRY32>() as u32,
        ..THREADENTRY32::default()
    };
    let mut found = None;
    // SAFETY: `snap` is live and `entry` a writable THREADENTRY32 with `dwSize` set.
    let mut more = unsafe { Thread32First(snap, &raw mut entry) }.is_ok();
    while more {
        if entry.th32OwnerProcessID == pid {
            found = Some(entry.th32ThreadID);
            break;
        }
        // SAFETY: as above.
        more = unsafe { Thread32Next(snap, &raw mut entry) }.is_ok();
    }
    // SAFETY: the snapshot handle was created above and is closed only here.
    let _ = unsafe { CloseHandle(snap) };
    let tid = found.ok_or_else(|| Error::NotFound {
        path: format!("the thread of suspended pid {pid}").into(),
    })?;
    // SAFETY: plain values in; the thread handle is owned here and closed below.
    let thread = unsafe { OpenThread(THREAD_SUSPEND_RESUME, false, tid) }
        .map_err(|e| job_error("OpenThread", &e))?;
    // SAFETY: `thread` is live and opened with THREAD_SUSPEND_RESUME.
    let previous = unsafe { ResumeThread(thread) };
    // SAFETY: opened above, closed only here.
    let _ = unsafe { CloseHandle(thread) };
    if previous == u32::MAX {
        return Err(job_error(
            "ResumeThread",
            &windows::core::Error::from_thread(),
        ));
    }
    Ok(())
}

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle was created by CreateJobObjectW and is closed only here; closing
        // the last handle kills what is left in the job (KILL_ON_JOB_CLOSE).
        let _ = unsafe { CloseHandle(self.handle) };
    }
}
