//! Opening a model: a `.gguf` file, a `.safetensors` file, a `model.safetensors.index.json`, or
//! a directory holding them (with `config.json` for the architecture).

use std::path::{Path, PathBuf};

use super::config;
use super::fit::ModelSpec;
use super::gguf;
use super::safetensors;
use crate::error::{Error, Result};

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
}

fn config_beside(dir: &Path) -> Result<Option<(crate::estimate::Architecture, String)>> {
    let path = dir.join("config.json");
    match std::fs::read(&path) {
        Ok(text) if text.len() <= 16 << 20 => {
            let a = config::from_config_json(&text).map_err(|e| e.at(&path))?;
            Ok(Some((a, path.display().to_string())))
        }
        Ok(_) => Err(Error::parse(&path, None, "larger than 16 MiB")),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::from_io(&path, e)),
    }
}

fn from_safetensors(summary: safetensors::Summary, dir: &Path) -> Result<OpenedModel> {
    let arch = config_beside(dir)?;
    let mut spec = ModelSpec::new(summary.weights_bytes, arch.as_ref().map(|(a, _)| a.clone()));
    spec.tensor_count = Some(summary.tensor_count);
    Ok(OpenedModel {
        spec,
        format: "safetensors",
        files: summary.files,
        by_dtype: summary.by_dtype,
        arch_source: arch.map(|(_, s)| s),
    })
}

/// Opens a model file or directory, reading headers only.
///
/// # Errors
/// [`Error::NotFound`] / [`Error::Parse`] naming the offending file.
pub fn open(path: &Path) -> Result<OpenedModel> {
    let md = std::fs::metadata(path).map_err(|e| Error::from_io(path, e))?;
    if md.is_dir() {
        let index = path.join("model.safetensors.index.json");
        if index.exists() {
            return from_safetensors(safetensors::read_index(&index)?, path);
        }
        let mut files: Vec<PathBuf> = std::fs::read_dir(path)
            .map_err(|e| Error::from_io(path, e))?
            .flatten()
            .map(|e| e.path())
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
                let mut total = safetensors::Summary::default();
                for f in many {
                    total.add(safetensors::read_file(f)?);
                }
                from_safetensors(total, path)
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
    if name.ends_with(".safetensors") {
        return from_safetensors(safetensors::read_file(path)?, dir);
    }
    let f = std::fs::File::open(path).map_err(|e| Error::from_io(path, e))?;
    let h = gguf::read_header(std::io::BufReader::new(f), md.len()).map_err(|e| e.at(path))?;
    let arch = config::from_gguf(&h);
    let mut by_dtype = std::collections::BTreeMap::new();
    for t in &h.tensors {
        *by_dtype.entry(format!("{:?}", t.ggml_type)).or_default() += t.bytes;
    }
    let mut spec = ModelSpec::new(h.weights_bytes(), arch.clone());
    spec.tensor_count = Some(h.tensors.len() as u64);
    Ok(OpenedModel {
        spec,
        format: "gguf",
        files: vec![path.to_path_buf()],
        by_dtype,
        arch_source: arch.map(|_| "GGUF metadata".to_string()),
    })
}
