//! Containers and PID namespaces from the outside and the inside (issue 13): the workload of
//! each row (column, JSON, `--workload`), Docker's container names, the innermost pid, and
//! NVML's host pids in a container with and without the host's `/proc`.

use hmn_testbed::{FakeNvml, FakeProc, FakeProcess};

use crate::util::{Bed, json, stderr, stdout};

const ID: &str = "4e9a6f0b6d7c1f1a0e8c8f5a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c";
const CUT_ID: &str = "5f0b1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b";
const FIFO_ID: &str = "6a7b8c9d0e1f2a3b4c5d6e7f8a9b0c1d2e3f4a5b6c7d8e9f0a1b2c3d4e5f6a7b";
const UID_: &str = "8a1c5bc0_0cf5_4b4a_9f8b_0c2f6e7a5d11";
const HOST_NS: u64 = 4_026_531_836;
const CTR_NS: u64 = 4_026_532_777;

/// One H100 whose NVML lists pids 48213 (8 GiB), 2000 (2 GiB) and 3000 (1 GiB).
fn three_processes() -> Bed {
    Bed::with_nvml(
        &FakeNvml::h100s(1)
            .process(FakeProcess::compute(0, 48213, 8 << 30))
            .process(FakeProcess::compute(0, 2000, 2 << 30))
            .process(FakeProcess::compute(0, 3000, 1 << 30)),
    )
}

/// NVML with three processes: a pod's container (host pid 48213, pid 7 inside), a systemd
/// service, and one in no cgroup file this root can read.
fn host_bed() -> Bed {
    let bed = three_processes();
    let fx = bed.fixture();
    let vllm = FakeProc::new(48213, "vllm");
    fx.process(&vllm).unwrap();
    fx.file(
        "48213/status",
        &vllm
            .status_text()
            .replace("NSpid:\t48213\n", "NSpid:\t48213\t7\n"),
    )
    .unwrap();
    fx.file(
        "48213/cgroup",
        &format!(
            "0::/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{UID_}.slice/cri-containerd-{ID}.scope\n"
        ),
    )
    .unwrap();
    fx.process(&FakeProc::new(2000, "ollama")).unwrap();
    fx.file("2000/cgroup", "0::/system.slice/ollama.service\n")
        .unwrap();
    fx.process(&FakeProc::new(3000, "python3")).unwrap();
    // The host: pid 1 in the initial namespace.
    fx.process(&FakeProc::new(1, "systemd")).unwrap();
    fx.pid_ns(1, HOST_NS).unwrap();
    bed
}

#[test]
fn workloads_and_namespace_pids_on_the_host() {
    let bed = host_bed();
    let o = bed.run(&["ps", "--sort", "pid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].starts_with("  PID  NS PID  USER"), "{out}");
    assert!(lines[0].ends_with("WORKLOAD"), "{out}");
    assert!(
        lines[1].contains("ollama") && lines[1].ends_with("unit:ollama.service"),
        "{out}"
    );
    assert!(
        lines[2].contains("python3") && lines[2].ends_with("  -"),
        "{out}"
    );
    assert!(
        lines[3].starts_with("48213       7  root")
            && lines[3]
                .ends_with("pod:8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11/containerd:4e9a6f0b6d7c"),
        "{out}"
    );
    assert!(!stderr(&o).contains("--pid=host"), "{}", stderr(&o));

    let o = bed.run(&["ps", "--json", "--sort", "pid"]);
    let v = json(&o);
    let rows = v["processes"].as_array().unwrap();
    assert_eq!(rows[0]["workload"]["kind"], "unit");
    assert_eq!(rows[0]["workload"]["unit"], "ollama.service");
    assert!(rows[0].get("ns_pid").is_none());
    assert!(
        rows[1].get("workload").is_none(),
        "no cgroup file: no workload"
    );
    let pod = &rows[2]["workload"];
    assert_eq!(pod["kind"], "pod");
    assert_eq!(pod["runtime"], "containerd");
    assert_eq!(pod["pod_uid"], "8a1c5bc0-0cf5-4b4a-9f8b-0c2f6e7a5d11");
    assert_eq!(pod["container_id"], ID);
    assert_eq!(rows[2]["ns_pid"], 7);
    assert_eq!(rows[2]["name"], "vllm");
}

#[test]
fn the_workload_filter() {
    let bed = host_bed();
    let pids = |args: &[&str]| -> Vec<u64> { bed.ps_pids(&[&["--sort", "pid"], args].concat()) };
    assert_eq!(pids(&["--workload", "POD"]), [48213]);
    assert_eq!(
        pids(&["--workload", &ID[30..50]]),
        [48213],
        "inside the full id"
    );
    assert_eq!(
        pids(&["--workload", "ollama", "--workload", "8a1c5bc0"]),
        [2000, 48213]
    );
    assert_eq!(pids(&["--workload", "docker"]), [0u64; 0]);
    let o = bed.run(&["ps", "--workload", " "]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("invalid filter"), "{}", stderr(&o));
}

/// `record` (top's collector) and `watch PID` name the pod as `ps` does, from the kubelet's log
/// layout under `HMN_LOG_ROOT`.
#[test]
fn record_and_watch_name_the_pod_as_ps_does() {
    let bed = host_bed();
    bed.fixture().stat(48213, "vllm", 1, 100).unwrap();
    bed.kubelet_container("ml", "llama-0", &UID_.replace('_', "-"), "server", ID);
    let names = |w: &serde_json::Value| {
        (
            w["namespace"].as_str().map(str::to_string),
            w["pod_name"].as_str().map(str::to_string),
            w["container_name"].as_str().map(str::to_string),
        )
    };
    let want = (
        Some("ml".to_string()),
        Some("llama-0".to_string()),
        Some("server".to_string()),
    );
    let file = bed.path("rec.jsonl");
    bed.record(&file, "100ms", "150ms");
    let text = std::fs::read_to_string(&file).unwrap();
    let first: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    let row = first["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["pid"] == 48213)
        .unwrap();
    assert_eq!(names(&row["workload"]), want, "{row}");
    let o = bed.run(&[
        "watch",
        "--interval",
        "100ms",
        "--duration",
        "150ms",
        "--json",
        "48213",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let sample = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .find(|r| r["kind"] == "sample")
        .unwrap();
    assert_eq!(names(&sample["workload"]), want, "{sample}");
}

/// Docker containers' names from their `config.v2.json` under `HMN_DOCKER_ROOT`: pid 48213 in a
/// container named `my-llm` (keys as Docker writes them, the environment included); pid 2000
/// in one whose config is cut short; pid 3000 in one whose config is a FIFO nobody writes to.
fn docker_bed() -> Bed {
    let bed = three_processes();
    let fx = bed.fixture();
    let containers = bed.env.runtimes.join("docker/containers");
    // cgroup v2 with Docker's systemd driver (`docker-<id>.scope`), and with cgroupfs.
    for (pid, name, id, cgroup) in [
        (
            48213,
            "vllm",
            ID,
            format!("0::/system.slice/docker-{ID}.scope\n"),
        ),
        (2000, "ollama", CUT_ID, format!("0::/docker/{CUT_ID}\n")),
        (3000, "python3", FIFO_ID, format!("0::/docker/{FIFO_ID}\n")),
    ] {
        fx.process(&FakeProc::new(pid, name)).unwrap();
        fx.file(&format!("{pid}/cgroup"), &cgroup).unwrap();
        std::fs::create_dir_all(containers.join(id)).unwrap();
    }
    let config = serde_json::json!({
        "ID": ID,
        "Created": "2025-03-02T10:11:12.123456789Z",
        "Path": "python3",
        "Args": ["-m", "vllm.entrypoints.openai.api_server"],
        "Config": {
            "Hostname": &ID[..12],
            "Env": ["HF_TOKEN=hf_secret_do_not_log", "PATH=/usr/bin"],
            "Image": "vllm/vllm-openai:latest",
            "Labels": {},
        },
        "Name": "/my-llm",
        "Driver": "overlay2",
    });
    std::fs::write(
        containers.join(ID).join("config.v2.json"),
        config.to_string(),
    )
    .unwrap();
    std::fs::write(
        containers.join(CUT_ID).join("config.v2.json"),
        r#"{"ID":"5f0b","Name":"/half-writ"#,
    )
    .unwrap();
    nix::unistd::mkfifo(
        &containers.join(FIFO_ID).join("config.v2.json"),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .unwrap();
    bed
}

/// `hmn ps ARGS` in `bed`, killed after 20 s (a read that blocked on the FIFO would hang it).
fn ps_within(bed: &Bed, args: &[&str]) -> std::process::Output {
    bed.env
        .command("timeout")
        .args(["-s", "KILL", "20"])
        .arg(env!("CARGO_BIN_EXE_hmn"))
        .arg("ps")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn docker_names_a_container_and_an_unreadable_config_leaves_its_id() {
    let bed = docker_bed();
    let o = ps_within(&bed, &["--json", "--sort", "pid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let rows = v["processes"].as_array().unwrap();
    let named = &rows[2]["workload"];
    assert_eq!(rows[2]["pid"], 48213);
    assert_eq!(named["kind"], "container");
    assert_eq!(named["runtime"], "docker");
    assert_eq!(named["container_id"], ID);
    assert_eq!(named["container_name"], "my-llm");
    assert_eq!(named["names_from"], "docker");
    // The config holds the container's environment: none of it is kept or shown.
    assert!(!stdout(&o).contains("hf_secret"), "{}", stdout(&o));
    // A config cut short, and one that is not a regular file: the id alone, no failure.
    for (row, id) in [(&rows[0], CUT_ID), (&rows[1], FIFO_ID)] {
        let w = &row["workload"];
        assert_eq!(w["kind"], "container", "{row}");
        assert_eq!(w["container_id"], id, "{row}");
        assert!(
            w.get("container_name").is_none() && w.get("names_from").is_none(),
            "{row}"
        );
    }
    let o = ps_within(&bed, &["--sort", "pid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[1].ends_with("docker:5f0b1c2d3e4f"), "{out}");
    assert!(lines[2].ends_with("docker:6a7b8c9d0e1f"), "{out}");
    assert!(lines[3].ends_with("docker:my-llm"), "{out}");
}

/// A container's own `/proc`: hmn is pid 1 there, its namespace is not the initial one, and
/// pid 7 is an unrelated shell — which NVML's host pid 7 must not be named after.
fn container_bed() -> Bed {
    let fake = FakeNvml::h100s(1)
        .process(FakeProcess::compute(0, 48213, 8 << 30))
        .process(FakeProcess::compute(0, 7, 1 << 30));
    let bed = Bed::with_nvml(&fake);
    let fx = bed.fixture();
    fx.process(&FakeProc::new(1, "hmn")).unwrap();
    fx.process(&FakeProc::new(7, "bash")).unwrap();
    fx.pid_ns(1, CTR_NS).unwrap();
    fx.self_link(1).unwrap();
    bed
}

#[test]
fn host_pids_inside_a_container_are_not_named() {
    let bed = container_bed();
    let o = bed.run(&["ps", "--sort", "pid"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(!out.contains("bash"), "a wrong name: {out}");
    assert_eq!(
        out.matches("(host pid: not visible here)").count(),
        2,
        "{out}"
    );
    let err = stderr(&o);
    assert!(
        err.contains("ps: 2 NVIDIA rows name a host PID that this /proc cannot show")
            && err.contains("--pid=host")
            && err.contains("--proc-root /host/proc"),
        "{err}"
    );
    let v = json(&bed.run(&["ps", "--json", "--sort", "pid"]));
    let row = &v["processes"][0];
    assert_eq!(row["pid"], 7);
    assert!(row["name"].is_null() && row["user"].is_null(), "{row}");
    assert_eq!(row["unknown"][0]["field"], "name");
    assert_eq!(row["unknown"][0]["reason"], "other_pid_namespace");
    assert!(
        row["unknown"][0]["detail"]
            .as_str()
            .unwrap()
            .contains("NVML reports host PID 7"),
        "{row}"
    );
}

#[test]
fn the_host_proc_mounted_in_a_container_names_every_nvml_pid() {
    // The same NVML, with --proc-root naming the host's /proc (mounted read-only).
    let bed = container_bed();
    let host = bed.path("host-proc");
    let fx = hmn_testbed::ProcFixture::new(&host).unwrap();
    fx.meminfo(24_684_084, 24_444_784).unwrap();
    fx.process(&FakeProc::new(1, "systemd")).unwrap();
    fx.pid_ns(1, HOST_NS).unwrap();
    for (pid, name) in [(48213, "vllm"), (7, "kthreadd")] {
        fx.process(&FakeProc::new(pid, name)).unwrap();
    }
    let o = bed.run(&[
        "ps",
        "--json",
        "--sort",
        "pid",
        "--proc-root",
        host.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let names: Vec<&str> = v["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kthreadd", "vllm"]);
    assert!(!stderr(&o).contains("--pid=host"));
}
