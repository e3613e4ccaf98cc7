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

use crate::error::Error;

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
    crate::host::windows::win_error(what.to_string(), err)
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

impl Drop for Job {
    fn drop(&mut self) {
        // SAFETY: the handle was created by CreateJobObjectW and is closed only here; closing
        // the last handle kills what is left in the job (KILL_ON_JOB_CLOSE).
        let _ = unsafe { CloseHandle(self.handle) };
    }
}
