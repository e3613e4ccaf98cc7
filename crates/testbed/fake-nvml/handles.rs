//! Device handles of the fake NVML: decoding a handle into what it names (a GPU or a MIG
//! device), counting a MIG handle's calls and refusing it once its instance is gone, and the
//! per-handle injected errors.

use super::*;

/// A compute instance (a MIG device) as the fake serves it: where it is in the scenario and
/// its MIG slot on its GPU.
#[derive(Clone, Copy, Debug)]
pub(crate) struct MigSlot {
    /// Its GPU instance (index in the scenario).
    pub(crate) gi: usize,
    /// Its index among that GPU instance's compute instances.
    pub(crate) ci: usize,
    /// Its GPU.
    pub(crate) device: usize,
    pub(crate) slot: u32,
}

/// The scenario's compute instances in order: one without a `slot` gets the next free one on
/// its GPU; two in one slot are an error.
pub(crate) fn mig_slots(cfg: &FakeNvml) -> Result<Vec<MigSlot>, String> {
    let all: Vec<(usize, usize, usize, Option<u32>)> = cfg
        .gpu_instances
        .iter()
        .enumerate()
        .flat_map(|(gi, g)| {
            g.compute_instances
                .iter()
                .enumerate()
                .map(move |(ci, c)| (gi, ci, g.device as usize, c.slot))
        })
        .collect();
    let mut taken: Vec<(usize, u32)> = all
        .iter()
        .filter_map(|(_, _, d, s)| s.map(|s| (*d, s)))
        .collect();
    let mut slots: Vec<MigSlot> = Vec::with_capacity(all.len());
    for (gi, ci, device, slot) in all {
        let slot = match slot {
            Some(s) => s,
            None => {
                let mut s = 0;
                while taken.contains(&(device, s)) {
                    s += 1;
                }
                taken.push((device, s));
                s
            }
        };
        if slots.iter().any(|m| m.device == device && m.slot == slot) {
            return Err(format!(
                "two compute instances in slot {slot} of device {device}"
            ));
        }
        slots.push(MigSlot { gi, ci, device, slot });
    }
    Ok(slots)
}

impl State {
    /// Compute instance `k` (in [`State::slots`] order) and its GPU instance.
    pub(crate) fn ci(&self, k: usize) -> Option<(&FakeGpuInstance, &FakeComputeInstance)> {
        let m = self.slots.get(k)?;
        let g = self.cfg.gpu_instances.get(m.gi)?;
        Some((g, g.compute_instances.get(m.ci)?))
    }

    /// The profiles of device `i`'s table (none without one).
    pub(crate) fn profiles(&self, i: usize) -> &'static [MigProfile] {
        self.cfg
            .devices
            .get(i)
            .and_then(|d| d.extras.mig_profiles)
            .and_then(|name| profile_table(name).ok())
            .map_or(&[], |(_, table)| table)
    }

    /// Whether compute instance `k` is gone: its handle has answered all the calls it may.
    pub(crate) fn ci_gone(&self, k: usize) -> bool {
        match (self.ci(k), self.ci_calls.get(k)) {
            (Some((_, c)), Some(calls)) => c.gone_after_calls.is_some_and(|n| *calls >= n),
            _ => true,
        }
    }

    /// Whether device `i` has MIG mode on now.
    pub(crate) fn mig_on(&self, i: usize) -> bool {
        self.cfg.devices.get(i).and_then(|d| d.extras.mig_mode) == Some(true)
    }

    /// Decodes a device handle; a MIG handle's call is counted (and refused once it is gone).
    pub(crate) fn decode(&mut self, raw: usize) -> Result<Target, nvmlReturn_t> {
        if raw == 0 {
            return Err(INVALID_ARGUMENT);
        }
        if raw < MIG_TAG {
            let idx = raw - 1;
            return if idx < self.cfg.devices.len() {
                Ok(Target::Physical(idx))
            } else {
                Err(INVALID_ARGUMENT)
            };
        }
        if raw >> 24 != MIG_TAG >> 24 {
            return Err(INVALID_ARGUMENT);
        }
        let (parent, slot) = ((raw >> 8) & 0xffff, (raw & 0xff) as u32);
        let Some(k) = self
            .slots
            .iter()
            .position(|m| m.device == parent && m.slot == slot)
        else {
            return Err(INVALID_ARGUMENT);
        };
        if self.ci_gone(k) {
            return Err(INVALID_ARGUMENT);
        }
        if let Some(c) = self.ci_calls.get_mut(k) {
            *c = c.saturating_add(1);
        }
        Ok(Target::Mig { parent, ci: k })
    }

    /// The injected error for `sym` on this target (its own first, then the global ones).
    pub(crate) fn injected(&self, sym: &str, t: Target) -> Option<nvmlReturn_t> {
        let own = match t {
            Target::Physical(i) => self.cfg.devices.get(i).map(|d| &d.errors),
            Target::Mig { ci, .. } => self.ci(ci).map(|(_, c)| &c.errors),
        };
        own.and_then(|e| find_error(e, sym))
            .or_else(|| find_error(&self.cfg.errors, sym))
    }

    /// The GPU instance (index in the scenario) of compute instance `ci`.
    pub(crate) fn gi_of(&self, ci: usize) -> Option<usize> {
        self.slots.get(ci).map(|m| m.gi)
    }
}

/// The handle of the MIG device in `slot` of GPU `parent`.
pub(crate) fn mig_handle(parent: usize, slot: u32) -> nvmlDevice_t {
    (MIG_TAG | (parent & 0xffff) << 8 | (slot as usize & 0xff)) as nvmlDevice_t
}

/// Runs `f` with what `dev` names, after validating the handle and applying the injected
/// errors for `sym` (the handle's own first, then global ones).
pub(crate) fn with_handle(
    sym: &str,
    dev: nvmlDevice_t,
    f: impl FnOnce(&mut State, Target) -> nvmlReturn_t,
) -> nvmlReturn_t {
    hang_while_flagged();
    let mut g = lock();
    let Some(st) = g.as_mut() else {
        return UNINITIALIZED;
    };
    if st.cfg.log_calls {
        crate::log_call(sym);
    }
    let t = match st.decode(dev as usize) {
        Ok(t) => t,
        Err(code) => return code,
    };
    if let Some(code) = st.injected(sym, t) {
        return code;
    }
    f(st, t)
}

/// Runs `f` with the device index behind `dev`, after validating the handle and applying
/// the injected errors for `sym` (the device's own first, then global ones). A MIG handle gets
/// NOT_SUPPORTED: the call is a whole-GPU one.
pub(crate) fn with_device(
    sym: &str,
    dev: nvmlDevice_t,
    f: impl FnOnce(&mut State, usize) -> nvmlReturn_t,
) -> nvmlReturn_t {
    with_handle(sym, dev, |st, t| match t {
        Target::Physical(i) => f(st, i),
        Target::Mig { .. } => NOT_SUPPORTED,
    })
}

