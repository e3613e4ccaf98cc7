//! DRM devices from sysfs: discovery under `<sys>/class/drm` and `<sys>/class/accel`, and the
//! device-wide memory, VRAM size and telemetry each driver exposes — which files those are is
//! the driver's entry in the table ([`driver`]); this module reads them. The
//! VRAM-size reader ([`vram_size_files`], [`read_vram_size`]) is spill's too.
//!
//! Nodes (`card1`, `renderD128`, `accel0`; never connectors like `card1-DP-1`) are resolved
//! independently through their `device` link and grouped by the device they belong to, so a
//! GPU's card and render nodes are one device. `renderD(128+N)` is *not* assumed to be `cardN`.
//!
//! A device whose `power/runtime_status` is `suspended` is not read any further: reading amdgpu
//! or xe attributes either wakes it or fails, so it is listed as suspended with its memory
//! unknown.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::driver::{
    self, Bytes, Clock, DeviceMemory, DrmDriver, Integrated, SysfsMemory, Utilization, VramSize,
    no_vram_use,
};
use super::pool;
use super::statics::Statics;
use crate::system::fsread;
use crate::system::kept::KeptFiles;
use crate::system::roots::Roots;
use crate::types::pci::PciBusId;
use crate::types::{
    Device, DeviceMemory as Memory, DeviceRegion, Field, RuntimeStatus, Source, Telemetry, Unknown,
    UnknownReason, Vendor,
};

/// A device found in sysfs, before it is read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Found {
    /// The device's sysfs directory (canonical).
    pub dir: PathBuf,
    /// Its PCI address, for PCI devices.
    pub pci: Option<PciBusId>,
    /// Its DRM/accel node names.
    pub nodes: Vec<String>,
    pub vendor_id: Option<u16>,
    pub device_id: Option<u16>,
    pub driver: Option<String>,
    pub runtime_status: Option<RuntimeStatus>,
    /// `subsystem_vendor` and `subsystem_device` (a PCI board's own ids).
    pub subsystem: Option<(u16, u16)>,
    /// `revision` (amdgpu.ids keys on it).
    pub revision: Option<u8>,
}

impl Found {
    pub(crate) fn suspended(&self) -> bool {
        self.runtime_status == Some(RuntimeStatus::Suspended)
    }

    pub(crate) fn vendor(&self) -> Vendor {
        match self.vendor_id {
            Some(0x1002) => Vendor::Amd,
            Some(0x8086) => Vendor::Intel,
            Some(0x10de) => Vendor::Nvidia,
            _ => Vendor::Other(self.driver.clone().unwrap_or_else(|| "unknown".to_string())),
        }
    }

    /// Its driver's entry in the table ([`driver::GENERIC`] when unlisted).
    pub(crate) fn entry(&self) -> &'static DrmDriver {
        driver::by_sysfs_name(self.driver.as_deref())
    }

    /// Whether it is integrated (its memory is system memory), when its driver's test can tell.
    pub(crate) fn integrated(&self) -> Option<bool> {
        self.entry().integrated(self.pci)
    }

    /// The PCI identity to look a name up by (cached kernel values: reading them never wakes
    /// a suspended device).
    pub(crate) fn pci_identity(&self) -> Option<crate::system::pci_ids::PciIdentity> {
        let (vendor, device) = (self.vendor_id?, self.device_id?);
        self.pci?;
        Some(crate::system::pci_ids::PciIdentity::new(
            vendor,
            device,
            self.subsystem,
            self.revision,
        ))
    }

    /// The card node (`cardN`), where per-card attributes such as i915 frequencies live.
    pub(crate) fn card_node(&self) -> Option<&str> {
        self.nodes
            .iter()
            .map(String::as_str)
            .find(|n| n.starts_with("card"))
    }
}

/// `true` for `card3`, `renderD128`, `accel0`; `false` for connectors and control files.
pub(crate) fn is_node_name(name: &str) -> bool {
    let digits = |rest: &str| !rest.is_empty() && rest.bytes().all(|b| b.is_ascii_digit());
    ["card", "renderD", "accel"]
        .iter()
        .any(|p| name.strip_prefix(p).is_some_and(digits))
}

/// Finds every DRM and accel device, grouped, non-GPUs dropped, in PCI bus order (non-PCI
/// devices after, by path).
pub(crate) fn discover(roots: &Roots) -> Vec<Found> {
    let mut by_dir: BTreeMap<PathBuf, Found> = BTreeMap::new();
    for class in ["drm", "accel"] {
        let Ok(entries) = fsread::list_dir(&roots.sys.join("class").join(class)) else {
            continue;
        };
        for entry in entries {
            let Some(name) = entry.file_name().map(|n| n.to_string_lossy().into_owned()) else {
                continue;
            };
            if !is_node_name(&name) {
                continue;
            }
            let Ok(dir) = std::fs::canonicalize(entry.join("device")) else {
                continue;
            };
            by_dir
                .entry(dir.clone())
                .or_insert_with(|| probe_device(dir))
                .nodes
                .push(name);
        }
    }
    let mut found: Vec<Found> = by_dir
        .into_values()
        .filter(|f| driver::is_gpu(f.driver.as_deref()))
        .collect();
    for f in &mut found {
        f.nodes.sort();
    }
    found.sort_by(|a, b| match (a.pci, b.pci) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => std::cmp::Ordering::Less,
        (None, Some(_)) => std::cmp::Ordering::Greater,
        (None, None) => a.dir.cmp(&b.dir),
    });
    found
}

/// Re-reads a found device's runtime status (whether it sleeps) through the backend's kept
/// files; `false` when its directory is gone (the finding is stale: discover again).
pub(crate) fn refresh(f: &mut Found, files: &mut SysfsFiles) -> bool {
    f.runtime_status = files
        .read_trimmed(&runtime_status_path(&f.dir))
        .map(|s| RuntimeStatus::parse(&s));
    f.runtime_status.is_some() || f.dir.exists()
}

/// The sysfs files a backend reads at every query, kept open between queries (by path): each
/// reading one `pread` of a file the kernel regenerates, as `nvtop` and `amdgpu_top` keep
/// theirs.
pub(crate) type SysfsFiles = KeptFiles<PathBuf>;

/// Where a device's runtime power status is.
fn runtime_status_path(dir: &Path) -> PathBuf {
    dir.join("power").join("runtime_status")
}

/// A device's `power/runtime_status`, when it has one.
fn runtime_status(dir: &Path) -> Option<RuntimeStatus> {
    fsread::read_trimmed(&runtime_status_path(dir))
        .ok()
        .map(|s| RuntimeStatus::parse(&s))
}

fn probe_device(dir: PathBuf) -> Found {
    let uevent = fsread::read_trimmed(&dir.join("uevent"))
        .ok()
        .unwrap_or_default();
    let field = |key: &str| {
        uevent
            .lines()
            .find_map(|l| l.strip_prefix(key).and_then(|v| v.strip_prefix('=')))
            .map(str::to_string)
    };
    let driver = field("DRIVER").or_else(|| {
        std::fs::read_link(dir.join("driver"))
            .ok()
            .and_then(|l| l.file_name().map(|n| n.to_string_lossy().into_owned()))
    });
    let pci = field("PCI_SLOT_NAME")
        .or_else(|| dir.file_name().map(|n| n.to_string_lossy().into_owned()))
        .and_then(|s| s.parse::<PciBusId>().ok());
    let hex = |name: &str| fsread::read_hex_u16(&dir.join(name)).ok();
    Found {
        vendor_id: hex("vendor"),
        device_id: hex("device"),
        subsystem: hex("subsystem_vendor").zip(hex("subsystem_device")),
        revision: hex("revision").and_then(|r| u8::try_from(r).ok()),
        runtime_status: runtime_status(&dir),
        dir,
        pci,
        nodes: Vec::new(),
        driver,
    }
}

/// Reads a found device into a [`Device`] with the given index: the figures its driver's
/// entry in the table ([`driver`]) names. `statics`: the device's unchanging facts, read now
/// or kept from an earlier query (asked for only when the device is awake); `files`: the figures
/// that move, read through files kept open.
pub(crate) fn read(
    roots: &Roots,
    f: &Found,
    index: u32,
    nvml_reason: Option<&str>,
    telemetry: bool,
    statics: &mut dyn FnMut() -> Statics,
    files: &mut SysfsFiles,
) -> Device {
    let mut d = Device::new(index, f.vendor(), Source::Sysfs);
    d.pci_bus_id = f.pci;
    d.driver.clone_from(&f.driver);
    d.runtime_status.clone_from(&f.runtime_status);
    d.pci_id = match (f.vendor_id, f.device_id) {
        (Some(v), Some(p)) => Some(format!("{v:04x}:{p:04x}")),
        _ => None,
    };
    if f.suspended() {
        for field in MEMORY_FIELDS.iter().chain(&[Field::Name, Field::Telemetry]) {
            d.unknown.push(Unknown::new(
                *field,
                UnknownReason::Suspended,
                "the device is runtime-suspended; reading it would wake it",
            ));
        }
        return d;
    }
    let statics = statics();
    d.driver_version.clone_from(&statics.driver_version);
    d.name.clone_from(&statics.name);
    if d.name.is_none() {
        d.unknown.push(Unknown::new(
            Field::Name,
            UnknownReason::Unsupported,
            "sysfs has no product name",
        ));
    }
    let drv = f.entry();
    match drv.memory {
        DeviceMemory::Sysfs(names) => sysfs_memory(f, names, files, &mut d),
        DeviceMemory::Nvml | DeviceMemory::None => other_memory(roots, f, nvml_reason, &mut d),
    }
    if drv.integrated == Integrated::Vddnb {
        pool::amdgpu(&statics.voltages, &mut d);
    }
    if telemetry {
        let hwmon = statics.hwmon.as_deref();
        d.telemetry = read_telemetry(roots, f, drv, hwmon, files, &mut d.unknown);
    } else {
        d.unknown.push(Unknown::new(
            Field::Telemetry,
            UnknownReason::NotRequested,
            "not read: ProbeOptions::telemetry is off",
        ));
    }
    d
}

/// A card's hwmon readings, busy counters and current clock (which files: its driver's entry).
fn read_telemetry(
    roots: &Roots,
    f: &Found,
    drv: &DrmDriver,
    hwmon: Option<&Path>,
    files: &mut SysfsFiles,
    unknown: &mut Vec<Unknown>,
) -> Telemetry {
    let mut t = hwmon_telemetry(hwmon, files, unknown);
    let mut get = |name: &str| files.read_u64(&f.dir.join(name));
    match drv.utilization {
        Utilization::Files { gpu, memory } => {
            t.utilization_percent = get(gpu).map(|v| v as f64);
            t.memory_utilization_percent = get(memory).map(|v| v as f64);
            for (field, v, file) in [
                (
                    Field::TelemetryUtilizationPercent,
                    t.utilization_percent,
                    gpu,
                ),
                (
                    Field::TelemetryMemoryUtilizationPercent,
                    t.memory_utilization_percent,
                    memory,
                ),
            ] {
                if v.is_none() {
                    let (reason, detail) = why_none(&f.dir.join(file), "not exposed by this ASIC");
                    unknown.push(Unknown::new(field, reason, detail));
                }
            }
        }
        Utilization::NoCounter => unknown.push(Unknown::new(
            Field::TelemetryUtilizationPercent,
            UnknownReason::Unsupported,
            format!(
                "{} has no device-wide busy counter in sysfs; see per-process engines",
                f.driver.as_deref().unwrap_or_default()
            ),
        )),
        Utilization::NotRead => {}
    }
    let mhz = match drv.clock {
        Clock::Hwmon => None,
        Clock::Device(file) => Some(get(file)),
        Clock::CardNode(names) => Some(f.card_node().and_then(|card| {
            let base = roots.sys.join("class/drm").join(card);
            names
                .iter()
                .find_map(|name| files.read_u64(&base.join(name)))
        })),
    };
    if let Some(mhz) = mhz {
        t.clock_graphics_mhz = mhz.and_then(|v| u32::try_from(v).ok());
    }
    t
}

/// A device's memory figures, in [`Memory::new`]'s order (total, used, free, reserved).
const MEMORY_FIELDS: [Field; 4] = [
    Field::MemoryTotalBytes,
    Field::MemoryUsedBytes,
    Field::MemoryFreeBytes,
    Field::MemoryReservedBytes,
];

/// Device memory from the driver's sysfs files (amdgpu).
fn sysfs_memory(f: &Found, names: &SysfsMemory, files: &mut SysfsFiles, d: &mut Device) {
    // Each file once per query: a region's files may be the device's own (amdgpu's VRAM).
    let mut read: Vec<(&str, Option<u64>)> = Vec::new();
    let mut get = |file: Bytes| {
        if let Some((_, v)) = read.iter().find(|(name, _)| *name == file.0) {
            return *v;
        }
        let v = files.read_u64(&f.dir.join(file.0));
        read.push((file.0, v));
        v
    };
    let (total, used) = (get(names.total), get(names.used));
    let free = total.zip(used).map(|(t, u)| t.saturating_sub(u));
    d.memory = Memory::new(total, used, free, None);
    for (field, v) in MEMORY_FIELDS.into_iter().zip([total, used, free]) {
        if v.is_none() {
            d.unknown.push(Unknown::new(
                field,
                UnknownReason::Unsupported,
                names.unreadable,
            ));
        }
    }
    d.unknown.push(Unknown::new(
        Field::MemoryReservedBytes,
        UnknownReason::Unsupported,
        names.reserved,
    ));
    for (region, total, used) in names.regions {
        let r = DeviceRegion::new(get(*total), get(*used));
        if r.total_bytes.is_some() || r.used_bytes.is_some() {
            d.regions.insert((*region).to_string(), r);
        }
    }
}

/// A device whose sysfs gives no memory figures, at most a VRAM size: integrated (its memory
/// is system memory), NVIDIA (NVML's), a VRAM size where a non-mainline driver exposes one,
/// or none.
fn other_memory(roots: &Roots, f: &Found, nvml_reason: Option<&str>, d: &mut Device) {
    let drv = f.entry();
    let name = f.driver.as_deref();
    if let (DeviceMemory::Nvml, Some(r)) = (drv.memory, nvml_reason) {
        let detail = format!("NVIDIA memory is read through NVML, which is unavailable: {r}");
        return unknown(d, &MEMORY_FIELDS, detail);
    }
    let integrated = f.integrated();
    d.integrated = integrated;
    if integrated == Some(true) {
        let detail = drv.integrated_memory_detail(name.unwrap_or("unknown driver"));
        unknown(d, &MEMORY_FIELDS, detail);
        return pool::unified(
            d,
            integrated_evidence(drv, name.unwrap_or("unknown driver")),
        );
    }
    let name = name.unwrap_or("this driver");
    if drv.vram_size == VramSize::None {
        return unknown(
            d,
            &MEMORY_FIELDS,
            format!("{name} exposes no device memory in sysfs"),
        );
    }
    let files = vram_size_files(roots, f);
    d.memory.total_bytes = read_vram_size(&files);
    let missing = d.memory.total_bytes.is_none().then(|| {
        if files.is_empty() {
            drv.vram_size.missing(name)
        } else {
            format!("{} not readable", display_paths(&files))
        }
    });
    if let Some(detail) = &missing {
        unknown(d, &MEMORY_FIELDS[..1], detail.clone());
    }
    unknown(d, &MEMORY_FIELDS[1..], no_vram_use(name));
    if integrated == Some(false) {
        let total = d.memory.total_bytes;
        pool::client_sum_dedicated(d, total, missing.as_deref());
    }
}

/// Why an integrated device of driver `drv` (`name` as sysfs gave it) shares the host's RAM.
fn integrated_evidence(drv: &DrmDriver, name: &str) -> String {
    match drv.integrated {
        Integrated::AtIntelIgpuSlot => "at PCI 0000:00:02.0, the slot reserved for Intel's \
            integrated GPU: its memory is the host's RAM"
            .to_string(),
        _ => format!(
            "{name} has no PCI address: a SoC GPU on a platform bus, whose memory is the host's \
             RAM"
        ),
    }
}

/// Marks `fields` unknown (unsupported) for one reason.
fn unknown(d: &mut Device, fields: &[Field], detail: String) {
    for field in fields {
        d.unknown.push(Unknown::new(
            *field,
            UnknownReason::Unsupported,
            detail.clone(),
        ));
    }
}

/// The paths, comma-separated.
fn display_paths(files: &[PathBuf]) -> String {
    files
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The files giving a found device's VRAM size, as its driver's entry names them, those that
/// exist (deciding from existence never wakes the device): one per tile (xe, non-mainline),
/// one on the card node (i915, Intel's backport), the device's own (amdgpu).
pub(crate) fn vram_size_files(roots: &Roots, f: &Found) -> Vec<PathBuf> {
    let files: Vec<PathBuf> = match f.entry().vram_size {
        VramSize::None => Vec::new(),
        VramSize::Device(file) => vec![f.dir.join(file.0)],
        VramSize::PerTile { file, .. } => {
            let mut tiles: Vec<PathBuf> = fsread::list_dir(&f.dir)
                .unwrap_or_default()
                .into_iter()
                .filter(|p| {
                    p.file_name()
                        .and_then(|n| n.to_str())
                        .and_then(|n| n.strip_prefix("tile"))
                        .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
                })
                .map(|t| t.join(file.0))
                .collect();
            tiles.sort();
            tiles
        }
        VramSize::CardNode(file) => f
            .card_node()
            .map(|card| roots.sys.join("class/drm").join(card).join(file.0))
            .into_iter()
            .collect(),
    };
    files.into_iter().filter(|p| p.exists()).collect()
}

/// The VRAM size from `files` (summed), `None` when there are none or one cannot be read.
pub(crate) fn read_vram_size(files: &[PathBuf]) -> Option<u64> {
    if files.is_empty() {
        return None;
    }
    files.iter().try_fold(0u64, |sum, file| {
        Some(sum.saturating_add(fsread::read_u64(file).ok()?))
    })
}

/// Why a sysfs figure read nothing: its file is absent (`absent`: the driver does not expose
/// it), or there and not a number this reader takes (a negative busy counter, garbage).
fn why_none(path: &Path, absent: &str) -> (UnknownReason, String) {
    if path.exists() {
        (
            UnknownReason::Unreadable,
            format!("{}: not a number in range", path.display()),
        )
    } else {
        (UnknownReason::Unsupported, absent.to_string())
    }
}

/// Temperature, power, energy and clocks from hwmon; milli-°C, µW, µJ and Hz are converted.
fn hwmon_telemetry(
    hwmon: Option<&Path>,
    files: &mut SysfsFiles,
    unknown: &mut Vec<Unknown>,
) -> Telemetry {
    let mut t = Telemetry::default();
    let Some(h) = hwmon else {
        unknown.push(Unknown::new(
            Field::Telemetry,
            UnknownReason::Unsupported,
            "no hwmon for this device",
        ));
        return t;
    };
    // hwmon temperatures are signed millidegrees (a device below 0 °C reads negative).
    t.temperature_celsius = ["temp1_input", "temp2_input"]
        .iter()
        .find_map(|n| files.read_trimmed(&h.join(n))?.parse::<i64>().ok())
        .map(|m| m as f64 / 1000.0);
    let mut get = |name: &str| files.read_u64(&h.join(name));
    t.power_watts = get("power1_average")
        .or_else(|| get("power1_input"))
        .map(|uw| uw as f64 / 1e6);
    t.energy_joules = get("energy1_input").map(|uj| uj as f64 / 1e6);
    let mhz = |hz: Option<u64>| hz.and_then(|v| u32::try_from(v / 1_000_000).ok());
    t.clock_graphics_mhz = mhz(get("freq1_input"));
    t.clock_memory_mhz = mhz(get("freq2_input"));
    for (field, missing, file) in [
        (
            Field::TelemetryTemperatureCelsius,
            t.temperature_celsius.is_none(),
            "temp1_input",
        ),
        (
            Field::TelemetryPowerWatts,
            t.power_watts.is_none(),
            "power1_average",
        ),
    ] {
        if missing {
            let (reason, detail) = why_none(&h.join(file), "not exposed by this device's hwmon");
            unknown.push(Unknown::new(field, reason, detail));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn node_names() {
        for n in ["card0", "card12", "renderD128", "accel0"] {
            assert!(is_node_name(n), "{n}");
        }
        for n in [
            "card0-DP-1",
            "card1-HDMI-A-1",
            "version",
            "renderD",
            "cardX",
            "ttm",
        ] {
            assert!(!is_node_name(n), "{n}");
        }
    }

    /// A busy counter or hwmon file that is there but not a number in range is unreadable
    /// (naming the file), not "not exposed" (QA); a temperature below 0 °C is a reading.
    #[test]
    fn a_file_that_is_there_but_unreadable_is_not_unsupported() {
        let dir = tempfile::tempdir().unwrap();
        let world = hmn_testbed::World::new(dir.path()).unwrap();
        world
            .gpu(hmn_testbed::FakeGpu::amdgpu("0000:03:00.0", 1, 128))
            .unwrap();
        let card = world.sys.root().join("devices/0000:03:00.0");
        std::fs::write(card.join("gpu_busy_percent"), "-1").unwrap();
        std::fs::write(card.join("hwmon/hwmon4/temp1_input"), "-5000").unwrap();
        std::fs::write(card.join("hwmon/hwmon4/power1_average"), "garbage").unwrap();
        let roots = Roots::system()
            .with_proc(dir.path().join("proc"))
            .with_sys(world.sys.root());
        let found = discover(&roots);
        let d = read(
            &roots,
            &found[0],
            0,
            None,
            true,
            &mut || Statics::read(&roots, &found[0].dir, found[0].driver.as_deref()),
            &mut SysfsFiles::new(fsread::Cap::SYSFS),
        );
        assert_eq!(d.telemetry.temperature_celsius, Some(-5.0));
        assert_eq!(d.telemetry.utilization_percent, None);
        let why = |field| d.unknown.iter().find(|u| u.field == field).unwrap();
        let busy = why(Field::TelemetryUtilizationPercent);
        assert_eq!(busy.reason, UnknownReason::Unreadable);
        assert!(busy.detail.contains("gpu_busy_percent"), "{}", busy.detail);
        assert_eq!(
            why(Field::TelemetryPowerWatts).reason,
            UnknownReason::Unreadable
        );
        // The memory busy file the fixture lacks is what the ASIC does not expose.
        let absent = why(Field::TelemetryMemoryUtilizationPercent);
        assert_eq!(absent.reason, UnknownReason::Unsupported);
        assert_eq!(absent.detail, "not exposed by this ASIC");
    }
}
