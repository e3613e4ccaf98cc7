//! The files `hmn` itself opens for reading (a `top --replay` recording, a process's command
//! line for the `top` detail pane): opened so that a FIFO or device where a file is expected
//! never blocks the open. The caller checks that what it got is a regular file.
//!
//! Platform seam: `O_NONBLOCK` (and, on request, `O_NOFOLLOW`) on Unix; on Windows a plain
//! open, which does not block on the kinds of files Windows has there.

use std::fs::File;
use std::path::Path;

/// Opens `path` for reading without blocking on a FIFO; `follow_links: false` refuses a
/// symbolic link as the last component (Unix).
///
/// # Errors
/// The open's error.
pub fn open_nonblocking(path: &Path, follow_links: bool) -> std::io::Result<File> {
    let mut o = std::fs::OpenOptions::new();
    o.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        let nofollow = if follow_links {
            0
        } else {
            nix::libc::O_NOFOLLOW
        };
        o.custom_flags(nix::libc::O_NONBLOCK | nix::libc::O_CLOEXEC | nofollow);
    }
    #[cfg(not(unix))]
    let _ = follow_links;
    o.open(path)
}
