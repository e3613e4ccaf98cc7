//! The GGUF reader's tests: exact weights, hostile claims, what is kept and the bounds.

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

/// A header (no tensors) whose metadata the writer `w` built, parsed.
fn parse_writer(w: hmn_testbed::GgufWriter) -> Result<Header, ParseError> {
    parse(&w.to_bytes())
}

#[test]
fn only_what_the_estimator_reads_is_kept() {
    let h = parse_writer(
        hmn_testbed::GgufWriter::new()
            .str("general.architecture", "llama")
            .u32s("llama.attention.head_count_kv", &[4, 4, 2])
            .zeroed_array("junk.numbers", 4, 1000)
            .zeroed_array("junk.strings", STRING, 1000)
            .nested_array("junk.nested", 4, 100)
            .zeroed_array("tokenizer.ggml.tokens", STRING, 7)
            .zeroed_string("junk.long", KEEP_STRING + 1)
            .str("junk.short", "kept")
            .u32s("mistral.attention.head_count", &[1, 2]),
    )
    .unwrap();
    let items = |k: &str| match &h.metadata[k] {
        Value::Array { len, items } => (*len, items.len()),
        v => panic!("{k}: {v:?}"),
    };
    assert_eq!(items("llama.attention.head_count_kv"), (3, 3), "read: kept");
    assert_eq!(items("junk.numbers"), (1000, 0), "not read: length only");
    assert_eq!(items("junk.strings"), (1000, 0));
    assert_eq!(items("junk.nested"), (1, 0));
    assert_eq!(items("tokenizer.ggml.tokens"), (7, 0), "its length is read");
    assert_eq!(
        items("mistral.attention.head_count"),
        (2, 0),
        "another arch"
    );
    assert!(!h.metadata.contains_key("junk.long"));
    assert_eq!(h.metadata["junk.short"], Value::String("kept".into()));
    assert_eq!(h.skipped, 1);
    assert!(is_read("llama.block_count", None) && is_read("x.block_count", None));
    assert!(!is_read("x.block_count", Some("llama")) && !is_read("llama.foo", None));
}

#[test]
fn kept_memory_is_bounded() {
    // Per-layer arrays under keys of an architecture not yet named: kept, up to the cap.
    let mut w = hmn_testbed::GgufWriter::new();
    for i in 0..=MAX_KEPT_ITEMS / KEEP_ARRAY {
        w = w.u32s(&format!("a{i}.attention.head_count"), &[1; 4096]);
    }
    let e = parse_writer(w).unwrap_err().message;
    assert!(
        e.contains("per-layer array elements to keep (limit)"),
        "{e}"
    );
    // Many tensor infos: refused before they are read.
    let b = hmn_testbed::GgufWriter::new()
        .zeroed_tensors(MAX_KEPT_BYTES / 64)
        .to_bytes();
    let e = parse(&b).unwrap_err().message;
    assert!(
        e.contains("tensor infos: the metadata and tensor infos to keep need more than 16 MiB"),
        "{e}"
    );
    // Long tensor names: refused once they add up.
    let b = hmn_testbed::GgufWriter::new()
        .nul_named_tensors(MAX_KEPT_BYTES / MAX_NAME + 1, MAX_NAME)
        .to_bytes();
    assert!(parse(&b).unwrap_err().message.contains("16 MiB"));
    // Many keys: those the estimator does not read stop being kept at 4 MiB, unrefused.
    let mut w = hmn_testbed::GgufWriter::new();
    let n = 2 * OPTIONAL_BYTES / (OVERHEAD + 1000);
    for i in 0..n {
        w = w.u32(&format!("{i:0>1000}"), 1);
    }
    let h = parse_writer(w.u32("llama.block_count", 2)).unwrap();
    assert!(h.skipped > n / 3 && h.skipped < n, "{} of {n}", h.skipped);
    assert_eq!(
        h.u64("llama.block_count"),
        Some(2),
        "a key it reads is kept"
    );
    // A key read again and again replaces itself: no charge accumulates.
    let mut w = hmn_testbed::GgufWriter::new();
    for _ in 0..100 {
        w = w.u32s("llama.attention.head_count", &[1; 4096]);
    }
    assert!(parse_writer(w).is_ok());
}

/// The start of a header of `n` metadata pairs, each a `u8` array of `len` elements (only
/// the first pair's head is written: the rest of the file is claimed, not there).
fn arrays_claimed(n: u64, len: u64) -> Vec<u8> {
    let mut b = b"GGUF".to_vec();
    b.extend(3u32.to_le_bytes());
    b.extend(0u64.to_le_bytes());
    b.extend(n.to_le_bytes());
    s(&mut b, "junk");
    b.extend(9u32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend(len.to_le_bytes());
    b
}

#[test]
fn the_header_length_is_bounded_for_a_file_and_a_set() {
    // A 200 MiB array in a file claimed to be 300 MiB: skipped by a seek, within the limit.
    let bytes = arrays_claimed(1, 200 << 20);
    let claimed = 300 << 20;
    let mut set = ReadBudget::default();
    let first = read_header_within(Cursor::new(&bytes), claimed, &mut set);
    assert!(first.is_ok() && set.header_bytes > 200 << 20, "{first:?}");
    // The same again in the same set: over the limit together.
    let e = read_header_within(Cursor::new(&bytes), claimed, &mut set).unwrap_err();
    assert!(
        e.message
            .contains("the header is longer than 256 MiB (limit)"),
        "{e}"
    );
    // One file over the limit alone.
    let e = read_header(Cursor::new(&arrays_claimed(1, 257 << 20)), claimed).unwrap_err();
    assert!(e.message.contains("256 MiB"), "{e}");
}

#[test]
fn an_invalid_alignment_is_an_error() {
    for bad in [0u32, 24] {
        let b = hmn_testbed::GgufWriter::new()
            .u32("general.alignment", bad)
            .to_bytes();
        let e = parse(&b).unwrap_err().message;
        assert!(
            e.contains(&format!("invalid general.alignment ({bad}")),
            "{e}"
        );
    }
    let b = hmn_testbed::GgufWriter::new()
        .u32("general.alignment", 32)
        .to_bytes();
    assert!(parse(&b).is_ok());
}
