//! User namespaces, as the `ptrace` check needs them (pure): whether `/proc/self/uid_map` is
//! the initial namespace's identity map, and which uid outside a uid inside maps to. In a
//! user namespace (rootless Podman, `unshare -r`, a Kubernetes pod with `hostUsers: false`)
//! uid 0 and a full capability set hold for the namespace only: they do not reach the
//! processes of other users of the parent namespace.

/// Whether a `uid_map` text is the initial user namespace's: one line, `0 0 4294967295`.
pub fn is_initial_uid_map(text: &str) -> bool {
    let mut lines = text.lines().filter(|l| !l.trim().is_empty());
    let first = lines.next().map(fields);
    first == Some(Some((0, 0, u32::MAX))) && lines.next().is_none()
}

/// The uid outside the namespace that `uid` inside maps to, by a `uid_map` text.
pub fn uid_outside(text: &str, uid: u32) -> Option<u32> {
    text.lines()
        .filter_map(fields)
        .find_map(|(inside, outside, count)| {
            let offset = uid.checked_sub(inside).filter(|o| *o < count)?;
            outside.checked_add(offset)
        })
}

/// `inside outside count` of one `uid_map` line.
fn fields(line: &str) -> Option<(u32, u32, u32)> {
    let mut it = line.split_whitespace().map(str::parse::<u32>);
    match (it.next(), it.next(), it.next(), it.next()) {
        (Some(Ok(a)), Some(Ok(b)), Some(Ok(c)), None) => Some((a, b, c)),
        _ => None,
    }
}
