//! What `hmn fits` judged, ready to print: the [`Input`] asked about and the [`Outcome`] — the
//! library's [`Plan`] (where, each device's verdict, the chosen device, the overall verdict:
//! [`hypomnesis::estimate::plan()`]) with what gathering the devices added (formatted by
//! `text.rs` and `json.rs`).

use hypomnesis::Warning;
use hypomnesis::estimate::Plan;
use hypomnesis::estimate::model::OpenedModel;

/// What the user asked about.
pub(super) enum Input {
    Size(u64),
    Model(Box<OpenedModel>),
}

/// Everything judged, ready to print.
pub(super) struct Outcome {
    /// The library's plan.
    pub(super) plan: Plan,
    /// The devices' warnings.
    pub(super) warnings: Vec<Warning>,
    /// Why there is no answer: why there are no devices (no GPU, a selector that names none),
    /// else the plan's own reason.
    pub(super) error: Option<String>,
    /// Why the run is CPU-only without `--device cpu`, then the plan's notes.
    pub(super) notes: Vec<String>,
}
