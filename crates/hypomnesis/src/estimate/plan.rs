//! The plan of a "will it fit" question over devices — what `hmn fits` answers: where the
//! estimate is judged, each device's verdict, the chosen device and the overall verdict.
//!
//! | Rule | Where |
//! |---|---|
//! | where the estimate is judged ([`Placement`]): a given budget, the host (CPU only), one device, every device alone, llama.cpp's layer split, vLLM tensor parallel | [`plan`] |
//! | the layer split by `--tensor-split` (no free figure read; a device without a budget alone has no verdict) or by free memory (an unknown free figure leaves every share unknown, never counted as 0 free) | [`plan`] (through [`split_weights`], [`estimate_split_by`]) |
//! | the chosen device: a verdict first, then the best answer, then the most headroom | [`best`] |
//! | the overall verdict: the chosen device's, or for a split the worst part's (the host part included) | [`Plan::fit`] |
//! | the devices the model is placed on | [`Plan::devices_used`] |
//! | which plans read the host's available RAM | [`Target::needs_host_available`] |
//! | the devices a plan over every device judges (a GPU in MIG mode as its MIG devices), and when a question goes to the CPU instead | [`devices`]: [`judged_devices`], [`judged_on_cpu`] |
//!
//! Nothing here reads a device or a file: the caller gathers the devices (as probed, then
//! [`judged_devices`] for every device) and the host's `MemAvailable` and passes them in.

use super::arch::ModelSpec;
use super::budget::{Budget, BudgetSource, NoBudget};
use super::judge::{Fit, HostVerdict, Verdict, host_verdict, judge_estimate, judge_with_host};
use super::offload::estimate_split_by;
use super::params::FitParams;
use super::parts::Estimate;
use super::runtime::{Runtime, Utilization};
use super::split::{FreeUnknown, split_weights};
use crate::types::spelling::spelled;
use crate::types::{Device, DeviceMemory, Source, Vendor};

#[cfg(feature = "serde")]
use serde::Serialize;

pub mod devices;
use devices::best_device_note;
pub use devices::{Asked, Judged, judged_as, judged_devices, judged_on_cpu};

/// What the estimate is judged against.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Target<'a> {
    /// A budget given by the caller (`hmn fits --free`): planning for a device that is not here.
    Given(u64),
    /// One budget per GPU that is not here (`hmn fits --free 24GiB,24GiB`), each taken as it is:
    /// planned as [`Target::Devices`] over those GPUs with every one asked for (llama.cpp splits
    /// its layers over them by these figures); each answer is [`TargetKind::Given`], numbered
    /// in the order given.
    GivenEach(&'a [u64]),
    /// The host's available RAM (`MemAvailable`): llama.cpp without a GPU (asked for, or with
    /// no GPU at all: [`judged_on_cpu`]).
    Cpu,
    /// These devices. `every`: the caller asked for every device (`hmn fits --device all`), so
    /// llama.cpp splits its layers over them and other runtimes are judged on each alone (the
    /// one with the most headroom is chosen). Without it each listed device is judged alone —
    /// or, at vLLM tensor parallel N > 1, the first N together.
    Devices {
        /// The devices, as gathered (a MIG device as its own device; every device of a
        /// probe as [`judged_devices`] lists them).
        devices: &'a [Device],
        /// Whether every device was asked for.
        every: bool,
    },
}

impl Target<'_> {
    /// Whether [`plan`] needs the host's available RAM for `est` against this target: a CPU
    /// run, an estimate with a host part (llama.cpp on a GPU), or an integrated GPU that
    /// reports no free memory of its own ([`Budget::needs_host_available`]). A caller reads
    /// host memory only then.
    pub fn needs_host_available(&self, est: &Estimate) -> bool {
        let host_part = est.host_high_bytes.is_some();
        match self {
            Target::Given(_) | Target::GivenEach(_) => host_part,
            Target::Cpu => true,
            Target::Devices { devices, .. } => {
                host_part || devices.iter().any(Budget::needs_host_available)
            }
        }
    }
}

spelled! {
    /// Where the answer was judged.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum Placement {
        /// One device (or each device listed, alone); the verdict is the chosen one's.
        Device = "device",
        /// Every device judged alone; the verdict is the one with the most headroom.
        BestDevice = "best_device",
        /// A budget given by the caller.
        Given = "given",
        /// Host RAM, as llama.cpp without a GPU.
        Cpu = "cpu",
        /// llama.cpp `--split-mode layer` over every device.
        SplitLayers = "split_layers",
        /// vLLM tensor parallel over the first N devices.
        TensorParallel = "tensor_parallel",
    }
}

spelled! {
    /// What one [`DeviceFit`] is for.
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    #[non_exhaustive]
    pub enum TargetKind {
        /// A device (a GPU, or a MIG device).
        Gpu = "gpu",
        /// The host, for a CPU-only run.
        Cpu = "cpu",
        /// A budget given by the caller.
        Given = "given",
    }
}

/// Why a device has no verdict.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoVerdict {
    /// The device has no budget: it cannot be read, or reports no free memory (in a layer
    /// split by free memory, whatever the device: its share follows its free memory).
    #[error(transparent)]
    NoBudget(#[from] NoBudget),
    /// llama.cpp's layer split follows every device's free memory (no `--tensor-split`): with
    /// one device's unknown, no device's share is known.
    #[error(
        "its share of the layer split is unknown: device {index} does not report its free memory"
    )]
    ShareUnknown {
        /// The device whose free memory is unknown.
        index: u32,
    },
}

#[cfg(feature = "serde")]
impl Serialize for NoVerdict {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

/// Why a plan has no overall verdict ([`Plan::fit`] is `None`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum NoAnswer {
    /// A CPU-only plan without the host's available RAM.
    #[error("CPU-only estimate: the host's available RAM (MemAvailable) cannot be read")]
    HostUnknown,
    /// vLLM tensor parallel N needs N devices (it uses the first N visible).
    #[error(
        "tensor parallel size {needed} needs {needed} GPUs; {found} found (vLLM uses the first {needed} visible devices)"
    )]
    TooFewDevices {
        /// The tensor parallel size.
        needed: u64,
        /// The devices there are.
        found: usize,
    },
    /// The one device judged, or the first of several, has no verdict.
    #[error(transparent)]
    Device(NoVerdict),
    /// No device was judged.
    #[error("no device reported its free memory")]
    NoDevice,
}

/// One device's answer (or the host's, or a given budget's). Serialised as `hmn fits --json`'s
/// `devices[]`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(Serialize))]
#[non_exhaustive]
pub struct DeviceFit {
    /// The device's index; `None` for the host and a given budget.
    pub index: Option<u32>,
    /// The device's name (`CPU` for the host).
    pub name: Option<String>,
    /// The device's free memory (the host's available RAM; the given budget).
    pub free_bytes: Option<u64>,
    /// The device's total memory.
    pub total_bytes: Option<u64>,
    /// The verdict's budget source; `None` without a verdict.
    pub budget_source: Option<BudgetSource>,
    /// The verdict.
    pub verdict: Option<Verdict>,
    /// Why there is no verdict.
    pub error: Option<NoVerdict>,
    /// What this answer is for.
    pub kind: TargetKind,
    /// This device's part when the model is split over several (llama.cpp layers).
    pub share: Option<Estimate>,
    /// The MIG device judged (its own GPU instance's memory), when it is one.
    #[cfg_attr(feature = "serde", serde(skip_serializing_if = "Option::is_none"))]
    pub mig_uuid: Option<String>,
    /// vLLM's `gpu_memory_utilization` the budget was taken with (for the words of a
    /// [`BudgetSource::VllmUtilization`] budget).
    /// Not serialised.
    #[cfg_attr(feature = "serde", serde(skip))]
    pub utilization: Utilization,
}

impl DeviceFit {
    fn new(
        kind: TargetKind,
        index: Option<u32>,
        name: Option<String>,
        (free_bytes, total_bytes): (Option<u64>, Option<u64>),
        judged: Result<Verdict, NoVerdict>,
    ) -> DeviceFit {
        let (verdict, error) = match judged {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        DeviceFit {
            index,
            name,
            free_bytes,
            total_bytes,
            budget_source: verdict.as_ref().map(|v| v.budget_source),
            verdict,
            error,
            kind,
            share: None,
            mig_uuid: None,
            utilization: Utilization::default(),
        }
    }

    /// `device`'s answer: its index, name and memory (its pool's, where it has one:
    /// [`Device::pool_free_and_total`]), the verdict or why there is none, and its MIG UUID
    /// when it is a MIG device.
    pub fn of_device(device: &Device, judged: Result<Verdict, NoVerdict>) -> DeviceFit {
        let mut f = DeviceFit::new(
            TargetKind::Gpu,
            Some(device.index),
            device.name.clone(),
            device.pool_free_and_total(),
            judged,
        );
        f.mig_uuid = device.uuid.clone().filter(|u| u.starts_with("MIG-"));
        f
    }

    /// The answer for a budget of `bytes` given by the caller.
    pub fn given(bytes: u64, verdict: Verdict) -> DeviceFit {
        DeviceFit::new(
            TargetKind::Given,
            None,
            None,
            (Some(bytes), None),
            Ok(verdict),
        )
    }

    /// The host's answer for a CPU-only run with `available` bytes of RAM available.
    pub fn cpu(available: u64, verdict: Verdict) -> DeviceFit {
        DeviceFit::new(
            TargetKind::Cpu,
            None,
            Some("CPU".to_string()),
            (Some(available), None),
            Ok(verdict),
        )
    }

    /// The same answer with vLLM's `gpu_memory_utilization` noted.
    #[must_use]
    pub fn with_utilization(mut self, utilization: Utilization) -> DeviceFit {
        self.utilization = utilization;
        self
    }

    fn fit(&self) -> Option<Fit> {
        self.verdict.as_ref().map(|v| v.fit)
    }
}

/// Everything judged.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Plan {
    /// Where the answer was judged.
    pub placement: Placement,
    /// Each device's answer (the host's, the given budget's), in device order.
    pub fits: Vec<DeviceFit>,
    /// The answer whose verdict is the plan's (single-device and best-device plans, the CPU,
    /// a given budget): an index into `fits`.
    pub chosen: Option<usize>,
    /// The overall verdict: the chosen answer's, or for a split every part's together
    /// ([`Fit::worst`], the host part included); `None` when there is none (see `error`).
    pub fit: Option<Fit>,
    /// The host part (llama.cpp on a GPU) against the host's available RAM.
    pub host: Option<HostVerdict>,
    /// Notes on the plan (vLLM's device order, what a runtime's placement does not model, a
    /// host part not judged).
    pub notes: Vec<String>,
    /// Why there is no overall verdict.
    pub error: Option<NoAnswer>,
}

impl Plan {
    fn new(placement: Placement) -> Plan {
        Plan {
            placement,
            fits: Vec::new(),
            chosen: None,
            fit: None,
            host: None,
            notes: Vec::new(),
            error: None,
        }
    }

    /// The chosen answer ([`Plan::chosen`]).
    pub fn chosen_fit(&self) -> Option<&DeviceFit> {
        self.chosen.and_then(|c| self.fits.get(c))
    }

    /// Whether the model is split over several devices (llama.cpp layers, vLLM tensor
    /// parallel): the answer is every part's together.
    pub fn is_split(&self) -> bool {
        matches!(
            self.placement,
            Placement::SplitLayers | Placement::TensorParallel
        )
    }

    /// The devices the model is placed on: every part's for a split, else the chosen device
    /// (none for the CPU and a given budget).
    pub fn devices_used(&self) -> Vec<u32> {
        if self.is_split() {
            self.fits.iter().filter_map(|f| f.index).collect()
        } else {
            self.chosen_fit()
                .and_then(|f| f.index)
                .into_iter()
                .collect()
        }
    }
}

/// Judges `est` where `target` places it.
///
/// `model` is the model and its run parameters when the estimate is of a model (`None` for a
/// size given as it is, judged with [`judge_estimate`] under the default runtime); the
/// verdicts then carry the largest context, batch and `--gpu-layers` ([`judge_with_host`]).
/// `host_available` is the host's `MemAvailable`, needed where
/// [`Target::needs_host_available`] says so (a CPU plan without it has no answer:
/// [`NoAnswer::HostUnknown`]).
///
/// Per target:
/// - [`Target::Given`], [`Target::Cpu`]: one answer, against the given budget or the host. A
///   given budget is one GPU: at vLLM tensor parallel N > 1 it is [`NoAnswer::TooFewDevices`]
///   (found 1), as [`Target::GivenEach`] with fewer than N figures is.
/// - [`Target::Devices`] with `every`, llama.cpp and several devices: the layers split by
///   `--tensor-split` or free memory ([`estimate_split_by`]), each device's share judged
///   against its own budget; by free memory, when a device's free memory is unknown, no share
///   is known and no device has a verdict ([`NoVerdict::ShareUnknown`]).
/// - vLLM at tensor parallel N > 1: the first N devices, each rank judged alone
///   ([`NoAnswer::TooFewDevices`] with fewer).
/// - otherwise each device alone; with `every`, the chosen one is the [`best`].
pub fn plan(
    target: Target<'_>,
    model: Option<(&ModelSpec, FitParams)>,
    est: &Estimate,
    host_available: Option<u64>,
) -> Plan {
    let params = model.map(|(_, p)| p);
    let verdict = |budget: &Budget, host: Option<&Budget>| judged(model, est, budget, host);
    let needs_host = est.host_high_bytes.is_some();
    let util = params.map(|p| p.utilization()).unwrap_or_default();
    // One given budget is one GPU (`--free 24GiB` for a 24 GB card): vLLM tensor parallel N > 1
    // is planned over it as over N given figures, and has too few GPUs.
    let one;
    let target = match target {
        Target::Given(free) if params.is_some_and(|p| p.tensor_parallel > 1) => {
            one = [free];
            Target::GivenEach(&one)
        }
        t => t,
    };
    let mut o = match target {
        Target::Given(free) => {
            let mut o = Plan::new(Placement::Given);
            let host = needs_host
                .then_some(host_available)
                .flatten()
                .map(Budget::host);
            let v = verdict(&Budget::given(free), host.as_ref());
            o.fits.push(DeviceFit::given(free, v));
            o.chosen = Some(0);
            o
        }
        Target::Cpu => {
            let mut o = Plan::new(Placement::Cpu);
            let Some(avail) = host_available else {
                o.error = Some(NoAnswer::HostUnknown);
                return o;
            };
            let v = verdict(&Budget::host(avail), None);
            o.fits.push(DeviceFit::cpu(avail, v));
            o.chosen = Some(0);
            o
        }
        Target::Devices { devices, every } => {
            let runtime = params.map(|p| p.runtime).unwrap_or_default();
            let budget_of = |d: &Device| Budget::for_device_with(d, host_available, runtime, util);
            on_devices(devices, every, model, est, host_available, &budget_of)
        }
        Target::GivenEach(budgets) => {
            let devices: Vec<Device> = budgets
                .iter()
                .zip(0u32..)
                .map(|(b, i)| {
                    let mut d = Device::new(i, Vendor::Other("given".to_string()), Source::Sysfs);
                    d.memory = DeviceMemory::new(Some(*b), Some(0), Some(*b), None);
                    d
                })
                .collect();
            let budget_of = |d: &Device| Ok(Budget::given(d.memory.free_bytes.unwrap_or(0)));
            let mut o = on_devices(&devices, true, model, est, host_available, &budget_of);
            for f in &mut o.fits {
                f.kind = TargetKind::Given;
                f.total_bytes = None;
            }
            o
        }
    };
    o.fit = if o.is_split() {
        o.fits
            .iter()
            .map(DeviceFit::fit)
            .collect::<Option<Vec<Fit>>>()
            .and_then(|v| v.into_iter().reduce(Fit::worst))
            .map(|f| o.host.as_ref().map_or(f, |h| f.worst(h.fit)))
    } else {
        o.chosen_fit().and_then(DeviceFit::fit)
    };
    if o.error.is_some() {
        o.fit = None;
    }
    for f in &mut o.fits {
        f.utilization = util;
    }
    if o.host.is_none() {
        o.host = o
            .chosen_fit()
            .and_then(|f| f.verdict.as_ref()?.host.clone());
    }
    if o.fit.is_none() && o.error.is_none() {
        o.error = Some(
            o.fits
                .iter()
                .find_map(|f| f.error.clone())
                .map_or(NoAnswer::NoDevice, NoAnswer::Device),
        );
    }
    o
}

/// [`plan`] over `devices` ([`Target::Devices`]), each device's budget from `budget_of`.
fn on_devices(
    devices: &[Device],
    every: bool,
    model: Option<(&ModelSpec, FitParams)>,
    est: &Estimate,
    host_available: Option<u64>,
    budget_of: &dyn Fn(&Device) -> Result<Budget, NoBudget>,
) -> Plan {
    let params = model.map(|(_, p)| p);
    let runtime = params.map(|p| p.runtime).unwrap_or_default();
    let verdict = |budget: &Budget, host: Option<&Budget>| judged(model, est, budget, host);
    let needs_host = est.host_high_bytes.is_some();
    let host = needs_host
        .then_some(host_available)
        .flatten()
        .map(Budget::host);
    let tp = params.map_or(1, |p| p.tensor_parallel);
    let mut o = match model {
        Some((m, p)) if runtime == Runtime::LlamaCpp && devices.len() > 1 && every => {
            let mut o = Plan::new(Placement::SplitLayers);
            o.fits = split_layers(m, &p, devices, budget_of);
            o.host = host.as_ref().and_then(|h| host_verdict(est, h));
            o
        }
        Some(_) if tp > 1 => {
            let mut o = Plan::new(Placement::TensorParallel);
            let needed = usize::try_from(tp).unwrap_or(usize::MAX);
            if devices.len() < needed {
                o.error = Some(NoAnswer::TooFewDevices {
                    needed: tp,
                    found: devices.len(),
                });
            } else {
                for d in devices.iter().take(needed) {
                    let judged = budget_of(d).map(|b| verdict(&b, None));
                    o.fits
                        .push(DeviceFit::of_device(d, judged.map_err(NoVerdict::from)));
                }
            }
            o.notes.push(format!("vLLM uses the first {tp} visible GPUs (set CUDA_VISIBLE_DEVICES to choose them); each rank is judged on its own"));
            o
        }
        _ => {
            let mut o = Plan::new(if every {
                Placement::BestDevice
            } else {
                Placement::Device
            });
            if every {
                o.notes.extend(best_device_note(model.is_some(), runtime));
            }
            for d in devices {
                let judged = budget_of(d).map(|b| verdict(&b, host.as_ref()));
                o.fits
                    .push(DeviceFit::of_device(d, judged.map_err(NoVerdict::from)));
            }
            o.chosen = best(&o.fits);
            o
        }
    };
    // First: it concerns every device.
    if needs_host && host.is_none() {
        o.notes.insert(
            0,
            "host RAM not judged: MemAvailable could not be read".to_string(),
        );
    }
    o
}

/// The verdict on `budget` (and `host` for a host part): the model's, else the estimate's.
fn judged(
    model: Option<(&ModelSpec, FitParams)>,
    est: &Estimate,
    budget: &Budget,
    host: Option<&Budget>,
) -> Verdict {
    match model {
        Some((m, p)) => judge_with_host(m, p, budget, host),
        None => judge_estimate(est, budget),
    }
}

/// llama.cpp `--split-mode layer` over `devices`: each device's share ([`estimate_split_by`])
/// judged against its own budget. The shares follow `--tensor-split` when it is given (no free
/// figure is read; a device without a budget alone has no verdict), else free memory — a
/// device's pool's, where it has one, as llama.cpp's UMA path takes the host's available RAM.
/// By free memory, a device whose free memory is unknown leaves the proportions unknown, so no
/// device has a verdict — an unknown free figure is never taken as 0 bytes free.
fn split_layers(
    model: &ModelSpec,
    p: &FitParams,
    devices: &[Device],
    budget_of: &dyn Fn(&Device) -> Result<Budget, NoBudget>,
) -> Vec<DeviceFit> {
    let free: Vec<Option<u64>> = devices.iter().map(|d| d.pool_free_and_total().0).collect();
    let weights = match split_weights(p.tensor_split.as_ref(), &free) {
        Ok(w) => w,
        Err(FreeUnknown { position }) => {
            let unknown = devices.get(position).map_or(0, |d| d.index);
            return devices
                .iter()
                .zip(&free)
                .map(|(d, free)| {
                    let why = match (free, budget_of(d)) {
                        (_, Err(e)) => NoVerdict::NoBudget(e),
                        (None, Ok(_)) => NoVerdict::NoBudget(NoBudget::unknown_free(d)),
                        (Some(_), Ok(_)) => NoVerdict::ShareUnknown { index: unknown },
                    };
                    DeviceFit::of_device(d, Err(why))
                })
                .collect();
        }
    };
    devices
        .iter()
        .zip(estimate_split_by(model, p, &weights))
        .map(|(d, share)| {
            let judged = budget_of(d).map(|b| judge_estimate(&share, &b));
            let mut f = DeviceFit::of_device(d, judged.map_err(NoVerdict::from));
            f.share = Some(share);
            f
        })
        .collect()
}

/// The chosen answer among `fits`: of those with a verdict, the best [`Fit`] (fits before
/// tight before incomplete before does not fit), then the most headroom; of equals, the last.
pub fn best(fits: &[DeviceFit]) -> Option<usize> {
    fits.iter()
        .enumerate()
        .filter(|(_, f)| f.verdict.is_some())
        .max_by_key(|(_, f)| {
            f.verdict
                .as_ref()
                .map(|v| (std::cmp::Reverse(v.fit), v.headroom_bytes))
        })
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests;
