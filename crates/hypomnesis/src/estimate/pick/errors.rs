//! Why a device could not be judged for a need ([`JudgeError`]) and why a model could not
//! become one ([`ModelNeedError`]): values a caller can match, whose `Display` is the text
//! `hmn pick` shows.

use crate::estimate::plan::NoAnswer;

/// Why a device could not be judged for a need (the answer of [`judge`](super::judge) and of
/// a [`rank`](super::rank) judge). Its text becomes the candidate's `why_not`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum JudgeError {
    /// The device admits no new CUDA context: its compute mode
    /// ([`mode_refusal`](super::mode_refusal)'s words).
    #[error("{reason}")]
    Refused {
        /// Why, in words.
        reason: String,
    },
    /// The model's plan has no verdict on the device.
    #[error(transparent)]
    NoAnswer(#[from] NoAnswer),
    /// The plan gave neither a verdict nor a reason.
    #[error("no verdict")]
    NoVerdict,
    /// The model's estimate is incomplete — a component is unknown (the KV cache without an
    /// architecture) — and what is known fits: `hmn fits`'s "incomplete", not a fit, and not
    /// for want of free memory.
    #[error("the estimate is incomplete (no {}): what is known fits", unknown.join(", "))]
    Incomplete {
        /// The unknown components (`kv_cache`, `output_buffer`).
        unknown: Vec<String>,
    },
}

/// Why a model could not be made a need ([`ModelNeed`](super::ModelNeed)).
#[cfg(feature = "models")]
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelNeedError {
    /// The model's headers could not be read.
    #[error(transparent)]
    Open(#[from] crate::types::error::Error),
    /// The default runtime's default parameters are refused for this model.
    #[error(transparent)]
    Params(#[from] crate::estimate::runtime::ParamError),
}
