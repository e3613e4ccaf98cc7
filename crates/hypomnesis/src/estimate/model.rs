//! Opening a model: a `.gguf` file, a `.safetensors` file, a `model.safetensors.index.json`, or
//! a directory holding them (with `config.json` for the architecture).
//!
//! | Rule | Function |
//! |---|---|
//! | one shard of a set (`…-0000K-of-0000N.safetensors`) brings the whole set: the index beside it when it names the shard, else every `{prefix}-{k:05}-of-{N:05}.safetensors`; a missing shard is an error naming it | `shard_set` |
//! | a split GGUF (`-0000K-of-0000N.gguf`) brings every shard | `open_gguf` |
//! | no `config.json`: no architecture, and a warning that the estimate is weights-only | [`open`] |
//! | bytes per block / embedding / output from the tensor names ([`super::layout`]) | [`open`] |
//! | a config without `num_key_value_heads`: the KV heads from the `k_proj` shapes ([`super::config::infer_kv_heads`]) | `kv_rows` |

use std::path::{Path, PathBuf};

use super::config;
use super::fit::ModelSpec;
use super::gguf;
use super::layout::WeightsLayout;
use super::safetensors;
use crate::system::fsread::{self, Cap};
use crate::types::error::Error;

/// What was read.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpenedModel {
    /// Weights and architecture.
    pub spec: ModelSpec,
    /// `gguf` or `safetensors`.
    pub format: &'static str,
    /// Files whose headers were read.
    pub files: Vec<PathBuf>,
    /// Bytes per element type.
    pub by_dtype: std::collections::BTreeMap<String, u64>,
    /// Where the architecture came from (`config.json`, GGUF metadata), if anywhere.
    pub arch_source: Option<String>,
    /// What the reader could not do or had to assume (no `config.json`, …).
    pub warnings: Vec<String>,
}

/// The largest `config.json` read.
pub(crate) const MAX_CONFIG: u64 = 16 << 20;

fn config_beside(dir: &Path) -> Result<Option<(super::arch::Architecture, String)>, Error> {
    let path = dir.join("config.json");
    match fsread::read_bounded(&path, Cap::bytes(MAX_CONFIG)) {
        Ok(Some(text)) => {
            let a = config::from_config_json(&text).map_err(|e| e.at(&path))?;
            Ok(Some((a, path.display().to_string())))
        }
        Ok(None) => Err(Error::parse(&path, None, "larger than 16 MiB")),
        Err(Error::NotFound { .. }) => Ok(None),
        Err(e) => Err(e),
    }
}

/// Rows of each layer's K projection (`[n_kv × head_dim, hidden]`, PyTorch layout), by layer:
/// `k_proj.weight`, else its bias, else a fused `qkv_proj.weight` (`(heads + 2 × n_kv) ×
/// head_dim` rows). Quantized (`qweight`) and flattened (bitsandbytes) tensors are not used.
fn kv_rows(summary: &safetensors::Summary, arch: &super::arch::Architecture) -> Vec<Option<u64>> {
    let heads = arch.attention_heads.unwrap_or(0);
    (0..arch.layers.len())
        .map(|i| {
            let k = summary.k_projections.get(i)?;
            k.weight_rows.or(k.bias_len).or_else(|| {
                let d = arch.layers.get(i).map_or(0, |l| l.head_dim_k);
                k.qkv_rows
                    .filter(|_| d > 0)
                    .and_then(|r| (r / d).checked_sub(heads))
                    .map(|two_kv| two_kv / 2 * d)
            })
        })
        .collect()
}

fn from_safetensors(summary: safetensors::Summary, dir: &Path) -> Result<OpenedModel, Error> {
    let arch = config_beside(dir)?;
    Ok(assemble_safetensors(
        summary,
        arch,
        &dir.display().to_string(),
    ))
}

/// A safetensors model from its headers' `summary` and its `config.json` (`arch`, with where it
/// came from; `None`: a weights-only estimate, warned about `place`).
pub(crate) fn assemble_safetensors(
    summary: safetensors::Summary,
    mut arch: Option<(super::arch::Architecture, String)>,
    place: &str,
) -> OpenedModel {
    let mut warnings = summary.warnings.clone();
    match &mut arch {
        Some((a, _)) => {
            let rows = kv_rows(&summary, a);
            config::infer_kv_heads(a, &rows);
        }
        None => warnings.push(format!(
            "no config.json in {place}: the architecture is unknown, so the KV cache and the compute buffers are too — a weights-only estimate"
        )),
    }
    let layout = summary.layout;
    let mut spec = ModelSpec::new(summary.weights_bytes, arch.as_ref().map(|(a, _)| a.clone()));
    spec.tensor_count = Some(summary.tensor_count);
    spec.layout = Some(layout);
    OpenedModel {
        spec,
        format: "safetensors",
        files: summary.files,
        by_dtype: summary.by_dtype,
        arch_source: arch.map(|(_, s)| s),
        warnings,
    }
}

/// `name-00001-of-00003.safetensors` → (`name`, 3): transformers' shard names.
pub(crate) fn shard_name(name: &str) -> Option<(&str, u32)> {
    numbered_part(name, ".safetensors")
}

/// `<prefix>-NNNNN-of-NNNNN<ext>` → (prefix, total): one file of a set split for size (five
/// digits each, as transformers and llama.cpp both write them; a total of 0 is no set).
fn numbered_part<'a>(name: &'a str, ext: &str) -> Option<(&'a str, u32)> {
    let stem = name.strip_suffix(ext)?;
    let (rest, total) = stem.rsplit_once("-of-")?;
    let (prefix, index) = rest.rsplit_once('-')?;
    let digits = |s: &str| s.len() == 5 && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(total) || !digits(index) {
        return None;
    }
    total.parse().ok().filter(|n| *n > 0).map(|n| (prefix, n))
}

/// One shard of a set: the whole set, through the index beside it when the index names this
/// shard, else by the naming pattern (every shard must exist).
fn shard_set(path: &Path, prefix: &str, total: u32) -> Result<safetensors::Summary, Error> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let index = dir.join(format!("{prefix}.safetensors.index.json"));
    if let Ok(Some(text)) = fsread::read_bounded(&index, Cap::bytes(safetensors::MAX_HEADER)) {
        if String::from_utf8_lossy(&text).contains(&name) {
            return safetensors::read_index(&index);
        }
    }
    if total as usize > safetensors::MAX_SHARDS {
        return Err(Error::parse(path, None, "more than 4096 shards"));
    }
    let mut sum = safetensors::ShardReader::new();
    for k in 1..=total {
        let shard = dir.join(format!("{prefix}-{k:05}-of-{total:05}.safetensors"));
        if !shard.exists() {
            return Err(Error::parse(
                &shard,
                None,
                format!(
                    "shard {k} of {total} is missing: {name} is one shard of a set, and the estimate needs every shard (or its {prefix}.safetensors.index.json)"
                ),
            ));
        }
        sum.read(&shard)?;
    }
    Ok(sum.finish())
}

/// Opens a model file or directory, reading headers only.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::Parse`] naming the offending file.
pub fn open(path: &Path) -> Result<OpenedModel, Error> {
    let md = std::fs::metadata(path).map_err(|e| Error::from_io(path, e))?;
    if md.is_dir() {
        let index = path.join("model.safetensors.index.json");
        if index.exists() {
            return from_safetensors(safetensors::read_index(&index)?, path);
        }
        let mut files: Vec<PathBuf> = fsread::list_dir(path)?
            .into_iter()
            .filter(|p| {
                p.extension()
                    .is_some_and(|x| x == "safetensors" || x == "gguf")
            })
            .collect();
        files.sort();
        return match files.as_slice() {
            [] => Err(Error::parse(
                path,
                None,
                "no .safetensors or .gguf file in this directory",
            )),
            [one] => open(one),
            many if many
                .iter()
                .all(|p| p.extension().is_some_and(|x| x == "safetensors")) =>
            {
                open_safetensors_dir(path, many)
            }
            // One split GGUF (its shard 1 names the others).
            [first, ..]
                if first
                    .file_name()
                    .and_then(|n| split_gguf(&n.to_string_lossy()).map(|(_, t)| t))
                    == u32::try_from(files.len()).ok() =>
            {
                open_gguf(first)
            }
            _ => Err(Error::parse(
                path,
                None,
                "several model files here; name one",
            )),
        };
    }
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = path.parent().unwrap_or(Path::new("."));
    if name.ends_with(".index.json") {
        return from_safetensors(safetensors::read_index(path)?, dir);
    }
    if let Some((prefix, total)) = shard_name(&name).filter(|(_, t)| *t > 1) {
        return from_safetensors(shard_set(path, prefix, total)?, dir);
    }
    if name.ends_with(".safetensors") {
        return from_safetensors(safetensors::read_file(path)?, dir);
    }
    open_gguf(path)
}

/// Several `.safetensors` files in a directory without an index: one shard set, every shard
/// read (a missing one is an error naming it), or a refusal to guess — never a sum of files
/// that are not one model (a set beside an adapter, `model.safetensors` beside its
/// `consolidated.safetensors` copy, two shards of three).
fn open_safetensors_dir(dir: &Path, files: &[PathBuf]) -> Result<OpenedModel, Error> {
    let name = |p: &PathBuf| {
        p.file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    };
    let names: Vec<String> = files.iter().map(name).collect();
    let sets: Vec<Option<(&str, u32)>> = names.iter().map(|n| shard_name(n)).collect();
    if let (Some(Some(first)), true) = (sets.first(), sets.windows(2).all(|w| w[0] == w[1])) {
        if let Some(f) = files.first() {
            return from_safetensors(shard_set(f, first.0, first.1)?, dir);
        }
    }
    let shown: Vec<&str> = names.iter().take(6).map(String::as_str).collect();
    Err(Error::parse(
        dir,
        None,
        format!(
            "{} .safetensors files that are not one shard set ({}{}): name one (a shard names its whole set)",
            names.len(),
            shown.join(", "),
            if names.len() > 6 { ", …" } else { "" }
        ),
    ))
}

/// `name-00001-of-00003.gguf` → (`name`, 3): llama.cpp's split files.
pub(crate) fn split_gguf(name: &str) -> Option<(&str, u32)> {
    numbered_part(name, ".gguf")
}

/// Reads one GGUF header into the set's `budget`; `None` when the file was read already through
/// another name (`seen`: the identity and path of each file read).
fn read_gguf(
    path: &Path,
    budget: &mut gguf::ReadBudget,
    seen: &mut Vec<((u64, u64), PathBuf)>,
    warnings: &mut Vec<String>,
) -> Result<Option<gguf::Header>, Error> {
    let (f, len) = fsread::open_sized(path)?;
    let id = fsread::identity(&f);
    if let Some((_, first)) = seen.iter().find(|(s, _)| Some(*s) == id) {
        warnings.push(format!(
            "{} is another name of {}: read once",
            path.display(),
            first.display()
        ));
        return Ok(None);
    }
    let h = gguf::read_header_within(std::io::BufReader::new(f), len, budget)
        .map_err(|e| e.at(path))?;
    if let Some(id) = id {
        seen.push((id, path.to_path_buf()));
    }
    Ok(Some(h))
}

/// Opens a GGUF file; a split file (`-0000K-of-0000N.gguf`) brings every shard, the
/// architecture coming from the first shard that has it (usually shard 1). The shards share
/// one [`gguf::ReadBudget`]: the set together is bounded as one file is, and a file reached
/// through several names is read once.
fn open_gguf(path: &Path) -> Result<OpenedModel, Error> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let files: Vec<PathBuf> = match split_gguf(&name) {
        Some((prefix, total)) => {
            if total > 4096 {
                return Err(Error::parse(path, None, "more than 4096 split files"));
            }
            (1..=total)
                .map(|k| path.with_file_name(format!("{prefix}-{k:05}-of-{total:05}.gguf")))
                .collect()
        }
        None => vec![path.to_path_buf()],
    };
    let mut budget = gguf::ReadBudget::default();
    let mut seen = Vec::new();
    let mut warnings = Vec::new();
    let mut headers = Vec::new();
    for file in &files {
        if let Some(h) = read_gguf(file, &mut budget, &mut seen, &mut warnings)? {
            headers.push((file.clone(), h));
        }
    }
    assemble_gguf(headers, warnings)
}

/// A GGUF model from the headers of its file (or of every file of a split set, in order); the
/// architecture from the first that has it.
pub(crate) fn assemble_gguf(
    headers: Vec<(PathBuf, gguf::Header)>,
    mut warnings: Vec<String>,
) -> Result<OpenedModel, Error> {
    let mut arch = None;
    let mut weights = 0u64;
    let mut tensors = 0u64;
    let mut by_dtype = std::collections::BTreeMap::new();
    let mut names: Vec<(String, u64)> = Vec::new();
    let mut read = Vec::new();
    for (file, h) in headers {
        if arch.is_none() {
            arch = config::from_gguf(&h).map_err(|e| e.at(&file))?;
        }
        read.push(file);
        weights = weights.saturating_add(h.weights_bytes());
        tensors += h.tensors.len() as u64;
        for t in h.tensors {
            *by_dtype.entry(format!("{:?}", t.ggml_type)).or_default() += t.bytes;
            names.push((t.name, t.bytes));
        }
    }
    if arch.is_none() {
        warnings.push("no general.architecture, block count or head count in the GGUF metadata: a weights-only estimate".to_string());
    }
    let mut spec = ModelSpec::new(weights, arch.clone());
    spec.tensor_count = Some(tensors);
    spec.layout = Some(WeightsLayout::from_tensors(
        names.iter().map(|(n, b)| (n.as_str(), *b)),
    ));
    Ok(OpenedModel {
        spec,
        format: "gguf",
        files: read,
        by_dtype,
        arch_source: arch.map(|_| "GGUF metadata".to_string()),
        warnings,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn oversized_files_are_refused_unread() {
        // Reads 16 MiB into memory and frees it: serialised with the tests that measure RSS.
        let _serial = crate::system::host::RSS_TEST_LOCK
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("config.json");
        // A sparse 17 MiB config.json: refused with the limit in the message.
        std::fs::File::create(&p)
            .unwrap()
            .set_len(17 << 20)
            .unwrap();
        let e = config_beside(dir.path()).unwrap_err().to_string();
        assert!(e.contains("larger than 16 MiB"), "{e}");
    }

    #[test]
    fn shard_names() {
        assert_eq!(
            shard_name("model-00001-of-00004.safetensors"),
            Some(("model", 4))
        );
        assert_eq!(shard_name("model.safetensors"), None);
        assert_eq!(shard_name("model-1-of-2.safetensors"), None);
    }

    #[test]
    fn split_gguf_names() {
        assert_eq!(
            split_gguf("Qwen3-235B-Q4_K_M-00001-of-00003.gguf"),
            Some(("Qwen3-235B-Q4_K_M", 3))
        );
        assert_eq!(split_gguf("model-00002-of-00002.gguf"), Some(("model", 2)));
        assert_eq!(split_gguf("model.gguf"), None);
        assert_eq!(split_gguf("model-1-of-2.gguf"), None);
        assert_eq!(split_gguf("model-00001-of-00000.gguf"), None);
        assert_eq!(split_gguf("-00001-of-00002.gguf"), Some(("", 2)));
    }
}
