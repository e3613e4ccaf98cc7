//! macOS: the `PerformanceStatistics` property of the GPU's IOKit service (`AGXAccelerator`,
//! Apple Silicon), read without privileges through objc2-io-kit — compile-checked from Linux
//! (no macOS runner here). Only the reading: the dictionary's meaning is `iokit_stats`
//! (platform-free, tested everywhere).
//!
//! `IOServiceMatching("AGXAccelerator")` → `IOServiceGetMatchingServices` (which consumes the
//! matching dictionary) → `IOIteratorNext` over the services →
//! `IORegistryEntryCreateCFProperty(entry, "PerformanceStatistics")`; every IOKit object is
//! released. The first service that has the property answers.

use objc2_core_foundation::{CFDictionary, CFNumber, CFRetained, CFString, CFType};
use objc2_io_kit::{
    IOIteratorNext, IOObjectRelease, IORegistryEntryCreateCFProperty, IOServiceGetMatchingServices,
    IOServiceMatching, io_iterator_t,
};

use super::iokit_stats::Value;

/// The entries of the first `AGXAccelerator`'s `PerformanceStatistics`, or why there are none.
pub(crate) fn performance_statistics() -> Result<Vec<(String, Value)>, String> {
    // SAFETY: the name is a NUL-terminated C string that outlives the call.
    let matching = unsafe { IOServiceMatching(c"AGXAccelerator".as_ptr()) }
        .ok_or("IOServiceMatching(\"AGXAccelerator\") returned no dictionary")?;
    let matching: CFRetained<CFDictionary> = CFRetained::from(&*matching);
    let mut iter: io_iterator_t = 0;
    // SAFETY: 0 is kIOMainPortDefault ("a synonym for NULL": the default main port); the
    // matching dictionary is consumed by the call (one reference, ours); `iter` is a valid out
    // pointer for an io_iterator_t.
    let kr = unsafe { IOServiceGetMatchingServices(0, Some(matching), &mut iter) };
    if kr != 0 {
        return Err(format!(
            "IOServiceGetMatchingServices(AGXAccelerator) returned {kr:#x}"
        ));
    }
    if iter == 0 {
        return Err("no AGXAccelerator service (not Apple Silicon?)".to_string());
    }
    let key = CFString::from_static_str("PerformanceStatistics");
    let mut found = Err("no AGXAccelerator service has PerformanceStatistics".to_string());
    loop {
        let entry = IOIteratorNext(iter);
        if entry == 0 {
            break;
        }
        // SAFETY: `entry` is a live registry entry from the iterator; the key is a valid
        // CFString; no allocator (the default) and no options, as documented.
        let property = unsafe { IORegistryEntryCreateCFProperty(entry, Some(&key), None, 0) };
        let _ = IOObjectRelease(entry);
        if let Some(dict) = property.and_then(|p| p.downcast::<CFDictionary>().ok()) {
            found = Ok(entries(&dict));
            break;
        }
    }
    let _ = IOObjectRelease(iter);
    found
}

/// A property dictionary's entries: string keys, integer numbers as such, anything else by its
/// kind.
fn entries(dict: &CFDictionary) -> Vec<(String, Value)> {
    // SAFETY: an IORegistry property dictionary has CFString keys (OSSymbol) and CFType
    // values; viewing it with those parameters only names them.
    let typed: &CFDictionary<CFString, CFType> =
        unsafe { &*(dict as *const CFDictionary).cast::<CFDictionary<CFString, CFType>>() };
    let (keys, values) = typed.to_vecs();
    keys.iter()
        .zip(values.iter())
        .map(|(k, v)| {
            let value = match v.downcast_ref::<CFNumber>() {
                Some(n) if !n.is_float_type() => n
                    .as_i64()
                    .map_or_else(|| Value::Other("a number".into()), Value::Number),
                Some(_) => Value::Other("a float".into()),
                None => Value::Other("not a number".into()),
            };
            (k.to_string(), value)
        })
        .collect()
}
