use super::*;
use crate::estimate::test_models::llama_8b;
use crate::types::{Source, Vendor};

const GIB: u64 = 1 << 30;

fn gpu(index: u32, free: Option<u64>) -> Device {
    let mut d = Device::new(index, Vendor::Nvidia, Source::Nvml);
    d.memory.free_bytes = free;
    d.memory.total_bytes = Some(80 * GIB);
    d
}

fn llama(spec: &ModelSpec) -> FitParams {
    FitParams::defaults(Runtime::LlamaCpp, spec.arch.as_ref()).context(8192)
}

fn every(devices: &[Device]) -> Target<'_> {
    Target::Devices {
        devices,
        every: true,
    }
}

#[test]
fn the_best_device_fits_before_it_has_headroom() {
    let fit = |free: u64, need: u64| {
        DeviceFit::given(
            free,
            judge_estimate(&Estimate::requested(need), &Budget::given(free)),
        )
    };
    let fits = [fit(10, 20), fit(30, 20), fit(100, 20)];
    assert_eq!(best(&fits), Some(2));
    assert_eq!(best(&[fit(10, 20), fit(5, 20)]), Some(0));
    assert_eq!(best(&[]), None);
}

#[test]
fn a_device_without_a_budget_has_no_verdict_and_says_why() {
    let d = Device::new(2, Vendor::Intel, Source::Sysfs);
    let p = plan(
        Target::Devices {
            devices: std::slice::from_ref(&d),
            every: false,
        },
        None,
        &Estimate::requested(1),
        None,
    );
    assert_eq!(p.placement, Placement::Device);
    let f = &p.fits[0];
    assert!(f.verdict.is_none() && f.budget_source.is_none());
    assert_eq!(f.kind, TargetKind::Gpu);
    assert_eq!(
        f.error.as_ref().map(ToString::to_string).as_deref(),
        Some("device 2 does not report its free memory: not reported")
    );
    assert_eq!((p.fit, p.chosen), (None, None));
    assert_eq!(p.error, f.error.clone().map(NoAnswer::Device));
}

#[test]
fn a_size_is_judged_on_the_device_with_the_most_headroom() {
    let devices = [gpu(0, Some(10 * GIB)), gpu(1, Some(30 * GIB)), gpu(2, None)];
    let p = plan(every(&devices), None, &Estimate::requested(20 * GIB), None);
    assert_eq!(p.placement, Placement::BestDevice);
    assert_eq!(p.chosen, Some(1));
    assert_eq!(p.fit, Some(Fit::Fits));
    assert_eq!(p.devices_used(), vec![1]);
    assert!(p.fits[2].error.is_some(), "unknown free: no verdict");
    assert!(p.notes.is_empty(), "a size has no runtime to note");
    assert_eq!(p.error, None);
}

#[test]
fn a_given_budget_and_the_cpu_are_one_answer() {
    let est = Estimate::requested(20 * GIB);
    let p = plan(Target::Given(24 * GIB), None, &est, None);
    assert_eq!((p.placement, p.chosen), (Placement::Given, Some(0)));
    assert_eq!(p.fits[0].kind, TargetKind::Given);
    assert_eq!(p.fits[0].free_bytes, Some(24 * GIB));
    assert_eq!(p.fit, Some(Fit::Fits));
    assert!(p.devices_used().is_empty());

    let p = plan(Target::Cpu, None, &est, Some(16 * GIB));
    assert_eq!(
        (p.placement, p.fits[0].kind),
        (Placement::Cpu, TargetKind::Cpu)
    );
    assert_eq!(p.fits[0].name.as_deref(), Some("CPU"));
    assert_eq!(p.fit, Some(Fit::DoesNotFit));
    assert!(Target::Cpu.needs_host_available(&est));
    let p = plan(Target::Cpu, None, &est, None);
    assert_eq!((p.fit, p.error), (None, Some(NoAnswer::HostUnknown)));
}

#[test]
fn the_layer_split_follows_free_memory_and_judges_every_part() {
    let spec = llama_8b();
    let p_ = llama(&spec);
    let est = crate::estimate::fit::estimate(&spec, p_);
    let devices = [gpu(0, Some(20 * GIB)), gpu(1, Some(40 * GIB))];
    let p = plan(every(&devices), Some((&spec, p_)), &est, Some(64 * GIB));
    assert_eq!(p.placement, Placement::SplitLayers);
    assert_eq!(p.devices_used(), vec![0, 1]);
    assert_eq!(p.chosen, None);
    let share = |i: usize| p.fits[i].share.as_ref().unwrap().high_bytes;
    assert!(share(1) > share(0), "{} {}", share(0), share(1));
    let worst = p
        .fits
        .iter()
        .map(|f| f.verdict.as_ref().unwrap().fit)
        .reduce(Fit::worst);
    assert_eq!(p.fit, worst);
    assert_eq!(p.error, None);
}

/// Regression (issue 21): the split once took an unknown free figure as 0 bytes free, gave that
/// device no layers, and judged the others as if they held the whole model.
#[test]
fn an_unknown_free_figure_leaves_the_layer_split_unknown_never_zero() {
    let spec = llama_8b();
    let p_ = llama(&spec);
    let est = crate::estimate::fit::estimate(&spec, p_);
    let devices = [gpu(0, Some(70 * GIB)), gpu(1, None)];
    let p = plan(every(&devices), Some((&spec, p_)), &est, Some(64 * GIB));
    assert_eq!(p.placement, Placement::SplitLayers);
    for f in &p.fits {
        assert!(f.verdict.is_none(), "device {:?} judged", f.index);
        assert!(f.share.is_none(), "device {:?} given a share", f.index);
    }
    assert_eq!(
        p.fits[0].error,
        Some(NoVerdict::ShareUnknown { index: 1 }),
        "the known device's share depends on the unknown one"
    );
    assert_eq!(
        p.fits[0].error.as_ref().unwrap().to_string(),
        "its share of the layer split is unknown: device 1 does not report its free memory"
    );
    assert!(matches!(
        p.fits[1].error,
        Some(NoVerdict::NoBudget(NoBudget::UnknownFree { index: 1, .. }))
    ));
    assert_eq!(p.fit, None);
    assert_eq!(
        p.error,
        Some(NoAnswer::Device(NoVerdict::ShareUnknown { index: 1 }))
    );

    // An integrated GPU without a free figure has a budget of its own (the host's available
    // RAM), but its share of the split is still unknown: not a device with nothing on it.
    let mut igpu = Device::new(1, Vendor::Intel, Source::Sysfs);
    igpu.integrated = Some(true);
    let devices = [gpu(0, Some(70 * GIB)), igpu];
    assert!(every(&devices).needs_host_available(&Estimate::requested(1)));
    let p = plan(every(&devices), Some((&spec, p_)), &est, Some(64 * GIB));
    assert!(p.fits.iter().all(|f| f.verdict.is_none()));
    assert_eq!(
        p.fits[1].error.as_ref().unwrap().to_string(),
        "device 1 does not report its free memory: not reported"
    );
    assert_eq!(p.fit, None);
}

/// With `--tensor-split` the proportions are given: the shares need no free figure, so the
/// device that reports its free memory is judged on its share, and only the one without a
/// budget has no verdict (never judged as if it had 0 bytes free).
#[test]
fn explicit_proportions_split_the_layers_without_the_free_figures() {
    use crate::estimate::split::TensorSplit;
    let spec = llama_8b();
    let p_ = llama(&spec).tensor_split(TensorSplit::parse("3,1").unwrap());
    let est = crate::estimate::fit::estimate(&spec, p_);
    let devices = [gpu(0, Some(70 * GIB)), gpu(1, None)];
    let p = plan(every(&devices), Some((&spec, p_)), &est, Some(64 * GIB));
    assert_eq!(p.placement, Placement::SplitLayers);
    let share = |i: usize| p.fits[i].share.as_ref().unwrap().high_bytes;
    assert!(share(0) > 2 * share(1), "3 : 1: {} {}", share(0), share(1));
    // The same shares as with both free figures known: they follow the proportions only.
    let known = [gpu(0, Some(70 * GIB)), gpu(1, Some(70 * GIB))];
    let q = plan(every(&known), Some((&spec, p_)), &est, Some(64 * GIB));
    assert_eq!(p.fits[0].share, q.fits[0].share);
    assert_eq!(p.fits[1].share, q.fits[1].share);
    let v = p.fits[0]
        .verdict
        .as_ref()
        .expect("device 0 judged on its share");
    assert_eq!(v.fit, Fit::Fits);
    assert!(matches!(
        p.fits[1].error,
        Some(NoVerdict::NoBudget(NoBudget::UnknownFree { index: 1, .. }))
    ));
    assert!(p.fits[1].verdict.is_none());
    // A split's answer is every part's: one part unknown, no overall verdict.
    assert_eq!(p.fit, None);
    assert!(matches!(
        p.error,
        Some(NoAnswer::Device(NoVerdict::NoBudget(
            NoBudget::UnknownFree { index: 1, .. }
        )))
    ));

    // Proportions all zero for these devices: free memory decides, and it is unknown.
    let zeros = llama(&spec).tensor_split(TensorSplit::parse("0,0").unwrap());
    let p = plan(every(&devices), Some((&spec, zeros)), &est, Some(64 * GIB));
    assert_eq!(p.fits[0].error, Some(NoVerdict::ShareUnknown { index: 1 }));
}

/// A device with a memory pool (a GB10: the driver reports no memory, the pool is host RAM)
/// takes its share of the split from the pool's free figure, as llama.cpp's UMA path takes
/// `MemAvailable`, and `devices[]` shows the pool's figures.
#[test]
fn a_pool_device_takes_its_share_from_the_pools_free_memory() {
    use crate::types::{MemoryPool, PoolSource};
    let spec = llama_8b();
    let p_ = llama(&spec);
    let est = crate::estimate::fit::estimate(&spec, p_);
    let mut gb10 = Device::new(1, Vendor::Nvidia, Source::Nvml);
    gb10.integrated = Some(true);
    let mut pool = MemoryPool::host_ram(PoolSource::ProcessSum, "NOT_SUPPORTED");
    pool.total_bytes = Some(120 * GIB);
    pool.free_bytes = Some(40 * GIB);
    gb10.pool = Some(pool);
    let devices = [gpu(0, Some(20 * GIB)), gb10];
    let p = plan(every(&devices), Some((&spec, p_)), &est, Some(40 * GIB));
    assert_eq!(p.placement, Placement::SplitLayers);
    assert!(p.fits.iter().all(|f| f.verdict.is_some()), "{:?}", p.fits);
    let share = |i: usize| p.fits[i].share.as_ref().unwrap().high_bytes;
    assert!(share(1) > share(0), "{} {}", share(0), share(1));
    assert_eq!(
        (p.fits[1].free_bytes, p.fits[1].total_bytes),
        (Some(40 * GIB), Some(120 * GIB))
    );
    assert_eq!(p.fits[1].budget_source, Some(BudgetSource::HostAvailable));
}

#[test]
fn tensor_parallel_judges_each_rank_on_the_first_n_devices() {
    let spec = llama_8b();
    let p_ = FitParams::defaults(Runtime::Vllm, spec.arch.as_ref())
        .context(8192)
        .tensor_parallel(2);
    let est = crate::estimate::fit::estimate(&spec, p_);
    let devices = [gpu(0, Some(80 * GIB)), gpu(1, Some(80 * GIB)), gpu(2, None)];
    let p = plan(
        Target::Devices {
            devices: &devices,
            every: false,
        },
        Some((&spec, p_)),
        &est,
        None,
    );
    assert_eq!(p.placement, Placement::TensorParallel);
    assert_eq!(p.devices_used(), vec![0, 1], "the third is not used");
    assert_eq!(p.fit, Some(Fit::Fits));
    assert!(p.notes[0].starts_with("vLLM uses the first 2 visible GPUs"));

    let p = plan(
        Target::Devices {
            devices: &devices[..1],
            every: false,
        },
        Some((&spec, p_)),
        &est,
        None,
    );
    assert_eq!(
        p.error,
        Some(NoAnswer::TooFewDevices {
            needed: 2,
            found: 1
        })
    );
    assert_eq!((p.fit, p.fits.len()), (None, 0));
}

/// QA (defect 4): one given budget at tensor parallel 4 said "fits" with no devices used;
/// one `--free` figure is one GPU, so it is too few, as two figures are.
#[test]
fn one_given_budget_is_one_gpu_for_tensor_parallel() {
    let spec = llama_8b();
    let p_ = FitParams::defaults(Runtime::Vllm, spec.arch.as_ref()).tensor_parallel(4);
    let est = crate::estimate::fit::estimate(&spec, p_);
    let too_few = |found| NoAnswer::TooFewDevices { needed: 4, found };
    let p = plan(Target::Given(40 * GIB), Some((&spec, p_)), &est, None);
    assert_eq!((p.fit, p.error.clone()), (None, Some(too_few(1))));
    assert!(p.devices_used().is_empty());
    let two = [40 * GIB; 2];
    let p = plan(Target::GivenEach(&two), Some((&spec, p_)), &est, None);
    assert_eq!((p.fit, p.error), (None, Some(too_few(2))));
    let four = [40 * GIB; 4];
    let p = plan(Target::GivenEach(&four), Some((&spec, p_)), &est, None);
    assert_eq!(p.fit, Some(Fit::Fits));
    assert_eq!(p.devices_used(), vec![0, 1, 2, 3]);
    // At tensor parallel 1 a given budget is judged as it is.
    let p1 = FitParams::defaults(Runtime::Vllm, spec.arch.as_ref());
    let est1 = crate::estimate::fit::estimate(&spec, p1);
    let p = plan(Target::Given(80 * GIB), Some((&spec, p1)), &est1, None);
    assert_eq!((p.placement, p.fit), (Placement::Given, Some(Fit::Fits)));
}

#[test]
fn a_host_part_without_memavailable_is_noted_first() {
    let spec = llama_8b();
    let p_ = llama(&spec).gpu_layers(10);
    let est = crate::estimate::fit::estimate(&spec, p_);
    assert!(
        est.host_high_bytes.is_some(),
        "partial offload has a host part"
    );
    let devices = [gpu(0, Some(70 * GIB))];
    let target = Target::Devices {
        devices: &devices,
        every: false,
    };
    assert!(target.needs_host_available(&est));
    let p = plan(target, Some((&spec, p_)), &est, None);
    assert_eq!(
        p.notes.first().map(String::as_str),
        Some("host RAM not judged: MemAvailable could not be read")
    );
    assert_eq!(p.host, None);
    let p = plan(target, Some((&spec, p_)), &est, Some(64 * GIB));
    assert!(p.notes.is_empty());
    assert!(p.host.is_some(), "the chosen device's host part");
}

#[cfg(feature = "serde")]
#[test]
fn serialised_as_hmn_fits_json() {
    let p = plan(
        Target::Given(24 * GIB),
        None,
        &Estimate::requested(GIB),
        None,
    );
    let v = serde_json::to_value(&p.fits[0]).unwrap();
    assert_eq!(v["kind"], "given");
    assert_eq!(v["budget_source"], "given");
    assert!(v.get("mig_uuid").is_none() && v.get("utilization").is_none());
    // The fields in `hmn fits --json`'s order.
    let text = serde_json::to_string(&p.fits[0]).unwrap();
    let at: Vec<usize> = [
        "index",
        "name",
        "free_bytes",
        "total_bytes",
        "budget_source",
        "verdict",
        "error",
        "kind",
        "share",
    ]
    .iter()
    .map(|k| text.find(&format!("\"{k}\":")).unwrap())
    .collect();
    assert!(at.is_sorted(), "{text}");
    assert_eq!(v.as_object().unwrap().len(), 9, "{text}");
    let d = Device::new(3, Vendor::Amd, Source::Sysfs);
    let p = plan(
        Target::Devices {
            devices: std::slice::from_ref(&d),
            every: false,
        },
        None,
        &Estimate::requested(GIB),
        None,
    );
    let v = serde_json::to_value(&p.fits[0]).unwrap();
    assert_eq!(v["kind"], "gpu");
    assert_eq!(
        v["error"],
        "device 3 does not report its free memory: not reported"
    );
    for (placement, name) in [
        (Placement::Device, "device"),
        (Placement::BestDevice, "best_device"),
        (Placement::Given, "given"),
        (Placement::Cpu, "cpu"),
        (Placement::SplitLayers, "split_layers"),
        (Placement::TensorParallel, "tensor_parallel"),
    ] {
        assert_eq!(serde_json::to_value(placement).unwrap(), name);
    }
    assert_eq!(serde_json::to_value(TargetKind::Cpu).unwrap(), "cpu");
}
