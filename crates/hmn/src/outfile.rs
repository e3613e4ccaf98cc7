//! Every file `hmn` writes — `run --plot`, `run --timeline`, `serve --textfile` — and the one
//! kernel file `__exec` writes to: where each may go and how it is replaced.
//!
//! The rules (docs/security.md):
//! - `-` and `/dev/stdout` mean standard output, written directly (streamed, never renamed);
//! - any other target must be absent or a regular file. A symlink is refused, even one that
//!   points to a regular file (give the link's target instead), and so is a FIFO, a device node
//!   (`/dev/full`), a socket or a directory: each with a one-line error, checked before the
//!   command runs or the server starts;
//! - the content goes to a new file in the target's directory, created exclusively under a
//!   random name (`O_CREAT|O_EXCL|O_NOFOLLOW|O_CLOEXEC`, mode 0644 less the umask: a name
//!   another user planted, as a file or a symlink, is never opened), written, `fsync`ed, and
//!   renamed over the target only if the target is (still) absent or a regular file; the
//!   directory is then `fsync`ed. Any failure removes the new file and leaves the target as it
//!   was: nothing partial is ever left under the target's name.
//!
//! On Windows the same rules hold with Windows means: the new file is created with
//! `CREATE_NEW` and `FILE_FLAG_OPEN_REPARSE_POINT` (a planted name or link is never opened),
//! renamed with `MoveFileExW(MOVEFILE_REPLACE_EXISTING)` (std's `rename`) only over a regular
//! file, and put under an absent name with a hard link (which fails if the name appeared
//! meanwhile) instead of `renameat2(RENAME_NOREPLACE)`; there are no FIFOs or device nodes.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
#[cfg(unix)]
use std::os::fd::AsFd as _;
#[cfg(unix)]
use std::os::unix::fs::{FileTypeExt as _, OpenOptionsExt as _};
#[cfg(windows)]
use std::os::windows::fs::OpenOptionsExt as _;
#[cfg(windows)]
use std::os::windows::io::AsHandle as _;
use std::path::{Path, PathBuf};

use tempfile::TempPath;

/// Where a `FILE` argument sends its output.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Dest {
    /// Standard output (`-` or `/dev/stdout`).
    Stdout,
    /// A file, replaced atomically.
    File(PathBuf),
}

impl Dest {
    /// The destination a `FILE` argument names.
    pub fn of(path: &Path) -> Dest {
        if path.as_os_str() == "-" || path.as_os_str() == "/dev/stdout" {
            Dest::Stdout
        } else {
            Dest::File(path.to_path_buf())
        }
    }
}

fn refused(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidInput, what)
}

/// The refusal of a target that is neither absent nor a regular file nor a link (a FIFO, a
/// device, a directory): typed, so a caller can add what it accepts instead.
#[derive(Debug)]
struct NotRegular(String);

impl std::fmt::Display for NotRegular {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for NotRegular {}

/// What a non-regular file is, in words.
#[cfg(not(unix))]
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else {
        "not a regular file"
    }
}

/// What a non-regular file is, in words.
#[cfg(unix)]
fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_symlink() {
        "a symbolic link"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_fifo() {
        "a FIFO"
    } else if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    }
}

/// `Ok(true)` when `path` is a regular file, `Ok(false)` when it does not exist; an error
/// naming what it is otherwise (a symlink is not followed).
fn regular_or_absent(path: &Path) -> io::Result<bool> {
    match std::fs::symlink_metadata(path) {
        Ok(md) if md.file_type().is_file() => Ok(true),
        Ok(md) => {
            let kind = kind_of(md.file_type());
            Err(if md.file_type().is_symlink() {
                refused(format!(
                    "is {kind}; hmn does not write through links (name its target)"
                ))
            } else {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    NotRegular(format!("is {kind}; hmn only replaces regular files")),
                )
            })
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e),
    }
}

/// The directory a target is created in.
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// A file being written under a random name beside its target, renamed over the target by
/// [`AtomicFile::commit`]; dropped uncommitted, it is removed.
#[derive(Debug)]
pub struct AtomicFile {
    file: BufWriter<File>,
    tmp: TempPath,
    target: PathBuf,
}

impl AtomicFile {
    /// Checks the target and creates the new file beside it.
    ///
    /// # Errors
    /// The target is not absent or a regular file, its directory does not exist, or no file
    /// can be created there (a read-only directory): one line, without the path.
    pub fn create(target: &Path) -> io::Result<AtomicFile> {
        regular_or_absent(target)?;
        let dir = parent_of(target);
        match std::fs::metadata(dir) {
            Ok(md) if md.is_dir() => {}
            Ok(_) => return Err(refused(format!("{} is not a directory", dir.display()))),
            Err(e) => return Err(io::Error::new(e.kind(), format!("{}: {e}", dir.display()))),
        }
        let name = target.file_name().map_or_else(String::new, |n| {
            n.to_string_lossy().chars().take(64).collect::<String>()
        });
        let prefix = format!(".{name}.");
        let named = tempfile::Builder::new()
            .prefix(&prefix)
            .suffix(".hmn-tmp")
            .rand_bytes(12)
            .make_in(dir, |p| {
                let mut open = OpenOptions::new();
                open.write(true).create_new(true); // O_CREAT|O_EXCL / CREATE_NEW
                #[cfg(unix)]
                open.mode(0o644)
                    .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC);
                // FILE_FLAG_OPEN_REPARSE_POINT: a link is opened as itself, never followed.
                #[cfg(windows)]
                open.custom_flags(0x0020_0000);
                open.open(p)
            })
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot create a file in {}: {e}", dir.display()),
                )
            })?;
        let (file, tmp) = named.into_parts();
        Ok(AtomicFile {
            file: BufWriter::new(file),
            tmp,
            target: target.to_path_buf(),
        })
    }

    /// Flushes, `fsync`s and renames the file over its target — only if the target is still
    /// absent or a regular file — then `fsync`s the directory.
    ///
    /// # Errors
    /// A write, `fsync` or rename failure, or a target that became something else; the new
    /// file is removed and the target left as it was.
    pub fn commit(self) -> io::Result<()> {
        let AtomicFile { file, tmp, target } = self;
        finish(file, &tmp, &target, true)?;
        // Renamed: nothing to remove any more.
        let _ = tmp.keep();
        Ok(())
    }

    /// As [`AtomicFile::commit`], but with `replace` false an existing target is never replaced
    /// (the rename fails with "exists"), and on any failure the new file is kept where it is,
    /// its path returned with the error (`hmn record`: a night's samples are never deleted).
    ///
    /// # Errors
    /// As [`AtomicFile::commit`], with the kept file's path (`None` if even that failed).
    pub fn commit_or_keep(self, replace: bool) -> Result<(), (io::Error, Option<PathBuf>)> {
        let AtomicFile { file, tmp, target } = self;
        match finish(file, &tmp, &target, replace) {
            Ok(()) => {
                let _ = tmp.keep();
                Ok(())
            }
            Err(e) => Err((e, tmp.keep().ok())),
        }
    }

    /// Where the new file is until it is committed.
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Cuts the new file to its first `len` bytes, dropping what is buffered beyond them (after
    /// a failed write: keeps the complete records written before it). Truncating frees space,
    /// so it works on a full disk.
    ///
    /// # Errors
    /// When the file cannot be truncated or sought.
    pub fn truncate(&mut self, len: u64) -> io::Result<()> {
        // A fresh buffer over the same open file; the old one is taken apart without the flush
        // its drop would do, so what it still holds is dropped.
        let fresh = BufWriter::new(self.file.get_ref().try_clone()?);
        let (mut f, _dropped) = std::mem::replace(&mut self.file, fresh).into_parts();
        f.set_len(len)?;
        std::io::Seek::seek(&mut f, io::SeekFrom::Start(len))?;
        Ok(())
    }
}

/// Flushes, `fsync`s and renames `tmp` over `target` (over a regular file only when
/// `replace`), then `fsync`s the directory.
fn finish(file: BufWriter<File>, tmp: &Path, target: &Path, replace: bool) -> io::Result<()> {
    let file = file.into_inner().map_err(io::IntoInnerError::into_error)?;
    file.sync_all()?;
    drop(file);
    if regular_or_absent(target)? && replace {
        std::fs::rename(tmp, target)?;
    } else {
        // Absent (or not to be replaced): a name created meanwhile (by anyone) is not replaced.
        #[cfg(not(target_os = "linux"))]
        {
            std::fs::hard_link(tmp, target)?;
            let _ = std::fs::remove_file(tmp);
        }
        #[cfg(target_os = "linux")]
        nix::fcntl::renameat2(
            nix::fcntl::AT_FDCWD,
            tmp,
            nix::fcntl::AT_FDCWD,
            target,
            nix::fcntl::RenameFlags::RENAME_NOREPLACE,
        )
        .map_err(io::Error::from)?;
    }
    if let Ok(d) = File::open(parent_of(target)) {
        let _ = d.sync_all();
    }
    Ok(())
}

impl Write for AtomicFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.file.write(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.file.flush()
    }
}

/// Writes `bytes` to `path` as an [`AtomicFile`] (`serve --textfile`).
///
/// # Errors
/// As [`AtomicFile::create`] and [`AtomicFile::commit`].
#[cfg_attr(not(feature = "serve"), allow(dead_code))]
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = AtomicFile::create(path)?;
    f.write_all(bytes)?;
    f.commit()
}

/// An output opened for a `FILE` argument: standard output, or an [`AtomicFile`].
#[derive(Debug)]
pub enum Sink {
    /// Standard output, through its own descriptor (no lock shared with the main thread's
    /// buffered stdout): each write goes out at once.
    Stdout(File),
    /// A file, in place once committed.
    File(AtomicFile),
}

impl Sink {
    /// Opens `dest`: a duplicate of stdout's descriptor, or a new [`AtomicFile`].
    ///
    /// # Errors
    /// As [`AtomicFile::create`]; stdout closed.
    pub fn open(dest: &Dest) -> io::Result<Sink> {
        match dest {
            #[cfg(unix)]
            Dest::Stdout => Ok(Sink::Stdout(File::from(
                io::stdout().as_fd().try_clone_to_owned()?,
            ))),
            #[cfg(windows)]
            Dest::Stdout => Ok(Sink::Stdout(File::from(
                io::stdout().as_handle().try_clone_to_owned()?,
            ))),
            // Where `-` is accepted, a refusal says so (`serve --textfile` takes no `-`).
            Dest::File(p) => AtomicFile::create(p).map(Sink::File).map_err(|e| {
                if e.get_ref().is_some_and(|r| r.is::<NotRegular>()) {
                    refused(format!("{e} (- writes to stdout)"))
                } else {
                    e
                }
            }),
        }
    }

    /// Puts a file in place; stdout needs nothing.
    ///
    /// # Errors
    /// As [`AtomicFile::commit`].
    pub fn commit(self) -> io::Result<()> {
        match self {
            Sink::Stdout(_) => Ok(()),
            Sink::File(f) => f.commit(),
        }
    }
}

impl Write for Sink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match self {
            Sink::Stdout(f) => f.write(buf),
            Sink::File(f) => f.write(buf),
        }
    }

    fn flush(&mut self) -> io::Result<()> {
        match self {
            Sink::Stdout(f) => f.flush(),
            Sink::File(f) => f.flush(),
        }
    }
}

/// Writes `bytes` to an existing kernel file (`cgroup.procs`): never created, truncated or
/// reached through a symlink, and only if it is a regular file (cgroupfs files are).
///
/// # Errors
/// The file is missing, a link or not a regular file, or the write fails.
#[cfg(target_os = "linux")]
pub fn write_kernel_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let mut f = OpenOptions::new()
        .write(true)
        .custom_flags(nix::libc::O_NOFOLLOW | nix::libc::O_CLOEXEC | nix::libc::O_NONBLOCK)
        .open(path)?;
    let t = f.metadata()?.file_type();
    if !t.is_file() {
        return Err(refused(format!("is {}", kind_of(t))));
    }
    f.write_all(bytes)
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    /// The mode a file created now gets: 0644 less the umask (read from `/proc/self/status`,
    /// not set and restored, which would race with other test threads).
    fn created_mode() -> u32 {
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        let mask = status
            .lines()
            .find_map(|l| l.strip_prefix("Umask:"))
            .map(|m| u32::from_str_radix(m.trim(), 8).unwrap())
            .unwrap();
        0o644 & !mask
    }

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn replaces_a_regular_file_and_leaves_no_temporary() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.prom");
        std::fs::write(&path, "old").unwrap();
        write_atomic(&path, b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        assert_eq!(names(dir.path()), ["out.prom"]);
        let md = std::fs::metadata(&path).unwrap();
        assert_eq!(md.permissions().mode() & 0o777, created_mode());
        let fresh = dir.path().join("fresh");
        write_atomic(&fresh, b"x").unwrap();
        assert_eq!(std::fs::read(&fresh).unwrap(), b"x");
        let missing = dir.path().join("no-such-dir/out.prom");
        assert!(write_atomic(&missing, b"x").is_err());
    }

    #[test]
    fn refuses_every_target_that_is_not_a_regular_file() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        for (target, words) in [
            (link.as_path(), "is a symbolic link"),
            (fifo.as_path(), "is a FIFO"),
            (dir.path(), "is a directory"),
            (Path::new("/dev/full"), "is a character device"),
        ] {
            let e = write_atomic(target, b"x").unwrap_err();
            assert!(e.to_string().contains(words), "{}: {e}", target.display());
            assert!(!e.to_string().contains('\n'));
            // Where `-` is accepted the refusal says so, except for a link (name its target).
            let Err(e) = Sink::open(&Dest::File(target.to_path_buf())) else {
                panic!("{} opened", target.display());
            };
            assert_eq!(
                e.to_string().ends_with("(- writes to stdout)"),
                target != link.as_path(),
                "{}: {e}",
                target.display()
            );
        }
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(
            std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(
            names(dir.path()),
            ["fifo", "link", "victim"],
            "no temporary left"
        );
    }

    #[test]
    fn a_target_that_changes_before_the_rename_is_not_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        let target = dir.path().join("out");
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"new").unwrap();
        // Between check and rename, someone puts a link at the target.
        std::os::unix::fs::symlink(&victim, &target).unwrap();
        assert!(f.commit().is_err());
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert!(
            std::fs::symlink_metadata(&target)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(names(dir.path()), ["out", "victim"]);
    }

    #[test]
    fn planted_temporary_names_are_never_opened() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, "keep").unwrap();
        // The names of the old scheme, and a guess at the new one's prefix.
        for n in [
            format!(".out.hmn-tmp-{}", std::process::id()),
            ".out.hmn-tmp".to_string(),
            ".out.000000000000.hmn-tmp".to_string(),
        ] {
            std::os::unix::fs::symlink(&victim, dir.path().join(n)).unwrap();
        }
        write_atomic(&dir.path().join("out"), b"new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
        assert_eq!(
            std::fs::read_to_string(dir.path().join("out")).unwrap(),
            "new"
        );
    }

    #[test]
    fn dropped_uncommitted_leaves_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let mut f = AtomicFile::create(&target).unwrap();
        f.write_all(b"half").unwrap();
        assert_eq!(
            names(dir.path()).len(),
            1,
            "the temporary exists while writing"
        );
        drop(f);
        assert!(names(dir.path()).is_empty());
    }

    #[test]
    fn stdout_names() {
        assert_eq!(Dest::of(Path::new("-")), Dest::Stdout);
        assert_eq!(Dest::of(Path::new("/dev/stdout")), Dest::Stdout);
        assert_eq!(
            Dest::of(Path::new("./-x")),
            Dest::File(PathBuf::from("./-x"))
        );
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn kernel_files_are_written_in_place_only() {
        let dir = tempfile::tempdir().unwrap();
        let procs = dir.path().join("cgroup.procs");
        std::fs::write(&procs, "").unwrap();
        write_kernel_file(&procs, b"42").unwrap();
        assert_eq!(std::fs::read(&procs).unwrap(), b"42");
        assert!(write_kernel_file(&dir.path().join("absent"), b"1").is_err());
        assert!(!dir.path().join("absent").exists(), "never created");
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&procs, &link).unwrap();
        assert!(
            write_kernel_file(&link, b"7").is_err(),
            "never through a link"
        );
        let fifo = dir.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(write_kernel_file(&fifo, b"7").is_err());
    }
}
