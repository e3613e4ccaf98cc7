//! `hmn spill -- CMD`: upstream's exit codes, the JSON object after the command's output with
//! upstream's keys first, NVIDIA "not measurable" with the reason, and a fixture amdgpu card
//! whose VRAM fills while the command's own buffers are evicted into GTT — the command itself
//! rewrites the fixture files as it runs.

use std::process::Output;

use hmn_testbed::{FakeGpu, FakeNvml};
use serde_json::Value;

use crate::run::{spawn_group, wait_for_child_process};
use crate::util::{Bed, stderr, stdout};

const MIB: u64 = 1 << 20;

/// The last stdout line as JSON (the command's own output comes first).
fn report(o: &Output) -> Value {
    let out = stdout(o);
    let last = out
        .lines()
        .last()
        .unwrap_or_else(|| panic!("no stdout: {}", stderr(o)));
    serde_json::from_str(last).unwrap_or_else(|e| panic!("{e}: {out}"))
}

#[test]
fn exit_codes_are_upstreams() {
    let bed = Bed::new().real_proc();
    let code = |args: &[&str]| {
        let mut all = vec!["spill", "--interval", "20", "--"];
        all.extend_from_slice(args);
        bed.run(&all).status.code().unwrap()
    };
    assert_eq!(code(&["sh", "-c", "exit 0"]), 0);
    assert_eq!(code(&["sh", "-c", "exit 3"]), 3);
    assert_eq!(code(&["sh", "-c", "exit 255"]), 255);
    assert_eq!(
        code(&["sh", "-c", "kill -9 $$"]),
        1,
        "a signal is 1, not 137"
    );
    assert_eq!(code(&["sh", "-c", "kill -TERM $$"]), 1);
    let o = bed.run(&["spill", "--", "surely-not-a-command-hmn"]);
    assert_eq!(o.status.code(), Some(1));
    assert_eq!(
        stderr(&o),
        "hmn: failed to spawn \"surely-not-a-command-hmn\": command not found\n"
    );
    assert_eq!(stdout(&o), "");
    // Usage errors are clap's: exit 2.
    for args in [
        &["spill"][..],
        &["spill", "--interval", "0", "--", "true"],
        &["spill", "--interval", "soon", "--", "true"],
        &["spill", "--device", "x", "--", "true"],
    ] {
        assert_eq!(bed.run(args).status.code(), Some(2), "{args:?}");
    }
}

#[test]
fn the_json_follows_the_commands_output_with_upstreams_keys_first() {
    let bed = Bed::new().real_proc();
    let o = bed.run(&[
        "spill",
        "--json",
        "--interval",
        "20ms",
        "--",
        "sh",
        "-c",
        "echo child-out; echo child-err >&2",
    ]);
    assert_eq!(o.status.code(), Some(0));
    let out = stdout(&o);
    assert!(
        out.starts_with("child-out\n{\"measurable\":false,"),
        "{out}"
    );
    let v = report(&o);
    let keys: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    // serde_json's map is sorted, so compare the key set here and the order in the text.
    assert_eq!(keys.len(), 13, "{keys:?}");
    let line = out.lines().last().unwrap();
    let order = [
        "measurable",
        "spilled",
        "observations",
        "baseline_shared_bytes",
        "peak_shared_bytes",
        "peak_dedicated_bytes",
        "dedicated_limit_bytes",
        "total_spill_duration_ms",
        "episodes",
        "schema",
        "device",
        "unmeasurable_reason",
        "tree_drm",
    ];
    let at: Vec<usize> = order
        .iter()
        .map(|k| line.find(&format!("\"{k}\":")).unwrap())
        .collect();
    assert!(at.windows(2).all(|w| w[0] < w[1]), "{line}");
    assert_eq!(v["observations"], 0);
    assert_eq!(v["episodes"], Value::Array(vec![]));
    assert_eq!(
        v["unmeasurable_reason"],
        "no GPU at index 0 (0 devices found)"
    );
    let err = stderr(&o);
    assert!(
        err.starts_with("child-err\nhmn spill: spill not measurable on GPU 0: no GPU at index 0"),
        "{err}"
    );
}

#[test]
fn nvidia_is_not_measurable_and_the_childs_code_passes() {
    let bed = Bed::with_nvml(&FakeNvml::h100s(1)).real_proc();
    let o = bed.run(&["spill", "--json", "--", "sh", "-c", "exit 3"]);
    assert_eq!(o.status.code(), Some(3));
    let v = report(&o);
    assert_eq!(v["measurable"], false);
    assert_eq!(v["spilled"], false);
    let reason = v["unmeasurable_reason"].as_str().unwrap();
    assert!(reason.starts_with("NVIDIA on Linux: "), "{reason}");
    assert!(
        stderr(&o).starts_with("hmn spill: spill not measurable on GPU 0: NVIDIA on Linux: "),
        "{}",
        stderr(&o)
    );
}

/// A shell script that becomes a DRM client of the fixture amdgpu card (its own `stat`, fd and
/// fdinfo in the fixture `/proc`, and its parent's `stat`: hmn's guard, where hmn has one,
/// which hmn follows the tree from), then fills VRAM and pushes 1 GiB into GTT (device-wide, in
/// the fixture `/sys`) while 512 MiB of its own buffers are evicted, then recovers.
const SCRIPT: &str = r#"
set -e
d="$HMN_PROC_ROOT/$$"
card="$HMN_SYS_ROOT/devices/0000:03:00.0"
mkdir -p "$d/fd" "$d/fdinfo"
put() { printf '%s\n' "$2" > "$1.tmp"; mv "$1.tmp" "$1"; }
client() {
  printf 'pos:\t0\nflags:\t02100002\ndrm-driver:\tamdgpu\ndrm-client-id:\t900\ndrm-pdev:\t0000:03:00.0\ndrm-total-vram:\t1048576 KiB\ndrm-resident-vram:\t%s KiB\ndrm-total-gtt:\t%s KiB\ndrm-resident-gtt:\t%s KiB\namd-evicted-vram:\t%s KiB\n' \
    "$((1048576 - $1))" "$2" "$2" "$1" > "$d/fdinfo/5.tmp"
  mv "$d/fdinfo/5.tmp" "$d/fdinfo/5"
}
client 0 2048
ln -s /dev/dri/renderD128 "$d/fd/5"
mkdir -p "$HMN_PROC_ROOT/$PPID"
put "$HMN_PROC_ROOT/$PPID/stat" "$PPID (hmn) S 1 $PPID $PPID 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 424200 1000 100"
put "$d/stat" "$$ (sh) S $PPID $$ $$ 0 -1 4194304 0 0 0 0 0 0 0 0 20 0 1 0 424242 1000 100"
sleep 0.6
put "$card/mem_info_vram_used" 8000000000
put "$card/mem_info_gtt_used" 1134247936
client 524288 526336
sleep 0.6
put "$card/mem_info_vram_used" 4000000000
put "$card/mem_info_gtt_used" 60506112
client 0 2048
sleep 0.4
exit 7
"#;

#[test]
fn a_drm_card_spills_while_the_commands_buffers_are_evicted() {
    let bed = Bed::new();
    bed.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128));
    let script = bed.path("evict.sh");
    std::fs::write(&script, SCRIPT).unwrap();
    let o = bed.run(&[
        "spill",
        "--json",
        "--interval",
        "50ms",
        "--",
        "sh",
        script.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(7), "{}", stderr(&o));
    let v = report(&o);
    assert_eq!(v["measurable"], true, "{v}");
    assert_eq!(v["unmeasurable_reason"], Value::Null);
    assert_eq!(v["spilled"], true, "{v}");
    assert_eq!(v["dedicated_limit_bytes"], 8_573_157_376u64);
    assert_eq!(v["baseline_shared_bytes"], 60_506_112u64);
    assert_eq!(v["peak_shared_bytes"], 1_134_247_936u64);
    assert_eq!(v["peak_dedicated_bytes"], 8_000_000_000u64);
    let episodes = v["episodes"].as_array().unwrap();
    assert_eq!(episodes.len(), 1, "{v}");
    let ep = &episodes[0];
    assert!(
        ep["end_label"].is_string(),
        "recovered before the end: {ep}"
    );
    assert!(ep["observations"].as_u64().unwrap() >= 2, "{ep}");
    assert!(ep["start_label"].as_str().unwrap().starts_with('+'));

    let tree = v["tree_drm"].as_array().unwrap();
    assert_eq!(tree.len(), 1, "{v}");
    let t = &tree[0];
    assert_eq!(t["device_index"], 0);
    assert_eq!(t["baseline_evicted_bytes"], 0);
    assert_eq!(t["peak_evicted_bytes"], 512 * MIB);
    assert_eq!(t["baseline_gtt_bytes"], 2 * MIB);
    assert_eq!(t["peak_gtt_bytes"], 514 * MIB);
    assert_eq!(t["peak_vram_bytes"], 1024 * MIB);

    let err = stderr(&o);
    assert!(
        err.contains("hmn spill: peak dedicated 7.5 GiB / 8 GiB\n"),
        "{err}"
    );
    assert!(err.contains("episodes       1 — total "), "{err}");
    assert!(
        err.contains(
            "hmn spill: the command's own buffers on GPU 0: evicted from VRAM peak 512 MiB \
             (+512 MiB); GTT-resident 2 MiB → peak 514 MiB (+512 MiB)"
        ),
        "{err}"
    );
}

#[test]
fn a_forwarded_sigterm_still_writes_the_report() {
    let bed = Bed::new().real_proc();
    let child = spawn_group(&bed, &["spill", "--json", "--", "sleep", "30"]);
    wait_for_child_process(child.id());
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id()).unwrap());
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
    let o = child.wait_with_output().unwrap();
    assert_eq!(o.status.code(), Some(1), "the command died by the signal");
    assert_eq!(report(&o)["measurable"], false);
    assert!(stderr(&o).contains("hmn spill: spill not measurable"));
}
