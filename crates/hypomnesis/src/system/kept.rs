//! Procfs files kept open between readings ([`Kept`] for one path, [`KeptByPid`] for a file of
//! many processes): each reading is one `pread` from offset 0, which procfs answers by
//! regenerating the file, instead of open + read + close.
//!
//! Only a file on procfs is kept (its file system's magic, asked once at open): a fixture
//! tree's files are replaced by rename, which a kept descriptor would never see, so any other
//! file is opened per reading as before. A kept `/proc/<pid>/…` descriptor stays bound to the
//! process it was opened for: once that process has exited, reading it fails (`ESRCH`) or
//! returns nothing, and the path is opened afresh — a reused pid is never read through its
//! predecessor's descriptor.

use std::collections::HashMap;
use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

#[cfg(not(target_os = "linux"))]
use crate::system::fsread::read_at_start;
use crate::system::fsread::{Cap, open, read_bytes};
use crate::system::roots::Roots;
use crate::types::error::Error;

/// The most `/proc/<pid>` files one [`KeptByPid`] keeps open (beyond it, a file is opened per
/// reading), far below the usual limit of 1024 descriptors.
pub(crate) const KEPT_MAX: usize = 256;

/// Whether `file` is on procfs, which regenerates a file read from its start.
#[cfg(target_os = "linux")]
pub(crate) fn regenerated(file: &File) -> bool {
    use nix::sys::statfs::{PROC_SUPER_MAGIC, fstatfs};
    fstatfs(file).is_ok_and(|s| s.filesystem_type() == PROC_SUPER_MAGIC)
}

/// Platform seam: only Linux has a procfs to keep files of (a proc root named elsewhere is a
/// fixture tree).
#[cfg(not(target_os = "linux"))]
pub(crate) fn regenerated(file: &File) -> bool {
    let _ = file;
    false
}

/// The buffer [`reread`] reads into, kept by its owner: allocated once (at [`SCRATCH_START`],
/// which `stat` and `meminfo` fit) and grown only for a longer file, instead of a buffer of the
/// whole cap zeroed and freed at every reading.
#[derive(Debug, Default)]
pub(crate) struct Scratch(Vec<u8>);

/// The first size of a [`Scratch`].
const SCRATCH_START: usize = 4 << 10;

/// One reading of a kept file from its start: `None` when it failed, read nothing (the
/// process is gone) or reached the cap — the caller then opens afresh, and the usual reader
/// words any error. One `pread` on Linux: procfs builds such a file whole when it is read from
/// offset 0 and copies all of it that fits, so a read shorter than the buffer is the whole
/// file; one that fills it is read again, from the start, into a larger one.
fn reread(file: &File, cap: Cap, scratch: &mut Scratch) -> Option<Vec<u8>> {
    let limit = usize::try_from(cap.limit()).ok()?;
    let most = limit.saturating_add(1);
    let buf = &mut scratch.0;
    if buf.is_empty() {
        buf.resize(SCRATCH_START.min(most), 0);
    }
    loop {
        let n = read_once(file, buf)?;
        if n < buf.len() {
            // Shorter than the buffer, which is at most the cap + 1: within the cap.
            return (n > 0).then(|| buf[..n].to_vec());
        }
        if buf.len() >= most {
            return None; // the cap reached
        }
        let grown = buf.len().saturating_mul(4).min(most);
        buf.resize(grown, 0);
    }
}

/// One `pread` from offset 0 (`None` on an error, which the caller words by opening afresh).
#[cfg(target_os = "linux")]
fn read_once(file: &File, buf: &mut [u8]) -> Option<usize> {
    use std::os::unix::fs::FileExt;
    loop {
        match file.read_at(buf, 0) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            r => return r.ok(),
        }
    }
}

/// Platform seam: nothing is kept off Linux ([`regenerated`]); the portable reader.
#[cfg(not(target_os = "linux"))]
fn read_once(file: &File, buf: &mut [u8]) -> Option<usize> {
    read_at_start(file, buf, Path::new("")).ok()
}

/// Reads `path` afresh, with the open file when it is worth keeping.
fn fresh(path: &Path, cap: Cap, scratch: &mut Scratch) -> Result<(Vec<u8>, Option<File>), Error> {
    let file = open(path)?;
    if regenerated(&file) {
        if let Some(bytes) = reread(&file, cap, scratch) {
            return Ok((bytes, Some(file)));
        }
    }
    drop(file);
    Ok((read_bytes(path, cap)?, None))
}

/// One file kept open (`/proc/meminfo`), shared behind a lock.
#[derive(Debug)]
pub(crate) struct Kept {
    path: PathBuf,
    cap: Cap,
    file: Mutex<(Option<File>, Scratch)>,
}

impl Kept {
    pub(crate) fn new(path: PathBuf, cap: Cap) -> Kept {
        Kept {
            path,
            cap,
            file: Mutex::new((None, Scratch::default())),
        }
    }

    /// The path read.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes, read through the kept descriptor where there is one.
    ///
    /// # Errors
    /// As [`read_bytes`].
    pub(crate) fn read(&self) -> Result<Vec<u8>, Error> {
        let mut guard = match self.file.lock() {
            Ok(g) => g,
            Err(poisoned) => poisoned.into_inner(),
        };
        let (kept, scratch) = &mut *guard;
        if let Some(file) = kept.as_ref() {
            if let Some(bytes) = reread(file, self.cap, scratch) {
                return Ok(bytes);
            }
        }
        let (bytes, file) = fresh(&self.path, self.cap, scratch)?;
        *kept = file;
        Ok(bytes)
    }
}

/// One file (`stat`) of many processes, kept open per pid. A caller that reads in rounds (one
/// per sample) calls [`KeptByPid::end_round`] after each, which closes the files of the pids
/// it did not read.
#[derive(Debug)]
pub(crate) struct KeptByPid {
    roots: Roots,
    name: &'static str,
    cap: Cap,
    /// pid → (its file, read this round).
    open: HashMap<u32, (File, bool)>,
    scratch: Scratch,
}

impl KeptByPid {
    pub(crate) fn new(roots: Roots, name: &'static str, cap: Cap) -> KeptByPid {
        KeptByPid {
            roots,
            name,
            cap,
            open: HashMap::new(),
            scratch: Scratch::default(),
        }
    }

    /// The path read for `pid`.
    pub(crate) fn path(&self, pid: u32) -> PathBuf {
        self.roots.pid_file(pid, self.name)
    }

    /// `<proc>/<pid>/<name>`'s bytes ([`KeptByPid::path`]: built only when the file is opened).
    ///
    /// # Errors
    /// As [`read_bytes`]: [`Error::NotFound`] when the process is gone.
    pub(crate) fn read(&mut self, pid: u32) -> Result<Vec<u8>, Error> {
        if let Some((file, used)) = self.open.get_mut(&pid) {
            if let Some(bytes) = reread(file, self.cap, &mut self.scratch) {
                *used = true;
                return Ok(bytes);
            }
            self.open.remove(&pid);
        }
        let (bytes, file) = fresh(&self.path(pid), self.cap, &mut self.scratch)?;
        if let Some(file) = file.filter(|_| self.open.len() < KEPT_MAX) {
            self.open.insert(pid, (file, true));
        }
        Ok(bytes)
    }

    /// Closes the files not read since the last call.
    pub(crate) fn end_round(&mut self) {
        self.open.retain(|_, (_, used)| std::mem::take(used));
    }

    /// How many files are kept open.
    pub(crate) fn kept(&self) -> usize {
        self.open.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixture_file_is_never_kept_and_a_replacement_is_seen() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("7")).unwrap();
        let roots = Roots::system().with_proc(dir.path());
        let stat = dir.path().join("7/stat");
        std::fs::write(&stat, "one").unwrap();
        let mut by_pid = KeptByPid::new(roots, "stat", Cap::STAT);
        assert_eq!(by_pid.read(7).unwrap(), b"one");
        assert_eq!(by_pid.kept(), 0, "not procfs");
        // Replaced by rename, as the test bed writes: a kept descriptor would miss it.
        std::fs::write(dir.path().join("7/new"), "two").unwrap();
        std::fs::rename(dir.path().join("7/new"), &stat).unwrap();
        assert_eq!(by_pid.read(7).unwrap(), b"two");
        assert!(matches!(by_pid.read(8), Err(Error::NotFound { .. })));
        let one = Kept::new(stat.clone(), Cap::STAT);
        assert_eq!(one.read().unwrap(), b"two");
        std::fs::write(&stat, "three").unwrap();
        assert_eq!(one.read().unwrap(), b"three");
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_procfs_file_is_kept_until_its_process_exits_or_a_round_skips_it() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let (me, pid) = (std::process::id(), child.id());
        let mut by_pid = KeptByPid::new(Roots::system(), "stat", Cap::STAT);
        let first = by_pid.read(pid).unwrap();
        assert!(first.starts_with(format!("{pid} (sleep)").as_bytes()));
        by_pid.read(me).unwrap();
        assert_eq!(by_pid.kept(), 2);
        // Read again through the kept descriptor: the same process, regenerated.
        assert!(
            by_pid
                .read(pid)
                .unwrap()
                .starts_with(format!("{pid} (").as_bytes())
        );
        child.kill().unwrap();
        child.wait().unwrap();
        // The kept descriptor of an exited (reaped) process reads nothing of anyone else.
        assert!(matches!(by_pid.read(pid), Err(Error::NotFound { .. })));
        assert_eq!(by_pid.kept(), 1, "the dead process's file is closed");
        by_pid.end_round();
        assert_eq!(by_pid.kept(), 1, "read this round");
        by_pid.end_round();
        assert_eq!(by_pid.kept(), 0, "not read in the last round");
        let meminfo = Kept::new("/proc/meminfo".into(), Cap::MEMINFO);
        for _ in 0..2 {
            assert!(meminfo.read().unwrap().starts_with(b"MemTotal:"));
        }
        assert!(meminfo.file.lock().unwrap().0.is_some(), "kept");
    }

    /// A file longer than the scratch buffer is read again, whole, into a larger one (kept for
    /// the next reading); one longer than the cap is refused; a short one leaves it as it was.
    #[cfg(target_os = "linux")]
    #[test]
    fn the_scratch_buffer_grows_for_a_long_file_and_stops_at_the_cap() {
        // A command line of some 20 KB, which procfs gives whole to a read that fits it.
        let pad = "x".repeat(20_000);
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30; :", &pad])
            .spawn()
            .unwrap();
        let path = PathBuf::from(format!("/proc/{}/cmdline", child.id()));
        // Until the child's exec has laid out its arguments, the file reads empty.
        for _ in 0..500 {
            if !std::fs::read(&path).unwrap().is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        let file = File::open(&path).unwrap();
        let mut scratch = Scratch::default();
        let cap = Cap::PROC_OTHER;
        let whole = reread(&file, cap, &mut scratch).unwrap();
        let want = [b"sh\0-c\0sleep 30; :\0".as_slice(), pad.as_bytes(), b"\0"].concat();
        assert_eq!(whole, want);
        assert!(scratch.0.len() > whole.len(), "grown: {}", scratch.0.len());
        let grown = scratch.0.len();
        assert_eq!(reread(&file, cap, &mut scratch).unwrap(), want);
        assert_eq!(scratch.0.len(), grown, "kept");
        assert_eq!(
            reread(&file, Cap::bytes(10_000), &mut Scratch::default()),
            None
        );
        child.kill().unwrap();
        child.wait().unwrap();
        let stat = File::open("/proc/self/stat").unwrap();
        let mut small = Scratch::default();
        let line = reread(&stat, Cap::STAT, &mut small).unwrap();
        assert!(line.starts_with(format!("{} (", std::process::id()).as_bytes()));
        assert_eq!(small.0.len(), SCRATCH_START);
    }
}
