//! `hmn` with no subcommand, the device view: one line per device and a host RAM line (or
//! JSON schema 1).

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context as _;
use hypomnesis::select::CudaView;
use hypomnesis::{
    BackendStatus, ComputeMode, Device, Field, HostMemory, MigDevice, MigMode, Probe, Source,
    Vendor, Warning,
};
use serde::Serialize;

use crate::args::GlobalArgs;
use crate::format::{bytes, opt_bytes, sanitize};
use crate::output;

/// `hmn --json` (schema 1).
#[derive(Serialize)]
struct DevicesJson<'a> {
    schema: u32,
    host: &'a HostMemory,
    devices: &'a [Device],
    warnings: &'a [Warning],
    backends: &'a [BackendStatus],
    /// With `--cuda-order`: the devices CUDA would see, in its order.
    #[serde(skip_serializing_if = "Option::is_none")]
    cuda: Option<&'a CudaView>,
}

pub fn run(probe: &Probe, g: &GlobalArgs, out: &mut dyn Write) -> anyhow::Result<ExitCode> {
    let host = probe.host_memory().context("reading host memory")?;
    let list = probe.devices();
    let cuda = crate::select::cuda(g, &list.devices);
    if g.json {
        output::json_line(
            out,
            &DevicesJson {
                schema: 1,
                host: &host,
                devices: &list.devices,
                warnings: &list.warnings,
                backends: &list.backends,
                cuda: cuda.as_ref(),
            },
        )?;
    } else {
        for dev in &list.devices {
            writeln!(out, "{}", device_line(dev))?;
            for m in dev.mig.iter().flat_map(|m| &m.instances) {
                writeln!(out, "{}", mig_line(m))?;
            }
            for line in health_lines(dev) {
                writeln!(out, "{line}")?;
            }
        }
        writeln!(out, "{}", host_line(&host))?;
        output::warnings(&list.warnings)?;
        if let Some(v) = &cuda {
            crate::select::note_cuda("", v, &list.devices)?;
        }
    }
    out.flush()?;
    // Upstream's contract, the library's verdict (`DeviceList::completeness`): exit 2 when GPUs
    // may exist that nothing can show — a backend that is here but broken, or devices that
    // were counted but none of which could be read; no GPU at all (no library, driver not
    // loaded, none found) stays 0.
    let complete = list.completeness();
    for failed in &complete.failed_backends {
        output::note(&format!("failed to count devices: {failed}"))?;
    }
    if complete.nothing_read && !list.devices.is_empty() {
        output::note(&format!(
            "{} GPU(s) enumerated but none readable.",
            complete.failed_devices.len()
        ))?;
    }
    if list.devices.is_empty() && complete.failed_backends.is_empty() {
        output::note(&output::no_gpu_line(&list.absent_reasons()))?;
    }
    Ok(ExitCode::from(if complete.is_failure() { 2 } else { 0 }))
}

/// The device's memory-health findings, one indented line each (`  memory health: fail: 2
/// uncorrectable ECC errors since the driver loaded; drain the GPU; …`); none when clean or
/// not read.
pub fn health_lines(dev: &Device) -> Vec<String> {
    dev.health.as_ref().map_or_else(Vec::new, |h| {
        h.findings()
            .iter()
            .map(|f| {
                format!(
                    "  memory health: {}: {}; {}",
                    f.severity,
                    sanitize(&f.what),
                    f.remedy
                )
            })
            .collect()
    })
}

/// `GPU 0 [name]: free X / Y, Z reserved, driver V`.
///
/// A device with a memory pool shows the pool instead of its own figures: an AMD APU's
/// carve-out plus GTT, host RAM for unified memory (with where the used figure comes from), a
/// discrete card whose use is the sum of its clients ([`crate::pool::memory_part`]).
/// A DRM device without a product name is named by vendor and PCI id (`AMD 1002:73ff`); its
/// driver is named with its version (`driver amdgpu 6.18.44`); a suspended device says so
/// instead of showing memory it did not read.
pub fn device_line(dev: &Device) -> String {
    let mut line = format!("GPU {}", dev.index);
    match (&dev.name, &dev.pci_id) {
        (Some(name), _) => line.push_str(&format!(" [{}]", sanitize(name))),
        (None, Some(id)) => {
            line.push_str(&format!(" [{} {}]", vendor_name(&dev.vendor), sanitize(id)))
        }
        (None, None) => {}
    }
    if let Some(err) = &dev.error {
        line.push_str(&format!(": unreadable ({})", sanitize(err)));
        return line;
    }
    let m = &dev.memory;
    if dev.is_suspended() && m.total_bytes.is_none() {
        line.push_str(": suspended (not read, so it can stay asleep)");
    } else if let Some(p) = &dev.pool {
        line.push_str(&format!(": {}", crate::pool::memory_part(dev, p)));
    } else if dev.integrated == Some(true) && m.total_bytes.is_none() {
        line.push_str(": shared system memory");
    } else {
        line.push_str(&format!(
            ": free {} / {}",
            opt_bytes(m.free_bytes),
            opt_bytes(m.total_bytes)
        ));
    }
    if let Some(r) = m.reserved_bytes.filter(|r| *r > 0) {
        line.push_str(&format!(", {} reserved", bytes(r)));
    }
    match (&dev.driver, &dev.driver_version) {
        (Some(d), Some(v)) if dev.vendor != Vendor::Nvidia => {
            line.push_str(&format!(", driver {} {}", sanitize(d), sanitize(v)));
        }
        (_, Some(v)) => line.push_str(&format!(", driver {}", sanitize(v))),
        (Some(d), None) if dev.vendor != Vendor::Nvidia => {
            line.push_str(&format!(", driver {}", sanitize(d)));
        }
        _ => {}
    }
    if dev.source == Source::NvidiaSmi {
        line.push_str(" (via nvidia-smi)");
    }
    // A mode other than the default decides who may run there (`hmn pick` heeds it).
    if let Some(mode) = dev.compute_mode.filter(|m| *m != ComputeMode::Default) {
        line.push_str(&format!(", compute mode {mode}"));
    }
    line.push_str(&mig_suffix(dev));
    let shown_elsewhere = dev.integrated == Some(true) || dev.is_suspended();
    let pool_total = dev.pool.as_ref().map(|p| p.total_bytes);
    if pool_total.unwrap_or(m.total_bytes).is_none() && !shown_elsewhere {
        let field = if pool_total.is_some() {
            Field::PoolTotalBytes
        } else {
            Field::MemoryTotalBytes
        };
        if let Some(u) = dev.unknown.iter().find(|u| u.field == field) {
            line.push_str(&format!(" — memory not reported: {}", sanitize(&u.detail)));
        }
    }
    line
}

/// `, MIG on (2 MIG devices)`, `, MIG on, no MIG device configured`, `, MIG off; on after the
/// next GPU reset` — nothing for a GPU without MIG, or with MIG off and nothing pending.
fn mig_suffix(dev: &Device) -> String {
    let Some(m) = &dev.mig else {
        return String::new();
    };
    let mut s = match (m.enabled(), m.instances.len()) {
        (true, 0) if m.unknown.iter().any(|u| u.field == Field::MigInstances) => {
            ", MIG on (MIG devices could not be listed)".to_string()
        }
        (true, 0) => ", MIG on, no MIG device configured".to_string(),
        (true, 1) => ", MIG on (1 MIG device)".to_string(),
        (true, n) => format!(", MIG on ({n} MIG devices)"),
        (false, _) if m.change_pending() => ", MIG off".to_string(),
        (false, _) => String::new(),
    };
    if m.change_pending() {
        s.push_str(&format!(
            "; {} after the next GPU reset (hmn never resets a GPU)",
            if m.pending == MigMode::Enabled {
                "on"
            } else {
                "off"
            }
        ));
    }
    s
}

/// `  MIG 1g.10gb  device 0, GI 11 CI 0: free X / Y, MIG-…` (the GPU instance's profile too
/// when it differs, as for a `+me` or subdivided instance).
pub fn mig_line(m: &MigDevice) -> String {
    let id = |v: Option<u32>| v.map_or_else(|| "?".to_string(), |v| v.to_string());
    let mut line = format!(
        "  {}{}  device {}, GI {} CI {}: free {} / {}",
        sanitize(&m.label()),
        if m.profile_approximate {
            " (approximate)"
        } else {
            ""
        },
        m.index,
        id(m.gpu_instance_id),
        id(m.compute_instance_id),
        opt_bytes(m.memory.free_bytes),
        opt_bytes(m.memory.total_bytes)
    );
    if let Some(p) = m
        .gpu_instance_profile
        .as_deref()
        .filter(|p| Some(*p) != m.profile.as_deref())
    {
        line.push_str(&format!(" (GPU instance {})", sanitize(p)));
    }
    if let Some(u) = &m.uuid {
        line.push_str(&format!(", {}", sanitize(u)));
    }
    line
}

fn vendor_name(v: &Vendor) -> &str {
    match v {
        Vendor::Amd => "AMD",
        Vendor::Intel => "Intel",
        Vendor::Nvidia => "NVIDIA",
        other => other.as_str(),
    }
}

/// `RAM: X available / Y`.
pub fn host_line(h: &HostMemory) -> String {
    format!(
        "RAM: {} available / {}",
        bytes(h.memory_available_bytes),
        bytes(h.memory_total_bytes)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use hypomnesis::test_helpers::DeviceBuilder;

    #[test]
    fn device_line_matches_the_documented_shape() {
        let dev = DeviceBuilder::new(0)
            .name("NVIDIA H100 80GB HBM3")
            .memory(
                Some(81_559 << 20),
                Some(1 << 30),
                Some(80_000 << 20),
                Some(540 << 20),
            )
            .driver("nvidia", Some("550.54.15".into()))
            .build();
        assert_eq!(
            device_line(&dev),
            "GPU 0 [NVIDIA H100 80GB HBM3]: free 78.1 GiB / 79.6 GiB, 540 MiB reserved, driver 550.54.15"
        );
        let mut exclusive = dev.clone();
        exclusive.compute_mode = Some(ComputeMode::ExclusiveProcess);
        assert!(
            device_line(&exclusive).ends_with("driver 550.54.15, compute mode exclusive_process"),
            "{}",
            device_line(&exclusive)
        );
        let mut default = dev;
        default.compute_mode = Some(ComputeMode::Default);
        assert!(
            !device_line(&default).contains("compute mode"),
            "the default goes unsaid"
        );
    }

    #[test]
    fn mig_lines_name_profile_instance_and_memory() {
        use hypomnesis::{DeviceMemory, MigState};
        let mut m = MigDevice::new(1, 0);
        m.profile = Some("1g.10gb".into());
        m.gpu_instance_profile = Some("1g.10gb+me".into());
        m.gpu_instance_id = Some(11);
        m.compute_instance_id = Some(0);
        m.uuid = Some("MIG-8443".into());
        m.memory = DeviceMemory::new(Some(9984 << 20), Some(15 << 20), Some(9969 << 20), None);
        assert_eq!(
            mig_line(&m),
            "  MIG 1g.10gb  device 1, GI 11 CI 0: free 9.7 GiB / 9.8 GiB (GPU instance 1g.10gb+me), MIG-8443"
        );
        m.profile_approximate = true;
        m.gpu_instance_id = None;
        m.memory = DeviceMemory::default();
        assert!(
            mig_line(&m)
                .starts_with("  MIG 1g.10gb (approximate)  device 1, GI ? CI 0: free ? / ?"),
            "{}",
            mig_line(&m)
        );
        let mut dev = DeviceBuilder::new(0).build();
        assert_eq!(mig_suffix(&dev), "");
        dev.mig = Some(MigState::new(MigMode::Disabled, MigMode::Disabled));
        assert_eq!(mig_suffix(&dev), "", "MIG-capable, off, nothing pending");
        dev.mig = Some(MigState::new(MigMode::Enabled, MigMode::Disabled));
        assert_eq!(
            mig_suffix(&dev),
            ", MIG on, no MIG device configured; off after the next GPU reset (hmn never resets a GPU)"
        );
    }

    #[test]
    fn unknown_memory_is_a_question_mark_not_zero() {
        let dev = DeviceBuilder::new(1).name("NVIDIA GB10").build();
        assert_eq!(device_line(&dev), "GPU 1 [NVIDIA GB10]: free ? / ?");
        let dev = DeviceBuilder::new(2)
            .error("NVML refused the device handle: no permission")
            .build();
        assert_eq!(
            device_line(&dev),
            "GPU 2: unreadable (NVML refused the device handle: no permission)"
        );
    }
}
