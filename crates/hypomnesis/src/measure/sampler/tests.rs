use super::*;
use crate::types::ProcessName;

fn sampler() -> (tempfile::TempDir, Sampler) {
    let dir = tempfile::tempdir().unwrap();
    let sys = dir.path().join("sys");
    std::fs::create_dir_all(&sys).unwrap();
    let probe = Probe::with_options(
        crate::probe::ProbeOptions::default()
            .roots(Roots::system().with_sys(sys))
            .nvml_library(dir.path().join("none.so"))
            .use_nvidia_smi(false),
    );
    let target = Target::Processes(Vec::new());
    (dir, Sampler::new(probe, target, SamplerOptions::default()))
}

fn sample(t_ms: u64, rss: &[u64]) -> Sample {
    Sample {
        t_ms,
        unix_ms: 0,
        rss_bytes: rss.iter().sum(),
        processes: rss
            .iter()
            .zip(1u32..)
            .map(|(&rss_bytes, pid)| ProcessSample {
                pid,
                start_time: 1,
                name: ProcessName::from("cat".as_bytes()),
                rss_bytes,
                vram_bytes: BTreeMap::new(),
                vram_unknown: BTreeMap::new(),
                utilization: BTreeMap::new(),
            })
            .collect(),
        devices: Vec::new(),
    }
}

/// A sample whose members all read no resident page (a command caught between `exec`'s empty
/// address space and its first page) measured nothing: the tree's peak stays unknown, not 0.
/// One member with a page is a measurement.
#[test]
fn a_sample_without_a_resident_page_is_no_measurement() {
    let (_dir, mut s) = sampler();
    s.account(&sample(0, &[0]));
    s.account(&sample(100, &[0, 0]));
    assert_eq!((s.report.samples, s.report.measured_samples), (2, 0));
    s.account(&sample(200, &[0, 4096]));
    assert_eq!(s.report.measured_samples, 1);
    assert_eq!(s.report.peak_rss_bytes, 4096);
}
