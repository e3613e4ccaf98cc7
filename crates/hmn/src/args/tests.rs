//! Tests of the command line's definition and value parsers.

use clap::CommandFactory;

use super::*;

fn parse(args: &[&str]) -> Result<Cli, clap::Error> {
    Cli::try_parse_from(std::iter::once("hmn").chain(args.iter().copied()))
}

#[test]
fn definition_is_consistent() {
    Cli::command().debug_assert();
}

/// `watch --help`'s exit statuses include the one `--exit-on-growth` ends with (3).
#[test]
fn watch_help_states_the_growth_exit_status() {
    let cmd = Cli::command();
    let about = cmd
        .find_subcommand("watch")
        .and_then(clap::Command::get_long_about)
        .map(ToString::to_string)
        .unwrap();
    let para = about
        .split("\n\n")
        .find(|p| p.starts_with("Exit status:"))
        .unwrap();
    assert!(para.contains("3 when --exit-on-growth ended it"), "{para}");
}

#[test]
fn global_flags_work_before_and_after_the_subcommand() {
    let a = parse(&["--json", "ps"]).unwrap();
    assert!(a.global.json);
    let b = parse(&["ps", "--json", "--proc-root", "/x"]).unwrap();
    assert!(b.global.json);
    assert_eq!(b.global.proc_root, Some(PathBuf::from("/x")));
}

#[test]
fn ps_filters() {
    let a = parse(&[
        "ps", "--pid", "1,2", "--pid", "3", "--min", "1GiB", "--sort", "pid",
    ])
    .unwrap();
    let Some(Command::Ps(ps)) = a.command else {
        panic!("ps expected")
    };
    assert_eq!(ps.pid, vec![1, 2, 3]);
    assert_eq!(ps.min, Some(1 << 30));
    assert_eq!(ps.sort, SortKey::Pid);
}

#[test]
fn upstream_sort_keys_and_spill_intervals() {
    let sort = |key: &str| match parse(&["ps", "--sort", key]).unwrap().command {
        Some(Command::Ps(ps)) => ps.sort,
        other => panic!("{other:?}"),
    };
    assert_eq!(sort("dedicated"), SortKey::Vram);
    assert_eq!(sort("committed"), SortKey::Vram);
    assert_eq!(sort("shared"), SortKey::Shared);
    assert_eq!(sort("total"), SortKey::Total);
    let interval = |v: &str| match parse(&["spill", "--interval", v, "--", "true"]) {
        Ok(Cli {
            command: Some(Command::Spill(s)),
            ..
        }) => Ok(s.interval),
        Ok(other) => panic!("{other:?}"),
        Err(e) => Err(e.exit_code()),
    };
    use std::time::Duration;
    assert_eq!(
        interval("100"),
        Ok(Duration::from_millis(100)),
        "upstream's ms"
    );
    assert_eq!(interval("1"), Ok(Duration::from_millis(1)));
    assert_eq!(interval("250ms"), Ok(Duration::from_millis(250)));
    assert_eq!(interval("2s"), Ok(Duration::from_secs(2)));
    for bad in ["0", "0ms", "-5", "soon", "99999999999"] {
        assert_eq!(interval(bad), Err(2), "{bad}");
    }
    let Some(Command::Spill(s)) = parse(&["spill", "--", "python3", "-c", "x"])
        .unwrap()
        .command
    else {
        panic!("spill expected")
    };
    assert_eq!(
        (s.interval, s.device),
        (
            Duration::from_millis(100),
            hypomnesis::select::DeviceSelector::Index(0)
        )
    );
    assert_eq!(s.command, ["python3", "-c", "x"]);
}

#[test]
fn size_parsing() {
    assert_eq!(parse_size("0").unwrap(), 0);
    assert_eq!(parse_size("512").unwrap(), 512);
    assert_eq!(parse_size("1GiB").unwrap(), 1 << 30);
    assert_eq!(parse_size("1.5 GiB").unwrap(), 3 << 29);
    assert_eq!(parse_size("2g").unwrap(), 2 << 30);
    assert_eq!(parse_size("100MB").unwrap(), 100_000_000);
    assert_eq!(parse_size("4 kB").unwrap(), 4000);
    for bad in ["", "GiB", "-1", "1.2.3G", "5 parsecs", "nan", "inf", "1e9"] {
        assert!(parse_size(bad).is_err(), "{bad:?}");
    }
    assert!(parse_size("99999999999999999999").is_err());
    assert!(parse_size("20000000 TiB").is_err());
}

#[test]
fn durations() {
    use std::time::Duration;
    assert_eq!(parse_duration("200ms").unwrap(), Duration::from_millis(200));
    assert_eq!(parse_duration("1.5s").unwrap(), Duration::from_millis(1500));
    assert_eq!(parse_duration("2").unwrap(), Duration::from_secs(2));
    assert_eq!(parse_duration("1m").unwrap(), Duration::from_secs(60));
    for bad in [
        "", "0", "0ms", "-1s", "1d", "ms", "1e3", "nan", "2h30m", "25h",
    ] {
        assert!(parse_duration(bad).is_err(), "{bad:?}");
    }
    // Positive, but rounding to zero (nanoseconds, or milliseconds in every report): refused
    // rather than sampled in a busy loop.
    assert_eq!(parse_duration("1ms").unwrap(), Duration::from_millis(1));
    for tiny in ["0.0000000001s", "0.0000001", "0.5ms", "0.999ms", "0.00001m"] {
        assert_eq!(
            parse_duration(tiny),
            Err(ArgError::DurationTooShort(tiny.into())),
            "{tiny:?}"
        );
    }
    assert_eq!(
        ArgError::DurationTooShort("0.5ms".into()).to_string(),
        "invalid duration \"0.5ms\": shorter than 1 ms, the shortest interval hmn samples at"
    );
}

#[test]
fn growth_rates() {
    use super::values::parse_rate;
    assert_eq!(parse_rate("1KiB/s").unwrap(), 1024.0);
    assert_eq!(
        parse_rate("500MiB/h").unwrap(),
        (500u64 << 20) as f64 / 3600.0
    );
    assert_eq!(parse_rate("60MB/min").unwrap(), 1_000_000.0);
    assert_eq!(
        parse_rate(" 1GiB / m ").unwrap(),
        (1u64 << 30) as f64 / 60.0
    );
    for bad in [
        "", "1GiB", "/h", "1GiB/", "1GiB/d", "0MiB/h", "-1MiB/h", "lots/h", "1GiB/h/h", "1/x",
    ] {
        let e = parse_rate(bad).unwrap_err();
        assert_eq!(e, ArgError::Rate(bad.to_string()), "{bad:?}");
        assert!(e.to_string().contains("500MiB/h"), "{e}");
    }
    let a = parse(&["watch", "--exit-on-growth", "1GiB/h", "1"]).unwrap();
    let Some(Command::Watch(w)) = a.command else {
        panic!("watch")
    };
    assert_eq!(w.exit_on_growth, Some((1u64 << 30) as f64 / 3600.0));
    assert!(parse(&["watch", "--exit-on-growth", "fast", "1"]).is_err());
}

#[test]
fn gpu_and_need_on_run() {
    let a = parse(&["run", "--gpu", "auto", "--need", "24GiB", "--", "x"]).unwrap();
    let Some(Command::Run(r)) = a.command else {
        panic!("run")
    };
    assert_eq!(r.gpu, Some(GpuArg::Auto));
    assert_eq!(r.need.as_deref(), Some(std::ffi::OsStr::new("24GiB")));
    let a = parse(&["run", "--gpu", "GPU-3a1f", "--", "x"]).unwrap();
    let Some(Command::Run(r)) = a.command else {
        panic!("run")
    };
    assert!(matches!(r.gpu, Some(GpuArg::Device(_))));
    for bad in [
        &["run", "--need", "1GiB", "--", "x"][..],
        &["run", "--wait", "1s", "--", "x"],
        &["run", "--gpu", "", "--", "x"],
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
}

#[test]
fn value_errors_are_typed_and_name_the_input() {
    assert_eq!(parse_size("lots"), Err(ArgError::Size("lots".into())));
    let refused = [
        parse_size("20000000 TiB").unwrap_err(),
        parse_size("5 parsecs").unwrap_err(),
        parse_duration("soon").unwrap_err(),
        parse_pattern("  ").unwrap_err(),
        parse_device_sel("first").unwrap_err(),
        parse_runtime("ollama").unwrap_err(),
        super::parse_selector("GPU-").unwrap_err(),
    ];
    assert_eq!(
        refused.map(|e| e.to_string()),
        [
            "invalid size \"20000000 TiB\": too large",
            "invalid size \"5 parsecs\": expected a number with an optional unit \
             (B, KiB, MiB, GiB, TiB, kB, MB, GB, TB)",
            "invalid duration \"soon\": expected a positive number with ms, s, m or h",
            "invalid filter \"  \": expected a non-blank name pattern",
            "invalid device \"first\": expected an index, a GPU-… or MIG-… UUID (or a unique \
             prefix of one), a PCI bus id, `all` or `cpu`",
            "unknown runtime \"ollama\" (expected generic, llama.cpp or vllm)",
            "invalid device \"GPU-\": expected an index, a GPU-… or MIG-… UUID (or a unique \
             prefix of one), or a PCI bus id",
        ]
    );
    let err = parse(&["fits", "1G", "--kv-dtype", "int3"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("unknown KV cache type \"int3\" (expected f32"),
        "{err}"
    );
}

#[test]
fn a_root_that_is_not_a_directory_is_refused() {
    let a = parse(&["--proc-root", "/definitely/not/here"]).unwrap();
    let err = a.global.probe_options().unwrap_err();
    assert_eq!(
        err.to_string(),
        "--proc-root /definitely/not/here: not a directory"
    );
    let a = parse(&["--proc-root", "/proc", "--sys-root", "/"]).unwrap();
    let opts = a.global.probe_options().unwrap();
    assert_eq!(opts.roots.proc, PathBuf::from("/proc"));
    assert_eq!(opts.roots.sys, PathBuf::from("/"));
}

#[test]
fn a_proc_root_must_look_like_one() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().display().to_string();
    let refused = |p: &str| {
        parse(&["--proc-root", p])
            .unwrap()
            .global
            .probe_options()
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        refused(&path),
        format!("--proc-root {path}: not a proc root (no process directories and no meminfo)"),
        "an empty directory"
    );
    std::fs::write(dir.path().join("notes.txt"), "").unwrap();
    assert!(refused(&path).ends_with("not a proc root (no process directories and no meminfo)"));
    // A fixture with only meminfo, or only a pid, is one.
    std::fs::write(dir.path().join("meminfo"), "").unwrap();
    assert!(
        parse(&["--proc-root", &path])
            .unwrap()
            .global
            .probe_options()
            .is_ok()
    );
    std::fs::remove_file(dir.path().join("meminfo")).unwrap();
    std::fs::create_dir(dir.path().join("42")).unwrap();
    assert!(
        parse(&["--proc-root", &path])
            .unwrap()
            .global
            .probe_options()
            .is_ok()
    );
}

#[test]
fn a_user_must_exist() {
    assert_eq!(commands::parse_user("root").unwrap(), "root");
    assert_eq!(
        commands::parse_user("4242").unwrap(),
        "4242",
        "a UID as it is"
    );
    let err = commands::parse_user("surely-no-such-user-hmn").unwrap_err();
    assert_eq!(err, ArgError::NoSuchUser("surely-no-such-user-hmn".into()));
    assert_eq!(err.to_string(), "no such user \"surely-no-such-user-hmn\"");
    let err = parse(&["ps", "--user", "root,surely-no-such-user-hmn"]).unwrap_err();
    assert!(
        err.to_string()
            .contains("no such user \"surely-no-such-user-hmn\""),
        "{err}"
    );
}

#[test]
fn bad_values_are_usage_errors() {
    for args in [
        &["ps", "--filter", "  "][..],
        &["ps", "--min", "lots"],
        &["ps", "--pid", "x"],
        &["ps", "--sort", "size"],
        &["ps", "--csv", "--json"],
        &["ps", "--util", "--interval", "0s"],
        &["ps", "--util", "--interval", "soon"],
        &["ps", "--interval", "1s"],
        &["fits"],
        &["fits", "1G", "--context", "0"],
        &["fits", "1G", "--batch", "-1"],
        &["fits", "1G", "--device", "first"],
        &["fits", "1G", "--kv-dtype", "int3"],
        &["fits", "1G", "--runtime", "ollama"],
        &["fits", "1G", "--free", "much"],
        &["fits", "1G", "--free", "1G", "--device", "0"],
        &["frobnicate"],
    ] {
        let err = parse(args).unwrap_err();
        assert_eq!(err.exit_code(), 2, "{args:?}");
    }
}

#[test]
fn fits_arguments() {
    use hypomnesis::estimate::FlashAttn;
    use hypomnesis::select::DeviceSelector;

    let a = parse(&[
        "fits",
        "m.gguf",
        "--device",
        "all",
        "--runtime",
        "llama.cpp",
        "--kv-dtype",
        "q8_0",
    ])
    .unwrap();
    let Some(Command::Fits(f)) = a.command else {
        panic!("fits expected")
    };
    assert_eq!(f.device, Some(DeviceSel::All));
    assert_eq!(f.runtime, Some(hypomnesis::estimate::Runtime::LlamaCpp));
    assert_eq!(f.kv_dtype, Some(hypomnesis::estimate::KvDtype::Q8_0));
    let a = parse(&["fits", "14GiB", "--device", "1"]).unwrap();
    let Some(Command::Fits(f)) = a.command else {
        panic!("fits expected")
    };
    assert_eq!(f.device, Some(DeviceSel::One(DeviceSelector::Index(1))));
    let a = parse(&["fits", "14GiB", "--device", "MIG-8443"]).unwrap();
    let Some(Command::Fits(f)) = a.command else {
        panic!("fits expected")
    };
    assert_eq!(
        f.device,
        Some(DeviceSel::One(DeviceSelector::MigUuid("MIG-8443".into())))
    );
    let e = parse(&["fits", "14GiB", "--device", "first"]).unwrap_err();
    assert!(e.to_string().contains("invalid device \"first\""), "{e}");
    let a = parse(&[
        "fits",
        "m.gguf",
        "--device",
        "CPU",
        "--flash-attn",
        "off",
        "--parallel",
        "4",
        "--kv-unified",
        "--ubatch",
        "256",
        "--gpu-layers",
        "20",
    ])
    .unwrap();
    let Some(Command::Fits(f)) = a.command else {
        panic!("fits expected")
    };
    assert_eq!(f.device, Some(DeviceSel::Cpu));
    assert_eq!(f.flash_attn, Some(FlashAttn::Off));
    assert_eq!(
        (f.parallel, f.kv_unified, f.ubatch, f.gpu_layers),
        (Some(4), true, Some(256), Some(20))
    );
    let a = parse(&[
        "fits",
        "m",
        "--max-model-len",
        "65536",
        "--gpu-memory-utilization",
        "0.92",
        "--tensor-parallel-size",
        "2",
    ])
    .unwrap();
    let Some(Command::Fits(f)) = a.command else {
        panic!("fits expected")
    };
    assert_eq!(f.max_model_len, Some(65536));
    assert_eq!(
        f.gpu_memory_utilization.map(|u| u.to_string()),
        Some("0.92".to_string())
    );
    assert_eq!(f.tensor_parallel_size, Some(2));
}
