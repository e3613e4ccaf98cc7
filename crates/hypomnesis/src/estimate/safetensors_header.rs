//! One safetensors JSON header, parsed as a stream (pure over any [`Read`]): each tensor's
//! dtype, shape and offsets are checked as they are read and folded into what the estimator
//! uses — its [`Summary`]: bytes per dtype, per block ([`WeightsLayout`]) and the K
//! projections' rows ([`KProjection`]) — so the memory kept does not grow with the header.
//!
//! Only each tensor's two offsets stay until the end of the file (16 bytes a tensor, at most
//! [`MAX_TENSORS`] tensors a file), to check that the tensors tile the data exactly as the
//! format requires (sorted, contiguous from 0, each as long as its dtype and shape say).
//! `__metadata__` and fields the estimator does not read are skipped without being built
//! ([`serde::de::IgnoredAny`]); a name, a dtype or a number longer than [`MAX_TOKEN`] bytes is
//! refused while it is read, before serde_json has buffered more of it (`Bounded`). A header
//! near the format's 100 MB limit costs `hmn fits` about 21 MiB at its peak, where the whole
//! JSON tree took 1.2 GiB (docs/security.md, "Model files").

use std::collections::BTreeMap;
use std::fmt;
use std::io::{self, BufReader, Read};
use std::path::PathBuf;

use serde::Deserialize;
use serde::de::{self, Deserializer as _, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::arch::MAX_LAYERS;
use super::dtype::{Dtype, SafetensorsDtype, tensor_bytes};
use super::layout::WeightsLayout;
use crate::types::error::ParseError;

/// Tensors one file may describe (a real checkpoint file has at most tens of thousands).
pub const MAX_TENSORS: u64 = 1 << 20;
/// The longest string (a tensor name, a dtype, a metadata value) or number in a header.
pub const MAX_TOKEN: u64 = 64 << 10;
/// Dimensions of one tensor.
pub const MAX_DIMS: usize = 16;

/// The tensors of one or more files, as the estimator uses them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Summary {
    /// Tensors.
    pub tensor_count: u64,
    /// Exact bytes of the weights.
    pub weights_bytes: u64,
    /// Bytes per dtype.
    pub by_dtype: BTreeMap<String, u64>,
    /// The files read.
    pub files: Vec<PathBuf>,
    /// Bytes per transformer block, embedding, output and the rest, by tensor name (partial
    /// offload places whole blocks).
    pub layout: WeightsLayout,
    /// Each layer's K projection, by layer index (a config without `num_key_value_heads`
    /// needs its rows); vision and audio towers are left out.
    pub k_projections: Vec<KProjection>,
    /// What reading the set met (a shard name that is another name of a file already read).
    pub warnings: Vec<String>,
}

/// What one layer's K projection tensors say about its rows (`[n_kv × head_dim, hidden]`,
/// PyTorch's `nn.Linear` layout); the first seen of each kind is kept.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct KProjection {
    /// Rows of a 2-D `k_proj.weight`.
    pub weight_rows: Option<u64>,
    /// Length of a 1-D `k_proj.bias`.
    pub bias_len: Option<u64>,
    /// Rows of a 2-D fused `qkv_proj.weight` (`(heads + 2 × n_kv) × head_dim`).
    pub qkv_rows: Option<u64>,
}

impl KProjection {
    fn merge(&mut self, o: KProjection) {
        self.weight_rows = self.weight_rows.or(o.weight_rows);
        self.bias_len = self.bias_len.or(o.bias_len);
        self.qkv_rows = self.qkv_rows.or(o.qkv_rows);
    }
}

impl Summary {
    /// Adds another file's tensors.
    pub fn add(&mut self, o: Summary) {
        self.tensor_count += o.tensor_count;
        self.weights_bytes = self.weights_bytes.saturating_add(o.weights_bytes);
        for (k, v) in o.by_dtype {
            let e = self.by_dtype.entry(k).or_default();
            *e = e.saturating_add(v);
        }
        self.files.extend(o.files);
        self.layout.merge(&o.layout);
        if self.k_projections.len() < o.k_projections.len() {
            self.k_projections
                .resize(o.k_projections.len(), KProjection::default());
        }
        for (a, b) in self.k_projections.iter_mut().zip(o.k_projections) {
            a.merge(b);
        }
        self.warnings.extend(o.warnings);
    }
}

/// Parses a header's JSON text from `r` (pure: it only reads): returns the summary and where
/// the data ends (the byte after the last tensor, relative to the data's start).
///
/// # Errors
/// Invalid JSON; a tensor with an unknown dtype, a size that overflows, offsets that do not
/// match its dtype and shape, or that overlap or leave a gap; more than [`MAX_TENSORS`]
/// tensors, [`MAX_DIMS`] dimensions or a string or number over [`MAX_TOKEN`] bytes.
pub fn parse<R: Read>(r: R) -> Result<(Summary, u64), ParseError> {
    parse_limited(r, MAX_TENSORS)
}

/// [`parse`] with at most `max_tensors` tensors.
fn parse_limited<R: Read>(r: R, max_tensors: u64) -> Result<(Summary, u64), ParseError> {
    let bad = |e: serde_json::Error| ParseError::new(format!("invalid safetensors header: {e}"));
    // serde_json reads a reader a byte at a time: the buffer goes outside the bound's scan.
    let mut de =
        serde_json::Deserializer::from_reader(BufReader::with_capacity(64 << 10, Bounded::new(r)));
    let mut acc = Acc {
        max_tensors,
        ..Acc::default()
    };
    de.deserialize_map(&mut acc).map_err(bad)?;
    de.end().map_err(bad)?;
    acc.finish()
}

/// What is kept while the header streams by.
#[derive(Default)]
struct Acc {
    sum: Summary,
    offsets: Vec<(u64, u64)>,
    max_tensors: u64,
}

/// One tensor's entry; other fields are skipped.
#[derive(Deserialize)]
struct Entry {
    dtype: Token,
    shape: Shape,
    data_offsets: (u64, u64),
}

/// A dtype's text (bounded by [`Bounded`] while read).
#[derive(Deserialize)]
#[serde(transparent)]
struct Token(String);

/// A shape, at most [`MAX_DIMS`] dimensions (refused while read, never collected past it).
struct Shape(Vec<u64>);

impl<'de> Deserialize<'de> for Shape {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Shape;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of dimensions")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Shape, A::Error> {
                let mut dims = Vec::new();
                while let Some(d) = s.next_element::<u64>()? {
                    if dims.len() == MAX_DIMS {
                        return Err(de::Error::custom(format!(
                            "a shape of more than {MAX_DIMS} dimensions"
                        )));
                    }
                    dims.push(d);
                }
                Ok(Shape(dims))
            }
        }
        d.deserialize_seq(V)
    }
}

impl<'de> Visitor<'de> for &mut Acc {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("an object of tensors")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<(), A::Error> {
        while let Some(name) = m.next_key::<String>()? {
            if name == "__metadata__" {
                m.next_value::<IgnoredAny>()?;
                continue;
            }
            let e: Entry = m.next_value()?;
            self.tensor(&name, e).map_err(de::Error::custom)?;
        }
        Ok(())
    }
}

impl Acc {
    fn tensor(&mut self, name: &str, e: Entry) -> Result<(), String> {
        let shown: String = name.chars().take(200).collect();
        if self.sum.tensor_count >= self.max_tensors {
            return Err(format!("more than {} tensors (limit)", self.max_tensors));
        }
        // File text goes into messages as it is: `Error` escapes control characters when shown.
        let d = SafetensorsDtype::parse(&e.dtype.0).map_err(|_| {
            format!(
                "tensor \"{shown}\": unknown safetensors dtype \"{}\"",
                e.dtype.0.chars().take(64).collect::<String>()
            )
        })?;
        let bytes = tensor_bytes(&e.shape.0, Dtype::Safetensors(d))
            .map_err(|x| format!("tensor \"{shown}\": {}", x.message))?;
        let (b, end) = e.data_offsets;
        if end.checked_sub(b) != Some(bytes) {
            return Err(format!(
                "tensor \"{shown}\": data_offsets [{b}, {end}] for {bytes} bytes of {d:?} {:?}",
                e.shape.0
            ));
        }
        self.offsets.push((b, end));
        let s = &mut self.sum;
        s.tensor_count += 1;
        s.weights_bytes = s.weights_bytes.saturating_add(bytes);
        match s.by_dtype.get_mut(e.dtype.0.as_str()) {
            Some(v) => *v = v.saturating_add(bytes),
            None => {
                s.by_dtype.insert(e.dtype.0, bytes);
            }
        }
        s.layout.add(name, bytes);
        k_projection(&mut s.k_projections, name, &e.shape.0);
        Ok(())
    }

    /// Checks that the tensors tile the data (sorted, contiguous from 0) and returns its end.
    fn finish(mut self) -> Result<(Summary, u64), ParseError> {
        self.offsets.sort_unstable();
        let mut end = 0u64;
        for (b, e) in &self.offsets {
            if *b != end {
                return Err(ParseError::new(format!(
                    "invalid safetensors header: the tensors {} at byte {end} of the data",
                    if *b < end { "overlap" } else { "leave a gap" }
                )));
            }
            end = *e;
        }
        Ok((self.sum, end))
    }
}

/// Notes a K projection's rows under its layer (`….layers.{i}.…` or `layers.{i}.…`).
fn k_projection(rows: &mut Vec<KProjection>, name: &str, shape: &[u64]) {
    if ["vision", "visual", "audio"]
        .iter()
        .any(|x| name.contains(x))
    {
        return;
    }
    let kind = if name.ends_with("k_proj.weight") && shape.len() == 2 {
        0
    } else if name.ends_with("k_proj.bias") && shape.len() == 1 {
        1
    } else if name.ends_with("qkv_proj.weight") && shape.len() == 2 {
        2
    } else {
        return;
    };
    let Some(i) = name
        .split(".layers.")
        .nth(1)
        .or_else(|| name.strip_prefix("layers."))
        .and_then(|r| r.split('.').next())
        .and_then(|d| d.parse::<usize>().ok())
        .filter(|i| (*i as u64) < MAX_LAYERS)
    else {
        return;
    };
    if rows.len() <= i {
        rows.resize(i + 1, KProjection::default());
    }
    let first = shape.first().copied();
    if let Some(k) = rows.get_mut(i) {
        let slot = match kind {
            0 => &mut k.weight_rows,
            1 => &mut k.bias_len,
            _ => &mut k.qkv_rows,
        };
        *slot = slot.or(first);
    }
}

/// A reader that refuses a JSON string or number (a run of bytes outside the structure) longer
/// than [`MAX_TOKEN`] while it passes by (at most one 64 KiB buffer ahead of the parser), so
/// serde_json never buffers more of one — except
/// inside the value of `__metadata__`, which the parser skips unbuffered (a training tool's
/// metadata may hold long strings).
pub(crate) struct Bounded<R> {
    inner: R,
    /// Brackets open outside strings.
    depth: u32,
    in_string: bool,
    escaped: bool,
    /// Bytes of the current string or number.
    run: u64,
    /// At depth 1, the next string is a key.
    key_pos: bool,
    /// The current string is a key at depth 1: its first bytes and its length.
    in_key: bool,
    key: [u8; 12],
    key_len: usize,
    /// The current top-level pair is `__metadata__`'s.
    metadata: bool,
}

impl<R: Read> Bounded<R> {
    pub(crate) fn new(inner: R) -> Self {
        Bounded {
            inner,
            depth: 0,
            in_string: false,
            escaped: false,
            run: 0,
            key_pos: false,
            in_key: false,
            key: [0; 12],
            key_len: 0,
            metadata: false,
        }
    }

    fn byte(&mut self, c: u8) -> io::Result<()> {
        if self.in_string {
            if self.escaped {
                self.escaped = false;
            } else if c == b'\\' {
                self.escaped = true;
            } else if c == b'"' {
                self.in_string = false;
                if self.in_key {
                    self.metadata =
                        self.key.get(..self.key_len) == Some(b"__metadata__".as_slice());
                }
                return Ok(());
            }
            if self.in_key {
                if let Some(k) = self.key.get_mut(self.key_len) {
                    *k = c;
                }
                self.key_len = self.key_len.saturating_add(1);
            }
            self.run += 1;
        } else {
            match c {
                b'"' => {
                    self.in_string = true;
                    self.in_key = self.depth == 1 && self.key_pos;
                    self.key_len = 0;
                    self.run = 0;
                }
                b'{' | b'[' => {
                    self.depth = self.depth.saturating_add(1);
                    self.key_pos = self.depth == 1;
                    self.run = 0;
                }
                b'}' | b']' => {
                    self.depth = self.depth.saturating_sub(1);
                    self.run = 0;
                }
                b',' | b':' => {
                    if self.depth == 1 {
                        self.key_pos = c == b',';
                        self.metadata &= c == b':';
                    }
                    self.run = 0;
                }
                b' ' | b'\t' | b'\r' | b'\n' => self.run = 0,
                _ => self.run += 1,
            }
        }
        if self.run > MAX_TOKEN && !self.metadata {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("a string or number longer than {MAX_TOKEN} bytes (limit)"),
            ));
        }
        Ok(())
    }
}

impl<R: Read> Read for Bounded<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        for &c in buf.get(..n).unwrap_or_default() {
            self.byte(c)?;
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_text(s: &str) -> Result<(Summary, u64), ParseError> {
        parse(s.as_bytes())
    }

    #[test]
    fn header_text() {
        let json = r#"{"__metadata__":{"format":"pt","nested":{"a":[1,2,{"b":null}]}},"a":{"dtype":"BF16","shape":[2,3],"data_offsets":[0,12],"extra":[1]},"b":{"dtype":"F4","shape":[4],"data_offsets":[12,14]}}"#;
        let (s, end) = parse_text(json).unwrap();
        assert_eq!((s.tensor_count, s.weights_bytes, end), (2, 14, 14));
        assert_eq!(s.by_dtype["F4"], 2);
        assert_eq!(s.by_dtype["BF16"], 12);
        assert_eq!(s.layout.other, 14);
        // Out of order in the text, contiguous in the data.
        let swapped = r#"{"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}"#;
        assert_eq!(parse_text(swapped).unwrap().1, 8);
        assert_eq!(parse_text("{}").unwrap().1, 0);
        for (bad, why) in [
            (
                r#"{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}"#,
                "overlap",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}"#,
                "leave a gap",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}"#,
                "for 12 bytes",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[1],"data_offsets":[8,4]}}"#,
                "data_offsets",
            ),
            (
                r#"{"a":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}}"#,
                "unknown safetensors dtype",
            ),
            (
                r#"{"a":{"dtype":"F4","shape":[3],"data_offsets":[0,1]}}"#,
                "whole bytes",
            ),
            (
                r#"{"a":{"dtype":"F32","shape":[4294967296,4294967296,4],"data_offsets":[0,1]}}"#,
                "overflows",
            ),
            (r#"{"a":{"dtype":"F32","shape":[1]}}"#, "data_offsets"),
            (r#"{"a":1}"#, "invalid type"),
            ("[]", "invalid type"),
            ("{not json", "invalid safetensors header"),
            (r#"{} x"#, "trailing characters"),
        ] {
            let e = parse_text(bad).unwrap_err().to_string();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }

    #[test]
    fn what_is_kept_is_bounded() {
        // A name, a dtype, a value and a number past the token limit are refused as read.
        let long = "x".repeat(MAX_TOKEN as usize + 1);
        let digits = format!("1{}", "0".repeat(MAX_TOKEN as usize));
        let entry = r#"{"dtype":"F32","shape":[],"data_offsets":[0,4]}"#;
        for bad in [
            format!(r#"{{"{long}":{entry}}}"#),
            format!(r#"{{"a":{{"dtype":"{long}","shape":[],"data_offsets":[0,4]}}}}"#),
            format!(r#"{{"a":"{long}"}}"#),
            format!(r#"{{"a":{{"dtype":"F32","shape":[{digits}],"data_offsets":[0,4]}}}}"#),
            format!(r#"{{"__metadata__":{{}},"a":"{long}"}}"#),
            // Escaped quotes do not end a string early.
            format!(r#"{{"a":"{}"}}"#, r#"\""#.repeat(40_000)),
        ] {
            let e = parse_text(&bad).unwrap_err().to_string();
            assert!(e.contains("longer than 65536 bytes"), "{e}");
        }
        // `__metadata__`'s value is skipped unbuffered: long strings and numbers there are read.
        let (s, end) = parse_text(&format!(
            r#"{{"__metadata__":{{"{long}":"{long}","n":[{digits}],"q":"\"{long}"}},"a":{entry}}}"#
        ))
        .unwrap();
        assert_eq!((s.tensor_count, end), (1, 4));
        let shape = format!(
            r#"{{"a":{{"dtype":"U8","shape":[{}],"data_offsets":[0,1]}}}}"#,
            vec!["1"; MAX_DIMS + 1].join(",")
        );
        assert!(
            parse_text(&shape)
                .unwrap_err()
                .to_string()
                .contains("more than 16 dimensions")
        );
    }

    #[test]
    fn sums_and_k_projections() {
        let json = r#"{
            "model.embed_tokens.weight":{"dtype":"BF16","shape":[10,4],"data_offsets":[0,80]},
            "model.layers.1.self_attn.k_proj.weight":{"dtype":"BF16","shape":[2,4],"data_offsets":[80,96]},
            "model.layers.1.self_attn.k_proj.bias":{"dtype":"BF16","shape":[2],"data_offsets":[96,100]},
            "model.layers.0.self_attn.qkv_proj.weight":{"dtype":"BF16","shape":[12,4],"data_offsets":[100,196]},
            "vision_tower.layers.0.self_attn.k_proj.weight":{"dtype":"BF16","shape":[7,4],"data_offsets":[196,252]},
            "lm_head.weight":{"dtype":"BF16","shape":[10,4],"data_offsets":[252,332]}
        }"#;
        let (s, end) = parse_text(json).unwrap();
        assert_eq!(end, 332);
        assert_eq!(s.layout.blocks, vec![96, 20]);
        assert_eq!(
            (s.layout.token_embd, s.layout.output, s.layout.other),
            (80, Some(80), 56)
        );
        assert_eq!(s.k_projections.len(), 2);
        assert_eq!(s.k_projections[0].qkv_rows, Some(12));
        assert_eq!(s.k_projections[0].weight_rows, None);
        assert_eq!(
            (s.k_projections[1].weight_rows, s.k_projections[1].bias_len),
            (Some(2), Some(2))
        );
        // Two halves added are the whole.
        let mut a = parse_text(
            r#"{"model.layers.3.self_attn.k_proj.weight":{"dtype":"F32","shape":[1,1],"data_offsets":[0,4]}}"#,
        )
        .unwrap()
        .0;
        a.add(s.clone());
        assert_eq!(a.tensor_count, 7);
        assert_eq!(a.k_projections.len(), 4);
        assert_eq!(a.k_projections[3].weight_rows, Some(1));
        assert_eq!(a.layout.blocks, vec![96, 20, 0, 4]);
        assert_eq!(a.by_dtype["BF16"], 332);
    }

    /// The tensor count is capped while the header streams (the offsets kept stop there); the
    /// header is generated as it is read.
    #[test]
    fn a_file_describes_at_most_max_tensors() {
        struct Many {
            i: u64,
            n: u64,
            pending: Vec<u8>,
        }
        impl Read for Many {
            fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
                if self.pending.is_empty() {
                    let i = self.i;
                    self.pending = match i {
                        _ if i > self.n => return Ok(0),
                        _ if i == self.n => b"}".to_vec(),
                        _ => format!(
                            "{}\"t{i}\":{{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[{i},{}]}}",
                            if i == 0 { "{" } else { "," },
                            i + 1
                        )
                        .into_bytes(),
                    };
                    self.i += 1;
                }
                let k = buf.len().min(self.pending.len());
                buf[..k].copy_from_slice(&self.pending[..k]);
                self.pending.drain(..k);
                Ok(k)
            }
        }
        let many = |n| {
            std::io::BufReader::new(Many {
                i: 0,
                n,
                pending: Vec::new(),
            })
        };
        let (s, end) = parse_limited(many(1000), 1000).unwrap();
        assert_eq!((s.tensor_count, end), (1000, 1000));
        let e = parse_limited(many(1001), 1000).unwrap_err().to_string();
        assert!(e.contains("more than 1000 tensors"), "{e}");
    }
}
