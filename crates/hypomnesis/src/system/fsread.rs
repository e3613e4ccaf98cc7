//! The I/O edge: the only place the library reads files — the kernel's (`/proc`, `/sys`,
//! cgroupfs) and the user's (model headers, `config.json`) — and lists directories.
//!
//! Owns:
//! - whole-file reads with a size [`Cap`] per kind of file ([`read_bytes`], [`read_string`],
//!   [`read_parsed`]) and the bounded reader for user files ([`read_bounded`]);
//! - one pid file into a pure parser of its text (decoded lossily) or bytes, with the path
//!   attached to its [`ParseError`] ([`read_pid_file`], [`read_pid_bytes`]);
//! - the numeric entries of a directory — the pids of a proc root — listed once
//!   ([`list_pids`], with their inode numbers [`list_pid_inodes`]), or over a directory kept
//!   open for `openat`-relative walks ([`open_dir`], [`open_dir_at`], [`numeric_entries`]; the
//!   DRM fd walk);
//! - sysfs values: trimmed text, decimal `u64`, hex `u16` ([`read_trimmed`], [`read_u64`],
//!   [`read_hex_u16`]);
//! - opening a file for a streaming header reader ([`open_sized`]) or for repeated reads
//!   from its start ([`open`], [`read_at_start`]), and which file an open file is
//!   ([`identity`]: one file reached through several names is read once; procfs files kept
//!   open between readings are `super::kept`'s).
//!
//! Asking about a path rather than reading it — `exists`, `metadata`, `canonicalize`,
//! `read_link`, and the DRM walk's `readlinkat` on fds below a directory opened here — stays
//! with the caller.
//!
//! Every error carries the path ([`Error::from_io`]: a vanished process is
//! [`Error::NotFound`]). A caller whose behaviour for a missing value is "skip" calls `.ok()`
//! on the result; none of these readers drops an error itself.
//!
//! Every whole-file read goes through one function that takes a [`Cap`], so the limit for each
//! kind of file is set here, in one place. The caps are generous: far above any real file of
//! that kind. A read stops at its cap (it never reads to the end first), and only a regular
//! file is read: a FIFO, a device node (`/dev/zero`) or a socket where a file is expected is
//! refused without blocking ([`Error::NotAFile`]), whether it sits in a hostile `/proc` tree
//! or is a user's model path.

use std::fs::File;
use std::io::{self, Read as _};
#[cfg(unix)]
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};

#[cfg(unix)]
use nix::dir::Dir;
#[cfg(unix)]
use nix::fcntl::OFlag;
#[cfg(unix)]
use nix::sys::stat::Mode;

mod numeric;
// Platform seam: the same readers over std::fs where there is no POSIX `openat`/`pread`
// (Windows). Only a fixture tree passed through `Roots` is read there; the native readers
// live in `crate::platform`.
#[cfg(not(unix))]
mod portable;
#[cfg(not(unix))]
pub(crate) use portable::{
    numeric_entries, open_dir, open_dir_at, open_regular, read_at_start, read_link_at,
};

#[cfg(unix)]
use numeric::parse_numeric;

use crate::system::roots::Roots;
use crate::types::error::{Error, ParseError};

/// The most bytes one read may return. Each kind of file has its own, a generous multiple of
/// the largest file of that kind a real kernel writes; a file beyond it is refused unread
/// ([`Error::TooLarge`]), so a hostile `/proc` (a container's, a FUSE mount) costs at most the
/// cap in memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Cap(u64);

impl Cap {
    /// `/proc/<pid>/stat`: one line of 52 fields, about 300 bytes (a `comm` of at most 64).
    pub(crate) const STAT: Cap = Cap(4 << 10);
    /// `/proc/<pid>/status`: about 1.5 KiB; its `Groups:` line may list up to 65,536 groups
    /// (`NGROUPS_MAX`, about 720 KiB).
    pub(crate) const STATUS: Cap = Cap(1 << 20);
    /// `/proc/<pid>/statm`: seven numbers.
    pub(crate) const STATM: Cap = Cap(4 << 10);
    /// `/proc/<pid>/comm`: at most 64 bytes (16 for user processes).
    pub(crate) const COMM: Cap = Cap(4 << 10);
    /// `/proc/<pid>/cmdline`: only this much of the start is read (argv\[0\] is all that is
    /// used), however long the command line (it can be hundreds of MB).
    pub(crate) const CMDLINE_PREFIX: Cap = Cap(8 << 10);
    /// `/proc/meminfo`: about 1.5 KiB.
    pub(crate) const MEMINFO: Cap = Cap(64 << 10);
    /// `/proc/<pid>/smaps_rollup`: about 1 KiB.
    pub(crate) const SMAPS_ROLLUP: Cap = Cap(64 << 10);
    /// `/proc/<pid>/cgroup`: a line per hierarchy (about 13 on cgroup v1).
    pub(crate) const PROC_CGROUP: Cap = Cap(64 << 10);
    /// `/proc/<pid>/fdinfo/<fd>` of a DRM client: under 1 KiB on every driver seen.
    pub(crate) const FDINFO: Cap = Cap(64 << 10);
    /// `/proc/stat`: a line per CPU and a count per interrupt (hundreds of KiB on the largest
    /// machines).
    pub(crate) const PROC_STAT: Cap = Cap(4 << 20);
    /// `/proc/<pid>/task/<tid>/children`: a pid per child.
    pub(crate) const CHILDREN: Cap = Cap(4 << 20);
    /// Any other procfs file (one per process).
    pub(crate) const PROC_OTHER: Cap = Cap(64 << 10);
    /// A sysfs attribute (also `/proc/sys` values and KFD files): at most one page, 4 KiB
    /// (64 KiB on kernels with 64 KiB pages).
    pub(crate) const SYSFS: Cap = Cap(64 << 10);
    /// `cgroup.procs`: a pid per line (a million pids).
    pub(crate) const CGROUP_PROCS: Cap = Cap(8 << 20);

    /// At most `bytes` (a user file whose format sets the limit).
    #[cfg_attr(not(feature = "models"), allow(dead_code))]
    pub(crate) const fn bytes(bytes: u64) -> Cap {
        Cap(bytes)
    }

    /// The limit in bytes.
    pub(crate) const fn limit(self) -> u64 {
        self.0
    }

    /// The cap of `<proc>/<pid>/<file>`.
    fn of_pid_file(file: &str) -> Cap {
        match file {
            "stat" => Cap::STAT,
            "status" => Cap::STATUS,
            "statm" => Cap::STATM,
            "comm" => Cap::COMM,
            "smaps_rollup" => Cap::SMAPS_ROLLUP,
            "cgroup" => Cap::PROC_CGROUP,
            _ => Cap::PROC_OTHER,
        }
    }
}

/// What a file that is not regular is, in words.
#[cfg(unix)]
fn kind_of(t: std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt;
    if t.is_fifo() {
        "fifo"
    } else if t.is_char_device() {
        "character device"
    } else if t.is_block_device() {
        "block device"
    } else if t.is_socket() {
        "socket"
    } else if t.is_dir() {
        "directory"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading only if it is a regular file (after following symlinks): opened
/// with `O_NONBLOCK`, so a FIFO with no writer cannot block the open, then checked with
/// `fstat`; a FIFO, device node or socket is refused unread ([`Error::NotAFile`]). procfs,
/// sysfs and cgroupfs files are regular files (of size 0 or 4096), so every kernel file passes.
/// `O_NONBLOCK` is cleared again before the file is returned.
///
/// # Errors
/// [`Error::NotAFile`]; [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`]
/// naming the file.
#[cfg(unix)]
fn open_regular(path: &Path) -> Result<File, Error> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_NOCTTY)
        .open(path)
        .map_err(|e| Error::from_io(path, e))?;
    let md = file.metadata().map_err(|e| Error::from_io(path, e))?;
    if !md.file_type().is_file() {
        return Err(Error::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(md.file_type()),
        });
    }
    nix::fcntl::fcntl(&file, nix::fcntl::FcntlArg::F_SETFL(OFlag::empty()))
        .map_err(|e| Error::from_io(path, io::Error::from(e)))?;
    Ok(file)
}

/// Reads at most `limit` bytes of an open file; the flag says whether there was more. Never
/// reads more than `limit + 1` bytes, whatever the file's length.
fn read_capped(file: &File, limit: u64, path: &Path) -> Result<(Vec<u8>, bool), Error> {
    // A chunk, not the whole cap, up front: most kernel files are far smaller than their cap.
    let mut bytes =
        Vec::with_capacity(usize::try_from(limit.saturating_add(1).min(4096)).unwrap_or(4096));
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(|e| Error::from_io(path, e))?;
    let over = bytes.len() as u64 > limit;
    if over {
        bytes.truncate(usize::try_from(limit).unwrap_or(usize::MAX));
    }
    Ok((bytes, over))
}

/// Reads at most `cap` bytes of `path`: `Ok(None)` when the file is longer, so a huge file is
/// refused without being read into memory (a user file's reader words the refusal, naming its
/// own limit). Every whole-file read goes through here: the file must be a regular file
/// ([`open_regular`]), and no more than `cap + 1` bytes are read.
///
/// # Errors
/// [`Error::NotFound`], [`Error::PermissionDenied`], [`Error::NotAFile`] or [`Error::Io`]
/// naming the file.
pub(crate) fn read_bounded(path: &Path, cap: Cap) -> Result<Option<Vec<u8>>, Error> {
    let file = open_regular(path)?;
    let (bytes, over) = read_capped(&file, cap.0, path)?;
    Ok((!over).then_some(bytes))
}

/// The first `cap` bytes of `path` (all of it when shorter): for a file of which only the
/// start is used (`cmdline`'s argv\[0\]).
///
/// # Errors
/// As [`read_bounded`].
pub(crate) fn read_prefix(path: &Path, cap: Cap) -> Result<Vec<u8>, Error> {
    let file = open_regular(path)?;
    Ok(read_capped(&file, cap.0, path)?.0)
}

/// Reads a whole kernel file.
///
/// # Errors
/// As [`read_bounded`]; [`Error::TooLarge`] when the file is longer than `cap`.
pub(crate) fn read_bytes(path: &Path, cap: Cap) -> Result<Vec<u8>, Error> {
    read_bounded(path, cap)?.ok_or_else(|| Error::TooLarge {
        path: path.to_path_buf(),
        limit: cap.0,
    })
}

/// Reads a whole kernel file as UTF-8 text.
///
/// # Errors
/// As [`read_bytes`]; [`Error::Io`] (`InvalidData`) when the text is not UTF-8.
pub(crate) fn read_string(path: &Path, cap: Cap) -> Result<String, Error> {
    String::from_utf8(read_bytes(path, cap)?).map_err(|_| {
        Error::from_io(
            path,
            io::Error::new(
                io::ErrorKind::InvalidData,
                "stream did not contain valid UTF-8",
            ),
        )
    })
}

/// Reads a whole file and hands its text to a pure parser, attaching the path to the parser's
/// error.
///
/// # Errors
/// As [`read_string`]; [`Error::Parse`] naming the file (and line) when `parse` fails.
pub(crate) fn read_parsed<T>(
    path: &Path,
    cap: Cap,
    parse: impl FnOnce(&str) -> std::result::Result<T, ParseError>,
) -> Result<T, Error> {
    parse(&read_string(path, cap)?).map_err(|e| e.at(path))
}

/// Reads `<proc>/<pid>/<file>` into a pure parser, as text decoded lossily: in a procfs file
/// only what a process or user names — `status`'s `Name:`, a cgroup path — can be other than
/// UTF-8, and such a name must not make the whole file (the owner, the RSS) unreadable. A
/// parser that needs a name's exact bytes reads them with [`read_pid_bytes`].
///
/// # Errors
/// [`Error::NotFound`] when the process is gone, [`Error::PermissionDenied`] when its file is
/// hidden from this user, [`Error::Parse`] naming the file when `parse` fails.
pub(crate) fn read_pid_file<T>(
    roots: &Roots,
    pid: u32,
    file: &str,
    parse: impl FnOnce(&str) -> std::result::Result<T, ParseError>,
) -> Result<T, Error> {
    read_pid_bytes(roots, pid, file, |b| parse(&String::from_utf8_lossy(b)))
}

/// Reads `<proc>/<pid>/<file>` into a pure parser of its bytes (`stat`, whose `comm` is kept
/// as bytes).
///
/// # Errors
/// As [`read_pid_file`].
pub(crate) fn read_pid_bytes<T>(
    roots: &Roots,
    pid: u32,
    file: &str,
    parse: impl FnOnce(&[u8]) -> std::result::Result<T, ParseError>,
) -> Result<T, Error> {
    let path = roots.pid_file(pid, file);
    parse(&read_bytes(&path, Cap::of_pid_file(file))?).map_err(|e| e.at(&path))
}

/// A sysfs attribute's text, surrounding whitespace removed.
///
/// # Errors
/// As [`read_string`].
pub(crate) fn read_trimmed(path: &Path) -> Result<String, Error> {
    Ok(read_string(path, Cap::SYSFS)?.trim().to_string())
}

/// A decimal sysfs value (`1048576\n`).
///
/// # Errors
/// As [`read_string`]; [`Error::Parse`] naming the file when it holds no number.
pub(crate) fn read_u64(path: &Path) -> Result<u64, Error> {
    read_parsed(path, Cap::SYSFS, parse_u64)
}

/// A hexadecimal sysfs id, with or without `0x` (`0x1002\n`).
///
/// # Errors
/// As [`read_u64`].
pub(crate) fn read_hex_u16(path: &Path) -> Result<u16, Error> {
    read_parsed(path, Cap::SYSFS, parse_hex_u16)
}

/// A decimal value, surrounding whitespace ignored (pure).
pub(crate) fn parse_u64(text: &str) -> std::result::Result<u64, ParseError> {
    let t = text.trim();
    t.parse()
        .map_err(|_| ParseError::new(format!("not a number: {t:?}")))
}

/// A hexadecimal 16-bit value, with or without `0x`, surrounding whitespace ignored (pure).
pub(crate) fn parse_hex_u16(text: &str) -> std::result::Result<u16, ParseError> {
    let t = text.trim();
    u16::from_str_radix(t.trim_start_matches("0x"), 16)
        .map_err(|_| ParseError::new(format!("not a 16-bit hex number: {t:?}")))
}

/// The entries of a directory, as paths under it (in the order the kernel lists them).
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`] naming the directory.
pub(crate) fn list_dir(dir: &Path) -> Result<Vec<PathBuf>, Error> {
    let entries = std::fs::read_dir(dir).map_err(|e| Error::from_io(dir, e))?;
    Ok(entries.flatten().map(|e| e.path()).collect())
}

#[cfg(unix)]
const DIR_FLAGS: OFlag = OFlag::O_RDONLY
    .union(OFlag::O_DIRECTORY)
    .union(OFlag::O_CLOEXEC);

/// Opens a directory for listing and for `openat`-relative reads below it.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`] naming the directory.
#[cfg(unix)]
pub(crate) fn open_dir(dir: &Path) -> Result<Dir, Error> {
    Dir::open(dir, DIR_FLAGS, Mode::empty()).map_err(|e| Error::from_io(dir, io::Error::from(e)))
}

/// Opens `name` (relative, such as `1234/fd`) below `parent`, which was opened from
/// `parent_path` (used only to name the path in an error).
///
/// # Errors
/// As [`open_dir`]; a vanished process is [`Error::NotFound`].
#[cfg(unix)]
pub(crate) fn open_dir_at(parent: &Dir, parent_path: &Path, name: &str) -> Result<Dir, Error> {
    Dir::openat(parent.as_fd(), name, DIR_FLAGS, Mode::empty())
        .map_err(|e| Error::from_io(parent_path.join(name), io::Error::from(e)))
}

/// The entries of an open directory whose names are decimal numbers (pids, tids, fds); every
/// other entry (`self`, `meminfo`, `.`) is skipped.
#[cfg(unix)]
pub(crate) fn numeric_entries(dir: &mut Dir) -> Vec<u32> {
    dir.iter()
        .flatten()
        .filter_map(|e| parse_numeric(e.file_name().to_bytes()))
        .collect()
}

/// The numeric entries of a directory: the pids of a proc root, the tids of a `task`
/// directory, the pids of KFD's `proc`. One readdir.
///
/// # Errors
/// As [`open_dir`].
pub(crate) fn list_pids(dir: &Path) -> Result<Vec<u32>, Error> {
    Ok(numeric_entries(&mut open_dir(dir)?))
}

/// The numeric entries of a directory with the inode number each entry had in the listing
/// (readdir's `d_ino`): for a proc root, a new process — even one with a reused pid — has a
/// new inode. One readdir. Where the platform gives no inode in a listing (a proc root read
/// on Windows), each is 0: unknown.
///
/// # Errors
/// As [`open_dir`].
#[cfg(unix)]
pub(crate) fn list_pid_inodes(dir: &Path) -> Result<Vec<(u32, u64)>, Error> {
    Ok(open_dir(dir)?
        .iter()
        .flatten()
        .filter_map(|e| Some((parse_numeric(e.file_name().to_bytes())?, e.ino())))
        .collect())
}

/// See the Unix version: no inode numbers, so each is 0 (unknown).
///
/// # Errors
/// As [`open_dir`].
#[cfg(not(unix))]
pub(crate) fn list_pid_inodes(dir: &Path) -> Result<Vec<(u32, u64)>, Error> {
    Ok(list_pids(dir)?.into_iter().map(|pid| (pid, 0)).collect())
}

/// The target of the symlink `name` in an open directory (`readlinkat`: an fd of
/// `/proc/<pid>/fd`), as bytes.
///
/// # Errors
/// The `nix` error of `readlinkat` (the fd was closed meanwhile).
#[cfg(unix)]
pub(crate) fn read_link_at(dir: &Dir, name: &str) -> Result<Vec<u8>, Error> {
    use std::os::unix::ffi::OsStringExt as _;
    nix::fcntl::readlinkat(dir.as_fd(), name)
        .map(std::ffi::OsString::into_vec)
        .map_err(|e| Error::from_io(name, io::Error::from(e)))
}

/// Opens a user file for a streaming reader, with its length (a regular file only).
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::NotAFile`] / [`Error::Io`]
/// naming the file.
#[cfg_attr(not(feature = "models"), allow(dead_code))]
pub(crate) fn open_sized(path: &Path) -> Result<(File, u64), Error> {
    let f = open(path)?;
    let len = f.metadata().map_err(|e| Error::from_io(path, e))?.len();
    Ok((f, len))
}

/// Which file an open file is: its device and inode numbers (`fstat` of the file itself, the
/// final target of every symbolic link), so two names of one file give the same identity.
#[cfg(unix)]
#[cfg_attr(not(feature = "models"), allow(dead_code))]
pub(crate) fn identity(file: &File) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt as _;
    file.metadata().ok().map(|m| (m.dev(), m.ino()))
}

/// See the Unix version: `None` (std gives no stable file index on Windows), so names of one
/// file are not recognised as one.
#[cfg(not(unix))]
#[cfg_attr(not(feature = "models"), allow(dead_code))]
pub(crate) fn identity(file: &File) -> Option<(u64, u64)> {
    let _ = file;
    None
}

/// Opens a regular file for reading (kept open by the caller, read with [`read_at_start`], or
/// streamed by a header reader that bounds what it reads); a FIFO or device is refused
/// ([`Error::NotAFile`]) rather than opened.
///
/// # Errors
/// As [`open_sized`].
pub(crate) fn open(path: &Path) -> Result<File, Error> {
    open_regular(path)
}

/// Reads a small file kept open from offset 0 into `buf` (one `pread` for a proc file, which
/// procfs regenerates when read from the start), returning the length; `buf`'s size is the
/// cap.
///
/// # Errors
/// [`Error::Io`] (or a classified kind) naming `path`.
#[cfg(unix)]
pub(crate) fn read_at_start(file: &File, buf: &mut [u8], path: &Path) -> Result<usize, Error> {
    use std::os::unix::fs::FileExt;
    let mut len = 0;
    while let Some(spare) = buf.get_mut(len..) {
        if spare.is_empty() {
            break;
        }
        match file.read_at(spare, len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::from_io(path, e)),
        }
    }
    Ok(len)
}

#[cfg(test)]
mod tests;
