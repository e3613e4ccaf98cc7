//! Pure conversions for the NVML backend: decoding process-info buffers, a compute mode, detecting the stride the
//! driver wrote, guarding per-process values, merging the compute and graphics lists, and
//! classifying NVML errors. Nothing here calls NVML, so all of it is unit-tested with hand-built
//! bytes.
//!
//! # The process-struct stride
//! `nvmlDeviceGetComputeRunningProcesses_v3` writes `nvmlProcessInfo_t` records. Headers and
//! drivers disagree on its size: 24 bytes (`pid, usedGpuMemory, gpuInstanceId,
//! computeInstanceId`) in most releases, 32 bytes (an extra `usedGpuCcProtectedMemory`) in the
//! R535.43–535.86 ABI break and some later R535 drivers. A wrong guess shifts every row after the
//! first (nvitop #75, pynvml #48). We pre-fill the buffer with a sentinel byte, let the driver
//! write `n` records, and read the stride from how far it wrote; the records are then checked
//! for plausibility.

use std::collections::BTreeMap;

use crate::types::{
    ComputeMode, Field, GpuProcess, ProcessKind, QueryError, Source, Unknown, UnknownReason,
    Warning,
};

/// The byte the process buffer is pre-filled with before the driver writes into it.
pub(crate) const SENTINEL: u8 = 0xAA;
/// NVML's "not available" value for `usedGpuMemory` (`NVML_VALUE_NOT_AVAILABLE`).
pub(crate) const VALUE_NOT_AVAILABLE: u64 = u64::MAX;
/// `gpuInstanceId` / `computeInstanceId` when MIG is off.
const NO_INSTANCE: u32 = u32::MAX;
/// Linux's `PID_MAX_LIMIT` (2^22): no pid can be larger.
const PID_MAX: u32 = 1 << 22;

/// One record of an NVML process list, as the driver wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RawProcess {
    pub pid: u32,
    pub used: u64,
    pub gpu_instance_id: u32,
    pub compute_instance_id: u32,
}

/// The record layouts NVML has used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Layout {
    /// `nvmlProcessInfo_v1_t`: pid, pad, usedGpuMemory (16 bytes).
    V1,
    /// `nvmlProcessInfo_v2_t`: v1 + gpuInstanceId, computeInstanceId (24 bytes).
    V2,
    /// The R535 "v3": v2 + usedGpuCcProtectedMemory (32 bytes).
    V3Wide,
}

impl Layout {
    pub(crate) const fn stride(self) -> usize {
        match self {
            Layout::V1 => 16,
            Layout::V2 => 24,
            Layout::V3Wide => 32,
        }
    }
}

fn read_u32(buf: &[u8], at: usize) -> Option<u32> {
    let bytes: [u8; 4] = buf.get(at..at.checked_add(4)?)?.try_into().ok()?;
    Some(u32::from_ne_bytes(bytes))
}

fn read_u64(buf: &[u8], at: usize) -> Option<u64> {
    let bytes: [u8; 8] = buf.get(at..at.checked_add(8)?)?.try_into().ok()?;
    Some(u64::from_ne_bytes(bytes))
}

/// Decodes `count` records of `layout` from `buf`. `None` if the buffer is too short.
pub(crate) fn decode(buf: &[u8], count: usize, layout: Layout) -> Option<Vec<RawProcess>> {
    let stride = layout.stride();
    (0..count)
        .map(|i| {
            let base = i.checked_mul(stride)?;
            let (gi, ci) = match layout {
                Layout::V1 => (NO_INSTANCE, NO_INSTANCE),
                Layout::V2 | Layout::V3Wide => {
                    (read_u32(buf, base + 16)?, read_u32(buf, base + 20)?)
                }
            };
            Some(RawProcess {
                pid: read_u32(buf, base)?,
                used: read_u64(buf, base + 8)?,
                gpu_instance_id: gi,
                compute_instance_id: ci,
            })
        })
        .collect()
}

/// True when every record could be real: a pid the kernel could have issued and MIG instance
/// ids that are either "none" or small.
fn plausible(records: &[RawProcess]) -> bool {
    let instance_ok = |id: u32| id == NO_INSTANCE || id < 1024;
    records.iter().all(|r| {
        r.pid != 0
            && r.pid <= PID_MAX
            && instance_ok(r.gpu_instance_id)
            && instance_ok(r.compute_instance_id)
    })
}

/// Decodes a buffer filled by a `_v3` process call whose stride is not known: infers it from
/// how many bytes the driver overwrote (the buffer was pre-filled with [`SENTINEL`]), then checks
/// the records. Returns the records and the layout used, or `None` when neither 24 nor 32 bytes
/// explains the data.
pub(crate) fn decode_v3(buf: &[u8], count: usize) -> Option<(Vec<RawProcess>, Layout)> {
    if count == 0 {
        return Some((Vec::new(), Layout::V2));
    }
    let written = buf
        .iter()
        .rposition(|b| *b != SENTINEL)
        .map_or(0, |p| p + 1);
    // The last record's final field ends the written span; it may coincide with the sentinel
    // only in a few trailing bytes, so allow up to 8 bytes of slack inside the last record.
    let fits = |layout: Layout| {
        let end = count * layout.stride();
        written <= end && written + 8 > end
    };
    let candidates = [Layout::V2, Layout::V3Wide];
    let by_span: Vec<Layout> = candidates.into_iter().filter(|l| fits(*l)).collect();
    // When the span names a layout, only that one is considered; when it names none (a driver
    // that clears the whole buffer, say), the records' plausibility decides.
    let tried: &[Layout] = if by_span.is_empty() {
        &candidates
    } else {
        &by_span
    };
    tried.iter().find_map(|&layout| {
        let records = decode(buf, count, layout)?;
        plausible(&records).then_some((records, layout))
    })
}

/// Turns a raw record into a row, applying the guards: the `ULLONG_MAX` sentinel is unknown, and
/// so is a value above the device's total (with a warning).
pub(crate) fn to_row(
    raw: RawProcess,
    device_index: u32,
    device_total: Option<u64>,
    kind: ProcessKind,
    warnings: &mut Vec<Warning>,
) -> GpuProcess {
    let mut row = GpuProcess::new(raw.pid, device_index, kind, Source::Nvml);
    row.gpu_instance_id = (raw.gpu_instance_id != NO_INSTANCE).then_some(raw.gpu_instance_id);
    row.compute_instance_id =
        (raw.compute_instance_id != NO_INSTANCE).then_some(raw.compute_instance_id);
    match (raw.used, device_total) {
        (VALUE_NOT_AVAILABLE, _) => row.unknown.push(Unknown::new(
            Field::UsedBytes,
            UnknownReason::DriverSentinel,
            "NVML reported NVML_VALUE_NOT_AVAILABLE (usual under MIG without privileges and on WDDM)",
        )),
        (used, Some(total)) if used > total => {
            warnings.push(Warning::device(
                device_index,
                format!(
                    "pid {} reported {used} bytes, more than the device's {total}; shown as unknown",
                    raw.pid
                ),
            ));
            row.unknown.push(Unknown::new(
                Field::UsedBytes,
                UnknownReason::Implausible,
                format!("NVML reported {used} bytes, above the device total of {total}"),
            ));
        }
        (used, _) => row.used_bytes = Some(used),
    }
    row
}

/// Merges rows of one device into one row per pid: the kind becomes `compute+graphics` when a
/// pid is in both lists, and the used figure is the larger known one (each list reports the
/// process's whole context, so adding them would double-count).
pub(crate) fn merge_rows(rows: Vec<GpuProcess>) -> Vec<GpuProcess> {
    let mut by_pid: BTreeMap<u32, GpuProcess> = BTreeMap::new();
    for row in rows {
        match by_pid.get_mut(&row.pid) {
            None => {
                by_pid.insert(row.pid, row);
            }
            Some(existing) => {
                existing.kind = existing.kind.merge(row.kind);
                match (existing.used_bytes, row.used_bytes) {
                    (Some(a), Some(b)) => existing.used_bytes = Some(a.max(b)),
                    (None, Some(b)) => {
                        existing.used_bytes = Some(b);
                        existing.unknown.retain(|u| u.field != Field::UsedBytes);
                    }
                    (_, None) => {}
                }
                existing.gpu_instance_id = existing.gpu_instance_id.or(row.gpu_instance_id);
                existing.compute_instance_id =
                    existing.compute_instance_id.or(row.compute_instance_id);
            }
        }
    }
    by_pid.into_values().collect()
}

/// A GPU's compute mode from `nvmlDeviceGetComputeMode`'s answer, or the unknown entry: a
/// value `nvml.h` does not define is the driver's, never guessed at.
pub(crate) fn compute_mode(
    read: Result<nvml_wrapper::enum_wrappers::device::ComputeMode, nvml_wrapper::error::NvmlError>,
) -> Result<ComputeMode, Unknown> {
    use nvml_wrapper::enum_wrappers::device::ComputeMode as M;
    use nvml_wrapper::error::NvmlError as E;
    match read {
        Ok(M::Default) => Ok(ComputeMode::Default),
        Ok(M::ExclusiveThread) => Ok(ComputeMode::ExclusiveThread),
        Ok(M::Prohibited) => Ok(ComputeMode::Prohibited),
        Ok(M::ExclusiveProcess) => Ok(ComputeMode::ExclusiveProcess),
        Err(E::UnexpectedVariant(v)) => Err(Unknown::new(
            Field::ComputeMode,
            UnknownReason::DeviceError,
            format!("the driver answered compute mode {v}, which nvml.h does not define"),
        )),
        Err(e) => Err(Unknown::new(
            Field::ComputeMode,
            reason_of(&e),
            describe(&e),
        )),
    }
}

/// Classifies an NVML error for an unknown field: what kind of reason it is.
pub(crate) fn reason_of(err: &nvml_wrapper::error::NvmlError) -> UnknownReason {
    use nvml_wrapper::error::NvmlError as E;
    match err {
        E::NotSupported | E::FailedToLoadSymbol(_) | E::FunctionNotFound => {
            UnknownReason::Unsupported
        }
        E::NoPermission => UnknownReason::PermissionDenied,
        _ => UnknownReason::DeviceError,
    }
}

/// A short description of an NVML error, naming the missing symbol when that is the cause
/// ([`query_error`]'s text).
pub(crate) fn describe(err: &nvml_wrapper::error::NvmlError) -> String {
    query_error(err).to_string()
}

/// An NVML error as a [`QueryError`] a caller can match.
pub(crate) fn query_error(err: &nvml_wrapper::error::NvmlError) -> QueryError {
    use nvml_wrapper::error::NvmlError as E;
    match err {
        E::FailedToLoadSymbol(s) => QueryError::MissingSymbol(s.clone()),
        E::GpuLost => QueryError::GpuLost,
        E::NoPermission => QueryError::NoPermission,
        E::NotSupported => QueryError::NotSupported,
        E::UnexpectedVariant(code) => QueryError::Failed(format!("NVML error code {code}")),
        other => QueryError::Failed(other.to_string()),
    }
}

/// NVML's name for a return code (`nvmlReturn_t`), as `nvml.h` spells it; `None` for a code the
/// header does not define.
pub(crate) const fn return_name(code: u32) -> Option<&'static str> {
    Some(match code {
        0 => "NVML_SUCCESS",
        1 => "NVML_ERROR_UNINITIALIZED",
        2 => "NVML_ERROR_INVALID_ARGUMENT",
        3 => "NVML_ERROR_NOT_SUPPORTED",
        4 => "NVML_ERROR_NO_PERMISSION",
        5 => "NVML_ERROR_ALREADY_INITIALIZED",
        6 => "NVML_ERROR_NOT_FOUND",
        7 => "NVML_ERROR_INSUFFICIENT_SIZE",
        8 => "NVML_ERROR_INSUFFICIENT_POWER",
        9 => "NVML_ERROR_DRIVER_NOT_LOADED",
        10 => "NVML_ERROR_TIMEOUT",
        11 => "NVML_ERROR_IRQ_ISSUE",
        12 => "NVML_ERROR_LIBRARY_NOT_FOUND",
        13 => "NVML_ERROR_FUNCTION_NOT_FOUND",
        14 => "NVML_ERROR_CORRUPTED_INFOROM",
        15 => "NVML_ERROR_GPU_IS_LOST",
        16 => "NVML_ERROR_RESET_REQUIRED",
        17 => "NVML_ERROR_OPERATING_SYSTEM",
        18 => "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
        19 => "NVML_ERROR_IN_USE",
        20 => "NVML_ERROR_MEMORY",
        21 => "NVML_ERROR_NO_DATA",
        22 => "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
        23 => "NVML_ERROR_INSUFFICIENT_RESOURCES",
        24 => "NVML_ERROR_FREQ_NOT_SUPPORTED",
        25 => "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
        26 => "NVML_ERROR_DEPRECATED",
        27 => "NVML_ERROR_NOT_READY",
        28 => "NVML_ERROR_GPU_NOT_FOUND",
        29 => "NVML_ERROR_INVALID_STATE",
        30 => "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
        999 => "NVML_ERROR_UNKNOWN",
        _ => return None,
    })
}

/// The NVML return code behind an error, when it came from a driver call (not from loading a
/// symbol or decoding a value). nvml-wrapper keeps the code only as its variant; this maps it
/// back without consuming the error.
pub(crate) fn return_code(err: &nvml_wrapper::error::NvmlError) -> Option<u32> {
    use nvml_wrapper::error::NvmlError as E;
    #[allow(deprecated)]
    let code = match err {
        E::Uninitialized => 1,
        E::InvalidArg => 2,
        E::NotSupported => 3,
        E::NoPermission => 4,
        E::AlreadyInitialized => 5,
        E::NotFound => 6,
        E::InsufficientSize(_) => 7,
        E::InsufficientPower => 8,
        E::DriverNotLoaded => 9,
        E::Timeout => 10,
        E::IrqIssue => 11,
        E::LibraryNotFound => 12,
        E::FunctionNotFound => 13,
        E::CorruptedInfoROM => 14,
        E::GpuLost => 15,
        E::ResetRequired => 16,
        E::OperatingSystem => 17,
        E::LibRmVersionMismatch => 18,
        E::InUse => 19,
        E::InsufficientMemory => 20,
        E::NoData => 21,
        E::VgpuEccNotSupported => 22,
        E::Unknown => 999,
        E::UnexpectedVariant(code) => *code,
        _ => return None,
    };
    Some(code)
}

/// Upstream hypomnesis's text for a failed NVML call: `<call> returned <NAME> (<code>)`
/// (`NVML_ERROR` for a code `nvml.h` does not name), or `failed to resolve <call>: <loader
/// error>` when the library lacks the symbol.
pub(crate) fn call_failure(call: &str, err: &nvml_wrapper::error::NvmlError) -> String {
    use nvml_wrapper::error::NvmlError as E;
    match (err, return_code(err)) {
        (E::FailedToLoadSymbol(loader), _) => format!("failed to resolve {call}: {loader}"),
        (_, Some(code)) => format!(
            "{call} returned {} ({code})",
            return_name(code).unwrap_or("NVML_ERROR")
        ),
        (other, None) => format!("{call} failed: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(buf: &mut [u8], at: usize, pid: u32, used: u64, gi: u32, ci: u32) {
        buf[at..at + 4].copy_from_slice(&pid.to_ne_bytes());
        buf[at + 4..at + 8].copy_from_slice(&[0; 4]);
        buf[at + 8..at + 16].copy_from_slice(&used.to_ne_bytes());
        buf[at + 16..at + 20].copy_from_slice(&gi.to_ne_bytes());
        buf[at + 20..at + 24].copy_from_slice(&ci.to_ne_bytes());
    }

    /// A buffer as a driver with `stride` leaves it after writing `procs` into `capacity` slots.
    fn driver_buffer(stride: usize, capacity: usize, procs: &[(u32, u64)]) -> Vec<u8> {
        let mut buf = vec![SENTINEL; capacity * 32];
        for (i, (pid, used)) in procs.iter().enumerate() {
            record(&mut buf, i * stride, *pid, *used, NO_INSTANCE, NO_INSTANCE);
            if stride == 32 {
                buf[i * 32 + 24..i * 32 + 32].copy_from_slice(&0u64.to_ne_bytes());
            }
        }
        buf
    }

    const PROCS: [(u32, u64); 3] = [(1184, 512 << 20), (16040, 3 << 30), (2_811_349, 70 << 30)];

    #[test]
    fn detects_the_24_byte_stride() {
        for n in 1..=3 {
            let buf = driver_buffer(24, 8, &PROCS[..n]);
            let (recs, layout) = decode_v3(&buf, n).unwrap();
            assert_eq!(layout, Layout::V2);
            let pids: Vec<u32> = recs.iter().map(|r| r.pid).collect();
            assert_eq!(pids, PROCS[..n].iter().map(|p| p.0).collect::<Vec<_>>());
        }
    }

    #[test]
    fn detects_the_32_byte_stride() {
        for n in 1..=3 {
            let buf = driver_buffer(32, 8, &PROCS[..n]);
            let (recs, layout) = decode_v3(&buf, n).unwrap();
            assert_eq!(layout, Layout::V3Wide, "n = {n}");
            assert_eq!(recs[n - 1].pid, PROCS[n - 1].0);
            assert_eq!(recs[n - 1].used, PROCS[n - 1].1);
        }
    }

    #[test]
    fn misreading_with_the_wrong_stride_is_implausible() {
        // What a blind 24-byte reader makes of a 32-byte buffer: the second pid is garbage.
        let buf = driver_buffer(32, 8, &PROCS);
        let blind = decode(&buf, 3, Layout::V2).unwrap();
        assert!(!plausible(&blind), "{blind:?}");
    }

    #[test]
    fn unexplained_layout_is_rejected() {
        // A driver writing 40-byte records: neither stride fits the span or gives plausible rows.
        let mut buf = vec![SENTINEL; 8 * 40];
        for (i, (pid, used)) in PROCS.iter().enumerate() {
            record(&mut buf, i * 40, *pid, *used, NO_INSTANCE, NO_INSTANCE);
            buf[i * 40 + 24..i * 40 + 40].copy_from_slice(&[0x11; 16]);
        }
        assert_eq!(decode_v3(&buf, 3), None);
    }

    #[test]
    fn a_driver_that_clears_the_whole_buffer_is_decoded_by_plausibility() {
        let mut buf = vec![0u8; 8 * 32];
        for (i, (pid, used)) in PROCS.iter().enumerate() {
            record(&mut buf, i * 24, *pid, *used, NO_INSTANCE, NO_INSTANCE);
        }
        let (recs, layout) = decode_v3(&buf, 3).unwrap();
        assert_eq!(layout, Layout::V2);
        assert_eq!(recs[2].pid, PROCS[2].0);
    }

    #[test]
    fn v1_records_have_no_instances() {
        let mut buf = vec![0u8; 32];
        buf[0..4].copy_from_slice(&7u32.to_ne_bytes());
        buf[8..16].copy_from_slice(&42u64.to_ne_bytes());
        buf[16..20].copy_from_slice(&8u32.to_ne_bytes());
        buf[24..32].copy_from_slice(&43u64.to_ne_bytes());
        let recs = decode(&buf, 2, Layout::V1).unwrap();
        assert_eq!(recs[1].pid, 8);
        assert_eq!(recs[1].used, 43);
        assert_eq!(recs[0].gpu_instance_id, NO_INSTANCE);
        assert_eq!(decode(&buf, 3, Layout::V1), None, "short buffer");
    }

    fn raw(pid: u32, used: u64) -> RawProcess {
        RawProcess {
            pid,
            used,
            gpu_instance_id: NO_INSTANCE,
            compute_instance_id: NO_INSTANCE,
        }
    }

    #[test]
    fn sentinel_and_implausible_values_are_unknown() {
        let mut w = Vec::new();
        let r = to_row(
            raw(1, VALUE_NOT_AVAILABLE),
            0,
            Some(100),
            ProcessKind::Compute,
            &mut w,
        );
        assert_eq!(r.used_bytes, None);
        assert_eq!(r.unknown[0].reason, UnknownReason::DriverSentinel);
        assert!(w.is_empty());
        let r = to_row(raw(2, 101), 0, Some(100), ProcessKind::Compute, &mut w);
        assert_eq!(r.used_bytes, None);
        assert_eq!(r.unknown[0].reason, UnknownReason::Implausible);
        assert_eq!(w.len(), 1);
        let r = to_row(raw(3, 100), 0, Some(100), ProcessKind::Compute, &mut w);
        assert_eq!(r.used_bytes, Some(100), "used == total is kept");
        let r = to_row(raw(4, 1 << 40), 0, None, ProcessKind::Compute, &mut w);
        assert_eq!(r.used_bytes, Some(1 << 40), "no total, no bound");
    }

    #[test]
    fn merge_takes_the_larger_figure_and_both_kinds() {
        let mut w = Vec::new();
        let rows = vec![
            to_row(raw(10, 300), 0, None, ProcessKind::Compute, &mut w),
            to_row(raw(11, 5), 0, None, ProcessKind::Graphics, &mut w),
            to_row(raw(10, 200), 0, None, ProcessKind::Graphics, &mut w),
            to_row(
                raw(12, VALUE_NOT_AVAILABLE),
                0,
                None,
                ProcessKind::Compute,
                &mut w,
            ),
            to_row(raw(12, 64), 0, None, ProcessKind::Graphics, &mut w),
        ];
        let merged = merge_rows(rows);
        assert_eq!(merged.len(), 3);
        assert_eq!(merged[0].kind, ProcessKind::ComputeGraphics);
        assert_eq!(merged[0].used_bytes, Some(300));
        assert_eq!(merged[1].kind, ProcessKind::Graphics);
        assert_eq!(merged[2].used_bytes, Some(64));
        assert!(
            merged[2].unknown.is_empty(),
            "a known figure replaces the unknown one"
        );
    }

    #[test]
    fn return_codes_round_trip_through_nvml_wrapper() {
        use nvml_wrapper::error::NvmlError;
        for code in (1..=30).chain([999]) {
            let err = NvmlError::from(code);
            assert_eq!(return_code(&err), Some(code), "{err:?}");
            assert!(return_name(code).is_some(), "{code}");
        }
        assert_eq!(return_name(31), None);
        assert_eq!(
            return_code(&NvmlError::FailedToLoadSymbol("x".into())),
            None
        );
    }

    #[test]
    fn call_failures_read_as_upstream_prints_them() {
        use nvml_wrapper::error::NvmlError;
        assert_eq!(
            call_failure("nvmlInit_v2", &NvmlError::from(18)),
            "nvmlInit_v2 returned NVML_ERROR_LIB_RM_VERSION_MISMATCH (18)"
        );
        assert_eq!(
            call_failure("nvmlDeviceGetCount_v2", &NvmlError::from(999)),
            "nvmlDeviceGetCount_v2 returned NVML_ERROR_UNKNOWN (999)"
        );
        assert_eq!(
            call_failure("nvmlInit_v2", &NvmlError::from(77)),
            "nvmlInit_v2 returned NVML_ERROR (77)"
        );
        assert_eq!(
            call_failure(
                "nvmlDeviceGetCount_v2",
                &NvmlError::FailedToLoadSymbol("undefined symbol: nvmlDeviceGetCount_v2".into())
            ),
            "failed to resolve nvmlDeviceGetCount_v2: undefined symbol: nvmlDeviceGetCount_v2"
        );
    }

    #[test]
    fn nvml_errors_are_matchable_and_keep_their_words() {
        use nvml_wrapper::error::NvmlError as E;
        let cases = [
            (
                E::GpuLost,
                QueryError::GpuLost,
                "the GPU is lost (fell off the bus or needs a reset)",
            ),
            (E::NoPermission, QueryError::NoPermission, "no permission"),
            (
                E::NotSupported,
                QueryError::NotSupported,
                "not supported by this device or driver",
            ),
            (
                E::FailedToLoadSymbol("nvmlX".into()),
                QueryError::MissingSymbol("nvmlX".into()),
                "symbol missing from this driver's NVML (nvmlX)",
            ),
            (
                E::UnexpectedVariant(77),
                QueryError::Failed("NVML error code 77".into()),
                "NVML error code 77",
            ),
        ];
        for (err, want, text) in cases {
            assert_eq!(query_error(&err), want);
            assert_eq!(describe(&err), text);
        }
    }
}
