//! The directory and file primitives of [`crate::fsread`] over `std::fs`, for platforms without
//! POSIX `openat`/`pread`/`readlinkat` (Windows). Only a fixture tree named through
//! [`crate::Roots`] is read with these there (the native readers are in `crate::platform`), so
//! they keep the POSIX versions' contracts — a regular file only, a path in every error — not
//! their syscall counts.

use std::fs::File;
use std::io::{self, Read as _, Seek as _};
use std::path::{Path, PathBuf};

use crate::types::error::Error;

/// An open directory: its path (listed again on each walk; no handle is kept).
#[derive(Debug)]
pub(crate) struct Dir {
    path: PathBuf,
}

/// What a file that is not regular is, in words.
pub(crate) fn kind_of(t: std::fs::FileType) -> &'static str {
    if t.is_dir() {
        "directory"
    } else {
        "not a file"
    }
}

/// Opens `path` for reading if it is a regular file.
///
/// # Errors
/// [`Error::NotAFile`]; [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`]
/// naming the file.
pub(crate) fn open_regular(path: &Path) -> Result<File, Error> {
    let md = std::fs::metadata(path).map_err(|e| Error::from_io(path, e))?;
    if !md.file_type().is_file() {
        return Err(Error::NotAFile {
            path: path.to_path_buf(),
            kind: kind_of(md.file_type()),
        });
    }
    File::open(path).map_err(|e| Error::from_io(path, e))
}

/// Opens a directory for listing.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::PermissionDenied`] / [`Error::Io`] naming the directory.
pub(crate) fn open_dir(dir: &Path) -> Result<Dir, Error> {
    let md = std::fs::metadata(dir).map_err(|e| Error::from_io(dir, e))?;
    if !md.is_dir() {
        return Err(Error::from_io(
            dir,
            io::Error::new(io::ErrorKind::NotADirectory, "not a directory"),
        ));
    }
    Ok(Dir {
        path: dir.to_path_buf(),
    })
}

/// Opens `name` (relative) below `parent`.
///
/// # Errors
/// As [`open_dir`].
pub(crate) fn open_dir_at(parent: &Dir, _parent_path: &Path, name: &str) -> Result<Dir, Error> {
    open_dir(&parent.path.join(name))
}

/// The entries of a directory whose names are decimal numbers.
pub(crate) fn numeric_entries(dir: &mut Dir) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(&dir.path) else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| super::numeric::parse_numeric(e.file_name().to_string_lossy().as_bytes()))
        .collect()
}

/// The target of the symlink `name` below `dir`, as bytes (lossy where it is not Unicode).
///
/// # Errors
/// The path's I/O error.
pub(crate) fn read_link_at(dir: &Dir, name: &str) -> Result<Vec<u8>, Error> {
    let path = dir.path.join(name);
    std::fs::read_link(&path)
        .map(|t| t.to_string_lossy().into_owned().into_bytes())
        .map_err(|e| Error::from_io(&path, e))
}

/// Reads a small file kept open from offset 0 into `buf`, returning the length.
///
/// # Errors
/// [`Error::Io`] (or a classified kind) naming `path`.
pub(crate) fn read_at_start(file: &File, buf: &mut [u8], path: &Path) -> Result<usize, Error> {
    let mut f = file;
    f.rewind().map_err(|e| Error::from_io(path, e))?;
    let mut len = 0;
    while let Some(spare) = buf.get_mut(len..) {
        if spare.is_empty() {
            break;
        }
        match f.read(spare) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Error::from_io(path, e)),
        }
    }
    Ok(len)
}
