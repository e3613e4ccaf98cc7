//! Recordings of format version 1 (hmn 0.2.16 and before, when a snapshot had display types of
//! its own): each line is rewritten into version 2's shape and read as a [`Snapshot`], so an
//! old recording replays into the screens it showed then.
//!
//! Version 1 kept a device as version 2 does (plus a `suspended` flag that version 2 reads from
//! `runtime_status`) and a process row with the display text of a few values:
//! - `vram_bytes` is the row's `used_bytes`;
//! - `engines` maps each class to a percent (an NVIDIA row's `sm`, `encoder`, `decoder`
//!   among them) where version 2 has `{"busy_percent": …}`;
//! - `workload` is `{kind, name}` with `hmn ps`'s label as the name: it becomes a workload of
//!   that kind whose label is that text;
//! - `mig` is the MIG cell (`1g.10gb GI 1 CI 0`): the GI and CI ids go to the row and the
//!   profile to a MIG device of the row's GPU;
//! - `name` is the escaped text as shown (it is shown the same).
//!
//! The host's `MemFree`, which version 1 did not keep and `top` does not show, reads as
//! `MemAvailable`.

use serde_json::{Map, Value, json};

use super::snapshot::Snapshot;

/// Reads a version-1 line as a snapshot.
///
/// # Errors
/// When the line is not a version-1 snapshot, in one line.
pub fn read(line: &[u8]) -> Result<Snapshot, String> {
    let mut v: Value = serde_json::from_slice(line).map_err(|e| format!("not a snapshot: {e}"))?;
    if let Some(h) = v.get_mut("host").and_then(Value::as_object_mut) {
        if let Some(available) = h.get("memory_available_bytes").cloned() {
            h.entry("memory_free_bytes").or_insert(available);
        }
    }
    let mut mig: Vec<(u64, u64, Option<String>)> = Vec::new();
    if let Some(rows) = v.get_mut("processes").and_then(Value::as_array_mut) {
        for row in rows.iter_mut().filter_map(Value::as_object_mut) {
            if let Some(found) = process(row) {
                mig.push(found);
            }
        }
    }
    if let Some(devices) = v.get_mut("devices").and_then(Value::as_array_mut) {
        for (gpu, index, profile) in mig {
            let Some(d) = devices
                .iter_mut()
                .filter_map(Value::as_object_mut)
                .find(|d| d.get("index").and_then(Value::as_u64) == Some(gpu))
            else {
                continue;
            };
            let state = d.entry("mig").or_insert_with(
                || json!({"current": "enabled", "pending": "enabled", "instances": []}),
            );
            let Some(instances) = state.get_mut("instances").and_then(Value::as_array_mut) else {
                continue;
            };
            if !instances.iter().any(|i| i["index"].as_u64() == Some(index)) {
                instances.push(json!({
                    "index": index,
                    "parent_index": gpu,
                    "profile": profile,
                    "memory": {},
                }));
            }
        }
    }
    serde_json::from_value(v).map_err(|e| format!("not a snapshot: {e}"))
}

/// Rewrites one process row; returns its MIG device (GPU, index, profile) when it is in one.
fn process(row: &mut Map<String, Value>) -> Option<(u64, u64, Option<String>)> {
    if let Some(vram) = row.remove("vram_bytes") {
        row.insert("used_bytes".into(), vram);
    }
    if let Some(engines) = row.get_mut("engines").and_then(Value::as_object_mut) {
        for percent in engines.values_mut() {
            *percent = json!({ "busy_percent": percent.take() });
        }
    }
    if let Some(w) = row.get_mut("workload").and_then(Value::as_object_mut) {
        let label = w.remove("name").unwrap_or(Value::Null);
        let text = label.as_str().unwrap_or_default().to_string();
        // The label of a workload of each kind, given only its text: a pod's is `pod:` and its
        // UID, a unit's `unit:` and its name, any other kind's (with nothing else known) its
        // cgroup path.
        match w.get("kind").and_then(Value::as_str) {
            Some("pod") => {
                let uid = text.strip_prefix("pod:").unwrap_or(&text);
                w.insert("pod_uid".into(), uid.into());
            }
            Some("unit") => {
                let unit = text.strip_prefix("unit:").unwrap_or(&text);
                w.insert("unit".into(), unit.into());
            }
            _ => {}
        }
        w.insert("cgroup".into(), label);
    }
    let cell = row.remove("mig")?;
    let gpu = row.get("device_index")?.as_u64()?;
    let index = row.get("mig_index")?.as_u64()?;
    // `{profile} GI {id} CI {id}`, each id `?` when unknown, the profile `#{index}`.
    let cell = cell.as_str()?;
    let (rest, ci) = cell.rsplit_once(" CI ")?;
    let (profile, gi) = rest.rsplit_once(" GI ")?;
    let id = |t: &str| t.parse::<u64>().map_or(Value::Null, Value::from);
    row.insert("gpu_instance_id".into(), id(gi));
    row.insert("compute_instance_id".into(), id(ci));
    let profile = (profile != format!("#{index}")).then(|| profile.to_string());
    Some((gpu, index, profile))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_version_1_row_reads_as_the_library_row_it_showed() {
        let line = br#"{"format":"hmn-top","version":1,"unix_ms":5,"interval_ms":1000,"collect_ms":1,
            "host":{"memory_total_bytes":100,"memory_available_bytes":60,"swap_total_bytes":0,"swap_free_bytes":0},
            "devices":[{"index":0,"name":"H100","vendor":"nvidia","source":"nvml","suspended":false,
              "memory":{"total_bytes":10,"used_bytes":4,"free_bytes":6,"reserved_bytes":null},
              "telemetry":{"utilization_percent":37.0}}],
            "processes":[{"pid":7,"name":"py\\x1b","user":"root","uid":0,"device_index":0,
              "kind":"compute+graphics","vram_bytes":4,"rss_bytes":null,
              "engines":{"sm":37.0,"encoder":5.0},"workload":{"kind":"pod","name":"pod:u1/docker:4e9a"},
              "mig_index":2,"mig":"1g.10gb GI 11 CI ?","source":"nvml",
              "unknown":[{"field":"rss_bytes","reason":"unreadable","detail":"gone"}]}],
            "processes_total":1,"processes_omitted":0}"#;
        let s = read(line).unwrap();
        let host = s.host.unwrap();
        assert_eq!(host.memory_free_bytes, host.memory_available_bytes);
        let r = &s.processes[0];
        assert_eq!(r.gpu.used_bytes, Some(4));
        assert_eq!(r.name_or_unknown(), "py\\x1b", "shown as it was");
        assert_eq!(r.gpu.kind, hypomnesis::ProcessKind::ComputeGraphics);
        assert_eq!(r.busiest_engine(), Some(("sm", 37.0)));
        assert_eq!(r.workload_label().as_deref(), Some("pod:u1/docker:4e9a"));
        assert_eq!(
            (r.gpu.gpu_instance_id, r.gpu.compute_instance_id),
            (Some(11), None)
        );
        assert_eq!(s.mig_cell(r).as_deref(), Some("1g.10gb GI 11 CI ?"));
        assert_eq!(r.gpu.unknown[0].field, hypomnesis::Field::RssBytes);
        for (kind, label) in [
            ("unit", "unit:ollama.service"),
            ("container", "docker:4e9a6f0b6d7c"),
            ("slurm", "slurm:4242.0"),
            ("other", "/user.slice"),
        ] {
            let text = String::from_utf8_lossy(line).replace(
                r#"{"kind":"pod","name":"pod:u1/docker:4e9a"}"#,
                &format!(r#"{{"kind":"{kind}","name":"{label}"}}"#),
            );
            let s = read(text.as_bytes()).unwrap();
            assert_eq!(s.processes[0].workload_label().as_deref(), Some(label));
        }
    }

    #[test]
    fn malformed_version_1_lines_are_refused() {
        for bad in [
            &b"{\"format\":\"hmn-top\",\"version\":1"[..],
            br#"{"format":"hmn-top","version":1,"unix_ms":"x"}"#,
            br#"{"format":"hmn-top","version":1,"unix_ms":1,"interval_ms":1,"collect_ms":1,"host":null,
                "devices":[],"processes":[{"pid":1,"kind":"warp","source":"nvml","device_index":0}],
                "processes_total":1,"processes_omitted":0}"#,
        ] {
            let e = read(bad).unwrap_err();
            assert!(e.starts_with("not a snapshot: "), "{e}");
        }
    }
}
