//! Names of `/proc` entries that are numbers (pids, fds): one rule for the POSIX reader in
//! `fsread` and the portable one in `fsread/portable.rs`.

/// A name made only of ASCII digits, as a `u32`.
pub(crate) fn parse_numeric(name: &[u8]) -> Option<u32> {
    if name.is_empty() || !name.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(name).ok()?.parse().ok()
}
