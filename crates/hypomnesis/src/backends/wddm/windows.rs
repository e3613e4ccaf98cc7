//! The Windows implementations of [`super::AdapterSource`] (DXGI) and
//! [`super::CounterSource`] (PDH) — FFI, compile-checked from Linux (Wine has no GPU counters).
//!
//! - DXGI: `CreateDXGIFactory1` → `EnumAdapters1(i)` until it fails → `GetDesc1`; an adapter
//!   whose description fails is skipped, not the end of the walk. The caller's own usage:
//!   `IDXGIAdapter3::QueryVideoMemoryInfo(0, LOCAL | NON_LOCAL)`. COM pointers never leave a call.
//! - PDH: per collection, `PdhOpenQueryW`, `PdhEnumObjectItemsW` for the set's instances,
//!   `PdhAddEnglishCounterW` (English names, so a localised Windows resolves them) for
//!   `Dedicated Usage` and `Shared Usage` of each, one `PdhCollectQueryData` (the counters are
//!   gauges: one sample is enough), `PdhGetFormattedCounterValue(PDH_FMT_LARGE)`; a negative or
//!   failed value is unreadable (`None`), never 0. The query is closed on every path (RAII).

// PDH is feature `pdh`; with `dxgi` alone its half is built but not dispatched.
#![cfg_attr(not(feature = "pdh"), allow(dead_code))]

use windows::Win32::Graphics::Dxgi::{
    CreateDXGIFactory1, DXGI_ADAPTER_FLAG_SOFTWARE, DXGI_MEMORY_SEGMENT_GROUP,
    DXGI_MEMORY_SEGMENT_GROUP_LOCAL, DXGI_MEMORY_SEGMENT_GROUP_NON_LOCAL,
    DXGI_QUERY_VIDEO_MEMORY_INFO, IDXGIAdapter1, IDXGIAdapter3, IDXGIFactory1,
};
use windows::Win32::System::Performance::{
    PDH_FMT_COUNTERVALUE, PDH_FMT_LARGE, PDH_HCOUNTER, PDH_HQUERY, PDH_MORE_DATA,
    PERF_DETAIL_WIZARD, PdhAddEnglishCounterW, PdhCloseQuery, PdhCollectQueryData,
    PdhEnumObjectItemsW, PdhGetFormattedCounterValue, PdhOpenQueryW,
};
use windows::core::{HSTRING, Interface as _, PCWSTR, PWSTR};

use super::join::{self, PciLocation};
use super::{Adapter, CounterSample, Luid, SegmentUsage, VideoMemory, parse};

/// DXGI, walked afresh on every call (no COM object is kept).
#[derive(Debug, Default)]
pub(crate) struct Dxgi;

fn adapters_raw() -> Result<Vec<(IDXGIAdapter1, Adapter)>, String> {
    // SAFETY: CreateDXGIFactory1 has no preconditions; the factory is released on drop.
    let factory: IDXGIFactory1 =
        unsafe { CreateDXGIFactory1() }.map_err(|e| format!("CreateDXGIFactory1 failed ({e})"))?;
    let mut out = Vec::new();
    for i in 0u32.. {
        // SAFETY: the factory is live; an index past the last adapter returns an error.
        let Ok(adapter) = (unsafe { factory.EnumAdapters1(i) }) else {
            break;
        };
        // SAFETY: the adapter is live; GetDesc1 only fills the returned struct.
        let Ok(d) = (unsafe { adapter.GetDesc1() }) else {
            continue;
        };
        let end = d
            .Description
            .iter()
            .position(|c| *c == 0)
            .unwrap_or(d.Description.len());
        let description = String::from_utf16_lossy(d.Description.get(..end).unwrap_or_default());
        let info = Adapter {
            luid: Luid {
                high: d.AdapterLuid.HighPart,
                low: d.AdapterLuid.LowPart,
            },
            vendor_id: d.VendorId,
            description: (!description.trim().is_empty()).then_some(description),
            dedicated_bytes: d.DedicatedVideoMemory as u64,
            shared_bytes: d.SharedSystemMemory as u64,
            software: d.Flags & (DXGI_ADAPTER_FLAG_SOFTWARE.0 as u32) != 0,
        };
        out.push((adapter, info));
    }
    Ok(out)
}

/// Where the adapter `luid` sits on the PCI bus: `D3DKMTOpenAdapterFromLuid`, then
/// `D3DKMTQueryAdapterInfo(KMTQAITYPE_ADAPTERADDRESS)`; the adapter handle is closed on every
/// path.
fn location(luid: Luid) -> Result<PciLocation, String> {
    use windows::Wdk::Graphics::Direct3D::{
        D3DKMT_ADAPTERADDRESS, D3DKMT_CLOSEADAPTER, D3DKMT_OPENADAPTERFROMLUID,
        D3DKMT_QUERYADAPTERINFO, D3DKMTCloseAdapter, D3DKMTOpenAdapterFromLuid,
        D3DKMTQueryAdapterInfo, KMTQAITYPE_ADAPTERADDRESS,
    };
    use windows::Win32::Foundation::LUID;
    let mut open = D3DKMT_OPENADAPTERFROMLUID {
        AdapterLuid: LUID {
            LowPart: luid.low,
            HighPart: luid.high,
        },
        hAdapter: 0,
    };
    // SAFETY: `open` is a valid, writable D3DKMT_OPENADAPTERFROMLUID; on success the call
    // writes the adapter handle into it, which is closed below.
    let st = unsafe { D3DKMTOpenAdapterFromLuid(&raw mut open) };
    if st.is_err() {
        return Err(format!("D3DKMTOpenAdapterFromLuid: {:#010x}", st.0));
    }
    let mut addr = D3DKMT_ADAPTERADDRESS::default();
    let mut query = D3DKMT_QUERYADAPTERINFO {
        hAdapter: open.hAdapter,
        Type: KMTQAITYPE_ADAPTERADDRESS,
        pPrivateDriverData: (&raw mut addr).cast(),
        PrivateDriverDataSize: std::mem::size_of::<D3DKMT_ADAPTERADDRESS>() as u32,
    };
    // SAFETY: the handle is open; `pPrivateDriverData` points to a D3DKMT_ADAPTERADDRESS of
    // the size given, live for the call.
    let st = unsafe { D3DKMTQueryAdapterInfo(&raw mut query) };
    let close = D3DKMT_CLOSEADAPTER {
        hAdapter: open.hAdapter,
    };
    // SAFETY: the handle was opened above and is closed only here.
    let _ = unsafe { D3DKMTCloseAdapter(&raw const close) };
    if st.is_err() {
        return Err(format!(
            "D3DKMTQueryAdapterInfo(ADAPTERADDRESS): {:#010x}",
            st.0
        ));
    }
    Ok(PciLocation {
        bus: addr.BusNumber,
        device: addr.DeviceNumber,
        function: addr.FunctionNumber,
    })
}

/// The DXGI adapter of the NVIDIA GPU at `id` (NVML's PCI address), joined by PCI location
/// ([`join::adapter_at`]), with the adapter itself for its COM calls.
fn nvidia_adapter(id: &crate::types::pci::PciBusId) -> Result<(IDXGIAdapter1, Adapter), String> {
    let mut nvidia: Vec<(IDXGIAdapter1, Adapter)> = adapters_raw()?
        .into_iter()
        .filter(|(_, a)| a.vendor_id == 0x10DE && a.is_gpu())
        .collect();
    let located: Vec<(Luid, Result<PciLocation, String>)> = nvidia
        .iter()
        .map(|(_, a)| (a.luid, location(a.luid)))
        .collect();
    let luid = join::adapter_at(id, &located)?;
    let pos = nvidia
        .iter()
        .position(|(_, a)| a.luid == luid)
        .ok_or_else(|| "the joined adapter vanished".to_string())?;
    Ok(nvidia.swap_remove(pos))
}

/// The caller's own dedicated video memory (`QueryVideoMemoryInfo` LOCAL `CurrentUsage`) on
/// the NVIDIA GPU at `id`: what upstream's `process_gpu_info` reports on Windows, where NVML's
/// per-process figures are `NVML_VALUE_NOT_AVAILABLE` under WDDM.
pub(crate) fn own_local_usage(id: &crate::types::pci::PciBusId) -> Result<u64, String> {
    let (adapter, _) = nvidia_adapter(id)?;
    Ok(segment(&adapter3(&adapter)?, DXGI_MEMORY_SEGMENT_GROUP_LOCAL)?.usage_bytes)
}

/// The adapter's `IDXGIAdapter3` face, which has `QueryVideoMemoryInfo`.
fn adapter3(adapter: &IDXGIAdapter1) -> Result<IDXGIAdapter3, String> {
    adapter
        .cast()
        .map_err(|e| format!("IDXGIAdapter3 unavailable (WDDM 2.0+ needed): {e}"))
}

fn segment(a: &IDXGIAdapter3, group: DXGI_MEMORY_SEGMENT_GROUP) -> Result<SegmentUsage, String> {
    let mut info = DXGI_QUERY_VIDEO_MEMORY_INFO::default();
    // SAFETY: the adapter is live and `info` is a writable DXGI_QUERY_VIDEO_MEMORY_INFO.
    unsafe { a.QueryVideoMemoryInfo(0, group, &raw mut info) }
        .map_err(|e| format!("QueryVideoMemoryInfo failed ({e})"))?;
    Ok(SegmentUsage {
        usage_bytes: info.CurrentUsage,
        budget_bytes: info.Budget,
    })
}

impl super::AdapterSource for Dxgi {
    fn adapters(&self) -> Result<Vec<Adapter>, String> {
        Ok(adapters_raw()?.into_iter().map(|(_, a)| a).collect())
    }

    fn own_usage(&self, luid: Luid) -> Result<VideoMemory, String> {
        let (adapter, _) = adapters_raw()?
            .into_iter()
            .find(|(_, a)| a.luid == luid)
            .ok_or_else(|| "no DXGI adapter with that LUID".to_string())?;
        let a3 = adapter3(&adapter)?;
        Ok(VideoMemory {
            local: segment(&a3, DXGI_MEMORY_SEGMENT_GROUP_LOCAL)?,
            non_local: segment(&a3, DXGI_MEMORY_SEGMENT_GROUP_NON_LOCAL)?,
        })
    }
}

/// A PDH query, closed on drop.
struct Query(PDH_HQUERY);

impl Drop for Query {
    fn drop(&mut self) {
        // SAFETY: the query was opened by PdhOpenQueryW and is closed only here.
        let _ = unsafe { PdhCloseQuery(self.0) };
    }
}

/// The instances of a counter set (`PdhEnumObjectItemsW`: a size probe, then the fetch).
fn instances(object: &str) -> Result<Vec<String>, String> {
    let name = HSTRING::from(object);
    let (mut counters_len, mut instances_len) = (0u32, 0u32);
    // SAFETY: null buffers with zero lengths ask for the sizes only.
    let st = unsafe {
        PdhEnumObjectItemsW(
            PCWSTR::null(),
            PCWSTR::null(),
            &name,
            None,
            &raw mut counters_len,
            None,
            &raw mut instances_len,
            PERF_DETAIL_WIZARD,
            0,
        )
    };
    if st != PDH_MORE_DATA && st != 0 {
        return Err(format!(
            "PdhEnumObjectItemsW failed (size query for {object}, PDH_STATUS = 0x{st:08X})"
        ));
    }
    if instances_len <= 1 {
        return Ok(Vec::new());
    }
    let mut counters = vec![0u16; counters_len as usize];
    let mut names = vec![0u16; instances_len as usize];
    // SAFETY: both buffers are live and as long as the lengths passed with them.
    let st = unsafe {
        PdhEnumObjectItemsW(
            PCWSTR::null(),
            PCWSTR::null(),
            &name,
            Some(PWSTR(counters.as_mut_ptr())),
            &raw mut counters_len,
            Some(PWSTR(names.as_mut_ptr())),
            &raw mut instances_len,
            PERF_DETAIL_WIZARD,
            0,
        )
    };
    if st != 0 {
        return Err(format!(
            "PdhEnumObjectItemsW failed (data fetch for {object}, PDH_STATUS = 0x{st:08X})"
        ));
    }
    Ok(parse::multi_sz(&names))
}

fn add(q: &Query, path: &str) -> Option<PDH_HCOUNTER> {
    let mut h = PDH_HCOUNTER::default();
    // SAFETY: the query is live and `h` is writable; the path is a NUL-terminated HSTRING.
    let st = unsafe { PdhAddEnglishCounterW(q.0, &HSTRING::from(path), 0, &raw mut h) };
    (st == 0).then_some(h)
}

fn value(h: Option<PDH_HCOUNTER>) -> Option<u64> {
    let mut v = PDH_FMT_COUNTERVALUE::default();
    // SAFETY: the counter belongs to a live, collected query and `v` is writable.
    let st = unsafe { PdhGetFormattedCounterValue(h?, PDH_FMT_LARGE, None, &raw mut v) };
    if st != 0 || v.CStatus != 0 {
        return None;
    }
    // SAFETY: PDH_FMT_LARGE fills the `largeValue` member of the union.
    u64::try_from(unsafe { v.Anonymous.largeValue }).ok()
}

/// One collection of `Dedicated Usage` and `Shared Usage` for every instance of `object`
/// whose name passes `keep`.
fn collect(object: &str, keep: fn(&str) -> bool) -> Result<Vec<CounterSample>, String> {
    let names: Vec<String> = instances(object)?.into_iter().filter(|n| keep(n)).collect();
    let mut raw = PDH_HQUERY::default();
    // SAFETY: a live source (null: the real-time data) and a writable handle.
    let st = unsafe { PdhOpenQueryW(PCWSTR::null(), 0, &raw mut raw) };
    if st != 0 {
        return Err(format!("PdhOpenQueryW failed (PDH_STATUS = 0x{st:08X})"));
    }
    let q = Query(raw);
    let handles: Vec<_> = names
        .iter()
        .map(|n| {
            (
                add(&q, &format!("\\{object}({n})\\Dedicated Usage")),
                add(&q, &format!("\\{object}({n})\\Shared Usage")),
            )
        })
        .collect();
    // SAFETY: the query is live.
    let st = unsafe { PdhCollectQueryData(q.0) };
    if st != 0 {
        return Err(format!(
            "PdhCollectQueryData failed (PDH_STATUS = 0x{st:08X})"
        ));
    }
    Ok(names
        .into_iter()
        .zip(handles)
        .map(|(instance, (d, s))| CounterSample {
            instance,
            dedicated_bytes: value(d),
            shared_bytes: value(s),
        })
        .collect())
}

/// PDH's GPU counter sets.
#[derive(Debug, Default)]
pub(crate) struct Pdh;

impl super::CounterSource for Pdh {
    fn process_memory(&mut self) -> Result<Vec<CounterSample>, String> {
        collect("GPU Process Memory", |n| {
            parse::process_instance(n).is_some()
        })
    }

    fn adapter_memory(&mut self) -> Result<Vec<CounterSample>, String> {
        collect("GPU Adapter Memory", |n| {
            parse::adapter_instance(n).is_some()
        })
    }
}

/// Whether `list` holds an NVIDIA device from NVML or `nvidia-smi`.
fn nvidia_listed(list: &crate::types::DeviceList) -> bool {
    use crate::types::Source;
    list.devices
        .iter()
        .any(|d| matches!(d.source, Source::Nvml | Source::NvidiaSmi))
}

/// The probe's seam (`Probe::collect` on Windows): appends the DXGI adapters NVML does not
/// cover, numbered after the devices already listed, and DXGI's backend status.
pub(crate) fn append_devices(list: &mut crate::types::DeviceList) {
    use super::AdapterSource as _;
    use crate::types::{Backend, BackendState, BackendStatus};
    let first = list.devices.iter().map(|d| d.index + 1).max().unwrap_or(0);
    let state = match Dxgi.adapters() {
        Ok(adapters) => {
            let memory = if cfg!(feature = "pdh") {
                super::CounterSource::adapter_memory(&mut Pdh)
            } else {
                Err("built without the pdh feature".to_string())
            };
            let found = super::devices::devices(&adapters, &memory, first, nvidia_listed(list));
            let n = u32::try_from(found.len()).unwrap_or(u32::MAX);
            list.devices.extend(found.into_iter().map(|(d, _)| d));
            if n == 0 {
                BackendState::absent(
                    crate::types::BackendCause::NoDevice,
                    "no DXGI adapter besides NVML's and the software renderer",
                )
            } else {
                BackendState::Active { devices: n }
            }
        }
        Err(reason) => BackendState::absent(crate::types::BackendCause::CallFailed, reason),
    };
    list.backends.push(BackendStatus::new(Backend::Dxgi, state));
}

/// The probe's seam (`Probe::gpu_usage` on Windows): PDH's per-process rows on the DXGI
/// devices of `list` (the same adapter walk numbers them as [`append_devices`] did).
pub(crate) fn processes(list: &crate::types::DeviceList) -> Vec<crate::types::GpuProcess> {
    use super::AdapterSource as _;
    use crate::types::Source;
    let Some(first) = list
        .devices
        .iter()
        .filter(|d| d.source == Source::Dxgi)
        .map(|d| d.index)
        .min()
    else {
        return Vec::new();
    };
    let Ok(adapters) = Dxgi.adapters() else {
        return Vec::new();
    };
    let listed: Vec<(u32, usize)> =
        super::devices::devices(&adapters, &Ok(Vec::new()), first, nvidia_listed(list))
            .into_iter()
            .map(|(d, pos)| (d.index, pos))
            .collect();
    let Ok(samples) = super::CounterSource::process_memory(&mut Pdh) else {
        return Vec::new();
    };
    super::devices::processes(&super::process_rows(&samples, &adapters), &listed)
}

impl crate::backends::spill::SpillSource for super::PdhSpill<Pdh> {
    fn read(&mut self) -> Option<crate::backends::spill::Reading> {
        self.sample()
    }
}

/// The spill seam (`compat::spill::resolve` on Windows): the PDH source of a DXGI device, or
/// why an NVML device's spill cannot be attributed; `None` for any other index.
pub(crate) fn spill_source(
    list: &crate::types::DeviceList,
    index: u32,
) -> Option<Result<Box<dyn crate::backends::spill::SpillSource>, String>> {
    use super::AdapterSource as _;
    use crate::types::Source;
    let dev = list.devices.iter().find(|d| d.index == index)?;
    if matches!(dev.source, Source::Nvml | Source::NvidiaSmi) {
        let Some(id) = dev.pci_bus_id else {
            return Some(Err(
                "NVIDIA on Windows: the device's PCI address is unknown, so it cannot be joined \
                 to its DXGI adapter for PDH's counters"
                    .to_string(),
            ));
        };
        return Some(nvidia_adapter(&id).map(|(_, a)| {
            Box::new(super::PdhSpill {
                counters: Pdh,
                luid: a.luid,
                limit_bytes: a.dedicated_bytes,
            }) as Box<dyn crate::backends::spill::SpillSource>
        }));
    }
    if dev.source != Source::Dxgi {
        return None;
    }
    let first = list
        .devices
        .iter()
        .filter(|d| d.source == Source::Dxgi)
        .map(|d| d.index)
        .min()?;
    let adapters = match Dxgi.adapters() {
        Ok(a) => a,
        Err(e) => return Some(Err(e)),
    };
    let (_, pos) = super::devices::devices(&adapters, &Ok(Vec::new()), first, nvidia_listed(list))
        .into_iter()
        .find(|(d, _)| d.index == index)?;
    let a = adapters.get(pos)?;
    Some(Ok(Box::new(super::PdhSpill {
        counters: Pdh,
        luid: a.luid,
        limit_bytes: a.dedicated_bytes,
    })))
}

/// Whether PDH's `GPU Adapter Memory` has any instance (upstream's rule; never an error).
pub(crate) fn spill_measurable() -> bool {
    instances("GPU Adapter Memory")
        .is_ok_and(|v| v.iter().any(|n| parse::adapter_instance(n).is_some()))
}
