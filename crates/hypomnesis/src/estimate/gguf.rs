//! GGUF (v2/v3) header reader: metadata and tensor infos, never the weights.
//!
//! Every length a file claims is checked before anything is allocated: against fixed limits
//! and against the bytes actually left in the file, so a hostile or truncated file gets a
//! one-line error, never a huge allocation or a panic. Strings and arrays the estimator does
//! not need (the tokenizer's vocabulary) are skipped by seeking, counted but not stored.
//!
//! Layout (ggml `docs/gguf.md`): magic `GGUF`, u32 version, u64 tensor count, u64 metadata
//! count, the key/value pairs, the tensor infos (name, u32 n_dims, u64 dims ne0 first, u32
//! ggml type, u64 offset), alignment padding, then the data.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};

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
/// Elements of one array that are kept (longer arrays are only counted).
const KEEP_ARRAY: u64 = 65_536;

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
    /// ARRAY: its length, and the elements when short enough to keep.
    Array {
        /// Number of elements.
        len: u64,
        /// The elements (empty when the array was too long to keep, or of strings).
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
    /// Metadata by key.
    pub metadata: BTreeMap<String, Value>,
    /// Tensor infos.
    pub tensors: Vec<TensorInfo>,
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

struct Reader<R> {
    r: R,
    /// Bytes left in the file after the current position.
    left: u64,
}

impl<R: Read + Seek> Reader<R> {
    fn need(&self, n: u64, what: &str) -> Result<(), ParseError> {
        if n > self.left {
            return Err(ParseError::new(format!(
                "truncated: {what} needs {n} bytes, {} left in the file",
                self.left
            )));
        }
        Ok(())
    }

    fn bytes<const N: usize>(&mut self, what: &str) -> Result<[u8; N], ParseError> {
        self.need(N as u64, what)?;
        let mut b = [0u8; N];
        self.r
            .read_exact(&mut b)
            .map_err(|e| ParseError::new(format!("reading {what}: {e}")))?;
        self.left -= N as u64;
        Ok(b)
    }

    fn u32(&mut self, what: &str) -> Result<u32, ParseError> {
        Ok(u32::from_le_bytes(self.bytes(what)?))
    }

    fn u64(&mut self, what: &str) -> Result<u64, ParseError> {
        Ok(u64::from_le_bytes(self.bytes(what)?))
    }

    fn skip(&mut self, n: u64, what: &str) -> Result<(), ParseError> {
        self.need(n, what)?;
        let off = i64::try_from(n)
            .map_err(|_| ParseError::new(format!("{what}: length {n} too large")))?;
        self.r
            .seek(SeekFrom::Current(off))
            .map_err(|e| ParseError::new(format!("skipping {what}: {e}")))?;
        self.left -= n;
        Ok(())
    }

    /// A string of at most `max` bytes; `keep = false` skips it.
    fn string(&mut self, max: u64, what: &str, keep: bool) -> Result<Option<String>, ParseError> {
        let len = self.u64(what)?;
        if len > max {
            return Err(ParseError::new(format!(
                "{what} claims {len} bytes (limit {max})"
            )));
        }
        self.need(len, what)?;
        if !keep {
            self.skip(len, what)?;
            return Ok(None);
        }
        let n = usize::try_from(len)
            .map_err(|_| ParseError::new(format!("{what}: length {len} too large")))?;
        let mut buf = vec![0u8; n];
        self.r
            .read_exact(&mut buf)
            .map_err(|e| ParseError::new(format!("reading {what}: {e}")))?;
        self.left -= len;
        Ok(Some(String::from_utf8_lossy(&buf).into_owned()))
    }

    /// A value of `ty`.
    fn value(&mut self, ty: u32, depth: u32, keep: bool) -> Result<Value, ParseError> {
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
            8 => Ok(Value::String(
                self.string(MAX_STRING, "string value", keep)?
                    .unwrap_or_default(),
            )),
            9 => {
                if depth >= MAX_DEPTH {
                    return Err(ParseError::new(format!(
                        "arrays nested deeper than {MAX_DEPTH}"
                    )));
                }
                let elem = self.u32("array type")?;
                let len = self.u64("array length")?;
                // Every element takes at least one byte: a length beyond the file is a lie.
                self.need(len, "array")?;
                let keep_items = keep && len <= KEEP_ARRAY && elem != 8;
                let mut items = Vec::new();
                for _ in 0..len {
                    let v = self.value(elem, depth + 1, keep_items)?;
                    if keep_items {
                        items.push(v);
                    }
                }
                Ok(Value::Array { len, items })
            }
            10 => int(i128::from(self.u64("u64")?)),
            11 => int(i128::from(i64::from_le_bytes(self.bytes("i64")?))),
            12 => Ok(Value::Float(f64::from_le_bytes(self.bytes("f64")?))),
            other => Err(ParseError::new(format!(
                "unknown metadata value type {other}"
            ))),
        }
    }
}

/// Reads a GGUF header from `r`, whose total length is `len` bytes.
///
/// # Errors
/// A [`ParseError`] for a wrong magic, an unsupported version (v1), a claim beyond the limits
/// or the file's end, an unknown type.
pub fn read_header<R: Read + Seek>(r: R, len: u64) -> Result<Header, ParseError> {
    let mut rd = Reader { r, left: len };
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
        let key = rd
            .string(MAX_NAME, "metadata key", true)?
            .unwrap_or_default();
        let ty = rd.u32("metadata type")?;
        let v = rd.value(ty, 0, true)?;
        h.metadata.insert(key, v);
    }
    // Each tensor info is at least 8 + 4 + 4 + 8 bytes.
    rd.need(tensor_count.saturating_mul(24), "tensor infos")?;
    let mut data_end = 0u64;
    for _ in 0..tensor_count {
        let name = rd
            .string(MAX_NAME, "tensor name", true)?
            .unwrap_or_default();
        let n_dims = rd.u32("dimension count")?;
        if n_dims > MAX_DIMS {
            return Err(ParseError::new(format!(
                "tensor {name:?} claims {n_dims} dimensions (limit {MAX_DIMS})"
            )));
        }
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
    let alignment = h
        .u64("general.alignment")
        .filter(|a| *a > 0 && *a % 8 == 0)
        .unwrap_or(32);
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn s(b: &mut Vec<u8>, v: &str) {
        b.extend((v.len() as u64).to_le_bytes());
        b.extend(v.as_bytes());
    }

    fn minimal(tensors: &[(&str, &[u64], u32)]) -> Vec<u8> {
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend((tensors.len() as u64).to_le_bytes());
        b.extend(2u64.to_le_bytes());
        s(&mut b, "general.architecture");
        b.extend(8u32.to_le_bytes());
        s(&mut b, "llama");
        s(&mut b, "llama.attention.head_count_kv");
        b.extend(9u32.to_le_bytes());
        b.extend(4u32.to_le_bytes());
        b.extend(2u64.to_le_bytes());
        b.extend(8u32.to_le_bytes());
        b.extend(4u32.to_le_bytes());
        let mut data = 0u64;
        for (name, dims, ty) in tensors {
            s(&mut b, name);
            b.extend((dims.len() as u32).to_le_bytes());
            for d in *dims {
                b.extend(d.to_le_bytes());
            }
            b.extend(ty.to_le_bytes());
            b.extend(data.to_le_bytes());
            data += tensor_bytes(dims, Dtype::Ggml(GgmlType::from_id(*ty).unwrap())).unwrap();
        }
        while !b.len().is_multiple_of(32) {
            b.push(0);
        }
        b.extend(std::iter::repeat_n(0u8, data as usize));
        b
    }

    fn parse(b: &[u8]) -> Result<Header, ParseError> {
        read_header(Cursor::new(b), b.len() as u64)
    }

    #[test]
    fn header_and_exact_weights() {
        let b = minimal(&[("tok", &[64, 10], 8), ("out", &[256, 2], 12)]);
        let h = parse(&b).unwrap();
        assert_eq!(h.architecture(), Some("llama"));
        assert_eq!(h.tensors.len(), 2);
        assert_eq!(h.weights_bytes(), 2 * 34 * 10 + 144 * 2);
        match &h.metadata["llama.attention.head_count_kv"] {
            Value::Array { len, items } => {
                assert_eq!(*len, 2);
                assert_eq!(items[1].as_u64(), Some(4));
            }
            v => panic!("{v:?}"),
        }
    }

    #[test]
    fn hostile_headers_are_refused_before_allocating() {
        let good = minimal(&[("t", &[32], 8)]);
        assert!(
            parse(&good[..good.len() - 1])
                .unwrap_err()
                .message
                .contains("truncated")
        );
        let mut bad = good.clone();
        bad[0] = b'X';
        assert!(parse(&bad).unwrap_err().message.contains("magic"));
        let mut v1 = good.clone();
        v1[4] = 1;
        assert!(parse(&v1).unwrap_err().message.contains("version 1"));
        let mut many = good.clone();
        many[8..16].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(parse(&many).unwrap_err().message.contains("tensors"));
        // A key claiming 2^60 bytes: refused without allocating it.
        let mut long = b"GGUF".to_vec();
        long.extend(3u32.to_le_bytes());
        long.extend(0u64.to_le_bytes());
        long.extend(1u64.to_le_bytes());
        long.extend((1u64 << 60).to_le_bytes());
        assert!(parse(&long).unwrap_err().message.contains("limit"));
        // An array claiming more elements than the file has bytes.
        let mut arr = b"GGUF".to_vec();
        arr.extend(3u32.to_le_bytes());
        arr.extend(0u64.to_le_bytes());
        arr.extend(1u64.to_le_bytes());
        s(&mut arr, "k");
        arr.extend(9u32.to_le_bytes());
        arr.extend(0u32.to_le_bytes());
        arr.extend((1u64 << 40).to_le_bytes());
        assert!(parse(&arr).unwrap_err().message.contains("truncated"));
        assert!(parse(b"").is_err());
        assert!(parse(b"GGU").is_err());
    }
}
