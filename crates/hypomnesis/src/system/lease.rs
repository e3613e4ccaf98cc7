//! Advisory device leases: how concurrent `hmn pick` / `hmn run --gpu` invocations keep from
//! handing one GPU to two commands before either has allocated — one lock file per device in
//! a shared directory, each holding the reservations ([`Reservation`]) made on that device.
//!
//! - **The directory** ([`lock_dir`]): `$HMN_LOCK_DIR` (created if missing); else the first
//!   usable of `/run/hmn` (if it exists: packaging ships it), `/dev/shm/hmn-locks`,
//!   `/tmp/hmn-locks` (created `01777`; an existing one is used only when it is a real
//!   directory, sticky, and world-writable or ours), `$XDG_RUNTIME_DIR/hmn` (this user's
//!   commands only). Containers have private `/tmp` and `/dev/shm`: coordinating across them
//!   needs a shared `HMN_LOCK_DIR`.
//! - **The file** of a device: `<dir>/<key>.lock`, the key its UUID or PCI address reduced to
//!   `[A-Za-z0-9._-]` ([`lock_key`]); opened without following a symlink, mode 0666 so other
//!   users can add their reservations (the sticky bit keeps them from deleting it).
//! - **A claim** ([`LockDir::lock`]) takes `flock(LOCK_EX)` (waiting a bounded time), checks the
//!   path still names the locked file, reads the reservations, drops the dead ones
//!   ([`Reservation::is_live`]: its lease passed, another boot, or its holder process gone),
//!   and writes back what it decides. The lock is held for milliseconds; nothing waits on a
//!   lock held by a running command, so there is no deadlock whatever the order of devices.
//! - **Bad content** (a file over 4 KiB, a line that does not parse) is no reservation.
//!
//! Unix only: elsewhere [`lock_dir`] says why picks are not coordinated.

#[cfg(unix)]
use std::fs::File;
#[cfg(unix)]
use std::io::{Read as _, Seek as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

/// Environment variable naming the lock directory.
pub const ENV_LOCK_DIR: &str = "HMN_LOCK_DIR";
/// A lock file larger than this is bad content (no reservations).
#[cfg(unix)]
const MAX_FILE: u64 = 4 << 10;
/// Reservations kept per device, newest last.
#[cfg(unix)]
const MAX_RECORDS: usize = 32;

/// Why device locks cannot be used: no lock directory, or a lock file that cannot be opened,
/// locked or written. `Display` is the text `hmn pick` shows (after "no lock directory: ").
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum LeaseError {
    /// Device locks need `flock(2)`: not on this platform.
    #[error("device locks need flock(2) (Unix)")]
    Unsupported,
    /// An I/O error on a path (a directory that could not be made or read, a lock file that
    /// could not be opened or written).
    #[error("{}: {source}", path.display())]
    Io {
        /// The path.
        path: PathBuf,
        /// The error.
        source: Arc<std::io::Error>,
    },
    /// Something other than a directory where the lock directory goes.
    #[error("{}: not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// A shared default directory that is not sticky and world-writable (nor ours): others
    /// could remove our lock files.
    #[error("{}: not sticky and world-writable ({mode:o})", path.display())]
    NotShareable {
        /// The directory.
        path: PathBuf,
        /// Its permission bits.
        mode: u32,
    },
    /// No default directory is usable: why not, for each one tried.
    #[error("{}", joined(tried))]
    NoDirectory {
        /// Each directory tried, and why it is not usable.
        tried: Vec<LeaseError>,
    },
    /// Another holder kept the lock past the wait.
    #[error("{}: no lock within {wait:?} ({source})", path.display())]
    Busy {
        /// The lock file.
        path: PathBuf,
        /// How long was waited.
        wait: Duration,
        /// The last `flock` error.
        source: Arc<std::io::Error>,
    },
    /// The file at the lock's path kept being replaced between its open and its lock.
    #[error("{}: the file keeps changing", path.display())]
    Unstable {
        /// The lock file.
        path: PathBuf,
    },
    /// A write through a lock that holds no file.
    #[error("{}: not locked", path.display())]
    NotLocked {
        /// The lock file.
        path: PathBuf,
    },
}

impl LeaseError {
    /// An I/O error on `path`.
    #[cfg(unix)]
    fn io(path: &Path, e: std::io::Error) -> LeaseError {
        LeaseError::Io {
            path: path.to_path_buf(),
            source: Arc::new(e),
        }
    }
}

fn joined(tried: &[LeaseError]) -> String {
    tried
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join("; ")
}

/// One reservation of device memory.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Reservation {
    /// Tells this reservation from others (for its release).
    pub token: u64,
    /// The process holding it (`hmn run`), or 0: a lease only (`hmn pick`, whose command is
    /// started by someone else).
    pub pid: u32,
    /// The holder's start time (clock ticks since boot), with `pid` its identity.
    pub start_ticks: u64,
    /// The boot it was made in (`/proc/sys/kernel/random/boot_id`).
    pub boot_id: String,
    /// When it lapses, ms since the Unix epoch.
    pub until_unix_ms: u64,
    /// The memory reserved, bytes.
    pub need_bytes: u64,
    /// Who made it.
    pub uid: u32,
}

impl Reservation {
    /// A reservation.
    pub fn new(token: u64, need_bytes: u64, until_unix_ms: u64) -> Reservation {
        Reservation {
            token,
            pid: 0,
            start_ticks: 0,
            boot_id: String::new(),
            until_unix_ms,
            need_bytes,
            uid: 0,
        }
    }

    /// The record's line.
    pub fn to_line(&self) -> String {
        let boot = if self.boot_id.is_empty() {
            "-"
        } else {
            &self.boot_id
        };
        format!(
            "v1 token={:x} pid={} start={} boot={boot} until={} need={} uid={}",
            self.token, self.pid, self.start_ticks, self.until_unix_ms, self.need_bytes, self.uid
        )
    }

    /// Parses one line (pure); `None` for anything else.
    pub fn parse(line: &str) -> Option<Reservation> {
        let mut it = line.split_ascii_whitespace();
        if it.next()? != "v1" {
            return None;
        }
        let mut r = Reservation::new(0, 0, 0);
        let mut seen = 0u8;
        for field in it {
            let (k, v) = field.split_once('=')?;
            match k {
                "token" => r.token = u64::from_str_radix(v, 16).ok()?,
                "pid" => r.pid = v.parse().ok()?,
                "start" => r.start_ticks = v.parse().ok()?,
                "boot" => {
                    let ok = v.len() <= 64 && v.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-');
                    if !ok {
                        return None;
                    }
                    r.boot_id = if v == "-" {
                        String::new()
                    } else {
                        v.to_string()
                    };
                }
                "until" => r.until_unix_ms = v.parse().ok()?,
                "need" => r.need_bytes = v.parse().ok()?,
                "uid" => r.uid = v.parse().ok()?,
                _ => return None,
            }
            seen += 1;
        }
        (seen == 7).then_some(r)
    }

    /// Whether it still holds at `now_ms` in boot `boot_id`, given the start time of its holder
    /// process as `/proc` shows it now (`None`: no such process).
    pub fn is_live(&self, now_ms: u64, boot_id: &str, holder_start: Option<u64>) -> bool {
        if self.until_unix_ms <= now_ms {
            return false;
        }
        if !self.boot_id.is_empty() && !boot_id.is_empty() && self.boot_id != boot_id {
            return false;
        }
        self.pid == 0 || holder_start == Some(self.start_ticks)
    }
}

/// Every well-formed reservation in a lock file's text (pure); a bad line is skipped.
pub fn parse_records(text: &str) -> Vec<Reservation> {
    text.lines().filter_map(Reservation::parse).collect()
}

/// A device's lock key: its UUID or PCI address with anything but `[A-Za-z0-9._-]` replaced by
/// `_` (at most 128 characters).
pub fn lock_key(id: &str) -> String {
    id.chars()
        .take(128)
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// The directory of device locks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockDir {
    /// Its path.
    pub path: PathBuf,
    /// Whether other users' commands share it (false: `$XDG_RUNTIME_DIR`, this user only).
    pub shared: bool,
}

/// Finds (or makes) the lock directory (see the [module docs](self)). `explicit`: the
/// `HMN_LOCK_DIR` value.
///
/// # Errors
/// Why none is usable, naming the paths tried.
#[cfg(unix)]
pub fn lock_dir(explicit: Option<&Path>) -> Result<LockDir, LeaseError> {
    use std::os::unix::fs::{MetadataExt as _, PermissionsExt as _};
    if let Some(p) = explicit.filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(p).map_err(|e| LeaseError::io(p, e))?;
        return match std::fs::symlink_metadata(p) {
            Ok(m) if m.is_dir() => Ok(LockDir {
                path: p.to_path_buf(),
                shared: true,
            }),
            Ok(_) => Err(LeaseError::NotADirectory {
                path: p.to_path_buf(),
            }),
            Err(e) => Err(LeaseError::io(p, e)),
        };
    }
    let run = Path::new("/run/hmn");
    if std::fs::symlink_metadata(run).is_ok_and(|m| m.is_dir()) {
        return Ok(LockDir {
            path: run.to_path_buf(),
            shared: true,
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    let mut tried = Vec::new();
    for base in ["/dev/shm", "/tmp"] {
        let dir = Path::new(base).join("hmn-locks");
        if std::fs::create_dir(&dir).is_ok() {
            // Against the umask: everyone may add a lock file, no one may delete another's.
            let _ = std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o1777));
        }
        match std::fs::symlink_metadata(&dir) {
            Ok(m) if m.is_dir() => {
                let mode = m.mode();
                let sticky = mode & 0o1000 != 0;
                if sticky && (mode & 0o002 != 0 || m.uid() == me) {
                    return Ok(LockDir {
                        path: dir,
                        shared: true,
                    });
                }
                tried.push(LeaseError::NotShareable {
                    path: dir,
                    mode: mode & 0o7777,
                });
            }
            Ok(_) => tried.push(LeaseError::NotADirectory { path: dir }),
            Err(e) => tried.push(LeaseError::io(&dir, e)),
        }
    }
    if let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").filter(|v| !v.is_empty()) {
        let dir = Path::new(&xdg).join("hmn");
        if std::fs::create_dir_all(&dir).is_ok() {
            return Ok(LockDir {
                path: dir,
                shared: false,
            });
        }
    }
    Err(LeaseError::NoDirectory { tried })
}

/// No device locks off Unix.
///
/// # Errors
/// Always: picks are not coordinated here.
#[cfg(not(unix))]
pub fn lock_dir(_explicit: Option<&Path>) -> Result<LockDir, LeaseError> {
    Err(LeaseError::Unsupported)
}

/// A device's lock file, locked. Unlocked when dropped.
#[derive(Debug)]
pub struct DeviceLock {
    #[cfg(unix)]
    file: Option<nix::fcntl::Flock<File>>,
    path: PathBuf,
}

#[cfg(unix)]
impl LockDir {
    /// Locks device `key`'s file, waiting up to `wait` for another holder (which holds it for
    /// milliseconds).
    ///
    /// # Errors
    /// The file cannot be opened (a symlink in its place, no permission), or the lock was not
    /// had within `wait`.
    pub fn lock(&self, key: &str, wait: Duration) -> Result<DeviceLock, LeaseError> {
        use nix::fcntl::{Flock, FlockArg, OFlag};
        use std::os::unix::fs::{MetadataExt as _, OpenOptionsExt as _, PermissionsExt as _};
        let path = self.path.join(format!("{}.lock", lock_key(key)));
        let deadline = std::time::Instant::now() + wait;
        for _ in 0..2 {
            let created = !path.exists();
            let file = std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o666)
                .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
                .open(&path)
                .map_err(|e| LeaseError::io(&path, e))?;
            if created && self.shared {
                let _ = file.set_permissions(std::fs::Permissions::from_mode(0o666));
            }
            let mut file = file;
            let locked = loop {
                match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                    Ok(l) => break l,
                    Err((f, nix::errno::Errno::EWOULDBLOCK | nix::errno::Errno::EINTR))
                        if std::time::Instant::now() < deadline =>
                    {
                        file = f;
                        std::thread::sleep(Duration::from_millis(10));
                    }
                    Err((_, e)) => {
                        return Err(LeaseError::Busy {
                            path,
                            wait,
                            source: Arc::new(std::io::Error::from(e)),
                        });
                    }
                }
            };
            // The file may have been replaced between open and lock (a cleaner removing old
            // files): lock the one the path names.
            let same = match (locked.metadata(), std::fs::symlink_metadata(&path)) {
                (Ok(a), Ok(b)) => a.ino() == b.ino() && a.dev() == b.dev(),
                _ => false,
            };
            if same {
                return Ok(DeviceLock {
                    file: Some(locked),
                    path,
                });
            }
            release(locked);
        }
        Err(LeaseError::Unstable { path })
    }
}

#[cfg(not(unix))]
impl LockDir {
    /// No locks off Unix.
    ///
    /// # Errors
    /// Always.
    pub fn lock(&self, _key: &str, _wait: Duration) -> Result<DeviceLock, LeaseError> {
        Err(LeaseError::Unsupported)
    }
}

/// Unlocks; if unlocking fails the descriptor is closed without nix's drop (which would
/// panic), which releases the lock as well.
#[cfg(unix)]
fn release(l: nix::fcntl::Flock<File>) {
    match l.unlock() {
        Ok(f) => drop(f),
        Err((l, _)) => std::mem::forget(l),
    }
}

impl DeviceLock {
    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The reservations in the file (none when it is over 4 KiB or unreadable).
    pub fn read(&mut self) -> Vec<Reservation> {
        #[cfg(unix)]
        if let Some(f) = self.file.as_mut() {
            let mut text = String::new();
            let ok = f.rewind().is_ok()
                && f.metadata().is_ok_and(|m| m.len() <= MAX_FILE)
                && std::io::Read::by_ref(&mut **f)
                    .take(MAX_FILE)
                    .read_to_string(&mut text)
                    .is_ok();
            if ok {
                return parse_records(&text);
            }
        }
        Vec::new()
    }

    /// Replaces the reservations (the newest `MAX_RECORDS` kept), synced to disk.
    ///
    /// # Errors
    /// The write's error, naming the file.
    pub fn write(&mut self, records: &[Reservation]) -> Result<(), LeaseError> {
        #[cfg(unix)]
        if let Some(f) = self.file.as_mut() {
            let skip = records.len().saturating_sub(MAX_RECORDS);
            let text: String = records
                .iter()
                .skip(skip)
                .map(|r| r.to_line() + "\n")
                .collect();
            return f
                .set_len(0)
                .and_then(|()| f.rewind())
                .and_then(|()| f.write_all(text.as_bytes()))
                .and_then(|()| f.sync_data())
                .map_err(|e| LeaseError::io(&self.path, e));
        }
        #[cfg(not(unix))]
        let _ = records;
        Err(LeaseError::NotLocked {
            path: self.path.clone(),
        })
    }
}

impl Drop for DeviceLock {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(l) = self.file.take() {
            release(l);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_round_trip_and_bad_lines_are_skipped() {
        let mut r = Reservation::new(0xabc, 40 << 30, 1_700_000_060_000);
        r.pid = 4242;
        r.start_ticks = 99;
        r.boot_id = "1c2d-3e".into();
        r.uid = 1000;
        let line = r.to_line();
        assert_eq!(Reservation::parse(&line), Some(r.clone()));
        let text = format!("{line}\ngarbage\nv1 token=zz pid=1\nv2 x=1\n{line} extra=1\n\n");
        assert_eq!(parse_records(&text), vec![r]);
        assert_eq!(
            Reservation::parse("v1 token=1 pid=0 start=0 boot=../x until=1 need=1 uid=0"),
            None
        );
    }

    #[test]
    fn a_reservation_lapses_with_time_boot_and_holder() {
        let mut r = Reservation::new(1, 1, 1_000);
        r.boot_id = "b1".into();
        assert!(r.is_live(999, "b1", None), "a pick's lease: time only");
        assert!(!r.is_live(1_000, "b1", None));
        assert!(!r.is_live(10, "b2", None), "another boot");
        r.pid = 7;
        r.start_ticks = 5;
        assert!(r.is_live(10, "b1", Some(5)));
        assert!(!r.is_live(10, "b1", Some(6)), "the pid was reused");
        assert!(!r.is_live(10, "b1", None), "the holder is gone");
    }

    #[test]
    fn keys_are_file_names() {
        assert_eq!(lock_key("GPU-3a1f7c2e-5b9d"), "GPU-3a1f7c2e-5b9d");
        assert_eq!(lock_key("0000:1a:00.0"), "0000_1a_00.0");
        assert_eq!(lock_key("../../etc/passwd"), ".._.._etc_passwd");
        assert_eq!(lock_key(&"x".repeat(300)).len(), 128);
    }

    #[cfg(unix)]
    #[test]
    fn locks_exclude_each_other_and_keep_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let locks = lock_dir(Some(&dir.path().join("locks"))).unwrap();
        let mut a = locks.lock("GPU-1", Duration::from_millis(50)).unwrap();
        let e = locks.lock("GPU-1", Duration::from_millis(50)).unwrap_err();
        assert!(matches!(e, LeaseError::Busy { .. }), "{e:?}");
        assert!(e.to_string().contains("GPU-1.lock: no lock within"), "{e}");
        assert!(locks.lock("GPU-2", Duration::from_millis(50)).is_ok());
        a.write(&[Reservation::new(1, 2, 3)]).unwrap();
        drop(a);
        let mut b = locks.lock("GPU-1", Duration::from_millis(50)).unwrap();
        assert_eq!(b.read(), vec![Reservation::new(1, 2, 3)]);
        // A symlink where the lock file goes is refused, never followed.
        let target = dir.path().join("elsewhere");
        std::os::unix::fs::symlink(&target, locks.path.join("GPU-9.lock")).unwrap();
        assert!(matches!(
            locks.lock("GPU-9", Duration::from_millis(10)),
            Err(LeaseError::Io { .. })
        ));
        assert!(!target.exists());
        // Oversized content is no reservation.
        std::fs::write(locks.path.join("GPU-3.lock"), "v1 ".repeat(2000)).unwrap();
        assert!(
            locks
                .lock("GPU-3", Duration::from_millis(10))
                .unwrap()
                .read()
                .is_empty()
        );
        let file = dir.path().join("file");
        std::fs::write(&file, "").unwrap();
        let e = lock_dir(Some(&file)).unwrap_err();
        assert!(matches!(e, LeaseError::Io { .. }), "{e:?}");
        assert!(
            e.to_string().starts_with(&format!("{}: ", file.display())),
            "{e}"
        );
        // A symlink in the directory's place is refused, by what it is.
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&locks.path, &link).unwrap();
        let e = lock_dir(Some(&link)).unwrap_err();
        assert!(matches!(e, LeaseError::NotADirectory { .. }), "{e:?}");
        assert_eq!(
            e.to_string(),
            format!("{}: not a directory", link.display())
        );
    }

    #[test]
    fn no_usable_directory_names_each_one_tried() {
        let e = LeaseError::NoDirectory {
            tried: vec![
                LeaseError::NotShareable {
                    path: "/dev/shm/hmn-locks".into(),
                    mode: 0o755,
                },
                LeaseError::NotADirectory {
                    path: "/tmp/hmn-locks".into(),
                },
            ],
        };
        assert_eq!(
            e.to_string(),
            "/dev/shm/hmn-locks: not sticky and world-writable (755); /tmp/hmn-locks: not a \
             directory"
        );
        assert_eq!(
            LeaseError::Unsupported.to_string(),
            "device locks need flock(2) (Unix)"
        );
    }
}
