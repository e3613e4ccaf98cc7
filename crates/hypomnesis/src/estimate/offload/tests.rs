use super::*;

#[test]
fn ngl_counts_the_output_layer_first() {
    // R25: 32 blocks; -ngl 1 = the output layer alone, 32 leaves block 0, 33 = all.
    let one = Offload::new(32, Some(1));
    assert_eq!((one.gpu_blocks(), one.output_on_gpu()), (32..32, true));
    let most = Offload::new(32, Some(32));
    assert_eq!(most.gpu_blocks(), 1..32);
    assert!(!most.full());
    let all = Offload::new(32, Some(33));
    assert_eq!((all.gpu_blocks(), all.full()), (0..32, true));
    assert_eq!(Offload::new(32, Some(999)), all);
    assert_eq!(Offload::new(32, None), all);
    let none = Offload::new(32, Some(0));
    assert_eq!((none.gpu_blocks(), none.output_on_gpu()), (32..32, false));
}

#[test]
fn layers_follow_free_memory_and_the_output_lands_last() {
    let off = Offload::new(3, None);
    // 1 : 3 of the free memory: one unit of four on the first device.
    assert_eq!(split_units(&off, &[10, 30]), vec![0, 1, 1, 1]);
    assert_eq!(split_units(&off, &[10, 10]), vec![0, 0, 1, 1]);
    assert_eq!(split_units(&off, &[0, 10]), vec![1, 1, 1, 1]);
}

#[test]
fn tensor_split_overrides_free_memory_unless_all_zero() {
    use crate::estimate::params::FitParams;
    use crate::estimate::runtime::{KvDtype, Runtime};
    use crate::estimate::split::TensorSplit;
    let off = Offload::new(3, None);
    let p = FitParams::new(4096, 1, KvDtype::F16, Runtime::LlamaCpp);
    let ts = |s: &str| p.tensor_split(TensorSplit::parse(s).unwrap());
    // Free memory says 1 : 3; --tensor-split 3,1 says the opposite.
    assert_eq!(
        split_units_for(&off, &ts("3,1"), &[10, 30]),
        vec![0, 0, 0, 1]
    );
    // Zeros for these devices: free memory decides (llama.cpp's all_zero).
    assert_eq!(
        split_units_for(&off, &ts("0,0,5"), &[10, 30]),
        vec![0, 1, 1, 1]
    );
    // Fewer values than devices: the rest are 0.
    assert_eq!(split_units_for(&off, &ts("1"), &[10, 30]), vec![0, 0, 0, 0]);
    assert_eq!(split_units_for(&off, &p, &[10, 30]), vec![0, 1, 1, 1]);
}

/// QA (defect 8): a model that states no vocabulary size had an output buffer of 0 B and a
/// complete estimate; it is unknown (the estimate incomplete), on a GPU and CPU only.
#[test]
fn an_unknown_vocabulary_leaves_the_output_buffer_unknown() {
    use crate::estimate::fit::estimate;
    use crate::estimate::params::FitParams;
    use crate::estimate::runtime::{KvDtype, LlamaApi, Runtime};
    use crate::estimate::test_models::llama_8b;
    let mut m = llama_8b();
    let p = FitParams::new(4096, 1, KvDtype::F16, Runtime::LlamaCpp).llama_api(LlamaApi::Library);
    let known = estimate(&m, p);
    assert!(known.is_complete());
    if let Some(a) = m.arch.as_mut() {
        a.vocab_size = None;
    }
    for p in [p, p.cpu_only(true)] {
        let e = estimate(&m, p);
        let out = e.components.iter().find(|c| c.name == "output_buffer");
        assert_eq!(out.map(|c| (c.low_bytes, c.high_bytes)), Some((None, None)));
        assert_eq!(e.unknown_components, ["output_buffer"]);
        assert!(!e.is_complete());
        assert!(e.warnings.iter().any(|w| w.contains("no vocabulary size")));
    }
}
