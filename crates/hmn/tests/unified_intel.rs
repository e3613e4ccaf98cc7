//! Memory pools end to end (issue 23), Intel: integrated GPUs (i915, xe) whose pool is the
//! host's RAM with their clients' sum as used, and a discrete xe card measured by its clients'
//! VRAM — the device line, JSON and `fits`. (The other pools: `unified.rs`.)

use hmn_testbed::{FakeGpu, fdinfo_sample};

use crate::unified::device;
use crate::util::{Bed, json, stderr, stdout};

const GIB: u64 = 1 << 30;
const MIB: u64 = 1 << 20;
const KIB: u64 = 1 << 10;

#[test]
fn an_intel_igpu_is_host_ram_and_a_discrete_xe_card_its_clients_sum() {
    let bed = Bed::new();
    bed.gpu(FakeGpu::i915_igpu(0, 128));
    // The man page's i915 example (proc_pid_fdinfo.5): 6044 KiB resident in system0.
    bed.client(
        600,
        "gnome-shell",
        &[(
            9,
            "renderD128",
            &fdinfo_sample("i915-igpu-manpage.txt").unwrap(),
        )],
    );
    bed.gpu(
        FakeGpu::xe_dgpu("0000:03:00.0", 1, 129)
            .file("tile0/physical_vram_size_bytes", "12884901888"),
    );
    let xe = fdinfo_sample("xe-dgpu-doc.txt")
        .unwrap()
        .replace("drm-pdev:", "drm-pdev-was:");
    bed.client(601, "blender", &[(4, "renderD129", &xe)]);
    let o = bed.run(&["--json"]);
    let v = json(&o);
    let igpu = &v["devices"][0]["pool"];
    assert_eq!(igpu["kind"], "unified_host");
    assert_eq!(igpu["used_bytes"], 6044 * KIB);
    assert_eq!(igpu["used_source"], "client_sum");
    assert_eq!(igpu["total_bytes"], 24_684_084 * KIB);
    let xe = &v["devices"][1]["pool"];
    assert_eq!(xe["kind"], "dedicated");
    assert_eq!(xe["total_bytes"], 12 * GIB);
    assert_eq!(xe["used_bytes"], 23_992 * KIB);
    assert_eq!(xe["free_bytes"], 12 * GIB - 23_992 * KIB);
    let text = stdout(&bed.run(&[]));
    let lines: Vec<&str> = text.lines().collect();
    assert!(
        lines[0].contains("unified with host RAM, free 23.3 GiB / 23.5 GiB (the host's RAM), at least 5.9 MiB held by its DRM clients"),
        "{text}"
    );
    assert!(
        lines[1].contains(
            "free at most 12 GiB / 12 GiB, at least 23.4 MiB used (its DRM clients' resident VRAM)"
        ),
        "{text}"
    );
    // fits on the discrete card: against total − the clients' sum, said to be an upper bound.
    let o = bed.run(&["fits", "1GiB", "--device", "1", "--json"]);
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "free");
    assert!(
        v.to_string().contains("an upper bound"),
        "the verdict notes say so: {v}"
    );
    // fits on the iGPU: against the host's available RAM (its memory is the host's).
    let o = bed.run(&["fits", "1GiB", "--device", "0", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "host_available", "{v}");
    let available = igpu["free_bytes"].as_u64().unwrap();
    assert_eq!(v["devices"][0]["verdict"]["budget_bytes"], available, "{v}");
}

/// The kernel's xe example (xe_drm_client.c, formats.md §2.3) as an integrated GPU's client
/// prints it: at 0000:00:02.0, with no `vram0` region (an iGPU has none; its memory is in
/// `system` and `gtt`), client `id` holding `gtt_kib` of GTT and `system_kib` of system memory,
/// every one resident.
fn xe_igpu_client(id: u32, gtt_kib: u64, system_kib: u64) -> String {
    let doc = fdinfo_sample("xe-dgpu-doc.txt").unwrap();
    let mut text = String::new();
    for line in doc.lines().filter(|l| !l.contains("-vram0:")) {
        let line = match line.split_once(":\t") {
            Some(("drm-client-id", _)) => format!("drm-client-id:\t{id}"),
            Some(("drm-pdev", _)) => "drm-pdev:\t0000:00:02.0".to_string(),
            Some((key @ ("drm-total-gtt" | "drm-resident-gtt"), _)) => {
                format!("{key}:\t{gtt_kib} KiB")
            }
            Some((key @ ("drm-total-system" | "drm-resident-system"), _)) => {
                format!("{key}:\t{system_kib} KiB")
            }
            _ => line.to_string(),
        };
        text.push_str(&line);
        text.push('\n');
    }
    text
}

#[test]
fn an_intel_xe_igpu_is_host_ram_with_its_clients_sum_as_a_lower_bound() {
    let bed = Bed::new();
    bed.gpu(FakeGpu::xe_igpu(0, 128));
    // The compositor's 192 KiB of GTT (the example's figure), and a model in 4 GiB of GTT
    // beside 8 MiB of system memory.
    bed.client(
        600,
        "gnome-shell",
        &[(9, "renderD128", &xe_igpu_client(3, 192, 0))],
    );
    bed.client(
        601,
        "llama-server",
        &[(
            4,
            "renderD128",
            &xe_igpu_client(4, 4 * GIB / KIB, 8 * MIB / KIB),
        )],
    );
    let held = 192 * KIB + 4 * GIB + 8 * MIB;
    let d = device(&bed);
    assert_eq!(d["integrated"], true);
    let p = &d["pool"];
    assert_eq!(p["kind"], "unified_host");
    assert_eq!(p["total_bytes"], 24_684_084 * KIB);
    assert_eq!(p["free_bytes"], 24_444_784 * KIB);
    assert_eq!(p["used_bytes"], held, "{p}");
    assert_eq!(p["used_source"], "client_sum");
    assert_eq!(p["used_is_lower_bound"], true, "{p}");
    // Each client's GTT is its own: the row counts it with its system memory.
    let v = json(&bed.run(&["ps", "--json", "--sort", "pid"]));
    assert_eq!(v["processes"][1]["pid"], 601);
    assert_eq!(v["processes"][1]["used_bytes"], 4 * GIB + 8 * MIB, "{v}");
    let text = stdout(&bed.run(&[]));
    assert!(
        text.lines().next().unwrap().contains(
            "unified with host RAM, free 23.3 GiB / 23.5 GiB (the host's RAM), at least 4 GiB \
             held by its DRM clients"
        ),
        "{text}"
    );
    // fits: against the host's available RAM (its memory is the host's), so 30 GiB does not.
    let o = bed.run(&["fits", "1GiB", "--device", "0", "--json"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let v = json(&o);
    assert_eq!(v["devices"][0]["budget_source"], "host_available", "{v}");
    assert_eq!(
        v["devices"][0]["verdict"]["budget_bytes"],
        24_444_784 * KIB,
        "{v}"
    );
    let o = bed.run(&["fits", "30GiB", "--device", "0"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
}
