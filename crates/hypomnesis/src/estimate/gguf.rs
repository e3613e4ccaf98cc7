//! GGUF (v2/v3) header reader: metadata and tensor infos, never the weights.
//!
//! Every length a file claims is checked before anything is allocated: against fixed limits
//! and against the bytes actually left in the file, so a hostile or truncated file gets a
//! one-line error, never a huge allocation or a panic.
//!
//! Memory is bounded by what is kept, not by the file ([`ReadBudget`], shared by the files of a
//! split set): only the metadata the estimator reads is kept whatever its size ([`is_read`]:
//! `general.architecture`, `general.alignment`, the `{arch}.…` hyperparameters, the vocabulary's
//! length); the items of an array only for a flat per-layer array of numbers or bools under
//! such a key (at most 4,096, and [`MAX_KEPT_ITEMS`] across the header). Every other array is
//! skipped element by element without being materialised (fixed-size elements in one seek,
//! strings by their lengths, nested arrays recursively), and other pairs are kept only while
//! they are small (scalars, strings up to 4 KiB, array lengths) and under 4 MiB together; the
//! rest are counted ([`Header::skipped`]). Kept metadata and tensor infos together may take at
//! most [`MAX_KEPT_BYTES`], and the header itself may be at most [`MAX_HEADER_BYTES`] long.
//!
//! Layout (ggml `docs/gguf.md`): magic `GGUF`, u32 version, u64 tensor count, u64 metadata
//! count, the key/value pairs, the tensor infos (name, u32 n_dims, u64 dims ne0 first, u32
//! ggml type, u64 offset), alignment padding, then the data.

use std::collections::BTreeMap;
use std::io::{Read, Seek};

use super::dtype::{Dtype, GgmlType, tensor_bytes};
use crate::types::error::ParseError;

/// Limits on what a header may claim.
pub const MAX_TENSORS: u64 = 1 << 20;
/// Metadata pairs.
pub const MAX_METADATA: u64 = 1 << 20;
/// A string value or key, bytes.
pub const MAX_STRING: u64 = 16 << 20;
/// A key or tensor name, bytes (the spec allows 65535 / 64).
pub const MAX_NAME: u64 = 65_535;
/// Dimensions of a tensor (the spec uses up to 4).
pub const MAX_DIMS: u32 = 8;
/// Array nesting.
pub const MAX_DEPTH: u32 = 4;
/// The header (metadata and tensor infos) of one file, or of a split set's files together, in
/// bytes: a real one is a few MB to about 20 MB (a 262k-token vocabulary with its scores,
/// types and merges).
pub const MAX_HEADER_BYTES: u64 = 256 << 20;
/// Memory the kept metadata and tensor infos may take, estimated (each value, string and
/// allocation counted), for one file or a split set together: a real model keeps under 1 MiB.
pub const MAX_KEPT_BYTES: u64 = 16 << 20;
/// Array elements kept across the header (the per-layer arrays the estimator reads).
pub const MAX_KEPT_ITEMS: u64 = 65_536;
/// Elements of one kept array: a per-layer array has one per layer (at most 4096,
/// `config::MAX_LAYERS`).
const KEEP_ARRAY: u64 = 4096;
/// The longest string kept under a key the estimator does not read.
const KEEP_STRING: u64 = 4096;
/// Kept memory beyond which pairs the estimator does not read are skipped.
const OPTIONAL_BYTES: u64 = 4 << 20;
/// Bookkeeping counted per kept pair or tensor (map node, allocation headers).
const OVERHEAD: u64 = 64;

/// The `{arch}.…` keys the estimator reads ([`super::gguf_arch::from_gguf`]).
const ARCH_KEYS: [&str; 15] = [
    "block_count",
    "embedding_length",
    "context_length",
    "feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
    "attention.value_length",
    "attention.key_length_swa",
    "attention.value_length_swa",
    "attention.sliding_window",
    "attention.sliding_window_pattern",
    "attention.kv_lora_rank",
    "rope.dimension_count",
];

/// Whether the estimator reads `key`: `general.architecture`, `general.alignment`,
/// `tokenizer.ggml.tokens` (its length) and `{arch}.{ARCH_KEYS}`, for the architecture `arch`
/// (any, while `general.architecture` has not been read yet).
pub fn is_read(key: &str, arch: Option<&str>) -> bool {
    if matches!(
        key,
        "general.architecture" | "general.alignment" | "tokenizer.ggml.tokens"
    ) {
        return true;
    }
    key.split_once('.')
        .is_some_and(|(prefix, rest)| ARCH_KEYS.contains(&rest) && arch.is_none_or(|a| a == prefix))
}

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum Value {
    /// Any integer type.
    Int(i128),
    /// FLOAT32 / FLOAT64.
    Float(f64),
    /// BOOL.
    Bool(bool),
    /// STRING.
    String(String),
    /// ARRAY: its length, and the elements when kept.
    Array {
        /// Number of elements.
        len: u64,
        /// The elements: only for a flat array of numbers or bools, of at most 4096 elements,
        /// under a key the estimator reads ([`is_read`]); empty otherwise.
        items: Vec<Value>,
    },
}

impl Value {
    /// As an unsigned integer.
    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Value::Int(i) => u64::try_from(*i).ok(),
            _ => None,
        }
    }

    /// Estimated memory held by this value beyond its own size, and its kept array items.
    fn held(&self) -> (u64, u64) {
        match self {
            Value::String(s) => (s.len() as u64, 0),
            Value::Array { items, .. } => {
                let n = items.len() as u64;
                (n * std::mem::size_of::<Value>() as u64, n)
            }
            _ => (0, 0),
        }
    }
}

/// One tensor info.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct TensorInfo {
    /// Name.
    pub name: String,
    /// Dimensions, ne0 first.
    pub dims: Vec<u64>,
    /// Type.
    pub ggml_type: GgmlType,
    /// Exact bytes.
    pub bytes: u64,
}

/// A parsed header.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Header {
    /// 2 or 3.
    pub version: u32,
    /// Metadata by key: what was kept (see the module's documentation).
    pub metadata: BTreeMap<String, Value>,
    /// Tensor infos.
    pub tensors: Vec<TensorInfo>,
    /// Metadata pairs read but not kept (keys the estimator does not read, beyond what is kept
    /// of those).
    pub skipped: u64,
}

impl Header {
    /// Total bytes of all tensors.
    pub fn weights_bytes(&self) -> u64 {
        self.tensors
            .iter()
            .map(|t| t.bytes)
            .fold(0u64, u64::saturating_add)
    }

    /// A metadata integer.
    pub fn u64(&self, key: &str) -> Option<u64> {
        self.metadata.get(key).and_then(Value::as_u64)
    }

    /// `general.architecture`.
    pub fn architecture(&self) -> Option<&str> {
        match self.metadata.get("general.architecture") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        }
    }
}

/// What reading headers has cost so far: header bytes read and memory kept. One budget is
/// shared by the files of a split set, so the set together is bounded as one file is.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct ReadBudget {
    /// Header bytes read (or skipped over), every file together.
    pub header_bytes: u64,
    /// Estimated memory of what was kept.
    pub kept_bytes: u64,
    /// Array elements kept.
    pub kept_items: u64,
}

impl ReadBudget {
    fn charge(&mut self, bytes: u64, items: u64, what: &str) -> Result<(), ParseError> {
        let bytes = self.kept_bytes.saturating_add(bytes);
        let items = self.kept_items.saturating_add(items);
        if items > MAX_KEPT_ITEMS {
            return Err(ParseError::new(format!(
                "{what}: more than {MAX_KEPT_ITEMS} per-layer array elements to keep (limit)"
            )));
        }
        if bytes > MAX_KEPT_BYTES {
            return Err(ParseError::new(format!(
                "{what}: the metadata and tensor infos to keep need more than {} MiB (limit)",
                MAX_KEPT_BYTES >> 20
            )));
        }
        self.kept_bytes = bytes;
        self.kept_items = items;
        Ok(())
    }

    fn refund(&mut self, bytes: u64, items: u64) {
        self.kept_bytes = self.kept_bytes.saturating_sub(bytes);
        self.kept_items = self.kept_items.saturating_sub(items);
    }
}

/// Value types.
const STRING: u32 = 8;
const ARRAY: u32 = 9;

/// The size of a fixed-size value type; `None` for strings, arrays and unknown types.
fn fixed_size(ty: u32) -> Option<u64> {
    match ty {
        0 | 1 | 7 => Some(1),
        2 | 3 => Some(2),
        4..=6 => Some(4),
        10..=12 => Some(8),
        _ => None,
    }
}

fn check_type(ty: u32) -> Result<(), ParseError> {
    if fixed_size(ty).is_some() || ty == STRING || ty == ARRAY {
        Ok(())
    } else {
        Err(ParseError::new(format!("unknown metadata value type {ty}")))
    }
}

struct Reader<'b, R> {
    r: R,
    /// Bytes left in the file after the current position.
    left: u64,
    /// Header bytes read before this file's current position (this file's included).
    budget: &'b mut ReadBudget,
}

impl<R: Read + Seek> Reader<'_, R> {
    /// Checks that `n` more bytes are in the file and within the header limit.
    fn need(&self, n: u64, what: &str) -> Result<(), ParseError> {
        if n > self.left {
            return Err(ParseError::new(format!(
                "truncated: {what} needs {n} bytes, {} left in the file",
                self.left
            )));
        }
        if self.budget.header_bytes.saturating_add(n) > MAX_HEADER_BYTES {
            return Err(ParseError::new(format!(
                "{what}: the header is longer than {} MiB (limit)",
                MAX_HEADER_BYTES >> 20
            )));
        }
        Ok(())
    }

    fn consumed(&mut self, n: u64) {
        self.left -= n;
        self.budget.header_bytes += n;
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ParseError> {
        self.need(N as u64, what)?;
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .map_err(|e| ParseError::new(format!("reading {what}: {e}")))?;
        self.consumed(N as u64);
        Ok(b)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ParseError> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ParseError> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    /// Moves past `n` bytes without reading them (within a buffered reader's buffer when they
    /// are there: skipping a vocabulary's short strings costs no system call each).
    fn skip(&mut self, n: u64, what: &str) -> Result<(), ParseError> {
        self.need(n, what)?;
        if n == 0 {
            return Ok(());
        }
        let off = i64::try_from(n)
            .map_err(|_| ParseError::new(format!("{what}: length {n} too large")))?;
        self.r
            .seek_relative(off)
            .map_err(|e| ParseError::new(format!("skipping {what}: {e}")))?;
        self.consumed(n);
        Ok(())
    }

    /// A string of at most `max` bytes, or `None` (skipped) when `keep` says no to its length.
    fn string(
        &mut self,
        max: u64,
        what: &str,
        keep: impl FnOnce(u64) -> bool,
    ) -> Result<Option<String>, ParseError> {
        let len = self.u64(what)?;
        if len > max {
            return Err(ParseError::new(format!(
                "{what} claims {len} bytes (limit {max})"
            )));
        }
        self.need(len, what)?;
        if !keep(len) {
            self.skip(len, what)?;
            return Ok(None);
        }
        let n = usize::try_from(len)
            .map_err(|_| ParseError::new(format!("{what}: length {len} too large")))?;
        let mut buf = vec![0u8; n];
        self.r
            .read_exact(&mut buf)
            .map_err(|e| ParseError::new(format!("reading {what}: {e}")))?;
        self.consumed(len);
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// A fixed-size value of type `ty`.
    fn scalar(&mut self, ty: u32) -> Result<Value, ParseError> {
        let int = |v: i128| Ok(Value::Int(v));
        match ty {
            0 => int(i128::from(self.bytes::<1>("u8")?[0])),
            1 => int(i128::from(i8::from_le_bytes(self.bytes("i8")?))),
            2 => int(i128::from(u16::from_le_bytes(self.bytes("u16")?))),
            3 => int(i128::from(i16::from_le_bytes(self.bytes("i16")?))),
            4 => int(i128::from(self.u32("u32")?)),
            5 => int(i128::from(i32::from_le_bytes(self.bytes("i32")?))),
            6 => Ok(Value::Float(f64::from(f32::from_le_bytes(
                self.bytes("f32")?,
            )))),
            7 => Ok(Value::Bool(self.bytes::<1>("bool")?[0] != 0)),
            10 => int(i128::from(self.u64("u64")?)),
            11 => int(i128::from(i64::from_le_bytes(self.bytes("i64")?))),
            12 => Ok(Value::Float(f64::from_le_bytes(self.bytes("f64")?))),
            other => Err(ParseError::new(format!(
                "unknown metadata value type {other}"
            ))),
        }
    }

    /// Moves past a value of type `ty` (`depth`: arrays around it) without keeping anything.
    fn skip_value(&mut self, ty: u32, depth: u32) -> Result<(), ParseError> {
        match ty {
            STRING => {
                self.string(MAX_STRING, "string value", |_| false)?;
                Ok(())
            }
            ARRAY => {
                let (elem, len) = self.array_head(depth)?;
                self.skip_items(elem, len, depth + 1)
            }
            _ => match fixed_size(ty) {
                Some(n) => self.skip(n, "value"),
                None => Err(ParseError::new(format!("unknown metadata value type {ty}"))),
            },
        }
    }

    /// An array's element type and length, checked.
    fn array_head(&mut self, depth: u32) -> Result<(u32, u64), ParseError> {
        if depth >= MAX_DEPTH {
            return Err(ParseError::new(format!(
                "arrays nested deeper than {MAX_DEPTH}"
            )));
        }
        let elem = self.u32("array type")?;
        check_type(elem)?;
        let len = self.u64("array length")?;
        // Every element takes at least one byte: a length beyond the file is a lie.
        self.need(len, "array")?;
        Ok((elem, len))
    }

    /// Moves past `len` elements of type `elem`: fixed-size ones in one seek.
    fn skip_items(&mut self, elem: u32, len: u64, depth: u32) -> Result<(), ParseError> {
        if let Some(size) = fixed_size(elem) {
            let n = len
                .checked_mul(size)
                .ok_or_else(|| ParseError::new(format!("array of {len} elements too large")))?;
            return self.skip(n, "array");
        }
        for _ in 0..len {
            self.skip_value(elem, depth)?;
        }
        Ok(())
    }

    /// A top-level array: its items kept only when `keep` and it is a short flat array of
    /// numbers or bools.
    fn array(&mut self, keep: bool) -> Result<Value, ParseError> {
        let (elem, len) = self.array_head(0)?;
        let flat = fixed_size(elem).is_some();
        if !(keep && flat && len <= KEEP_ARRAY) {
            self.skip_items(elem, len, 1)?;
            return Ok(Value::Array {
                len,
                items: Vec::new(),
            });
        }
        let mut items = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        for _ in 0..len {
            items.push(self.scalar(elem)?);
        }
        Ok(Value::Array { len, items })
    }

    /// One key/value pair into `h`, kept or counted as skipped.
    fn pair(&mut self, h: &mut Header) -> Result<(), ParseError> {
        let Some(key) = self.string(MAX_NAME, "metadata key", |_| true)? else {
            return Ok(());
        };
        let ty = self.u32("metadata type")?;
        let read = is_read(&key, h.architecture());
        let room = self.budget.kept_bytes < OPTIONAL_BYTES;
        let value = match ty {
            ARRAY => Some(self.array(read && key != "tokenizer.ggml.tokens")?),
            STRING => self
                .string(MAX_STRING, "string value", |n| {
                    read || (room && n <= KEEP_STRING)
                })?
                .map(Value::String),
            _ => Some(self.scalar(ty)?),
        };
        match value {
            Some(v) if read || room => {
                let (bytes, items) = v.held();
                let cost = OVERHEAD + key.len() as u64 + bytes;
                self.budget.charge(cost, items, "metadata")?;
                let klen = key.len() as u64;
                if let Some(old) = h.metadata.insert(key, v) {
                    let (b, i) = old.held();
                    self.budget.refund(OVERHEAD + klen + b, i);
                }
            }
            _ => h.skipped += 1,
        }
        Ok(())
    }
}

/// Reads a GGUF header from `r`, whose total length is `len` bytes.
///
/// # Errors
/// A [`ParseError`] for a wrong magic, an unsupported version (v1), a claim beyond the limits
/// or the file's end, an unknown type.
pub fn read_header<R: Read + Seek>(r: R, len: u64) -> Result<Header, ParseError> {
    read_header_within(r, len, &mut ReadBudget::default())
}

/// Reads a GGUF header as [`read_header`], counting its cost into `budget` (shared by the
/// files of a split set: the set together is bounded as one file is).
///
/// # Errors
/// As [`read_header`]; also when the header, or the set's headers together, are longer than
/// [`MAX_HEADER_BYTES`] or keep more than [`MAX_KEPT_BYTES`] or [`MAX_KEPT_ITEMS`].
pub fn read_header_within<R: Read + Seek>(
    r: R,
    len: u64,
    budget: &mut ReadBudget,
) -> Result<Header, ParseError> {
    let mut rd = Reader {
        r,
        left: len,
        budget,
    };
    let magic = rd.bytes::<4>("magic")?;
    if &magic != b"GGUF" {
        return Err(ParseError::new("not a GGUF file (wrong magic)"));
    }
    let version = rd.u32("version")?;
    if !(2..=3).contains(&version) {
        return Err(ParseError::new(format!(
            "unsupported GGUF version {version} (2 and 3 are)"
        )));
    }
    let tensor_count = rd.u64("tensor count")?;
    let kv_count = rd.u64("metadata count")?;
    if tensor_count > MAX_TENSORS {
        return Err(ParseError::new(format!(
            "claims {tensor_count} tensors (limit {MAX_TENSORS})"
        )));
    }
    if kv_count > MAX_METADATA {
        return Err(ParseError::new(format!(
            "claims {kv_count} metadata pairs (limit {MAX_METADATA})"
        )));
    }
    let mut h = Header {
        version,
        ..Header::default()
    };
    for _ in 0..kv_count {
        rd.pair(&mut h)?;
    }
    // Each tensor info is at least 8 + 4 + 4 + 8 bytes.
    rd.need(tensor_count.saturating_mul(24), "tensor infos")?;
    let info = std::mem::size_of::<TensorInfo>() as u64;
    rd.budget
        .charge(tensor_count.saturating_mul(info), 0, "tensor infos")?;
    h.tensors
        .reserve_exact(usize::try_from(tensor_count).unwrap_or(0));
    let mut data_end = 0u64;
    for _ in 0..tensor_count {
        let name = rd
            .string(MAX_NAME, "tensor name", |_| true)?
            .unwrap_or_default();
        let n_dims = rd.u32("dimension count")?;
        if n_dims > MAX_DIMS {
            return Err(ParseError::new(format!(
                "tensor {name:?} claims {n_dims} dimensions (limit {MAX_DIMS})"
            )));
        }
        rd.budget.charge(
            OVERHEAD + name.len() as u64 + 8 * u64::from(n_dims),
            0,
            "tensor infos",
        )?;
        let dims = (0..n_dims)
            .map(|_| rd.u64("dimension"))
            .collect::<Result<Vec<_>, _>>()?;
        let ggml_type = GgmlType::from_id(rd.u32("tensor type")?)
            .map_err(|e| ParseError::new(format!("tensor {name:?}: {}", e.message)))?;
        let offset = rd.u64("tensor offset")?;
        let bytes = tensor_bytes(&dims, Dtype::Ggml(ggml_type))
            .map_err(|e| ParseError::new(format!("tensor {name:?}: {}", e.message)))?;
        data_end = data_end.max(offset.saturating_add(bytes));
        h.tensors.push(TensorInfo {
            name,
            dims,
            ggml_type,
            bytes,
        });
    }
    // The data starts at the next multiple of the alignment and must be in the file.
    let alignment = match h.metadata.get("general.alignment") {
        None => 32,
        Some(v) => v.as_u64().filter(|a| a.is_power_of_two()).ok_or_else(|| {
            ParseError::new(format!(
                "invalid general.alignment ({}: not a power of two)",
                shown(v)
            ))
        })?,
    };
    let header_end = len - rd.left;
    let data_start = header_end.div_ceil(alignment).saturating_mul(alignment);
    if data_start.saturating_add(data_end) > len {
        return Err(ParseError::new(format!(
            "truncated: the tensors end at byte {}, the file has {len}",
            data_start.saturating_add(data_end)
        )));
    }
    Ok(h)
}

/// A metadata value in a message: a number as itself, other values by their type.
pub fn shown(v: &Value) -> String {
    match v {
        Value::Int(i) => i.to_string(),
        Value::Float(f) => format!("{f:?}"),
        Value::Bool(b) => b.to_string(),
        Value::String(s) => format!("{s:?}"),
        Value::Array { len, .. } => format!("an array of {len}"),
    }
}

#[cfg(test)]
mod tests;
