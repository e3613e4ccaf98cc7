//! What `hmn fits` judged, ready to print: the [`Input`] asked about, the [`Plan`] that says
//! where, each device's [`DeviceFit`] and the whole [`Outcome`] (formatted by `text.rs` and
//! `json.rs`).

use hypomnesis::Warning;
use hypomnesis::estimate::model::OpenedModel;
use hypomnesis::estimate::{
    BudgetSource, Estimate, Fit, HostVerdict, NoBudget, Utilization, Verdict,
};
use serde::Serialize;

/// What the user asked about.
pub(super) enum Input {
    Size(u64),
    Model(Box<OpenedModel>),
}

/// Where the answer was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum Plan {
    /// One device (the default device 0, or `--device N`).
    Device,
    /// Every device judged alone; the verdict is the one with the most headroom.
    BestDevice,
    /// `--free SIZE`.
    Given,
    /// Host RAM, as llama.cpp without a GPU.
    Cpu,
    /// llama.cpp `--split-mode layer` over every device.
    SplitLayers,
    /// vLLM tensor parallel over the first N devices.
    TensorParallel,
}

/// One device's answer.
#[derive(Serialize)]
pub(super) struct DeviceFit {
    /// `None` for a budget given with `--free`, and for the CPU.
    pub(super) index: Option<u32>,
    pub(super) name: Option<String>,
    pub(super) free_bytes: Option<u64>,
    pub(super) total_bytes: Option<u64>,
    /// The verdict's budget source; `None` without a verdict.
    pub(super) budget_source: Option<BudgetSource>,
    pub(super) verdict: Option<Verdict>,
    /// Why there is no verdict.
    pub(super) error: Option<String>,
    /// `gpu`, `cpu` or `given`.
    pub(super) kind: &'static str,
    /// This device's part when the model is split over several (llama.cpp layers).
    pub(super) share: Option<Estimate>,
    /// The MIG device judged (its own GPU instance's memory), when it is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) mig_uuid: Option<String>,
    /// vLLM's `gpu_memory_utilization`, for the words of its budget.
    #[serde(skip)]
    pub(super) util: Utilization,
}

impl DeviceFit {
    /// A device's (`index`) or a given budget's (`None`) figures, with the verdict or why there
    /// is none.
    pub(super) fn new(
        index: Option<u32>,
        name: Option<String>,
        free_bytes: Option<u64>,
        total_bytes: Option<u64>,
        judged: Result<Verdict, NoBudget>,
    ) -> DeviceFit {
        let (verdict, error) = match judged {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e.to_string())),
        };
        DeviceFit {
            index,
            name,
            free_bytes,
            total_bytes,
            budget_source: verdict.as_ref().map(|v| v.budget_source),
            verdict,
            error,
            kind: if index.is_some() { "gpu" } else { "given" },
            share: None,
            mig_uuid: None,
            util: Utilization::default(),
        }
    }
}

/// Everything judged, ready to print.
pub(super) struct Outcome {
    pub(super) plan: Plan,
    pub(super) fits: Vec<DeviceFit>,
    /// The device whose verdict is the answer (single and best-device plans).
    pub(super) chosen: Option<usize>,
    /// The answer over every part.
    pub(super) fit: Option<Fit>,
    pub(super) host: Option<HostVerdict>,
    pub(super) warnings: Vec<Warning>,
    pub(super) error: Option<String>,
    pub(super) notes: Vec<String>,
}
