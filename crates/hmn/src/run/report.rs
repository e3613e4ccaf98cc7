//! The report `hmn run` writes at exit: JSON (schema 1) and text. The figures' rules are the
//! library's ([`hypomnesis::peaks`]); this module gathers them with the run's facts and formats.

use std::ffi::OsString;
use std::time::Duration;

use hypomnesis::ProcessName;
use hypomnesis::peaks::{
    AccountingState, DevicePeak, KernelPeak, PeakMethod, PeakRam, PeakRamSource, TreePeaks,
};
use hypomnesis::sampler::SamplerReport;
use serde::Serialize;

use super::exec::Exit;
use crate::format::{bytes, sanitize};

/// `hmn run --json` (schema 1).
#[derive(Debug, Serialize)]
pub struct RunReport {
    pub schema: u32,
    /// The command's arguments as text (each invalid UTF-8 sequence U+FFFD).
    pub command: Vec<String>,
    /// Per argument, its exact bytes in lowercase hex where it is not valid UTF-8 (`null` where
    /// it is): present only when one is not, as `name_bytes_hex` beside a process's `name`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command_bytes_hex: Option<Vec<Option<String>>>,
    /// The command line for a terminal: invalid bytes and control characters as `\xNN`.
    #[serde(skip)]
    pub command_escaped: String,
    pub exit_code: u8,
    /// The signal that killed the command, if one did.
    pub signal: Option<i32>,
    pub wall_time_ms: u64,
    pub interval_ms: u64,
    pub samples: u64,
    /// The headline, on every platform: [`hypomnesis::peaks::peak_ram`].
    pub peak_ram: PeakRam,
    /// Largest per-sample sum of the tree's RSS (`None`: no sample was taken).
    pub peak_rss_sum_bytes: Option<u64>,
    /// Largest sum of the tree's PSS (about once a second): shared pages counted once.
    pub peak_pss_sum_bytes: Option<u64>,
    /// Largest peak RSS of one process: [`hypomnesis::peaks::largest_process_peak_rss`].
    pub largest_process_peak_rss_bytes: Option<u64>,
    /// `ru_maxrss` of the largest waited-for child.
    pub rusage_max_rss_bytes: Option<u64>,
    /// The kernel's peak for the transient cgroup (includes page cache), when one was used.
    pub cgroup_peak_bytes: Option<u64>,
    /// Windows: the Job object's own peak (before the floor), when one held the tree.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub job_peak_bytes: Option<u64>,
    /// Per device: [`hypomnesis::peaks::device_peaks`].
    pub devices: Vec<DevicePeak>,
    /// Processes of the tree seen, with their peaks.
    pub processes: Vec<hypomnesis::sampler::ProcessPeaks>,
    /// Signals forwarded to the command.
    pub forwarded_signals: Vec<i32>,
    /// CPU time hmn's sampler used.
    pub sampler_cpu_ms: Option<f64>,
    pub warnings: Vec<String>,
}

impl RunReport {
    #[expect(
        clippy::too_many_arguments,
        reason = "one constructor gathers the run's results"
    )]
    pub fn new(
        command: &[OsString],
        exit: Exit,
        wall: Duration,
        interval: Duration,
        s: &SamplerReport,
        rusage_max_rss: Option<u64>,
        kernel: Option<KernelPeak>,
        forwarded_signals: Vec<i32>,
        warnings: Vec<String>,
    ) -> RunReport {
        let TreePeaks {
            peak_ram,
            largest_process_peak_rss_bytes,
            devices,
            ..
        } = TreePeaks::from_report(s, rusage_max_rss, kernel);
        let names: Vec<ProcessName> = command
            .iter()
            .map(|a| ProcessName::from_bytes(a.as_encoded_bytes()))
            .collect();
        let hex: Vec<Option<String>> = names.iter().map(ProcessName::bytes_hex).collect();
        RunReport {
            schema: 1,
            command: names
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            command_bytes_hex: hex.iter().any(Option::is_some).then_some(hex),
            command_escaped: names
                .iter()
                .map(ProcessName::escaped)
                .collect::<Vec<_>>()
                .join(" "),
            exit_code: exit.code,
            signal: exit.signal,
            wall_time_ms: u64::try_from(wall.as_millis()).unwrap_or(u64::MAX),
            interval_ms: u64::try_from(interval.as_millis()).unwrap_or(u64::MAX),
            samples: s.samples,
            peak_ram,
            peak_rss_sum_bytes: (s.measured_samples > 0).then_some(s.peak_rss_bytes),
            peak_pss_sum_bytes: s.peak_pss_sum_bytes,
            largest_process_peak_rss_bytes,
            rusage_max_rss_bytes: rusage_max_rss,
            cgroup_peak_bytes: kernel.and_then(|k| match k {
                KernelPeak::Cgroup { bytes, .. } => Some(bytes),
                _ => None,
            }),
            job_peak_bytes: kernel.and_then(|k| match k {
                KernelPeak::Job { bytes } => Some(bytes),
                _ => None,
            }),
            devices,
            processes: s.processes.clone(),
            forwarded_signals,
            sampler_cpu_ms: s.sampler_cpu_ms,
            warnings,
        }
    }

    /// The human-readable report (stderr).
    ///
    /// (Accounting states are in the JSON only: `disabled` is the driver's default and would
    /// add a line to every report.)
    pub fn text(&self) -> String {
        let mut t = String::new();
        t.push_str(&format!("hmn run: {}\n", self.command_escaped));
        t.push_str(&format!(
            "  wall time     {:.2} s\n",
            self.wall_time_ms as f64 / 1000.0
        ));
        let how = match self.peak_ram.method() {
            PeakMethod::Cgroup => format!(
                "kernel peak of a transient cgroup, {}; includes page cache; floored by the largest single process",
                self.peak_ram.source.as_str()
            ),
            PeakMethod::Job => {
                "kernel peak of the command's Job object: committed private memory of the whole tree; floored by the largest single process"
                    .to_string()
            }
            _ if self.peak_ram.source == PeakRamSource::SamplesPss => format!(
                "largest PSS sum of the tree, read about once a second, floored by per-process peaks; {} samples every {} ms",
                self.samples, self.interval_ms
            ),
            _ => format!(
                "largest RSS sum over {} samples every {} ms; pages shared between processes count in each",
                self.samples, self.interval_ms
            ),
        };
        match self.peak_ram.bytes {
            Some(b) => t.push_str(&format!("  peak RAM      {} ({how})\n", bytes(b))),
            None => t.push_str(
                "  peak RAM      unknown (the command ended before a sample found it, and no kernel \
                 or per-process peak is its own)\n",
            ),
        }
        match self.peak_rss_sum_bytes {
            _ if self.peak_ram.source == PeakRamSource::SamplesRss => {}
            Some(b) => t.push_str(&format!(
                "                {} largest RSS sum of the tree (sampled)\n",
                bytes(b)
            )),
            None => t.push_str(
                "                no sample found the command running: no RSS sum of the tree\n",
            ),
        }
        if let Some(m) = self.rusage_max_rss_bytes {
            t.push_str(&format!(
                "                {} largest single process (ru_maxrss)\n",
                bytes(m)
            ));
        }
        for d in &self.devices {
            let dev = d
                .peak_device_used_bytes
                .map(|u| format!("; device-wide peak {}", bytes(u)))
                .unwrap_or_default();
            let peak = match (d.peak_vram_bytes, d.peak_vram_is_lower_bound) {
                (Some(b), false) => bytes(b),
                (Some(b), true) => format!("≥ {}", bytes(b)),
                (None, _) => "unknown".to_string(),
            };
            t.push_str(&format!(
                "  peak VRAM     GPU {}: {peak} by the command{dev}\n",
                d.index,
            ));
            // A reason without a lower bound: no sample found the command running
            // (`peaks::NEVER_SAMPLED`); with one, some figure could not be read.
            match d.vram_unknown_detail.as_deref() {
                Some(why) if !d.peak_vram_is_lower_bound => t.push_str(&format!(
                    "                GPU {}: {}\n",
                    d.index,
                    sanitize(why)
                )),
                Some(why) => t.push_str(&format!(
                    "                GPU {}: not every figure could be read: {}\n",
                    d.index,
                    sanitize(why)
                )),
                None => {}
            }
            if let Some(kind) = d.pool {
                t.push_str(&format!(
                    "                {}\n",
                    crate::pool::host_memory_line(d.index, kind)
                ));
            }
            if !d.mig_devices.is_empty() {
                t.push_str(&format!(
                    "                GPU {}: in MIG device {}\n",
                    d.index,
                    sanitize(&d.mig_devices.join(", "))
                ));
            }
            if let Some(l) = d.largest_process_peak_vram_bytes {
                t.push_str(&format!(
                    "                GPU {}: {} largest single process (driver accounting); {} largest sampled sum\n",
                    d.index,
                    bytes(l),
                    d.sampled_peak_vram_bytes
                        .map_or_else(|| "unknown".to_string(), bytes)
                ));
            } else if d.vram_accounting == AccountingState::Enabled
                && let Some(why) = &d.vram_accounting_detail
            {
                t.push_str(&format!(
                    "                GPU {}: largest single process unknown: {}\n",
                    d.index,
                    sanitize(why)
                ));
            }
        }
        t.push_str(&format!("  samples       {}\n", self.samples));
        match self.signal {
            Some(sig) => t.push_str(&format!(
                "  exit status   {} (killed by signal {sig})\n",
                self.exit_code
            )),
            None => t.push_str(&format!("  exit status   {}\n", self.exit_code)),
        }
        for w in &self.warnings {
            t.push_str(&format!("hmn: warning: {}\n", sanitize(w)));
        }
        t
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::cgroup::CgroupVersion;

    const MIB: u64 = 1 << 20;

    fn report(
        s: &SamplerReport,
        rusage: Option<u64>,
        cgroup: Option<(u64, CgroupVersion)>,
    ) -> RunReport {
        with_kernel_peak(s, rusage, cgroup.map(|(b, v)| KernelPeak::cgroup(b, v)))
    }

    fn with_kernel_peak(
        s: &SamplerReport,
        rusage: Option<u64>,
        kernel: Option<KernelPeak>,
    ) -> RunReport {
        RunReport::new(
            &[OsString::from("python3"), OsString::from("train.py")],
            Exit {
                code: 0,
                signal: None,
            },
            Duration::from_millis(1234),
            Duration::from_millis(100),
            s,
            rusage,
            kernel,
            vec![15],
            vec!["w".to_string()],
        )
    }

    /// A report with a PSS sum, a VmHWM floor above it, and two devices without accounting.
    fn sampled() -> SamplerReport {
        let mut s = SamplerReport::default();
        s.samples = 12;
        s.measured_samples = 12;
        s.peak_rss_bytes = 300 * MIB;
        s.peak_pss_sum_bytes = Some(200 * MIB);
        s.max_process_peak_rss_bytes = Some(250 * MIB);
        s.peak_vram_bytes.insert(1, 2 * MIB);
        s.peak_vram_bytes.insert(0, 6 * MIB);
        s.peak_device_used_bytes.insert(0, 20 * MIB);
        s
    }

    fn json(r: &RunReport) -> String {
        serde_json::to_string(r).unwrap()
    }

    #[test]
    fn the_json_and_text_are_the_schema_1_contract() {
        let r = report(&sampled(), Some(260 * MIB), None);
        assert_eq!(
            json(&r),
            concat!(
                r#"{"schema":1,"command":["python3","train.py"],"exit_code":0,"signal":null,"#,
                r#""wall_time_ms":1234,"interval_ms":100,"samples":12,"#,
                r#""peak_ram":{"bytes":272629760,"method":"sampled","source":"samples_pss"},"#,
                r#""peak_rss_sum_bytes":314572800,"peak_pss_sum_bytes":209715200,"#,
                r#""largest_process_peak_rss_bytes":272629760,"rusage_max_rss_bytes":272629760,"#,
                r#""cgroup_peak_bytes":null,"devices":["#,
                r#"{"index":0,"peak_vram_bytes":6291456,"sampled_peak_vram_bytes":6291456,"#,
                r#""peak_vram_is_lower_bound":false,"#,
                r#""largest_process_peak_vram_bytes":null,"vram_accounting":"unavailable","#,
                r#""vram_accounting_detail":"this device's driver keeps no per-process peak","#,
                r#""peak_device_used_bytes":20971520},"#,
                r#"{"index":1,"peak_vram_bytes":2097152,"sampled_peak_vram_bytes":2097152,"#,
                r#""peak_vram_is_lower_bound":false,"#,
                r#""largest_process_peak_vram_bytes":null,"vram_accounting":"unavailable","#,
                r#""vram_accounting_detail":"this device's driver keeps no per-process peak","#,
                r#""peak_device_used_bytes":null}],"#,
                r#""processes":[],"forwarded_signals":[15],"sampler_cpu_ms":null,"warnings":["w"]}"#
            )
        );
        assert_eq!(
            r.text(),
            "hmn run: python3 train.py
  wall time     1.23 s
  peak RAM      260 MiB (largest PSS sum of the tree, read about once a second, floored by per-process peaks; 12 samples every 100 ms)
                300 MiB largest RSS sum of the tree (sampled)
                260 MiB largest single process (ru_maxrss)
  peak VRAM     GPU 0: 6 MiB by the command; device-wide peak 20 MiB
  peak VRAM     GPU 1: 2 MiB by the command
  samples       12
  exit status   0
hmn: warning: w
"
        );
    }

    #[test]
    fn a_device_whose_memory_is_host_ram_says_so() {
        let mut s = sampled();
        s.device_pools.insert(1, hypomnesis::PoolKind::UnifiedHost);
        let r = report(&s, Some(260 * MIB), None);
        assert!(json(&r).contains(r#""peak_device_used_bytes":null,"pool":"unified_host"}"#));
        assert!(
            r.text().contains(
                "  peak VRAM     GPU 1: 2 MiB by the command\n                GPU 1's memory is \
                 host RAM (unified):"
            ),
            "{}",
            r.text()
        );
        assert!(!r.text().contains("GPU 0's memory"));
    }

    #[test]
    fn the_cgroup_headline_names_its_file() {
        for (version, source) in [
            (CgroupVersion::V2, "cgroup_v2_memory.peak"),
            (CgroupVersion::V1, "cgroup_v1_memory.max_usage_in_bytes"),
        ] {
            let r = report(&sampled(), None, Some((400 * MIB, version)));
            let j = json(&r);
            assert!(
                j.contains(&format!(
                    r#""peak_ram":{{"bytes":419430400,"method":"cgroup","source":"{source}"}}"#
                )),
                "{j}"
            );
            assert!(j.contains(r#""cgroup_peak_bytes":419430400,"#), "{j}");
            let t = r.text();
            assert!(
                t.contains(&format!(
                    "  peak RAM      400 MiB (kernel peak of a transient cgroup, {source}; includes page cache; floored by the largest single process)\n                300 MiB largest RSS sum of the tree (sampled)\n"
                )),
                "{t}"
            );
        }
    }

    #[test]
    fn a_cgroup_peak_below_the_largest_process_is_floored() {
        // The group was charged 400 MiB; the command had 500 MiB resident (ru_maxrss), part of
        // it pages another group had brought in.
        let r = report(
            &sampled(),
            Some(500 * MIB),
            Some((400 * MIB, CgroupVersion::V1)),
        );
        assert_eq!(r.peak_ram.bytes, Some(500 * MIB));
        assert_eq!(r.peak_ram.source, PeakRamSource::CgroupV1MaxUsage);
        assert_eq!(r.cgroup_peak_bytes, Some(400 * MIB), "its own figure kept");
    }

    /// Windows: the Job's peak is the headline through the same rule, floored like a cgroup's.
    #[test]
    fn a_job_peak_is_the_headline_and_floored_too() {
        let r = with_kernel_peak(
            &sampled(),
            Some(500 * MIB),
            Some(KernelPeak::job(400 * MIB)),
        );
        assert_eq!(r.peak_ram.bytes, Some(500 * MIB));
        assert_eq!(r.peak_ram.source, PeakRamSource::JobPeakMemoryUsed);
        let j = json(&r);
        assert!(
            j.contains(
                r#""peak_ram":{"bytes":524288000,"method":"job","source":"windows_job_peak_memory_used"},"#
            ),
            "{j}"
        );
        assert!(
            j.contains(r#""cgroup_peak_bytes":null,"job_peak_bytes":419430400,"devices""#),
            "its own figure kept: {j}"
        );
        assert!(
            r.text().contains("  peak RAM      500 MiB (kernel peak of the command's Job object: committed private memory of the whole tree; floored by the largest single process)\n"),
            "{}",
            r.text()
        );
    }

    #[test]
    fn an_rss_headline_does_not_repeat_itself() {
        let mut s = SamplerReport::default();
        (s.samples, s.measured_samples) = (2, 2);
        s.peak_rss_bytes = 300 * MIB;
        let r = report(&s, None, None);
        assert!(json(&r).contains(
            r#""peak_ram":{"bytes":314572800,"method":"sampled","source":"samples_rss"}"#
        ));
        let t = r.text();
        assert!(
            t.contains("  peak RAM      300 MiB (largest RSS sum over 2 samples every 100 ms; pages shared between processes count in each)\n  samples       2\n"),
            "{t}"
        );
    }

    #[test]
    fn no_sample_is_no_rss_sum_not_zero() {
        let r = report(
            &SamplerReport::default(),
            Some(5 * MIB),
            Some((6 * MIB, CgroupVersion::V2)),
        );
        let j = json(&r);
        assert!(j.contains(r#""samples":0,"#), "{j}");
        assert!(j.contains(r#""peak_rss_sum_bytes":null,"#), "{j}");
        assert!(
            r.text().contains(
                "\n                no sample found the command running: no RSS sum of the tree\n"
            ),
            "{}",
            r.text()
        );
        // Two samples, neither found it alive; no kernel peak, no ru_maxrss of its own.
        let mut s = SamplerReport::default();
        s.samples = 2;
        let r = report(&s, None, None);
        let j = json(&r);
        assert!(j.contains(r#""peak_ram":{"bytes":null,"#), "{j}");
        assert!(j.contains(r#""peak_rss_sum_bytes":null,"#), "{j}");
        assert!(
            r.text().contains("  peak RAM      unknown ("),
            "{}",
            r.text()
        );
    }

    #[test]
    #[cfg(unix)]
    fn arguments_that_are_not_utf8_keep_their_bytes() {
        use std::os::unix::ffi::OsStringExt as _;
        let command = [
            OsString::from("printf"),
            OsString::from_vec(b"a\xffb\x1b[2J".to_vec()),
        ];
        let r = RunReport::new(
            &command,
            Exit {
                code: 0,
                signal: None,
            },
            Duration::from_millis(1),
            Duration::from_millis(100),
            &SamplerReport::default(),
            None,
            None,
            Vec::new(),
            Vec::new(),
        );
        let j = json(&r);
        assert!(
            j.contains(concat!(
                "\"command\":[\"printf\",\"a\u{fffd}b\\u001b[2J\"],",
                r#""command_bytes_hex":[null,"61ff621b5b324a"],"#
            )),
            "{j}"
        );
        assert!(r.text().starts_with("hmn run: printf a\\xffb\\x1b[2J\n"));
        let plain = report(&sampled(), None, None);
        assert!(
            !json(&plain).contains("command_bytes_hex"),
            "only when needed"
        );
    }
}
