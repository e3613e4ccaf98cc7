//! `hmn fits --json` (schema 1). Fields are only ever added: `input`, `params`, `estimate`,
//! `devices`, `fit`, `device`, `error`, `warnings` keep their names and meanings; `plan`,
//! `devices_used`, `host`, `complete` and the new fields inside them are additions.
//!
//! The top-level `warnings` hold every warning of the run, as in the other commands: the
//! devices', then the model reader's (`input.warnings`), then the estimate's
//! (`estimate.warnings`); those two lists keep theirs too.

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::io::Write;
use std::path::Path;

use hypomnesis::Warning;
use hypomnesis::estimate::model::OpenedModel;
use hypomnesis::estimate::{
    DeviceFit, Estimate, Fit, FitParams, FlashAttn, HostVerdict, KvDtype, KvHeadsFrom, LlamaApi,
    Placement, kv_bytes_per_token,
};
use serde::Serialize;

use super::model::{Input, Outcome};
use crate::args::FitsArgs;

#[derive(Serialize)]
struct ArchJson {
    source: Option<String>,
    name: Option<String>,
    layers: usize,
    kv_bytes_per_token: u64,
    max_context: Option<u64>,
    /// How `max_context` was derived (YaRN factor × original, a config default, …).
    context_rule: Option<String>,
    kv_heads_from: KvHeadsFrom,
    sliding_layers: usize,
}

#[derive(Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum InputJson<'a> {
    Size {
        bytes: u64,
    },
    Model {
        path: String,
        format: &'static str,
        files: Vec<String>,
        tensor_count: Option<u64>,
        weights_bytes: u64,
        by_dtype: &'a BTreeMap<String, u64>,
        architecture: Option<Box<ArchJson>>,
        /// What the reader could not do (no `config.json`, …).
        warnings: &'a [String],
    },
}

#[derive(Serialize)]
struct ParamsJson {
    context: u64,
    batch: u64,
    kv_dtype: &'static str,
    runtime: &'static str,
    flash_attn: FlashAttn,
    ubatch: Option<u64>,
    parallel: Option<u64>,
    kv_unified: Option<bool>,
    swa_full: bool,
    gpu_layers: Option<u64>,
    tensor_parallel_size: u64,
    gpu_memory_utilization: Option<String>,
    max_num_batched_tokens: Option<u64>,
    cpu_only: bool,
    llama_api: Option<LlamaApi>,
    n_batch: Option<u64>,
    tensor_split: Option<Vec<f32>>,
}

/// `hmn fits --json` (schema 1).
#[derive(Serialize)]
struct FitsJson<'a> {
    schema: u32,
    input: InputJson<'a>,
    params: Option<ParamsJson>,
    estimate: &'a Estimate,
    devices: &'a [DeviceFit],
    /// The answer: the chosen device's verdict, or every part's together for a split.
    fit: Option<Fit>,
    /// The chosen device (`null` for a split, a CPU-only run or `--free`).
    device: Option<u32>,
    error: Option<String>,
    warnings: &'a [Warning],
    /// Where the answer was judged.
    plan: Placement,
    /// The devices the model is placed on.
    devices_used: Vec<u32>,
    /// The host part (llama.cpp on a GPU) against MemAvailable.
    host: Option<&'a HostVerdict>,
    /// Whether every component could be estimated.
    complete: bool,
    /// Notes on the plan (no GPU → CPU, vLLM's device order, …).
    notes: &'a [String],
}

/// The model argument as shown: a URL without its query (a presigned URL's signature).
fn shown_input(arg: &OsStr) -> String {
    let s = Path::new(arg).display().to_string();
    if s.starts_with("https://") || s.starts_with("http://") {
        return s.split(['?', '#']).next().unwrap_or(&s).to_string();
    }
    s
}

fn model_json<'a>(m: &'a OpenedModel, arg: &OsStr) -> InputJson<'a> {
    InputJson::Model {
        path: shown_input(arg),
        format: m.format,
        files: m.files.iter().map(|p| p.display().to_string()).collect(),
        tensor_count: m.spec.tensor_count,
        weights_bytes: m.spec.weights_bytes,
        by_dtype: &m.by_dtype,
        architecture: m.spec.arch.as_ref().map(|x| {
            Box::new(ArchJson {
                source: m.arch_source.clone(),
                name: x.name.clone(),
                layers: x.layers.len(),
                kv_bytes_per_token: kv_bytes_per_token(x, KvDtype::BF16),
                max_context: x.max_context,
                context_rule: x.context_rule.clone(),
                kv_heads_from: x.kv_heads_from,
                sliding_layers: x
                    .layers
                    .iter()
                    .filter(|l| matches!(l.kind, hypomnesis::estimate::LayerKind::Sliding { .. }))
                    .count(),
            })
        }),
        warnings: &m.warnings,
    }
}

pub(super) fn write(
    out: &mut dyn Write,
    input: &Input,
    a: &FitsArgs,
    params: Option<FitParams>,
    est: &Estimate,
    o: &Outcome,
) -> anyhow::Result<()> {
    let input_json = match input {
        Input::Size(n) => InputJson::Size { bytes: *n },
        Input::Model(m) => model_json(m, &a.model),
    };
    let reader = match input {
        Input::Model(m) => m.warnings.as_slice(),
        Input::Size(_) => &[],
    };
    let warnings: Vec<Warning> = o
        .warnings
        .iter()
        .cloned()
        .chain(reader.iter().chain(&est.warnings).map(Warning::general))
        .collect();
    crate::output::json_line(
        out,
        &FitsJson {
            schema: 1,
            input: input_json,
            params: params.map(|p| ParamsJson {
                context: p.context,
                batch: p.batch,
                kv_dtype: p.kv_dtype.as_str(),
                runtime: p.runtime.as_str(),
                flash_attn: p.flash_attn,
                ubatch: p.ubatch,
                parallel: p.slots,
                kv_unified: p.kv_unified,
                swa_full: p.swa_full,
                gpu_layers: p.gpu_layers,
                tensor_parallel_size: p.tensor_parallel,
                gpu_memory_utilization: p.gpu_memory_utilization.map(|u| u.to_string()),
                max_num_batched_tokens: p.max_num_batched_tokens,
                cpu_only: p.cpu_only,
                llama_api: p.llama_api,
                n_batch: p.n_batch,
                tensor_split: p.tensor_split.map(|t| t.proportions().to_vec()),
            }),
            estimate: est,
            devices: &o.plan.fits,
            fit: o.plan.fit,
            device: o.plan.chosen_fit().and_then(|c| c.index),
            error: o.error.clone(),
            warnings: &warnings,
            plan: o.plan.placement,
            devices_used: o.plan.devices_used(),
            host: o.plan.host.as_ref(),
            complete: est.is_complete(),
            notes: &o.notes,
        },
    )
}
