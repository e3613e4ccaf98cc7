//! A minimal GGUF v3 writer for tests: metadata (u32, string, u32 arrays) and tensor infos,
//! then zeroed tensor data, laid out as the GGUF spec says (32-byte alignment).
//!
//! For hostile headers it also writes regions of zero bytes — arrays of any element type whose
//! elements are all zero (for strings: empty strings; for arrays: empty `u8` arrays), zeroed
//! tensor infos (an unnamed 0-dimension F32 tensor) — which [`GgufWriter::write_sparse`] leaves
//! as holes: a header of gigabytes costs no disk.

use std::io::{Seek, SeekFrom, Write};
use std::path::Path;

/// GGML type ids the tests use.
pub mod ggml {
    /// 4 bytes per element.
    pub const F32: u32 = 0;
    /// 2 bytes per element.
    pub const F16: u32 = 1;
    /// 18 bytes per block of 32.
    pub const Q4_0: u32 = 2;
    /// 34 bytes per block of 32.
    pub const Q8_0: u32 = 8;
    /// 144 bytes per block of 256.
    pub const Q4_K: u32 = 12;
    /// 210 bytes per block of 256.
    pub const Q6_K: u32 = 14;
}

/// GGUF metadata value types.
pub mod gguf_type {
    /// Each element type of a metadata array and its size in bytes in a zeroed array (`STRING`:
    /// an empty string, its u64 length; `ARRAY`: an empty `UINT8` array, its u32 type and u64
    /// length).
    pub const ALL: [(u32, &str, u64); 13] = [
        (0, "uint8", 1),
        (1, "int8", 1),
        (2, "uint16", 2),
        (3, "int16", 2),
        (4, "uint32", 4),
        (5, "int32", 4),
        (6, "float32", 4),
        (7, "bool", 1),
        (8, "string", 8),
        (9, "array", 12),
        (10, "uint64", 8),
        (11, "int64", 8),
        (12, "float64", 8),
    ];
}

/// Bytes of a header: written, or zeros (a hole in a sparse file).
#[derive(Debug, Clone)]
enum Part {
    Bytes(Vec<u8>),
    Zeros(u64),
}

/// Builds a GGUF file.
#[derive(Debug, Default, Clone)]
pub struct GgufWriter {
    kv: Vec<Part>,
    kv_count: u64,
    tensors: Vec<(String, Vec<u64>, u32, u64)>,
    /// Tensor infos written as bytes and holes, after the named ones, and their count.
    raw_tensors: Vec<Part>,
    raw_tensor_count: u64,
}

/// Appends written bytes to `parts`.
fn push(parts: &mut Vec<Part>, bytes: &[u8]) {
    if let Some(Part::Bytes(b)) = parts.last_mut() {
        b.extend_from_slice(bytes);
    } else {
        parts.push(Part::Bytes(bytes.to_vec()));
    }
}

fn string(buf: &mut Vec<u8>, v: &str) {
    buf.extend((v.len() as u64).to_le_bytes());
    buf.extend(v.as_bytes());
}

/// Bytes of a tensor of `elements` elements of GGML type `ty` (the types in [`ggml`]).
///
/// # Panics
/// On a type outside [`ggml`] (a test bug).
#[allow(clippy::panic)]
pub fn ggml_bytes(elements: u64, ty: u32) -> u64 {
    match ty {
        ggml::F32 => elements * 4,
        ggml::F16 => elements * 2,
        ggml::Q4_0 => elements.div_ceil(32) * 18,
        ggml::Q8_0 => elements.div_ceil(32) * 34,
        ggml::Q4_K => elements.div_ceil(256) * 144,
        ggml::Q6_K => elements.div_ceil(256) * 210,
        other => panic!("GgufWriter: type {other} not supported"),
    }
}

impl GgufWriter {
    /// An empty file.
    pub fn new() -> GgufWriter {
        GgufWriter::default()
    }

    fn bytes(&mut self, b: &[u8]) {
        push(&mut self.kv, b);
    }

    fn key(&mut self, k: &str, ty: u32) {
        let mut b = Vec::new();
        string(&mut b, k);
        b.extend(ty.to_le_bytes());
        self.bytes(&b);
        self.kv_count += 1;
    }

    /// A `u32` metadata value.
    #[must_use]
    pub fn u32(mut self, k: &str, v: u32) -> Self {
        self.key(k, 4);
        self.bytes(&v.to_le_bytes());
        self
    }

    /// A metadata value of any type, given as its raw little-endian bytes (a wrong type for a
    /// key, a negative integer, a float where an integer belongs).
    #[must_use]
    pub fn raw(mut self, k: &str, ty: u32, value: &[u8]) -> Self {
        self.key(k, ty);
        self.bytes(value);
        self
    }

    /// A string metadata value.
    #[must_use]
    pub fn str(mut self, k: &str, v: &str) -> Self {
        self.key(k, 8);
        let mut b = Vec::new();
        string(&mut b, v);
        self.bytes(&b);
        self
    }

    /// An array of `u32`.
    #[must_use]
    pub fn u32s(mut self, k: &str, v: &[u32]) -> Self {
        self.key(k, 9);
        let mut b = 4u32.to_le_bytes().to_vec();
        b.extend((v.len() as u64).to_le_bytes());
        for x in v {
            b.extend(x.to_le_bytes());
        }
        self.bytes(&b);
        self
    }

    /// An array of `bool` (GGUF type 7), e.g. a per-layer sliding-window pattern.
    #[must_use]
    pub fn bools(mut self, k: &str, v: &[bool]) -> Self {
        self.key(k, 9);
        let mut b = 7u32.to_le_bytes().to_vec();
        b.extend((v.len() as u64).to_le_bytes());
        b.extend(v.iter().map(|b| u8::from(*b)));
        self.bytes(&b);
        self
    }

    /// An array of `len` elements of type `elem` (see [`gguf_type::ALL`]) whose bytes are all
    /// zero: numbers 0, `false`, empty strings, empty `u8` arrays. A hole in a sparse file.
    ///
    /// # Panics
    /// On an element type outside [`gguf_type::ALL`] (a test bug).
    #[must_use]
    #[allow(clippy::panic)]
    pub fn zeroed_array(mut self, k: &str, elem: u32, len: u64) -> Self {
        let size = gguf_type::ALL
            .iter()
            .find(|t| t.0 == elem)
            .map_or_else(|| panic!("GgufWriter: element type {elem}"), |t| t.2);
        self.key(k, 9);
        let mut b = elem.to_le_bytes().to_vec();
        b.extend(len.to_le_bytes());
        self.bytes(&b);
        self.kv.push(Part::Zeros(len * size));
        self
    }

    /// An array nested `depth` deep (an array of one array of … of `u8`), the innermost
    /// holding `len` zero bytes.
    #[must_use]
    pub fn nested_array(mut self, k: &str, depth: u32, len: u64) -> Self {
        self.key(k, 9);
        let mut b = Vec::new();
        for _ in 1..depth {
            b.extend(9u32.to_le_bytes());
            b.extend(1u64.to_le_bytes());
        }
        b.extend(0u32.to_le_bytes());
        b.extend(len.to_le_bytes());
        self.bytes(&b);
        self.kv.push(Part::Zeros(len));
        self
    }

    /// A string value of `len` NUL bytes (a hole).
    #[must_use]
    pub fn zeroed_string(mut self, k: &str, len: u64) -> Self {
        self.key(k, 8);
        self.bytes(&len.to_le_bytes());
        self.kv.push(Part::Zeros(len));
        self
    }

    /// An array of `outer` arrays, each of `inner` zero bytes (`u8`).
    #[must_use]
    pub fn array_of_arrays(mut self, k: &str, outer: u64, inner: u64) -> Self {
        self.key(k, 9);
        let mut b = 9u32.to_le_bytes().to_vec();
        b.extend(outer.to_le_bytes());
        self.bytes(&b);
        let mut head = 0u32.to_le_bytes().to_vec();
        head.extend(inner.to_le_bytes());
        for _ in 0..outer {
            self.bytes(&head);
            self.kv.push(Part::Zeros(inner));
        }
        self
    }

    /// `n` more tensor infos, all zero bytes (an unnamed 0-dimension F32 tensor at offset 0),
    /// after the named ones.
    #[must_use]
    pub fn zeroed_tensors(mut self, n: u64) -> Self {
        self.raw_tensors.push(Part::Zeros(n * 24));
        self.raw_tensor_count += n;
        self
    }

    /// `n` more tensor infos named by `name_len` NUL bytes (0-dimension F32 tensors at offset
    /// 0), after the named ones.
    #[must_use]
    pub fn nul_named_tensors(mut self, n: u64, name_len: u64) -> Self {
        for _ in 0..n {
            push(&mut self.raw_tensors, &name_len.to_le_bytes());
            self.raw_tensors.push(Part::Zeros(name_len + 24 - 8));
        }
        self.raw_tensor_count += n;
        self
    }

    /// A tensor of GGML type `ty` (see [`ggml`]).
    #[must_use]
    pub fn tensor(mut self, name: &str, dims: &[u64], ty: u32) -> Self {
        let bytes = ggml_bytes(dims.iter().product(), ty);
        self.tensors
            .push((name.to_string(), dims.to_vec(), ty, bytes));
        self
    }

    /// The exact bytes of the tensors' data (without alignment padding).
    pub fn weights_bytes(&self) -> u64 {
        self.tensors.iter().map(|t| t.3).sum()
    }

    /// The file's bytes: header, padding, then zeroed data.
    pub fn to_bytes(&self) -> Vec<u8> {
        let (parts, data) = self.header_and_data_len();
        let mut b = Vec::new();
        for p in parts {
            match p {
                Part::Bytes(x) => b.extend(x),
                Part::Zeros(n) => b.resize(b.len() + n as usize, 0),
            }
        }
        b.resize(b.len() + data as usize, 0);
        b
    }

    /// The header and padding, and the length of the data after them.
    fn header_and_data_len(&self) -> (Vec<Part>, u64) {
        let mut parts = Vec::new();
        let mut b = b"GGUF".to_vec();
        b.extend(3u32.to_le_bytes());
        b.extend((self.tensors.len() as u64 + self.raw_tensor_count).to_le_bytes());
        b.extend(self.kv_count.to_le_bytes());
        push(&mut parts, &b);
        for p in &self.kv {
            match p {
                Part::Bytes(x) => push(&mut parts, x),
                Part::Zeros(n) => parts.push(Part::Zeros(*n)),
            }
        }
        let mut b = Vec::new();
        let mut offset = 0u64;
        for (name, dims, ty, bytes) in &self.tensors {
            string(&mut b, name);
            b.extend((dims.len() as u32).to_le_bytes());
            for d in dims {
                b.extend(d.to_le_bytes());
            }
            b.extend(ty.to_le_bytes());
            b.extend(offset.to_le_bytes());
            offset += bytes.div_ceil(32) * 32;
        }
        push(&mut parts, &b);
        for p in &self.raw_tensors {
            match p {
                Part::Bytes(x) => push(&mut parts, x),
                Part::Zeros(n) => parts.push(Part::Zeros(*n)),
            }
        }
        if self.raw_tensor_count > 0 {
            // Each raw info is a 4-byte F32 scalar at offset 0.
            offset = offset.max(32);
        }
        let len: u64 = parts
            .iter()
            .map(|p| match p {
                Part::Bytes(x) => x.len() as u64,
                Part::Zeros(n) => *n,
            })
            .sum();
        parts.push(Part::Zeros(len.next_multiple_of(32) - len));
        (parts, offset)
    }

    /// The header with its padding, and the whole file's length (header + data): what a
    /// server needs to serve the file without holding its zeros.
    pub fn header_and_size(&self) -> (Vec<u8>, u64) {
        let (parts, data) = self.header_and_data_len();
        let mut b = Vec::new();
        for p in parts {
            match p {
                Part::Bytes(x) => b.extend(x),
                Part::Zeros(n) => b.resize(b.len() + n as usize, 0),
            }
        }
        let size = b.len() as u64 + data;
        (b, size)
    }

    /// Writes the file; returns [`GgufWriter::weights_bytes`].
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write(&self, path: &Path) -> std::io::Result<u64> {
        std::fs::write(path, self.to_bytes())?;
        Ok(self.weights_bytes())
    }

    /// Writes the header and leaves the data a hole (a sparse file of the full length): real
    /// sizes without the disk use. Returns [`GgufWriter::weights_bytes`].
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn write_sparse(&self, path: &Path) -> std::io::Result<u64> {
        let (parts, data) = self.header_and_data_len();
        let mut f = std::fs::File::create(path)?;
        let mut len = 0u64;
        for p in parts {
            match p {
                Part::Bytes(x) => {
                    f.write_all(&x)?;
                    len += x.len() as u64;
                }
                Part::Zeros(n) => {
                    f.seek(SeekFrom::Current(
                        i64::try_from(n).map_err(std::io::Error::other)?,
                    ))?;
                    len += n;
                }
            }
        }
        f.set_len(len + data)?;
        Ok(self.weights_bytes())
    }
}
