//! safetensors header reader: the 8-byte little-endian length and the JSON header, never the
//! weights.
//!
//! The claimed header length is checked against the format's limit and against the file's size
//! before it is read; the JSON is parsed as a stream ([`super::safetensors_header`]: the
//! tensors' offsets must be contiguous and match their dtype and shape, and the sums the
//! estimator needs are kept, not the tensors), and the data they describe must end exactly at
//! the file's end. Sharded checkpoints are read through `model.safetensors.index.json`.
//!
//! The files of one checkpoint are read through one [`ShardReader`]: each file once, however
//! many names lead to it (identified by device and inode after every symbolic link — a Hugging
//! Face cache links each shard name to a blob, and a hostile set links them all to one), with a
//! warning for each name skipped; and the set's headers together at most [`MAX_HEADER`] bytes,
//! the bound of one file.

use std::collections::BTreeSet;
use std::io::Read;
use std::path::{Path, PathBuf};

pub use super::safetensors_header::{KProjection, MAX_TENSORS, Summary};
use crate::system::fsread::{self, Cap};
use crate::types::error::{Error, ParseError};

/// The format's own limit on the JSON header (the reference `safetensors` crate refuses larger
/// ones).
pub const MAX_HEADER: u64 = 100_000_000;
/// Shards an index may name.
pub const MAX_SHARDS: usize = 4096;

/// Reads the files of one checkpoint (a shard set, an index's shards, a directory's files):
/// each file once, and their headers together at most [`MAX_HEADER`] bytes.
#[derive(Debug)]
pub struct ShardReader {
    sum: Summary,
    /// The identity of each file read, with the path it was read through.
    seen: Vec<((u64, u64), PathBuf)>,
    /// Header bytes read so far, and the most the set may have.
    header_bytes: u64,
    limit: u64,
}

impl Default for ShardReader {
    fn default() -> Self {
        ShardReader::with_limit(MAX_HEADER)
    }
}

impl ShardReader {
    /// A reader for one set.
    pub fn new() -> Self {
        ShardReader::default()
    }

    /// A reader whose set may have `limit` header bytes together.
    fn with_limit(limit: u64) -> Self {
        ShardReader {
            sum: Summary::default(),
            seen: Vec::new(),
            header_bytes: 0,
            limit,
        }
    }

    /// Reads `path`'s header into the set, unless the file was read already through another
    /// name (then a warning says so).
    ///
    /// # Errors
    /// As [`read_file`]; also when the set's headers together would pass [`MAX_HEADER`].
    pub fn read(&mut self, path: &Path) -> Result<(), Error> {
        let (mut f, len) = fsread::open_sized(path)?;
        let id = fsread::identity(&f);
        if let Some((_, first)) = self.seen.iter().find(|(seen, _)| Some(*seen) == id) {
            self.sum.warnings.push(format!(
                "{} is another name of {}: read once",
                path.display(),
                first.display()
            ));
            return Ok(());
        }
        let left = self.limit.saturating_sub(self.header_bytes);
        let (s, n) = read_open(path, &mut f, len, left)?;
        self.header_bytes += n;
        if let Some(id) = id {
            self.seen.push((id, path.to_path_buf()));
        }
        self.sum.add(s);
        Ok(())
    }

    /// Reads the header of a file that is not on this machine (`label` names it in errors and
    /// in [`Summary::files`]) from `r`, positioned at its start, the file being `len` bytes:
    /// bounded as a local file is, and against the set's header budget.
    ///
    /// # Errors
    /// As [`ShardReader::read`].
    pub fn read_stream<R: Read>(&mut self, label: &Path, r: &mut R, len: u64) -> Result<(), Error> {
        let left = self.limit.saturating_sub(self.header_bytes);
        let (s, n) = read_open(label, r, len, left)?;
        self.header_bytes += n;
        self.sum.add(s);
        Ok(())
    }

    /// What was read.
    pub fn finish(self) -> Summary {
        self.sum
    }
}

/// Parses a header's JSON text (pure): returns the summary and where the data ends
/// ([`super::safetensors_header::parse`] over a slice).
///
/// # Errors
/// As [`super::safetensors_header::parse`].
pub fn parse_header(json: &[u8]) -> std::result::Result<(Summary, u64), ParseError> {
    super::safetensors_header::parse(json)
}

/// Reads one `.safetensors` file's header.
///
/// # Errors
/// [`Error::Parse`] naming the file for a length beyond the limit or the file, invalid JSON,
/// inconsistent offsets, or data that does not end at the end of the file.
pub fn read_file(path: &Path) -> Result<Summary, Error> {
    let mut r = ShardReader::new();
    r.read(path)?;
    Ok(r.finish())
}

/// Reads an open file's header when it is at most `left` bytes (what its set may still read);
/// returns the summary and the header's length.
fn read_open<R: Read>(
    path: &Path,
    f: &mut R,
    len: u64,
    left: u64,
) -> Result<(Summary, u64), Error> {
    let bad = |m: String| Error::parse(path, None, m);
    let mut n = [0u8; 8];
    f.read_exact(&mut n).map_err(|_| {
        bad(format!(
            "truncated: {len} bytes, not even the 8-byte header length"
        ))
    })?;
    let n = u64::from_le_bytes(n);
    if n > MAX_HEADER {
        return Err(bad(format!(
            "header length {n} exceeds the format's limit of {MAX_HEADER} bytes"
        )));
    }
    if n > len.saturating_sub(8) {
        return Err(bad(format!(
            "truncated: the header claims {n} bytes, the file has {} after the length",
            len - 8
        )));
    }
    if n > left {
        return Err(bad(format!(
            "the shard set's headers together pass {MAX_HEADER} bytes, the limit of one file ({n} here, {left} left)"
        )));
    }
    // Streamed: never the whole header in memory.
    let (mut s, end) = super::safetensors_header::parse(f.take(n)).map_err(|e| e.at(path))?;
    if 8u64.saturating_add(n).saturating_add(end) != len {
        return Err(bad(format!(
            "the header describes {end} bytes of data, the file has {} (truncated or corrupt)",
            len - 8 - n
        )));
    }
    s.files.push(path.to_path_buf());
    Ok((s, n))
}

/// Reads a sharded checkpoint through its `model.safetensors.index.json`: every shard named in
/// `weight_map` (each once).
///
/// # Errors
/// As [`read_file`] for each shard; [`Error::Parse`] for a malformed index or a shard path that
/// leaves the index's directory.
pub fn read_index(index: &Path) -> Result<Summary, Error> {
    let text = fsread::read_bounded(index, Cap::bytes(MAX_HEADER))?
        .ok_or_else(|| Error::parse(index, None, "index larger than 100 MB"))?;
    let shards = index_shards(&text).map_err(|e| e.at(index))?;
    let dir = index.parent().unwrap_or(Path::new("."));
    let mut total = ShardReader::new();
    for shard in shards {
        total.read(&dir.join(shard))?;
    }
    Ok(total.finish())
}

/// The shard file names an index's `weight_map` names, each once, sorted (pure): 1 to
/// [`MAX_SHARDS`] plain file names in the index's directory.
///
/// # Errors
/// Invalid JSON, no `weight_map`, too many or no shards, a name with a path in it.
pub fn index_shards(text: &[u8]) -> std::result::Result<Vec<String>, ParseError> {
    let v: serde_json::Value =
        serde_json::from_slice(text).map_err(|e| ParseError::new(format!("invalid JSON: {e}")))?;
    let map = v
        .get("weight_map")
        .and_then(serde_json::Value::as_object)
        .ok_or_else(|| ParseError::new("no weight_map object"))?;
    let shards: BTreeSet<&str> = map.values().filter_map(serde_json::Value::as_str).collect();
    if shards.is_empty() || shards.len() > MAX_SHARDS {
        return Err(ParseError::new(format!(
            "{} shards named (expected 1 to {MAX_SHARDS})",
            shards.len()
        )));
    }
    shards
        .into_iter()
        .map(|shard| {
            if shard.contains('/') || shard.contains('\\') || shard == ".." || shard.is_empty() {
                Err(ParseError::new(format!(
                    "shard {shard:?} is not a file name in the index's directory"
                )))
            } else {
                Ok(shard.to_string())
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_reads_each_file_once_and_its_headers_within_one_bound() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.safetensors");
        let b = dir.path().join("b.safetensors");
        let n = hmn_testbed::hostile_models::safetensors_with_header(&a, "x", 1000).unwrap();
        hmn_testbed::hostile_models::safetensors_with_header(&b, "y", 1000).unwrap();
        let link = dir.path().join("link.safetensors");
        hmn_testbed::symlink("a.safetensors", &link).unwrap();
        let mut set = ShardReader::new();
        for p in [&a, &link, &b] {
            set.read(p).unwrap();
        }
        let s = set.finish();
        assert_eq!(s.files, vec![a.clone(), b.clone()]);
        assert_eq!(s.tensor_count, 2 * n);
        assert_eq!(
            s.warnings,
            vec![format!(
                "{} is another name of {}: read once",
                link.display(),
                a.display()
            )]
        );
        // Two headers of about 1000 bytes in a set allowed 1500 together.
        let mut set = ShardReader::with_limit(1500);
        set.read(&a).unwrap();
        let e = set.read(&b).unwrap_err().to_string();
        assert!(
            e.contains("b.safetensors: the shard set's headers together pass"),
            "{e}"
        );
    }
}
