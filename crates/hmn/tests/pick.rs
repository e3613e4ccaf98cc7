//! `hmn pick` and `hmn run --gpu`: best fit first, reservations that keep concurrent picks
//! off the same memory, `--need` as a size or a model, the child's visibility variables,
//! `--wait` for a device with room, and bad input refused with one line and exit 2.

use std::process::Stdio;

use hmn_testbed::{FakeDevice, FakeNvml, FakeProcess};
use serde_json::Value;

use crate::util::{Bed, json, stderr, stdout};

const GIB: u64 = 1 << 30;

fn uuid(index: u32) -> String {
    format!("GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e{index:04x}")
}

/// Two H100s (≈ 79 GiB free each, less `used`).
fn two(used0: u64, used1: u64) -> Bed {
    Bed::with_nvml(
        &FakeNvml::new()
            .device(FakeDevice::h100(0).memory_used(&[used0]))
            .device(FakeDevice::h100(1).memory_used(&[used1])),
    )
}

#[test]
fn best_fit_first_and_a_second_pick_counts_the_first_reservation() {
    // GPU 0 has ≈ 19 GiB free, GPU 1 ≈ 78 GiB: 10 GiB fits both, GPU 0 is the tighter fit.
    let bed = two(60 * GIB, GIB);
    let first = bed.run(&["pick", "--need", "10GiB"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), format!("{}\n", uuid(0)));
    assert!(
        stderr(&first).contains("10 GiB reserved for 60 s"),
        "{}",
        stderr(&first)
    );
    // GPU 0 has 19 − 10 GiB left under the first pick's lease: the next goes to GPU 1.
    let second = bed.run(&["pick", "--json", "--need", "10GiB"]);
    assert!(second.status.success(), "{}", stderr(&second));
    let v = json(&second);
    assert_eq!(v["schema"], 1);
    assert_eq!(v["picked"][0]["selector"], uuid(1));
    assert_eq!(v["env"]["CUDA_VISIBLE_DEVICES"], uuid(1));
    assert_eq!(v["need_bytes"].as_u64(), Some(10 * GIB));
    assert!(v["lock"].as_str().unwrap().ends_with("locks"), "{v}");
    let gpu0 = v["considered"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["selector"] == uuid(0))
        .unwrap();
    assert_eq!(gpu0["reserved_bytes"].as_u64(), Some(10 * GIB));
    assert_eq!(gpu0["fits"], false);
    // Nothing has 70 GiB once 10 GiB of GPU 1 is reserved: exit 1, every candidate explained.
    let none = bed.run(&["pick", "--need", "70GiB"]);
    assert_eq!(none.status.code(), Some(1), "{}", stderr(&none));
    assert_eq!(stdout(&none), "");
    let err = stderr(&none);
    assert!(err.contains("pick: no device has room for 70 GiB"), "{err}");
    assert!(
        err.contains("GPU 1 [NVIDIA H100 80GB HBM3]") && err.contains("reserved by other picks"),
        "{err}"
    );
}

#[test]
fn a_lapsed_lease_frees_the_memory_again() {
    let bed = two(60 * GIB, 60 * GIB);
    let a = bed.run(&["pick", "--need", "15GiB", "--lease", "1ms"]);
    assert!(a.status.success(), "{}", stderr(&a));
    std::thread::sleep(std::time::Duration::from_millis(20));
    let b = bed.run(&["pick", "--json", "--need", "15GiB"]);
    assert!(b.status.success(), "{}", stderr(&b));
    let v = json(&b);
    assert!(
        v["considered"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["reserved_bytes"] == 0),
        "an expired lease holds nothing: {v}"
    );
}

#[test]
fn concurrent_picks_never_share_memory() {
    // Two GPUs with room for two 30 GiB jobs each: five picks at once, four succeed, two per GPU.
    let bed = two(GIB, GIB);
    let children: Vec<_> = (0..5)
        .map(|_| {
            bed.cmd(&["pick", "--need", "30GiB"])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    let outs: Vec<_> = children
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let picked: Vec<String> = outs
        .iter()
        .filter(|o| o.status.success())
        .map(|o| stdout(o).trim().to_string())
        .collect();
    assert_eq!(picked.len(), 4, "{outs:?}");
    for i in 0..2 {
        assert_eq!(
            picked.iter().filter(|p| **p == uuid(i)).count(),
            2,
            "{picked:?}"
        );
    }
    let failed: Vec<_> = outs.iter().filter(|o| !o.status.success()).collect();
    assert_eq!(failed[0].status.code(), Some(1));
}

#[test]
fn count_vendor_and_an_inherited_cuda_visible_devices() {
    let bed = two(GIB, GIB);
    let o = bed.run(&["pick", "--need", "1GiB", "--count", "2", "--lease", "1ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).lines().count(), 2);
    let amd = bed.run(&["pick", "--need", "1GiB", "--vendor", "amd"]);
    assert_eq!(amd.status.code(), Some(1), "{}", stderr(&amd));
    let o = bed
        .cmd(&["pick", "--need", "1GiB", "--lease", "1ms"])
        .env("CUDA_VISIBLE_DEVICES", uuid(1))
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o).trim(), uuid(1), "only what the caller may see");
}

#[test]
fn a_model_as_the_need_is_judged_as_fits_would() {
    // Llama 3.1 8B in BF16 (≈ 16 GiB of weights) fits GPU 1 (≈ 78 GiB free), not GPU 0 (≈ 9).
    let bed = two(70 * GIB, GIB);
    let model = crate::fits::llama_8b(&bed.path("models"));
    let m = model.to_str().unwrap();
    let o = bed.run(&["pick", "--json", "--need", m, "--lease", "1ms"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["picked"][0]["selector"], uuid(1));
    assert!(v["need_bytes"].as_u64().unwrap() > 15 * GIB, "{v}");
    let full = two(70 * GIB, 70 * GIB);
    let model = crate::fits::llama_8b(&full.path("models"));
    let o = full.run(&["pick", "--need", model.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("the model ("), "{}", stderr(&o));
}

/// QA (defect 9): a model with no architecture (a GGUF without `general.architecture`: an
/// incomplete estimate) gave "not enough free memory" for a GPU with ≈ 78 GiB free against a
/// ≈ 1 GiB need. `hmn fits` answers "incomplete" there (exit 1, no refusal up front); `pick`
/// says so as the reason, naming what is missing, and picks nothing (exit 1).
#[test]
fn an_incomplete_model_estimate_is_the_reason_a_device_is_not_picked() {
    let bed = two(GIB, GIB);
    let path = bed.path("noarch.gguf");
    hmn_testbed::GgufWriter::new()
        .tensor("token_embd.weight", &[256, 1000], hmn_testbed::ggml::F16)
        .write(&path)
        .unwrap();
    let m = path.to_str().unwrap();
    let fits = bed.run(&["fits", m, "--device", "1"]);
    assert_eq!(fits.status.code(), Some(1), "{}", stderr(&fits));
    assert!(stdout(&fits).contains("incomplete"), "{}", stdout(&fits));
    let o = bed.run(&["pick", "--json", "--need", m]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let v = json(&o);
    for c in v["considered"].as_array().unwrap() {
        assert_eq!(
            c["why_not"], "the estimate is incomplete (no kv_cache): what is known fits",
            "{v}"
        );
    }
    assert!(
        stderr(&o).contains("the estimate is incomplete (no kv_cache)"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn bad_input_is_one_line_and_exit_2() {
    let bed = two(GIB, GIB);
    let bad_model = bed.path("broken.safetensors");
    std::fs::write(&bad_model, b"not a model").unwrap();
    for (args, says) in [
        (vec!["pick", "--need", "lots"], "--need lots: no such file"),
        (vec!["pick", "--need", "12XB"], "--need"),
        (
            vec!["pick", "--need", bad_model.to_str().unwrap()],
            "broken.safetensors",
        ),
        (vec!["pick", "--need", "1GiB", "--count", "0"], "--count"),
        (vec!["pick", "--need", "1GiB", "--wait", "soon"], "--wait"),
        (
            vec!["pick", "--need", "1GiB", "--vendor", "matrox"],
            "--vendor",
        ),
        (vec!["pick"], "--need"),
        (vec!["run", "--gpu", "auto", "--", "true"], "needs --need"),
        (vec!["run", "--gpu", "GPU-nope!", "--", "true"], "--gpu"),
        (vec!["run", "--gpu", "7", "--", "true"], "run --gpu"),
        (vec!["run", "--need", "1GiB", "--", "true"], "--gpu"),
        (
            vec!["run", "--gpu", "auto", "--need", "x1", "--", "true"],
            "--need",
        ),
    ] {
        let o = bed.run(&args);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
        let err = stderr(&o);
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert_eq!(stdout(&o), "", "{args:?}");
    }
}

/// A model whose header claims a dimension no real model has: `pick --need` and `run --gpu
/// auto --need` refuse it as `fits` does — one line naming the file and the key, exit 2 —
/// instead of overflowing the estimate.
#[test]
fn a_model_need_with_an_implausible_dimension_is_one_line_and_exit_2() {
    let bed = two(GIB, GIB);
    let path = bed.path("vocab.gguf");
    crate::fits_bounds::vocab_u64_max_gguf(&path);
    let m = path.to_str().unwrap();
    for args in [
        vec!["pick", "--need", m],
        vec!["pick", "--json", "--need", m],
        vec!["run", "--gpu", "auto", "--need", m, "--", "true"],
    ] {
        let o = bed.run(&args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.contains("vocab.gguf")
                && err.contains("invalid llama.vocab_size (18446744073709551615"),
            "{args:?}: {err}"
        );
        assert_eq!(stdout(&o), "", "{args:?}");
    }
}

#[test]
fn waiting_ends_with_exit_1_and_the_reason() {
    let bed = two(79 * GIB, 79 * GIB);
    let o = bed.run(&["pick", "--need", "10GiB", "--wait", "300ms"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("no device has room"), "{}", stderr(&o));
}

/// One H100 that is too full for 10 GiB until its memory is freed: the fake answers its memory
/// calls in order, the last repeating (from the first again in each hmn), and hmn reads the
/// memory once to list the devices and once per attempt — so the first attempt finds 79 GiB
/// used and the next (a retry every 2 s, `hypomnesis::estimate::pick::RETRY`) 1 GiB.
fn freed_on_the_second_attempt() -> Bed {
    Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0).memory_used(&[
        79 * GIB,
        79 * GIB,
        GIB,
    ])))
}

#[test]
fn waiting_picks_the_device_once_its_memory_is_freed() {
    let bed = freed_on_the_second_attempt();
    // Without --wait the one attempt finds no room: what the wait below is for.
    let once = bed.run(&["pick", "--need", "10GiB"]);
    assert_eq!(once.status.code(), Some(1), "{}", stderr(&once));
    assert_eq!(stdout(&once), "");
    let o = bed.run(&["pick", "--need", "10GiB", "--wait", "30s"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{}\n", uuid(0)));
    assert!(
        stderr(&o).contains("10 GiB reserved for 60 s"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn run_gpu_waits_for_room_then_starts_the_command() {
    let bed = freed_on_the_second_attempt().real_proc();
    let run = |extra: &[&str]| {
        let mut args = vec!["run", "--gpu", "auto", "--need", "10GiB"];
        args.extend_from_slice(extra);
        args.extend_from_slice(&["--", "sh", "-c", "echo \"cuda=$CUDA_VISIBLE_DEVICES\""]);
        bed.run(&args)
    };
    // Without --wait: no room, the command never starts.
    let once = run(&[]);
    assert_eq!(once.status.code(), Some(1), "{}", stderr(&once));
    assert!(!stdout(&once).contains("cuda="), "{}", stdout(&once));
    ran_on_gpu_0(&run(&["--wait", "30s"]));
}

/// `hmn run --gpu` ran its command (which printed `cuda=$CUDA_VISIBLE_DEVICES`) on GPU 0.
fn ran_on_gpu_0(o: &std::process::Output) {
    assert!(o.status.success(), "{}", stderr(o));
    assert!(
        stdout(o).contains(&format!("cuda={}", uuid(0))),
        "{}",
        stdout(o)
    );
    assert!(stderr(o).contains("run: on GPU 0"), "{}", stderr(o));
}

#[test]
fn run_gpu_sets_the_variable_and_ends_its_reservation() {
    let bed = two(60 * GIB, GIB).real_proc();
    let o = bed.run(&[
        "run",
        "--gpu",
        "auto",
        "--need",
        "10GiB",
        "--",
        "sh",
        "-c",
        "echo \"cuda=$CUDA_VISIBLE_DEVICES\"",
    ]);
    ran_on_gpu_0(&o);
    // The command ended: its reservation is gone, the next pick sees all of GPU 0's room.
    let after = bed.run(&["pick", "--json", "--need", "10GiB", "--lease", "1ms"]);
    let v = json(&after);
    assert_eq!(v["picked"][0]["selector"], uuid(0), "{v}");
    assert_eq!(v["picked"][0]["reserved_bytes"], 0, "{v}");
    // A named device, no need: that device, whatever its room.
    let o = bed.run(&[
        "run",
        "--gpu",
        "1",
        "--",
        "sh",
        "-c",
        "echo \"cuda=$CUDA_VISIBLE_DEVICES\"",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stdout(&o).contains(&format!("cuda={}", uuid(1))));
    // No room: the command never starts; exit 1.
    let o = bed.run(&[
        "run", "--gpu", "auto", "--need", "500GiB", "--", "sh", "-c", "echo ran",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(!stdout(&o).contains("ran"));
    assert!(
        stderr(&o).contains("run --gpu: no device has room for 500 GiB"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn an_unusable_lock_dir_means_uncoordinated_picks_said_once() {
    let bed = two(GIB, GIB);
    let file = bed.path("not-a-dir");
    std::fs::write(&file, b"").unwrap();
    let o = bed
        .cmd(&["pick", "--json", "--need", "1GiB"])
        .env("HMN_LOCK_DIR", &file)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.matches("picks are not coordinated").count(), 1, "{err}");
    let v: Value = json(&o);
    assert!(v["lock"].is_null() && v["lock_reason"].is_string(), "{v}");
    // Others' reservations were not read: unknown, not 0; judged on free memory alone.
    for c in v["considered"].as_array().unwrap() {
        assert!(c["reserved_bytes"].is_null(), "{c}");
        assert_eq!(c["effective_free_bytes"], c["free_bytes"], "{c}");
    }
}

/// A lock file nobody can use — a link or a directory where it goes (anyone may write the
/// shared directory), or a holder that keeps it — does not deny its device: it is picked
/// without coordination, and said so (QA: every device was refused, "no device has room").
#[test]
fn an_unusable_lock_file_does_not_deny_its_device() {
    // GPU 0 (≈ 19 GiB free) is the best fit for 1 GiB.
    let bed = two(60 * GIB, GIB);
    let locks = &bed.env.locks;
    std::fs::create_dir_all(locks).unwrap();
    let lock = |i: u32| locks.join(format!("{}.lock", uuid(i)));
    std::os::unix::fs::symlink("/nonexistent", lock(0)).unwrap();
    std::fs::create_dir(lock(1)).unwrap();
    let o = bed.run(&["pick", "--json", "--count", "2", "--need", "1GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["picked"].as_array().unwrap().len(), 2, "{v}");
    let err = stderr(&o);
    for i in 0..2 {
        assert!(
            err.contains(&format!("GPU {i}: picked without coordination")),
            "{err}"
        );
    }
    assert!(err.contains(&uuid(0)) && err.contains(".lock"), "{err}");
    let o = bed.run(&["run", "--gpu", "auto", "--need", "1GiB", "--", "true"]);
    assert!(o.status.success(), "{}", stderr(&o));
    // A holder that keeps GPU 0's lock past the wait.
    std::fs::remove_file(lock(0)).unwrap();
    std::fs::write(lock(0), b"").unwrap();
    let mut holder = std::process::Command::new("flock")
        .arg("-x")
        .arg(lock(0))
        .args(["-c", "echo held; exec sleep 30"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(holder.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line, "held\n");
    let o = bed.run(&["pick", "--need", "1GiB"]);
    holder.kill().unwrap();
    holder.wait().unwrap();
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(stdout(&o), format!("{}\n", uuid(0)));
    assert!(
        stderr(&o).contains("GPU 0: picked without coordination")
            && stderr(&o).contains("no lock within"),
        "{}",
        stderr(&o)
    );
}

/// GPU 0 is the tightest fit but prohibited; GPU 1 is exclusive and held; GPU 2 is exclusive
/// and free; GPU 3 has the most room.
#[test]
fn compute_modes_are_heeded_a_prohibited_gpu_never_an_exclusive_one_only_when_free() {
    let fake = FakeNvml::new()
        .device(
            FakeDevice::h100(0)
                .memory_used(&[70 * GIB])
                .compute_mode(Some(2)),
        )
        .device(
            FakeDevice::h100(1)
                .memory_used(&[60 * GIB])
                .compute_mode(Some(3)),
        )
        .device(
            FakeDevice::h100(2)
                .memory_used(&[50 * GIB])
                .compute_mode(Some(3)),
        )
        .device(FakeDevice::h100(3).memory_used(&[GIB]))
        .process(FakeProcess::compute(1, 4242, 4 * GIB));
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["pick", "--json", "--need", "5GiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["picked"][0]["selector"], uuid(2), "{v}");
    let why = |i: u32| {
        v["considered"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["selector"] == uuid(i))
            .map(|c| c["why_not"].clone())
            .unwrap()
    };
    assert!(
        why(0).as_str().unwrap().contains("compute mode prohibited"),
        "{v}"
    );
    assert_eq!(
        why(1),
        "compute mode exclusive_process: pid 4242 holds its one context"
    );
    assert!(why(3).is_null(), "{v}");
    // The device view says the modes that are not the default.
    let text = stdout(&bed.run(&[]));
    assert!(text.contains(", compute mode prohibited"), "{text}");
    assert!(
        !text
            .lines()
            .any(|l| l.starts_with("GPU 3") && l.contains("compute mode"))
    );
    let d = json(&bed.run(&["--json"]));
    assert_eq!(d["devices"][1]["compute_mode"], "exclusive_process");
    assert_eq!(d["devices"][3]["compute_mode"], "default");
    // serve: a state set per GPU, 1 for its mode.
    let body = crate::serve::scrape_lint_clean(&bed);
    for (mode, v) in [("prohibited", 1), ("default", 0), ("exclusive_process", 0)] {
        let want = format!(
            "hmn_device_compute_mode{{gpu=\"0\",gpu_uuid=\"{}\",mode=\"{mode}\"}} {v}",
            uuid(0)
        );
        assert!(body.contains(&want), "missing {want}\n{body}");
    }
    // A driver that answers NOT_SUPPORTED: null with the reason, and nothing refused.
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0).compute_mode(None)));
    let d = json(&bed.run(&["--json"]));
    assert!(d["devices"][0]["compute_mode"].is_null());
    assert!(
        d["devices"][0]["unknown"]
            .as_array()
            .unwrap()
            .iter()
            .any(|u| u["field"] == "compute_mode" && u["reason"] == "unsupported"),
        "{d}"
    );
    assert!(bed.run(&["pick", "--need", "1GiB"]).status.success());
}

/// `run --gpu DEVICE` on a GPU no context can be made on: the command does not start, and the
/// reason is the compute mode, not room.
#[test]
fn run_gpu_on_a_prohibited_gpu_does_not_start_and_says_why() {
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0).compute_mode(Some(2))));
    let marker = bed.dir.path().join("started");
    let o = bed.run(&["run", "--gpu", "0", "--", "touch", marker.to_str().unwrap()]);
    assert!(!marker.exists(), "the command must not start");
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert_eq!(
        stderr(&o),
        "hmn: run --gpu: no device admits a new CUDA context (its compute mode): GPU 0 [NVIDIA \
         H100 80GB HBM3]: 79.1 GiB free — compute mode prohibited: no CUDA context can be made \
         there\n"
    );
}

/// An exclusive GPU is one command's: a second pick does not take it while the first's
/// reservation stands (its command has not made its context yet), and one whose process list
/// cannot be read is not taken as free.
#[test]
fn an_exclusive_gpu_goes_to_one_pick_and_an_unreadable_one_to_none() {
    let bed = Bed::with_nvml(&FakeNvml::new().device(FakeDevice::h100(0).compute_mode(Some(3))));
    let first = bed.run(&["pick", "--need", "1GiB"]);
    assert!(first.status.success(), "{}", stderr(&first));
    assert_eq!(stdout(&first), format!("{}\n", uuid(0)));
    let second = bed.run(&["pick", "--json", "--need", "1GiB"]);
    assert_eq!(second.status.code(), Some(1), "{}", stderr(&second));
    let v = json(&second);
    assert_eq!(
        v["considered"][0]["why_not"],
        "compute mode exclusive_process: another pick has reserved it for a command of its own"
    );
    let mut fake = FakeNvml::new().device(FakeDevice::h100(0).compute_mode(Some(3)));
    fake.devices[0]
        .errors
        .push(("nvmlDeviceGetComputeRunningProcesses_v3".to_string(), 999));
    let bed = Bed::with_nvml(&fake);
    let o = bed.run(&["pick", "--json", "--need", "1GiB"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let why = json(&o)["considered"][0]["why_not"].clone();
    assert!(
        why.as_str().unwrap().contains("could not be read"),
        "unknown holder, not free: {why}"
    );
}

#[test]
fn a_picked_device_its_runtime_cannot_name_says_why_in_json_too() {
    // An amdgpu card without a KFD node: picked, but ROCm has no name for it.
    let bed = Bed::new();
    bed.gpu(hmn_testbed::FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    let o = bed.run(&["pick", "--json", "--need", "1MiB"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["picked"][0]["selector"], "0000:03:00.0", "{v}");
    assert_eq!(v["env"], serde_json::json!({}), "{v}");
    let why = v["env_reason"].as_str().unwrap();
    assert!(stderr(&o).contains(why), "{why}\n{}", stderr(&o));
}
