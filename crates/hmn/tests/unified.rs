//! Memory pools end to end (issue 23): an NVIDIA GB10 through the fake NVML's unified-memory
//! mode and through `nvidia-smi`'s placeholders, a Grace Hopper that keeps its HBM, AMD APUs
//! from sysfs (Strix Halo, no hwmon) — in the device line and JSON, `ps`'s totals, `fits`,
//! `watch`, `run` and `doctor` (`serve`'s gauges: its unit tests). Intel's: `unified_intel.rs`.

use hmn_testbed::{FakeDevice, FakeGpu, FakeNvml, FakeProc, FakeProcess, FakeSmi, fdinfo_sample};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;
/// A DGX Spark's `/proc/meminfo` (nvitop #208): MemTotal, MemAvailable in KiB.
const SPARK: (u64, u64) = (127_600_748, 118_566_368);

/// A GB10 with a python process holding 63931 MiB (nvtop #426) and Xorg's 100 MiB.
fn gb10() -> Bed {
    let fake = FakeNvml::new()
        .device(FakeDevice::gb10(0))
        .process(FakeProcess::compute(0, 4242, 63_931 * MIB))
        .process(FakeProcess::graphics(0, 1460, 100 * MIB));
    let bed = Bed::with_nvml(&fake);
    bed.fixture().meminfo(SPARK.0, SPARK.1).unwrap();
    bed.fixture()
        .process(&FakeProc::new(4242, "python3"))
        .unwrap()
        .process(&FakeProc::new(1460, "Xorg"))
        .unwrap();
    bed
}

pub(crate) fn device(bed: &Bed) -> Value {
    let o = bed.run(&["--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    json(&o)["devices"][0].clone()
}

#[test]
fn gb10_is_host_ram_with_the_sum_of_its_processes() {
    let bed = gb10();
    let d = device(&bed);
    assert_eq!(d["integrated"], true);
    let p = &d["pool"];
    assert_eq!(p["kind"], "unified_host");
    assert_eq!(p["total_bytes"], SPARK.0 * KIB);
    assert_eq!(p["free_bytes"], SPARK.1 * KIB);
    assert_eq!(p["host_available_bytes"], SPARK.1 * KIB);
    assert_eq!(p["used_bytes"], (63_931 + 100) * MIB);
    assert_eq!(
        (&p["total_source"], &p["used_source"], &p["free_source"]),
        (
            &Value::from("host_total"),
            &Value::from("process_sum"),
            &Value::from("host_available")
        )
    );
    assert_eq!(p["used_is_lower_bound"], true);
    assert!(p["evidence"].as_str().unwrap().contains("nvml.h"), "{p}");
    // The driver's own figures stay unknown, with NVML's answer.
    assert!(d["memory"]["total_bytes"].is_null());
    let why = d["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["field"] == "memory.total_bytes")
        .unwrap();
    assert_eq!(why["reason"], "unsupported");
    assert!(why["detail"].as_str().unwrap().contains("NOT_SUPPORTED"));
    let o = bed.run(&[]);
    assert_eq!(
        stdout(&o).lines().next().unwrap(),
        "GPU 0 [NVIDIA GB10]: unified with host RAM, free 113.1 GiB / 121.7 GiB (the host's \
         RAM), 62.5 GiB held by GPU processes (the sum of NVML's per-process figures), driver \
         550.54.15"
    );
    // ps: the rows, and a total that says which pool it is.
    let o = bed.run(&["ps"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "hmn: 2 GPU processes found (62.5 GiB total; GPU 0: unified with host RAM)\n"
    );
}

#[test]
fn gb10_fits_against_available_ram_with_a_dgpus_answers() {
    let bed = gb10();
    let o = bed.run(&["fits", "100GiB", "--device", "0", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "host_available");
    assert_eq!(v["devices"][0]["verdict"]["budget_bytes"], SPARK.1 * KIB);
    let o = bed.run(&["fits", "120GiB"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(
        stderr(&o).contains("available (shared system RAM)"),
        "{}",
        stderr(&o)
    );
    // A model: the largest context and batch are those of a discrete GPU with as much free.
    let model = crate::fits::llama_8b(bed.dir.path());
    let answers = |bed: &Bed| {
        let o = bed.run(&["fits", model.to_str().unwrap(), "--json"]);
        let v = json(&o);
        let verdict = &v["devices"][0]["verdict"];
        (
            verdict["budget_bytes"].as_u64().unwrap(),
            verdict["max_context"].as_u64().unwrap(),
            verdict["max_batch"].as_u64().unwrap(),
        )
    };
    let mut dgpu = FakeDevice::h100(0);
    dgpu.memory_total = SPARK.1 * KIB + dgpu.memory_reserved + (4 << 20);
    let h = Bed::with_nvml(&FakeNvml::new().device(dgpu));
    let (on_gb10, on_dgpu) = (answers(&bed), answers(&h));
    assert_eq!(on_gb10.0, SPARK.1 * KIB);
    assert_eq!(on_gb10, on_dgpu);
}

#[test]
fn a_grace_hopper_that_reports_its_hbm_keeps_it() {
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::gh200(0)));
    let d = device(&bed);
    assert!(d.get("pool").is_none(), "{d}");
    assert!(d["integrated"].is_null());
    assert_eq!(d["memory"]["total_bytes"], 97_871 * MIB);
    let o = bed.run(&["fits", "10GiB", "--json"]);
    assert_eq!(json(&o)["devices"][0]["budget_source"], "free");
}

#[test]
fn not_supported_from_one_memory_call_is_no_unified_memory() {
    // v2 NOT_SUPPORTED, v1 answering: v1's figures, the reservation unknown, saying why.
    let fake = FakeNvml::new().device(FakeDevice::h100(0).error("nvmlDeviceGetMemoryInfo_v2", 3));
    let d = device(&Bed::with_nvml(&fake));
    assert!(d.get("pool").is_none() && d["integrated"].is_null(), "{d}");
    assert_eq!(d["memory"]["total_bytes"], 85_520_809_984u64);
    let why = d["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["field"] == "memory.reserved_bytes")
        .unwrap();
    assert!(
        why["detail"]
            .as_str()
            .unwrap()
            .contains("answered NOT_SUPPORTED")
    );
    // v1 NOT_SUPPORTED while v2 answers: v2 alone is read.
    let fake = FakeNvml::new().device(FakeDevice::h100(0).error("nvmlDeviceGetMemoryInfo", 3));
    let d = device(&Bed::with_nvml(&fake));
    assert!(d.get("pool").is_none());
    assert_eq!(d["memory"]["reserved_bytes"], 566_231_040u64);
    // Memory NOT_SUPPORTED and the process list failing: the pool's used figure is unknown,
    // with the reason, never 0.
    let fake = FakeNvml::new()
        .device(FakeDevice::gb10(0).error("nvmlDeviceGetComputeRunningProcesses_v3", 999));
    let bed = Bed::with_nvml(&fake);
    let d = device(&bed);
    assert!(d["pool"]["used_bytes"].is_null(), "{d}");
    let why = d["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["field"] == "pool.used_bytes")
        .unwrap();
    assert_eq!(why["reason"], "device_error");
    assert!(stdout(&bed.run(&[])).contains("? held by GPU processes"));
}

#[test]
fn nvidia_smi_placeholders_on_a_gb10_and_on_a_lost_discrete_gpu() {
    let bed = Bed::new();
    bed.fixture().meminfo(SPARK.0, SPARK.1).unwrap();
    let uuid = "GPU-11111111-2222-3333-4444-555555555555";
    // 580.95.05 (marimo #6822): memory.total, used, free (and reserved) all [N/A].
    let smi = FakeSmi::new(
        &format!(
            "0, NVIDIA GB10, {uuid}, 0000000F:01:00.0, 580.95.05, [N/A], [N/A], [N/A], [N/A]\n"
        ),
        &format!("4242, python3, 63931, {uuid}\n"),
    )
    .install(&bed.dir.path().join("smi"))
    .unwrap();
    let o = bed
        .cmd(&["--json"])
        .env("HMN_NVIDIA_SMI", &smi)
        .output()
        .unwrap();
    let d = &json(&o)["devices"][0];
    assert_eq!(d["source"], "nvidia-smi");
    assert_eq!(d["pool"]["kind"], "unified_host");
    assert_eq!(d["pool"]["used_bytes"], 63_931 * MIB);
    assert_eq!(d["pool"]["free_bytes"], SPARK.1 * KIB);
    let o = bed.cmd(&[]).env("HMN_NVIDIA_SMI", &smi).output().unwrap();
    assert!(
        stdout(&o).contains("(the sum of nvidia-smi's per-process figures)"),
        "{}",
        stdout(&o)
    );
    // The same placeholders with a discrete GPU's name (a GPU that fell off the bus): unknown.
    let lost = FakeSmi::new(
        &format!("0, NVIDIA H100 80GB HBM3, {uuid}, 00000000:1A:00.0, 580.95.05, [N/A], [N/A], [N/A], [N/A]\n"),
        "",
    )
    .install(&bed.dir.path().join("lost"))
    .unwrap();
    let o = bed
        .cmd(&["--json"])
        .env("HMN_NVIDIA_SMI", &lost)
        .output()
        .unwrap();
    let d = &json(&o)["devices"][0];
    assert!(d.get("pool").is_none() && d["integrated"].is_null(), "{d}");
    let o = bed.cmd(&[]).env("HMN_NVIDIA_SMI", &lost).output().unwrap();
    assert!(stdout(&o).contains("free ? / ?"), "{}", stdout(&o));
}

/// A Strix Halo (2 GiB of GTT in use) on a 128 GB machine (MemTotal 131161644 kB, a public
/// NixOS config) with `available_kib` available, a HIP process holding a 24 GB model in GTT
/// (nvtop #492's fdinfo) that KFD also reports, and another client.
fn strix_halo(available_kib: u64) -> Bed {
    strix_halo_with_gtt(available_kib, 2 * GIB)
}

/// [`strix_halo`] with `gtt_used` bytes of GTT in use device-wide.
fn strix_halo_with_gtt(available_kib: u64, gtt_used: u64) -> Bed {
    let bed = Bed::new();
    bed.fixture().meminfo(131_161_644, available_kib).unwrap();
    bed.gpu(FakeGpu::strix_halo("0000:c4:00.0", 0, 128, gtt_used));
    bed.client(
        500,
        "llama-server",
        &[(
            7,
            "renderD128",
            &fdinfo_sample("amdgpu-apu-nvtop492.txt").unwrap(),
        )],
    );
    // KFD's "VRAM" of the same process: on an APU that prefers GTT, the same buffers.
    bed.world.sys.kfd_node(1, 9001, 0, 0xc4, 0, 0).unwrap();
    bed.world
        .sys
        .kfd_process(500, 9001, 25_000_000 * KIB)
        .unwrap();
    bed
}

#[test]
fn an_apu_is_its_carve_out_plus_gtt() {
    let bed = strix_halo(120_000_000);
    let d = device(&bed);
    assert_eq!(d["integrated"], true);
    let p = &d["pool"];
    assert_eq!(p["kind"], "carve_out_plus_gtt");
    assert_eq!(p["total_bytes"], 536_870_912u64 + 65_867_993_088);
    assert_eq!(p["used_bytes"], 155_189_248 + 2 * GIB);
    // Free carve-out + free GTT (below MemAvailable here).
    assert_eq!(
        p["free_bytes"],
        (536_870_912 - 155_189_248) + (65_867_993_088 - 2 * GIB)
    );
    assert!(p["evidence"].as_str().unwrap().contains("vddnb"));
    // `memory` is the carve-out, as before.
    assert_eq!(d["memory"]["total_bytes"], 536_870_912u64);
    let o = bed.run(&[]);
    assert!(
        stdout(&o).starts_with(
            "GPU 0 [AMD 1002:1586]: free 59.7 GiB / 61.8 GiB carve-out + GTT (VRAM 364 MiB / 512 \
             MiB free, GTT 59.3 GiB / 61.3 GiB free, GTT's free at most the RAM available)"
        ),
        "{}",
        stdout(&o)
    );
    // ps: the HIP process counts its VRAM and GTT (24.1 GiB), not KFD's figure on top.
    let o = bed.run(&["ps"]);
    assert_eq!(
        stderr(&o),
        "hmn: 1 GPU process found (24.1 GiB total; GPU 0: carve-out + GTT, each process's VRAM \
         and GTT counted)\n"
    );
    // Its row keeps its contract: used_bytes is KFD's (the larger), the regions beside it.
    let v = json(&bed.run(&["ps", "--json"]));
    let row = &v["processes"][0];
    assert_eq!(row["used_bytes"], 25_000_000 * KIB);
    assert_eq!(row["source"], "kfd");
    assert_eq!(row["regions"]["gtt"]["resident_bytes"], 25_258_000 * KIB);
}

#[test]
fn an_apu_fits_against_its_larger_pool_bounded_by_available_ram() {
    // GTT free (59.3 GiB) above MemAvailable (40 GiB): 40 GiB.
    let bed = strix_halo(40 * GIB / KIB);
    let o = bed.run(&["fits", "30GiB", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "gtt_pool");
    assert_eq!(v["devices"][0]["verdict"]["budget_bytes"], 40 * GIB);
    let o = bed.run(&["fits", "30GiB"]);
    assert!(
        stderr(&o).contains("40 GiB free in GTT (an APU's larger pool; at most MemAvailable)"),
        "{}",
        stderr(&o)
    );
    assert_eq!(bed.run(&["fits", "45GiB"]).status.code(), Some(1));
}

/// A GTT set above the RAM (`amdgpu.gttsize`: 61.3 GiB of GTT on a 32 GiB machine): the pool
/// counts at most `MemTotal` of it, and the device line says so.
#[test]
fn an_apus_gtt_counts_at_most_the_hosts_ram() {
    let bed = Bed::new();
    bed.fixture()
        .meminfo(32 * GIB / KIB, 20 * GIB / KIB)
        .unwrap();
    bed.gpu(FakeGpu::strix_halo("0000:c4:00.0", 0, 128, 2 * GIB));
    let p = device(&bed)["pool"].clone();
    assert_eq!(p["total_bytes"], 536_870_912u64 + 32 * GIB);
    assert_eq!(p["total_source"], "vram_plus_gtt_host_bound");
    assert_eq!(p["used_bytes"], 155_189_248 + 2 * GIB);
    assert_eq!(p["free_bytes"], (536_870_912 - 155_189_248) + 20 * GIB);
    let line = stdout(&bed.run(&[]));
    assert!(
        line.contains("/ 32.5 GiB carve-out + GTT")
            && line.contains("GTT counted at most the host's RAM"),
        "{line}"
    );
}

#[test]
fn an_amdgpu_without_hwmon_is_not_guessed() {
    let bed = Bed::new();
    bed.gpu(FakeGpu::strix_halo("0000:c4:00.0", 0, 128, 0).without_hwmon());
    let d = device(&bed);
    assert!(d.get("pool").is_none() && d["integrated"].is_null(), "{d}");
    let why = d["unknown"]
        .as_array()
        .unwrap()
        .iter()
        .find(|u| u["field"] == "integrated")
        .unwrap();
    assert!(why["detail"].as_str().unwrap().contains("amdgpu.dpm=0"));
    // The device line shows the carve-out as before; doctor warns with the remedy.
    assert!(stdout(&bed.run(&[])).contains("free 364 MiB / 512 MiB"));
    let o = crate::doctor::doctor(&bed, &["--json"]);
    let v = json(&o);
    let c = v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == "memory-pool")
        .unwrap();
    assert_eq!(c["status"], "warn", "{c}");
    assert!(c["remedy"].as_str().unwrap().contains("amdgpu.dpm=0"));
}

#[test]
fn watch_says_the_gpu_memory_is_host_ram() {
    let mut sleeper = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    let pid = sleeper.id();
    let fake = FakeNvml::new()
        .device(FakeDevice::gb10(0))
        .process(FakeProcess::compute(0, pid, 8 * GIB));
    let bed = Bed::with_nvml(&fake).real_proc();
    let text = bed.run(&["watch", "--interval", "100ms", "--duration", "100ms"]);
    let json = bed.run(&[
        "watch",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "100ms",
    ]);
    let _ = sleeper.kill();
    let _ = sleeper.wait();
    assert_eq!(text.status.code(), Some(0), "{}", stderr(&text));
    assert!(
        stderr(&text).contains(
            "watch: GPU 0's memory is host RAM (unified): its VRAM figures are host RAM too"
        ),
        "{}",
        stderr(&text)
    );
    let start: Value = serde_json::from_str(stdout(&json).lines().next().unwrap()).unwrap();
    assert_eq!(start["host_memory_devices"], serde_json::json!([0]));
}

#[test]
fn run_says_the_gpu_memory_is_host_ram() {
    let fake = FakeNvml::new()
        .device(FakeDevice::gb10(0))
        .process(FakeProcess::compute_child_of_caller(0, 3 * GIB));
    let bed = Bed::with_nvml(&fake).real_proc();
    let o = bed.run(&["run", "--json", "--interval", "50ms", "--", "sleep", "0.4"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    let d = &v["devices"][0];
    assert_eq!(d["pool"], "unified_host");
    assert_eq!(d["peak_vram_bytes"], 3 * GIB);
    // Device-wide: the pool's used figure (the sum of processes), not an unknown.
    assert_eq!(d["peak_device_used_bytes"], 3 * GIB);
    assert!(
        stderr(&o).contains("GPU 0's memory is host RAM (unified)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn pick_judges_a_pool_as_fits_does_and_counts_reservations_in_it() {
    // A GB10: NVML has no free figure; a process can allocate the host's available RAM.
    let bed = gb10();
    let o = bed.run(&["pick", "--json", "--need", "10GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["considered"][0]["effective_free_bytes"], SPARK.1 * KIB);
    assert_eq!(v["picked"][0]["device_index"], 0, "{v}");
    // The first pick's 10 GiB come out of the same pool: 113.1 − 10 GiB is less than 105 GiB.
    let o = bed.run(&["pick", "--json", "--need", "105GiB"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let c = &json(&o)["considered"][0];
    assert_eq!(c["effective_free_bytes"], SPARK.1 * KIB - 10 * GIB, "{c}");
    assert_eq!(c["why_not"], "not enough free memory");
    // An APU: the larger pool (GTT, 59.3 GiB free), not the carve-out's 364 MiB.
    let bed = strix_halo(120_000_000);
    let o = bed.run(&["pick", "--json", "--need", "20GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let c = &json(&o)["considered"][0];
    assert_eq!(c["effective_free_bytes"], 65_867_993_088 - 2 * GIB, "{c}");
    // … bounded by MemAvailable, as in fits: 40 GiB available, less the 20 GiB reserved.
    let bed = strix_halo(40 * GIB / KIB);
    let first = bed.run(&["pick", "--need", "20GiB"]);
    assert!(first.status.success(), "{}", stderr(&first));
    let o = bed.run(&["pick", "--json", "--need", "21GiB"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let c = &json(&o)["considered"][0];
    assert_eq!(c["effective_free_bytes"], 20 * GIB, "{c}");
    // What is left still takes a smaller need.
    let o = bed.run(&["pick", "--json", "--need", "15GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
}

#[test]
fn unattributed_memory_on_an_apu_is_of_its_pool() {
    // 30 GiB of GTT in use, 24.1 GiB of it the HIP process's (fdinfo's VRAM + GTT, above KFD's).
    let bed = strix_halo_with_gtt(120_000_000, 30 * GIB);
    let v = json(&bed.run(&["ps", "--json"]));
    let u = &v["unattributed"][0];
    let held = (5_348 + 25_258_000) * KIB;
    assert_eq!(u["processes_bytes"], held, "{u}");
    assert_eq!(u["bytes"], 155_189_248 + 30 * GIB - held, "{u}");
    assert_eq!(u["bound"], "exact");
    // The device says 2 GiB of GTT while the process holds 24 GiB: the figures disagree, and
    // what nobody holds is unknown — never an exact 0.
    let bed = strix_halo(120_000_000);
    let v = json(&bed.run(&["ps", "--json"]));
    let u = &v["unattributed"][0];
    assert!(u["bytes"].is_null(), "{u}");
    assert!(u["reason"].as_str().unwrap().contains("more than"), "{u}");
    assert_eq!(
        u["processes_exceed_used_by"],
        held - (155_189_248 + 2 * GIB),
        "{u}"
    );
}

#[test]
fn watch_counts_an_apu_process_by_its_share_of_the_pool() {
    // The HIP process's 24 GB are in GTT: its VRAM + GTT (fdinfo, above KFD's figure).
    let bed = strix_halo_with_gtt(120_000_000, 30 * GIB);
    bed.fixture().stat(500, "llama-server", 1, 1000).unwrap();
    let o = bed.run(&[
        "watch",
        "500",
        "--json",
        "--interval",
        "100ms",
        "--duration",
        "100ms",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let held = (5_348 + 25_258_000) * KIB;
    let records: Vec<Value> = stdout(&o)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let sample = records.iter().find(|r| r["kind"] == "sample").unwrap();
    assert_eq!(sample["vram_by_device"]["0"], held, "{sample}");
    let device = records.iter().find(|r| r["kind"] == "device").unwrap();
    assert_eq!(device["tree_vram_bytes"], held, "{device}");
}
