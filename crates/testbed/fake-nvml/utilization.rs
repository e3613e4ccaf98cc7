//! `nvmlDeviceGetProcessUtilization` of the fake NVML: the `[sample]` sections, with the
//! sizing/fill protocol, `lastSeenTimeStamp` filtering, NOT_FOUND when no sample is newer, and
//! NOT_SUPPORTED on MIG (a MIG device, or a GPU in MIG mode), as the header documents.
//!
//! `nvmlProcessUtilizationSample_t`: u32 pid, (pad), u64 timeStamp (µs), u32 smUtil, memUtil,
//! encUtil, decUtil — 32 bytes.

use super::*;

/// The stride of `nvmlProcessUtilizationSample_t`.
const SAMPLE_SIZE: usize = 32;

#[no_mangle]
pub unsafe extern "C" fn nvmlDeviceGetProcessUtilization(
    device: nvmlDevice_t,
    utilization: *mut c_void,
    sample_count: *mut c_uint,
    last_seen_timestamp: c_ulonglong,
) -> nvmlReturn_t {
    with_handle("nvmlDeviceGetProcessUtilization", device, |st, t| {
        let Target::Physical(i) = t else {
            return NOT_SUPPORTED;
        };
        if sample_count.is_null() {
            return INVALID_ARGUMENT;
        }
        if st.mig_on(i) {
            return NOT_SUPPORTED;
        }
        let Some(round) = st.util_rounds.get(i).copied() else {
            return INVALID_ARGUMENT;
        };
        let now = accounting::now_us();
        let sizing = utilization.is_null();
        let samples: Vec<(u32, u64, [u32; 4])> = st
            .cfg
            .samples
            .iter()
            .filter(|s| s.device as usize == i)
            .filter(|s| {
                let (from, until) = s.rounds.unwrap_or((0, u64::MAX));
                from <= round && round < until
            })
            .filter(|s| !(sizing && s.late))
            .filter_map(|s| {
                let pid = if s.child_of_caller {
                    processes::child_of_caller()?
                } else if s.caller {
                    std::process::id()
                } else {
                    s.pid
                };
                let ts = now.saturating_sub(s.age_ms.saturating_mul(1000));
                (ts > last_seen_timestamp).then_some((pid, ts, s.values))
            })
            .collect();
        let n = u32::try_from(samples.len()).unwrap_or(u32::MAX);
        if n == 0 {
            if let Some(r) = st.util_rounds.get_mut(i) {
                *r = r.saturating_add(1);
            }
            return NOT_FOUND;
        }
        // SAFETY: checked non-null; NVML contract: a readable and writable uint.
        let capacity = unsafe { sample_count.read_unaligned() };
        if sizing || capacity < n {
            // SAFETY: as above.
            unsafe { sample_count.write_unaligned(n) };
            return INSUFFICIENT_SIZE;
        }
        for (k, (pid, ts, v)) in samples.iter().enumerate() {
            let base = k.saturating_mul(SAMPLE_SIZE);
            // SAFETY: NVML contract: `utilization` holds `capacity` 32-byte samples and
            // `k < n <= capacity`; every write is inside sample `k`.
            unsafe {
                put(utilization, base, *pid);
                put(utilization, base + 4, 0u32);
                put(utilization, base + 8, *ts);
                for (f, value) in v.iter().enumerate() {
                    put(utilization, base + 16 + 4 * f, *value);
                }
            }
        }
        // SAFETY: as above.
        unsafe { sample_count.write_unaligned(n) };
        if let Some(r) = st.util_rounds.get_mut(i) {
            *r = r.saturating_add(1);
        }
        SUCCESS
    })
}
