//! Files kept open between readings ([`Kept`] for one path, [`KeptFiles`] for many by key,
//! [`KeptByPid`] for a file of many processes): each reading is one `pread` from offset 0,
//! which procfs and sysfs answer by regenerating the file, instead of open + read + close.
//!
//! Only a file on procfs or sysfs is kept (its file system's magic, asked once at open): a
//! fixture tree's files are replaced by rename, which a kept descriptor would never see, so any
//! other file is opened per reading as before. A kept `/proc/<pid>/…` descriptor stays bound to
//! the process it was opened for: once that process has exited, reading it fails (`ESRCH`) or
//! returns nothing, and the path is opened afresh — a reused pid is never read through its
//! predecessor's descriptor. A kept sysfs attribute of a device that is unbound or unplugged
//! fails (`ENODEV`) and is opened afresh likewise, which then fails in turn.

use std::borrow::Borrow;
use std::collections::HashMap;
use std::fs::File;
use std::hash::Hash;
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

/// Whether `file` is on procfs or sysfs, which regenerate a file read from its start (sysfs:
/// kernfs calls the attribute's `show` again for a read at offset 0).
#[cfg(target_os = "linux")]
pub(crate) fn regenerated(file: &File) -> bool {
    use nix::sys::statfs::{PROC_SUPER_MAGIC, SYSFS_MAGIC, fstatfs};
    fstatfs(file).is_ok_and(|s| matches!(s.filesystem_type(), PROC_SUPER_MAGIC | SYSFS_MAGIC))
}

/// Platform seam: only Linux has a procfs and a sysfs to keep files of (a root named elsewhere
/// is a fixture tree).
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

/// Reads `path` afresh, with the open file when it is worth keeping (`keep`: [`regenerated`]
/// but in tests).
fn fresh(
    path: &Path,
    cap: Cap,
    scratch: &mut Scratch,
    keep: fn(&File) -> bool,
) -> Result<(Vec<u8>, Option<File>), Error> {
    let file = open(path)?;
    if keep(&file) {
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
        let (bytes, file) = fresh(&self.path, self.cap, scratch, regenerated)?;
        *kept = file;
        Ok(bytes)
    }
}

/// Files kept open by key (a device's sysfs attributes by path), at most [`KEPT_MAX`] (or
/// [`KeptFiles::at_most`]). A
/// caller that reads in rounds (one per sample) calls [`KeptFiles::end_round`] after each,
/// which closes the files it did not read.
#[derive(Debug)]
pub(crate) struct KeptFiles<K> {
    cap: Cap,
    /// The most files kept open.
    max: usize,
    /// key → (its file, read this round).
    open: HashMap<K, (File, bool)>,
    scratch: Scratch,
    /// Which opened files are kept: [`regenerated`], or every one in a test that rewrites its
    /// fixture files in place.
    keep: fn(&File) -> bool,
}

impl<K: Hash + Eq> KeptFiles<K> {
    /// Files of at most `cap` bytes each.
    pub(crate) fn new(cap: Cap) -> KeptFiles<K> {
        KeptFiles {
            cap,
            max: KEPT_MAX,
            open: HashMap::new(),
            scratch: Scratch::default(),
            keep: regenerated,
        }
    }

    /// Keeps at most `max` files open (instead of [`KEPT_MAX`]).
    #[must_use]
    pub(crate) fn at_most(mut self, max: usize) -> KeptFiles<K> {
        self.max = max;
        self
    }

    /// Keeps every file it opens, whatever its file system: for tests whose fixture files are
    /// rewritten in place (a kept descriptor sees that; it would not see a rename).
    #[cfg(test)]
    pub(crate) fn keeping_any(mut self) -> KeptFiles<K> {
        self.keep = |_| true;
        self
    }

    /// The bytes of `key`'s file, through its kept descriptor or opened at `path()` (called
    /// only then).
    ///
    /// # Errors
    /// As [`read_bytes`].
    pub(crate) fn read<Q>(
        &mut self,
        key: &Q,
        path: impl FnOnce() -> PathBuf,
    ) -> Result<Vec<u8>, Error>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
    {
        if let Some((file, used)) = self.open.get_mut(key) {
            if let Some(bytes) = reread(file, self.cap, &mut self.scratch) {
                *used = true;
                return Ok(bytes);
            }
            self.open.remove(key);
        }
        let (bytes, file) = fresh(&path(), self.cap, &mut self.scratch, self.keep)?;
        if let Some(file) = file.filter(|_| self.open.len() < self.max) {
            self.open.insert(key.to_owned(), (file, true));
        }
        Ok(bytes)
    }

    /// Closes the files not read since the last call.
    pub(crate) fn end_round(&mut self) {
        self.open.retain(|_, (_, used)| std::mem::take(used));
    }

    /// Closes every file.
    pub(crate) fn clear(&mut self) {
        self.open.clear();
    }

    /// How many files are kept open.
    pub(crate) fn kept(&self) -> usize {
        self.open.len()
    }
}

impl KeptFiles<PathBuf> {
    /// A decimal value (`1048576\n`) from the file at `path`, kept by its path; `None` when it
    /// could not be read or holds no number (as [`crate::system::fsread::read_u64`]`.ok()`).
    pub(crate) fn read_u64(&mut self, path: &Path) -> Option<u64> {
        let bytes = self.read(path, || path.to_path_buf()).ok()?;
        crate::system::fsread::parse_u64(std::str::from_utf8(&bytes).ok()?).ok()
    }

    /// The file's text, trimmed (as [`crate::system::fsread::read_trimmed`]`.ok()`).
    pub(crate) fn read_trimmed(&mut self, path: &Path) -> Option<String> {
        let bytes = self.read(path, || path.to_path_buf()).ok()?;
        Some(String::from_utf8(bytes).ok()?.trim().to_string())
    }
}

/// One file (`stat`) of many processes, kept open per pid ([`KeptFiles`] by pid).
#[derive(Debug)]
pub(crate) struct KeptByPid {
    roots: Roots,
    name: &'static str,
    files: KeptFiles<u32>,
}

impl KeptByPid {
    pub(crate) fn new(roots: Roots, name: &'static str, cap: Cap) -> KeptByPid {
        KeptByPid {
            roots,
            name,
            files: KeptFiles::new(cap),
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
        let (roots, name) = (&self.roots, self.name);
        self.files.read(&pid, || roots.pid_file(pid, name))
    }

    /// Closes the files not read since the last call.
    pub(crate) fn end_round(&mut self) {
        self.files.end_round();
    }

    /// How many files are kept open.
    pub(crate) fn kept(&self) -> usize {
        self.files.kept()
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

    /// A keyed set keeps what it opens (here any file: the fixture is rewritten in place), reads
    /// through the kept descriptor (a file renamed over the path is not seen until the kept one
    /// fails), stops keeping at its bound and closes what a round did not read.
    #[test]
    fn a_keyed_set_reads_through_its_descriptors_within_its_bound() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: u32| dir.path().join(format!("f{n}"));
        for n in 0..3 {
            std::fs::write(path(n), format!("{n}\n")).unwrap();
        }
        let mut set: KeptFiles<PathBuf> = KeptFiles::new(Cap::SYSFS).at_most(2).keeping_any();
        for n in 0..3 {
            assert_eq!(set.read_u64(&path(n)), Some(u64::from(n)));
        }
        assert_eq!(set.kept(), 2, "the bound");
        // Rewritten in place: the kept descriptor reads the new text.
        std::fs::write(path(0), "10\n").unwrap();
        assert_eq!(set.read_u64(&path(0)), Some(10));
        // Replaced by rename: the kept descriptor still reads the file it opened.
        std::fs::write(dir.path().join("new"), "20\n").unwrap();
        std::fs::rename(dir.path().join("new"), path(0)).unwrap();
        assert_eq!(
            set.read_u64(&path(0)),
            Some(10),
            "read through the kept file"
        );
        assert_eq!(set.read_trimmed(&path(0)).as_deref(), Some("10"));
        std::fs::write(path(1), "not a number").unwrap();
        assert_eq!(set.read_u64(&path(1)), None);
        assert_eq!(set.read_u64(&dir.path().join("absent")), None);
        set.end_round();
        assert_eq!(set.kept(), 2, "both read this round");
        set.read_u64(&path(1));
        set.end_round();
        assert_eq!(set.kept(), 1, "path 0 not read in the last round: closed");
        // Opened afresh: now the renamed file.
        assert_eq!(set.read_u64(&path(0)), Some(20));
        set.clear();
        assert_eq!(set.kept(), 0);
        // By default only procfs and sysfs files are kept.
        let mut plain: KeptFiles<PathBuf> = KeptFiles::new(Cap::SYSFS);
        assert_eq!(plain.read_u64(&path(2)), Some(2));
        assert_eq!(plain.kept(), 0, "not a file the kernel regenerates");
    }

    /// A real sysfs attribute is kept and regenerated by each `pread`: the loopback device's
    /// packet counter, read through the kept descriptor before and after sending it packets.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_sysfs_attribute_is_kept_and_regenerated() {
        let counter = Path::new("/sys/class/net/lo/statistics/tx_packets");
        if !counter.exists() {
            // A sandbox without sysfs (or without a loopback device) has nothing to keep.
            eprintln!("skipped: {} is absent", counter.display());
            return;
        }
        let mut set: KeptFiles<PathBuf> = KeptFiles::new(Cap::SYSFS);
        let before = set.read_u64(counter).unwrap();
        assert_eq!(set.kept(), 1, "sysfs is kept");
        let socket = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let to = socket.local_addr().unwrap();
        for _ in 0..8 {
            socket.send_to(b"hmn", to).unwrap();
        }
        let after = set.read_u64(counter).unwrap();
        assert!(after >= before + 8, "{before} → {after}");
        assert_eq!(set.kept(), 1, "the same descriptor");
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
