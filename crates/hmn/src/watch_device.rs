//! `hmn watch`'s device figures: each device's memory no listed process accounts for
//! ([`Unattributed`], carried by the sampler's device samples: no query of its own) and the XID
//! events counted while the watch runs (a thread of its own, NVIDIA only). JSON: a `device`
//! record per device per interval and an `xid` record per new event; stderr: the unattributed
//! figures at the first sample, a line when one moves by [`MOVE`] or more, a line per new XID;
//! and the closing lines.

use std::collections::BTreeMap;
use std::io::Write;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use hypomnesis::sampler::Sample;
use hypomnesis::types::xid_meaning;
use hypomnesis::{DeviceList, Probe, Unattributed, Vendor};
use serde_json::{Value, json};

use crate::format::{bytes, sanitize};
use crate::health::{
    NewXids, SharedTally, unattributed_cell, unattributed_figure, unattributed_line, xid_words,
};
use crate::output;

/// How far a device's unattributed figure must move from the one last said for `watch` to say
/// it again (smaller moves are allocator noise; the JSON carries every figure).
pub const MOVE: u64 = 64 << 20;

/// The reason a device that is not NVIDIA's has no XID count.
const NOT_NVIDIA: &str = "XID events are NVIDIA's: this device has none to count";

/// What `watch` follows of the devices (see the [module docs](self)).
pub struct DeviceWatch {
    /// Indices of the NVIDIA devices (the only ones with XID events).
    nvidia: Vec<u32>,
    /// The XID tally the counter thread writes (none without an NVIDIA device).
    xid: Option<SharedTally>,
    /// Ends the counter thread when the watch ends.
    stop: Arc<AtomicBool>,
    new_xids: NewXids,
    /// Per device, the unattributed figure last said.
    said: BTreeMap<u32, u64>,
    /// Per device, the largest unattributed figure seen.
    peak: BTreeMap<u32, u64>,
    /// Every device's figure at the latest sample.
    last: Vec<Unattributed>,
}

impl DeviceWatch {
    /// Starts counting XID events when an NVIDIA device is present (on a probe of its own, as
    /// `serve` and `top` do).
    ///
    /// # Errors
    /// When the counter thread cannot be started.
    pub fn start(probe: &Probe, devices: &DeviceList) -> std::io::Result<DeviceWatch> {
        let nvidia: Vec<u32> = devices
            .devices
            .iter()
            .filter(|d| d.vendor == Vendor::Nvidia)
            .map(|d| d.index)
            .collect();
        let stop = Arc::new(AtomicBool::new(false));
        let xid = if nvidia.is_empty() {
            None
        } else {
            Some(crate::health::spawn_xid_counter(
                probe.options().clone(),
                Arc::clone(&stop),
                |s| s,
            )?)
        };
        Ok(DeviceWatch {
            nvidia,
            xid,
            stop,
            new_xids: NewXids::default(),
            said: BTreeMap::new(),
            peak: BTreeMap::new(),
            last: Vec::new(),
        })
    }

    /// Device `index`'s XID count so far, or why there is none.
    fn xid_count(&self, index: u32) -> Result<u64, String> {
        if !self.nvidia.contains(&index) {
            return Err(NOT_NVIDIA.to_string());
        }
        let Some(t) = self.xid.as_ref().and_then(|t| t.lock().ok()) else {
            return Err("the XID counter is not running".to_string());
        };
        t.count_on(index).map_err(ToString::to_string)
    }

    /// One sample's device figures: JSON records on `out` (with `json`), stderr lines when a
    /// figure moved or an XID arrived.
    ///
    /// # Errors
    /// When `out` or stderr cannot be written.
    pub fn observe(&mut self, s: &Sample, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
        let at = format!("hmn watch: +{:.1}s", s.t_ms as f64 / 1000.0);
        let first = self.last.is_empty();
        let mut said = Vec::new();
        for d in &s.devices {
            let u = &d.unattributed;
            if json {
                let mut line = json!({"kind": "device", "t_ms": s.t_ms, "unix_ms": s.unix_ms});
                if let (Some(o), Value::Object(fields)) =
                    (line.as_object_mut(), serde_json::to_value(d)?)
                {
                    o.extend(fields);
                    let (n, why) = match self.xid_count(d.index) {
                        Ok(n) => (Some(n), None),
                        Err(why) => (None, Some(why)),
                    };
                    o.insert("xid_events".into(), json!(n));
                    o.insert("xid_unknown_reason".into(), json!(why));
                }
                output::json_line(out, &line)?;
            }
            let Some(now) = u.bytes else {
                continue;
            };
            let peak = self.peak.entry(d.index).or_default();
            *peak = (*peak).max(now);
            match self.said.get(&d.index) {
                None if first => {}
                None => said.push(format!(
                    "{at} unattributed on GPU {}: ? → {}",
                    d.index,
                    unattributed_figure(u)
                )),
                Some(before) if now.abs_diff(*before) >= MOVE => said.push(format!(
                    "{at} unattributed on GPU {}: {} → {}",
                    d.index,
                    bytes(*before),
                    unattributed_figure(u)
                )),
                Some(_) => continue,
            }
            self.said.insert(d.index, now);
        }
        self.last = s.devices.iter().map(|d| d.unattributed.clone()).collect();
        if first {
            if let Some(line) = unattributed_line(&self.last) {
                said.insert(0, format!("{at} {line}"));
            }
        }
        said.extend(self.new_xids(s.t_ms, s.unix_ms, json, out)?);
        say(out, &said)
    }

    /// The XID events counted since the last look: an `xid` record each on `out` (with
    /// `json`), and their stderr lines returned.
    fn new_xids(
        &mut self,
        t_ms: u64,
        unix_ms: u64,
        json: bool,
        out: &mut dyn Write,
    ) -> anyhow::Result<Vec<String>> {
        let at = format!("hmn watch: +{:.1}s", t_ms as f64 / 1000.0);
        let news = match self.xid.as_ref().and_then(|t| t.lock().ok()) {
            Some(t) => self.new_xids.since_last(&t),
            None => Vec::new(),
        };
        let mut said = Vec::new();
        for (device, xid, n) in news {
            if json {
                let (meaning, class) = xid_meaning(xid);
                output::json_line(
                    out,
                    &json!({"kind": "xid", "t_ms": t_ms, "unix_ms": unix_ms,
                    "device_index": device, "xid": xid, "count": n,
                    "meaning": (!meaning.is_empty()).then_some(meaning), "class": class.as_str()}),
                )?;
            }
            let times = if n > 1 {
                format!(" ×{n}")
            } else {
                String::new()
            };
            said.push(format!("{at} GPU {device}: {}{times}", xid_words(xid)));
        }
        Ok(said)
    }

    /// At the end, before the closing report: the XID events that arrived after the last
    /// sample, said as the others were (so every event counted in the summary was said).
    ///
    /// # Errors
    /// When `out` or stderr cannot be written.
    pub fn finish(&mut self, t_ms: u64, json: bool, out: &mut dyn Write) -> anyhow::Result<()> {
        let said = self.new_xids(t_ms, crate::health::now_ms(), json, out)?;
        say(out, &said)
    }

    /// The closing report's lines: each device's unattributed figure at the end and its peak
    /// (where either is above zero), and the XID events counted on each NVIDIA device.
    pub fn closing_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        for u in &self.last {
            let peak = self.peak.get(&u.device_index).copied().unwrap_or(0);
            if u.bytes.is_some_and(|b| b > 0) || peak > 0 {
                out.push(format!(
                    "unattributed at the end: {}; peak {}",
                    unattributed_cell(u),
                    bytes(peak)
                ));
            }
        }
        let mut none = Vec::new();
        let mut counted = Vec::new();
        for i in &self.nvidia {
            match self.xid_count(*i) {
                Ok(0) => none.push(i.to_string()),
                Ok(total) => {
                    let kinds = self
                        .xid
                        .as_ref()
                        .and_then(|t| t.lock().ok())
                        .and_then(|t| t.counts.get(i).cloned())
                        .unwrap_or_default()
                        .into_iter()
                        .map(|(x, n)| format!("{} ×{n}", xid_words(x)))
                        .collect::<Vec<_>>();
                    counted.push(format!(
                        "XID events while watching on GPU {i}: {total} — {}",
                        kinds.join(", ")
                    ));
                }
                Err(why) => counted.push(format!(
                    "XID events on GPU {i}: not counted ({})",
                    sanitize(&why)
                )),
            }
        }
        if !none.is_empty() {
            out.push(format!(
                "XID events while watching: none on GPU {}",
                none.join(", ")
            ));
        }
        out.extend(counted);
        out
    }

    /// The summary record's fields: `unattributed` (every device at the end),
    /// `unattributed_peak_bytes` (per device) and `xid` (the tally; `null` without an NVIDIA
    /// device).
    pub fn summary_fields(&self) -> Value {
        let xid = self
            .xid
            .as_ref()
            .and_then(|t| t.lock().ok())
            .map(|t| t.clone());
        json!({"unattributed": self.last, "unattributed_peak_bytes": self.peak, "xid": xid})
    }
}

/// Flushes `out` (its records go first), then writes `lines` on stderr, one each.
fn say(out: &mut dyn Write, lines: &[String]) -> anyhow::Result<()> {
    out.flush()?;
    for line in lines {
        output::report(&format!("{}\n", sanitize(line)))?;
    }
    Ok(())
}

impl Drop for DeviceWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}
