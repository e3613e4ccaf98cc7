//! Times as the view writes them: an interval (`250 ms`, `1.0 s`), a duration (`HH:MM:SS`), an
//! instant (`YYYY-MM-DD HH:MM:SSZ`, UTC).

use std::time::Duration;

/// `1.0 s`, `250 ms`: tenths of a second rounded half up, in integers (drawn every frame;
/// a float's formatting can fall back to bignum arithmetic).
pub fn seconds(d: Duration) -> String {
    let ms = d.as_millis();
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        let tenths = ms.saturating_add(50) / 100;
        format!("{}.{} s", tenths / 10, tenths % 10)
    }
}

/// `HH:MM:SS` of a duration in ms.
pub fn hms(ms: u64) -> String {
    let s = ms / 1000;
    format!("{:02}:{:02}:{:02}", s / 3600, s / 60 % 60, s % 60)
}

/// `YYYY-MM-DD HH:MM:SSZ` of ms since the epoch (UTC).
pub fn utc(ms: u64) -> String {
    let secs = ms / 1000;
    let days = i64::try_from(secs / 86_400).unwrap_or(0);
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02} {}Z", hms((secs % 86_400) * 1000))
}
