//! Recordings: snapshots as JSON Lines. [`write_line`] writes one snapshot as one line;
//! [`Recording::open`] reads a file back for `hmn top --replay`.
//!
//! Reading validates every line once (a malformed line is an error naming the file and the
//! line) and keeps only each line's offset and a few figures per device (for the history
//! charts); a snapshot is parsed again when it is shown, so a night's recording is not held in
//! memory. A last line without its newline that does not parse is what a crash leaves: it is
//! ignored, with a warning.

use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use super::snapshot::{FORMAT, Snapshot, VERSION};

/// The longest line read (a snapshot is bounded far below this).
pub const LINE_MAX: usize = 16 << 20;

/// Writes `snapshot` as one JSON line and flushes it.
///
/// # Errors
/// When the write or flush fails.
pub fn write_line(out: &mut dyn Write, snapshot: &Snapshot) -> io::Result<()> {
    let mut line = crate::output::json_vec(snapshot).map_err(io::Error::from)?;
    line.push(b'\n');
    out.write_all(&line)?;
    out.flush()
}

/// Why a recording cannot be replayed: one line naming the file (and the line).
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The file cannot be opened or read.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// What happened.
        source: io::Error,
    },
    /// Not a regular file (a FIFO, a directory, a device).
    #[error("{}: not a regular file", path.display())]
    NotRegular {
        /// The file.
        path: PathBuf,
    },
    /// A line that is not a snapshot.
    #[error("{} line {line}: {message}", path.display())]
    Malformed {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// No snapshot at all.
    #[error("{}: no snapshot in the file (is it a recording of `hmn record`?)", path.display())]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// What the history charts need of one device in one sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DevicePoint {
    pub index: u32,
    /// Used memory as a fraction of the total.
    pub memory: Option<f64>,
    /// Utilization, percent.
    pub utilization: Option<f64>,
}

/// One line of a recording.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub offset: u64,
    pub len: usize,
    pub unix_ms: u64,
    pub devices: Vec<DevicePoint>,
}

/// A recording, indexed.
#[derive(Debug)]
pub struct Recording {
    pub path: PathBuf,
    file: File,
    pub entries: Vec<Entry>,
    /// Set when a cut-off last line was ignored.
    pub warning: Option<String>,
}

/// The points of each device of a snapshot.
pub fn device_points(s: &Snapshot) -> Vec<DevicePoint> {
    s.devices
        .iter()
        .map(|d| DevicePoint {
            index: d.index,
            // The pool where the device has one (the device panel's bar shows it too).
            memory: match (d.pool_used_bytes(), d.pool_free_and_total().1) {
                (Some(u), Some(t)) if t > 0 => Some(u as f64 / t as f64),
                _ => None,
            },
            utilization: d.telemetry.utilization_percent,
        })
        .collect()
}

/// What every line starts with: the format and its version (the rest is skipped unread).
#[derive(serde::Deserialize)]
struct Header {
    format: Option<serde_json::Value>,
    version: Option<serde_json::Value>,
}

/// Parses one line as a snapshot of a version this build reads: version 2 as it is, version 1
/// through [`super::recording_v1`].
fn parse(line: &[u8]) -> Result<Snapshot, String> {
    let head: Header = serde_json::from_slice(line).map_err(|e| format!("not a snapshot: {e}"))?;
    match head.format.as_ref().and_then(serde_json::Value::as_str) {
        Some(FORMAT) => {}
        Some(other) => {
            return Err(format!(
                "not an hmn top snapshot (format {other:?}, expected {FORMAT:?})"
            ));
        }
        None => {
            return Err(format!(
                "not an hmn top snapshot (no \"format\": \"{FORMAT}\")"
            ));
        }
    }
    match head.version.as_ref().and_then(serde_json::Value::as_u64) {
        Some(2) => serde_json::from_slice(line).map_err(|e| format!("not a snapshot: {e}")),
        Some(0 | 1) => super::recording_v1::read(line),
        Some(n) => Err(format!(
            "format version {n} is newer than this hmn reads ({VERSION})"
        )),
        None => Err("not a snapshot: no format version".to_string()),
    }
}

impl Recording {
    /// Opens and indexes a recording.
    ///
    /// # Errors
    /// As [`ReplayError`]: the first malformed line stops the reading.
    pub fn open(path: &Path) -> Result<Recording, ReplayError> {
        let io_err = |source| ReplayError::Io {
            path: path.to_path_buf(),
            source,
        };
        // A FIFO is refused below instead of blocking the open.
        let file = crate::infile::open_nonblocking(path, true).map_err(io_err)?;
        if !file.metadata().map_err(io_err)?.is_file() {
            return Err(ReplayError::NotRegular {
                path: path.to_path_buf(),
            });
        }
        let mut reader = BufReader::with_capacity(1 << 16, file.try_clone().map_err(io_err)?);
        let mut entries = Vec::new();
        let mut warning = None;
        let mut offset = 0u64;
        let mut line_no = 0usize;
        let mut buf = Vec::new();
        loop {
            buf.clear();
            let n = (&mut reader)
                .take(LINE_MAX as u64 + 1)
                .read_until(b'\n', &mut buf)
                .map_err(io_err)?;
            if n == 0 {
                break;
            }
            line_no += 1;
            let complete = buf.last() == Some(&b'\n');
            let malformed = |message: String| ReplayError::Malformed {
                path: path.to_path_buf(),
                line: line_no,
                message,
            };
            if !complete && n > LINE_MAX {
                return Err(malformed(format!("longer than {} MiB", LINE_MAX >> 20)));
            }
            let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
            if text.iter().all(u8::is_ascii_whitespace) {
                offset += n as u64;
                continue;
            }
            match parse(text) {
                Ok(s) => entries.push(Entry {
                    offset,
                    len: text.len(),
                    unix_ms: s.unix_ms,
                    devices: device_points(&s),
                }),
                Err(_) if !complete => {
                    warning = Some(format!(
                        "{}: line {line_no} is cut off (the recording stopped mid-line); ignored",
                        path.display()
                    ));
                }
                Err(message) => return Err(malformed(message)),
            }
            offset += n as u64;
        }
        if entries.is_empty() {
            return Err(ReplayError::Empty {
                path: path.to_path_buf(),
            });
        }
        Ok(Recording {
            path: path.to_path_buf(),
            file,
            entries,
            warning,
        })
    }

    /// How many snapshots the recording holds.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Reads snapshot `i` (clamped to the last).
    ///
    /// # Errors
    /// When the file changed under us (a read or parse failure), in one line.
    pub fn get(&mut self, i: usize) -> Result<Snapshot, String> {
        let Some(e) = self
            .entries
            .get(i.min(self.entries.len().saturating_sub(1)))
        else {
            return Err("empty recording".to_string());
        };
        let mut buf = vec![0u8; e.len];
        self.file
            .seek(SeekFrom::Start(e.offset))
            .and_then(|_| self.file.read_exact(&mut buf))
            .map_err(|err| format!("{}: {err}", self.path.display()))?;
        parse(&buf).map_err(|m| format!("{}: {m}", self.path.display()))
    }

    /// The index of the last snapshot taken at or before `unix_ms` (0 when none is).
    pub fn at_or_before(&self, unix_ms: u64) -> usize {
        self.entries
            .partition_point(|e| e.unix_ms <= unix_ms)
            .saturating_sub(1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(t: u64) -> Vec<u8> {
        let mut v = Vec::new();
        write_line(&mut v, &Snapshot::empty(t, 1000)).unwrap();
        v
    }

    fn file(content: &[u8]) -> (tempfile::TempDir, PathBuf) {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("rec.jsonl");
        std::fs::write(&p, content).unwrap();
        (d, p)
    }

    #[test]
    fn reads_back_what_was_written() {
        let mut content = line(1000);
        content.extend(line(2000));
        content.extend(line(3000));
        let (_d, p) = file(&content);
        let mut r = Recording::open(&p).unwrap();
        assert_eq!(r.len(), 3);
        assert!(r.warning.is_none());
        assert_eq!(r.get(1).unwrap().unix_ms, 2000);
        assert_eq!(r.get(99).unwrap().unix_ms, 3000, "clamped");
        assert_eq!(r.at_or_before(2500), 1);
        assert_eq!(r.at_or_before(10), 0);
    }

    #[test]
    fn a_cut_off_last_line_is_ignored_with_a_warning() {
        let mut content = line(1000);
        let second = line(2000);
        content.extend(&second[..second.len() / 2]);
        let (_d, p) = file(&content);
        let r = Recording::open(&p).unwrap();
        assert_eq!(r.len(), 1);
        let w = r.warning.unwrap();
        assert!(w.contains("line 2 is cut off"), "{w}");
    }

    #[test]
    fn a_malformed_line_elsewhere_names_file_and_line() {
        let mut content = line(1000);
        content.extend(b"{\"format\":\"hmn-top\",\"version\":1,\"oops\n");
        content.extend(line(3000));
        let (_d, p) = file(&content);
        let e = Recording::open(&p).unwrap_err().to_string();
        assert!(
            e.starts_with(&format!("{} line 2: not a snapshot", p.display())),
            "{e}"
        );
        assert!(!e.contains('\n'));
    }

    #[test]
    fn foreign_and_future_lines_say_what_they_are() {
        let (_d, p) = file(b"{\"a\":1}\n");
        let e = Recording::open(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("line 1: not an hmn top snapshot (no \"format\": \"hmn-top\")"),
            "{e}"
        );
        let mut s = serde_json::to_value(Snapshot::empty(1, 1)).unwrap();
        s["version"] = 9.into();
        let (_d, p) = file(format!("{s}\n").as_bytes());
        let e = Recording::open(&p).unwrap_err().to_string();
        assert!(
            e.ends_with("line 1: format version 9 is newer than this hmn reads (2)"),
            "{e}"
        );
    }

    /// The longest line a hostile `/proc` (and sysfs) can make: every text at its cap and made
    /// of control characters (six bytes each in JSON), every list full, 64 rows, 16 devices.
    #[test]
    fn the_longest_line_stays_far_below_what_a_reader_reads() {
        use super::super::snapshot::{
            Ancestor, Bound, CMDLINE_MAX, Limits, ProcessRow, TEXT_MAX, cut,
        };
        use hypomnesis::{
            Device, Field, MigDevice, MigMode, MigState, ProcessName, Source, Unknown,
            UnknownReason, Vendor,
        };
        let evil = "\u{1}".repeat(5000);
        let unknown = |n| {
            let u = Unknown::new(Field::Name, UnknownReason::Unreadable, evil.clone());
            vec![u; n]
        };
        let mut g = hypomnesis::test_helpers::GpuProcessBuilder::new(u32::MAX, u32::MAX).build();
        g.name = Some(ProcessName::from_bytes(vec![0xff; 5000]));
        for s in [&mut g.user, &mut g.device_uuid, &mut g.mig_uuid] {
            *s = Some(evil.clone());
        }
        for i in 0..100 {
            let usage = hypomnesis::EngineUsage::default();
            g.engines.insert(format!("{i}{evil}"), usage);
        }
        g.drm_clients = vec![u64::MAX; 1000];
        g.shared_with = vec![u32::MAX; 1000];
        g.unknown = unknown(100);
        let slurm = format!("/slurmstepd.scope/job_1/step_{evil}/task_0");
        g.workload = hypomnesis::workload::classify(&slurm);
        assert!(g.workload.is_some());
        let mut row = ProcessRow::from_gpu(g);
        row.cmdline = Some(cut(evil.clone(), CMDLINE_MAX));
        let mut d = Device::new(u32::MAX, Vendor::Other(evil.clone()), Source::Sysfs);
        for s in [&mut d.name, &mut d.uuid, &mut d.driver, &mut d.error] {
            *s = Some(evil.clone());
        }
        for i in 0..100 {
            d.regions
                .insert(format!("{i}{evil}"), hypomnesis::DeviceRegion::default());
        }
        d.unknown = unknown(100);
        let mut mig = MigState::new(MigMode::Enabled, MigMode::Enabled);
        let mut m = MigDevice::new(u32::MAX, u32::MAX);
        m.name = Some(evil.clone());
        m.unknown = unknown(100);
        mig.instances = vec![m; 100];
        d.mig = Some(mig);
        let mut s = Snapshot::empty(u64::MAX, u64::MAX);
        s.devices = vec![d.bounded(); 16];
        s.processes = vec![row; 1000];
        s.warnings = vec![evil.clone(); 100];
        s.ancestors = vec![
            Ancestor {
                pid: u32::MAX,
                ppid: Some(u32::MAX),
                start_time: Some(u64::MAX),
                name: Some(cut(evil.clone(), TEXT_MAX)),
            };
            1000
        ];
        s.cap(Limits { max_processes: 64 });
        let line = serde_json::to_vec(&s).unwrap();
        assert!(line.len() < LINE_MAX / 2, "{}", line.len());
    }

    #[test]
    fn empty_files_fifos_and_directories_are_refused() {
        let (d, p) = file(b"");
        assert!(matches!(
            Recording::open(&p),
            Err(ReplayError::Empty { .. })
        ));
        assert!(matches!(
            Recording::open(d.path()),
            Err(ReplayError::NotRegular { .. }) | Err(ReplayError::Io { .. })
        ));
        let fifo = d.path().join("fifo");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::S_IRWXU).unwrap();
        assert!(matches!(
            Recording::open(&fifo),
            Err(ReplayError::NotRegular { .. })
        ));
        let missing = Recording::open(&d.path().join("absent")).unwrap_err();
        assert!(missing.to_string().contains("absent"), "{missing}");
    }
}
