//! `/proc/<pid>/cmdline`, the arguments a process was started with: the one reading of its
//! NUL-separated bytes ([`argv0`], [`cmdline_args`]; pure) and the one reader of the file
//! ([`read_cmdline`], through `fsread` with its cap). The name rule uses argv\[0\]
//! ([`super::display_name`]); `hmn top` shows the whole line.
//!
//! The file can be hundreds of MB (it is whatever the process put in its argument area), so
//! only its start is ever read.

use crate::system::fsread::{self, Cap};
use crate::system::roots::Roots;
use crate::types::error::Error;

/// The fields of a `cmdline`: the bytes between NULs, empty ones included.
fn fields(cmdline: &[u8]) -> impl Iterator<Item = &[u8]> {
    cmdline.split(|b| *b == 0)
}

/// argv\[0\]: the bytes before the first NUL (all of them when there is none; pure).
pub fn argv0(cmdline: &[u8]) -> &[u8] {
    fields(cmdline).next().unwrap_or_default()
}

/// The arguments of a `cmdline`, empty ones left out (pure).
///
/// ```
/// use hypomnesis::process::cmdline_args;
/// let args: Vec<&[u8]> = cmdline_args(b"python3\0train.py\0\0--epochs\0").collect();
/// assert_eq!(args, [&b"python3"[..], b"train.py", b"--epochs"]);
/// ```
pub fn cmdline_args(cmdline: &[u8]) -> impl Iterator<Item = &[u8]> {
    fields(cmdline).filter(|a| !a.is_empty())
}

/// The first `limit` bytes of `pid`'s `cmdline` (all of it when shorter), never more than
/// 8 KiB whatever `limit` asks; only a regular file is read (a FIFO in a fixture tree never
/// blocks).
///
/// # Errors
/// [`Error::NotFound`] when the process does not exist, [`Error::PermissionDenied`],
/// [`Error::NotAFile`] or [`Error::Io`] naming the file.
pub fn read_cmdline(roots: &Roots, pid: u32, limit: u64) -> Result<Vec<u8>, Error> {
    let cap = Cap::bytes(limit.min(Cap::CMDLINE_PREFIX.limit()));
    fsread::read_prefix(&roots.pid_file(pid, "cmdline"), cap)
}

/// The start of `pid`'s `cmdline` as far as it holds argv\[0\] whole: empty when the file
/// cannot be read, or when argv\[0\] runs past what is read (its basename would be wrong).
pub(crate) fn read_for_argv0(roots: &Roots, pid: u32) -> Vec<u8> {
    let limit = Cap::CMDLINE_PREFIX.limit();
    let mut cmdline = read_cmdline(roots, pid, limit).unwrap_or_default();
    if cmdline.len() as u64 >= limit && !cmdline.contains(&0) {
        cmdline.clear();
    }
    cmdline
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv0_is_the_first_field_even_when_empty() {
        assert_eq!(argv0(b"/usr/bin/python3\0train.py\0"), b"/usr/bin/python3");
        assert_eq!(argv0(b"postgres: checkpointer"), b"postgres: checkpointer");
        assert_eq!(argv0(b"\0x\0"), b"");
        assert_eq!(argv0(b""), b"");
    }

    #[test]
    fn arguments_leave_empty_fields_out() {
        let args: Vec<&[u8]> = cmdline_args(b"\0a\0\0b c\0").collect();
        assert_eq!(args, [&b"a"[..], b"b c"]);
        assert_eq!(cmdline_args(b"\0\0").count(), 0);
    }

    #[test]
    fn a_read_stops_at_its_limit_and_at_eight_kib() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path().join("7");
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("cmdline"), vec![b'a'; 20_000]).unwrap();
        let roots = Roots::system().with_proc(dir.path());
        assert_eq!(read_cmdline(&roots, 7, 1025).unwrap().len(), 1025);
        assert_eq!(read_cmdline(&roots, 7, u64::MAX).unwrap().len(), 8 << 10);
        // argv[0] cut by the read: nothing of it is used.
        assert!(read_for_argv0(&roots, 7).is_empty());
        assert!(read_cmdline(&roots, 8, 10).unwrap_err().is_not_found());
    }
}
