//! Hostile model files for the bounds of `hmn fits` (issue 22): GGUF headers whose metadata
//! arrays, strings, keys, nesting or tensor infos add up to a given number of bytes, each
//! around a small valid model (a llama architecture and one tensor) so that a reader that
//! survives the junk still reaches an estimate. Written sparse: the junk is zero bytes, so a
//! header of gigabytes costs no disk.
//!
//! The attacks, by file name:
//!
//! | File | Junk |
//! |---|---|
//! | `arrays-{type}.gguf` | arrays of 65,536 zeroed elements of one type (every GGUF type, `array` = empty `u8` arrays), as many as fit |
//! | `one-array-{type}.gguf` | one array of that type holding every byte |
//! | `nested.gguf` | an array of arrays of 65,536 zero bytes each |
//! | `deep.gguf` | one array nested 4 deep (the limit) around every byte |
//! | `strings.gguf` | string values of up to 16 MiB NUL bytes (the limit) |
//! | `keys.gguf` | `u8` values under up to 2²⁰ distinct keys of 1 KiB |
//! | `wanted-keys.gguf` | per-layer arrays of 4,096 `u32` under keys the estimator reads (`aN.attention.head_count`) |
//! | `tensors.gguf` | zeroed tensor infos (unnamed 0-dimension tensors), up to 2²⁰ |
//! | `tensor-names.gguf` | tensor infos named by 65,535 NUL bytes |

use crate::gguf::{GgufWriter, ggml, gguf_type};

/// Arrays of this many elements were kept item by item by the first GGUF reader.
pub const CHUNK: u64 = 65_536;

/// The valid model each attack surrounds: llama, 2 layers, one tensor.
pub fn base() -> GgufWriter {
    GgufWriter::new()
        .str("general.architecture", "llama")
        .u32("llama.block_count", 2)
        .u32("llama.attention.head_count", 4)
        .u32("llama.attention.head_count_kv", 2)
        .u32("llama.embedding_length", 256)
        .u32("llama.context_length", 4096)
}

/// `w` (an architecture, its layers and tensors) with every llama dimension `hmn fits` bounds
/// at its bound (`estimate::arch::Dim`): heads and head sizes 2¹⁶, embedding 2²⁰, FFN 2²²,
/// vocabulary 2²⁴, context 2³² — a header to be read and estimated (it fits nowhere), not
/// refused.
pub fn at_the_bounds(w: GgufWriter) -> GgufWriter {
    w.u32("llama.attention.head_count", 1 << 16)
        .u32("llama.attention.head_count_kv", 1 << 16)
        .u32("llama.attention.key_length", 1 << 16)
        .u32("llama.attention.value_length", 1 << 16)
        .u32("llama.embedding_length", 1 << 20)
        .u32("llama.feed_forward_length", 1 << 22)
        .u32("llama.vocab_size", 1 << 24)
        .raw("llama.context_length", 10, &(1u64 << 32).to_le_bytes())
}

fn finish(w: GgufWriter) -> GgufWriter {
    w.tensor("token_embd.weight", &[256, 32], ggml::F16)
}

/// Every attack with about `bytes` bytes of junk, by file name.
pub fn gguf_attacks(bytes: u64) -> Vec<(String, GgufWriter)> {
    let mut out = Vec::new();
    for (ty, name, size) in gguf_type::ALL {
        let per = CHUNK * size;
        let mut w = base();
        for i in 0..(bytes / per).max(1) {
            w = w.zeroed_array(&format!("junk.{i}"), ty, CHUNK);
        }
        out.push((format!("arrays-{name}.gguf"), finish(w)));
        let w = base().zeroed_array("junk", ty, bytes / size);
        out.push((format!("one-array-{name}.gguf"), finish(w)));
    }
    let inner = CHUNK + 12;
    out.push((
        "nested.gguf".into(),
        finish(base().array_of_arrays("junk", (bytes / inner).max(1), CHUNK)),
    ));
    out.push((
        "deep.gguf".into(),
        finish(base().nested_array("junk", 4, bytes)),
    ));
    let string = 16u64 << 20;
    let mut w = base();
    for i in 0..(bytes / string).max(1) {
        w = w.zeroed_string(&format!("junk.{i}"), string.min(bytes));
    }
    out.push(("strings.gguf".into(), finish(w)));
    let key_len = 1024u64;
    let mut w = base();
    for i in 0..(bytes / (key_len + 13)).clamp(1, 1 << 20) {
        w = w.u32(&format!("{i:0>1024}"), 0);
    }
    out.push(("keys.gguf".into(), finish(w)));
    let mut w = base();
    let layers = vec![1u32; 4096];
    for i in 0..(bytes / (4 * 4096 + 40)).max(1) {
        w = w.u32s(&format!("a{i}.attention.head_count"), &layers);
    }
    out.push(("wanted-keys.gguf".into(), finish(w)));
    out.push((
        "tensors.gguf".into(),
        finish(base()).zeroed_tensors((bytes / 24).clamp(1, (1 << 20) - 1)),
    ));
    let name = 65_535;
    out.push((
        "tensor-names.gguf".into(),
        finish(base()).nul_named_tensors((bytes / (name + 24)).clamp(1, (1 << 20) - 1), name),
    ));
    out
}

/// Writes a safetensors file whose JSON header is about `header_bytes` long (F32 scalars named
/// `{prefix}{i}`, the data a hole), padded to a multiple of 8; returns how many tensors it has.
///
/// # Errors
/// When the file cannot be written.
pub fn safetensors_with_header(
    path: &std::path::Path,
    prefix: &str,
    header_bytes: u64,
) -> std::io::Result<u64> {
    use std::io::Write as _;
    let mut json = String::from("{");
    let mut i = 0u64;
    while (json.len() as u64) + 80 < header_bytes || i == 0 {
        if i > 0 {
            json.push(',');
        }
        json.push_str(&format!(
            r#""{prefix}{i}":{{"dtype":"F32","shape":[1],"data_offsets":[{},{}]}}"#,
            i * 4,
            i * 4 + 4
        ));
        i += 1;
    }
    json.push('}');
    while json.len() % 8 != 0 {
        json.push(' ');
    }
    let mut f = std::fs::File::create(path)?;
    f.write_all(&(json.len() as u64).to_le_bytes())?;
    f.write_all(json.as_bytes())?;
    f.set_len(8 + json.len() as u64 + i * 4)?;
    Ok(i)
}

/// `n` shard names (`model-0000K-of-0000N.safetensors`) in `dir`, every one a symbolic link to
/// one file (`blob.safetensors`) with a header of about `header_bytes`; returns the file's
/// tensor count.
///
/// # Errors
/// When a file or link cannot be written.
pub fn symlinked_shards(dir: &std::path::Path, header_bytes: u64, n: u32) -> std::io::Result<u64> {
    std::fs::create_dir_all(dir)?;
    let tensors = safetensors_with_header(&dir.join("blob.safetensors"), "t", header_bytes)?;
    for k in 1..=n {
        crate::symlink(
            "blob.safetensors",
            dir.join(format!("model-{k:05}-of-{n:05}.safetensors")),
        )?;
    }
    Ok(tensors)
}

/// A Hugging Face cache of a sharded checkpoint under `root`: `blobs/<sha>` files and
/// `snapshots/<rev>/model-0000K-of-0000N.safetensors` → `../../blobs/<sha>` (shard K holds one
/// F32 tensor, `layerK.0`), and with `index` a `model.safetensors.index.json` (also a link to a
/// blob) naming every shard. With `identical`, shards 1 and 2 are one blob (the same bytes, so
/// one `sha`). Returns the snapshot directory.
///
/// # Errors
/// When a file or link cannot be written.
pub fn hf_cache(
    root: &std::path::Path,
    n: u32,
    identical: bool,
    index: bool,
) -> std::io::Result<std::path::PathBuf> {
    let blobs = root.join("blobs");
    let snapshot = root.join("snapshots").join("0123abcd");
    std::fs::create_dir_all(&blobs)?;
    std::fs::create_dir_all(&snapshot)?;
    let mut map = Vec::new();
    for k in 1..=n {
        let content = if identical && k == 2 { 1 } else { k };
        let sha = format!("{content:064x}");
        let blob = blobs.join(&sha);
        if !blob.exists() {
            safetensors_with_header(&blob, &format!("layer{content}."), 0)?;
        }
        let name = format!("model-{k:05}-of-{n:05}.safetensors");
        crate::symlink(
            std::path::Path::new("../../blobs").join(&sha),
            snapshot.join(&name),
        )?;
        map.push(format!(r#""layer{k}.0":"{name}""#));
    }
    if !index {
        return Ok(snapshot);
    }
    let index = format!(r#"{{"metadata":{{}},"weight_map":{{{}}}}}"#, map.join(","));
    let sha = format!("{:064x}", u64::MAX);
    std::fs::write(blobs.join(&sha), index)?;
    crate::symlink(
        std::path::Path::new("../../blobs").join(&sha),
        snapshot.join("model.safetensors.index.json"),
    )?;
    Ok(snapshot)
}
