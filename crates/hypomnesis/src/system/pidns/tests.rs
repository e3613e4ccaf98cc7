//! The namespace heuristic over facts, and over fixture `/proc` trees for each case: the host,
//! a container with its own `/proc`, a container with the host's `/proc` mounted, and a proc
//! root that tells nothing.

use super::*;

const HOST: u64 = INIT_PID_NS_INODE;
const CTR: u64 = 4_026_532_777;

fn facts(
    self_ns: Option<u64>,
    init_ns: Option<u64>,
    nspid: &[u32],
    markers: &[&str],
) -> NamespaceFacts {
    NamespaceFacts::new(
        self_ns,
        init_ns,
        nspid.to_vec(),
        None,
        markers.iter().map(|m| (*m).to_string()).collect(),
    )
}

#[test]
fn parsers() {
    assert_eq!(
        parse_nspid("Name:\tx\nNSpid:\t48213\t7\nNSpgid:\t1\n"),
        [48213, 7]
    );
    assert_eq!(parse_nspid("NSpid:\t12\n"), [12]);
    assert!(parse_nspid("Name:\tx\n").is_empty());
    assert_eq!(parse_ns_link("pid:[4026531836]"), Some(HOST));
    assert_eq!(parse_ns_link("net:[4026531836]"), None);
    assert_eq!(parse_ns_link("pid:[x]"), None);
    assert_eq!(
        parse_sched_pid("systemd (1, #threads: 1)\n---------\n"),
        Some(1)
    );
    assert_eq!(
        parse_sched_pid("my (odd) name (48213, #threads: 3)\n"),
        Some(48213)
    );
    assert_eq!(parse_sched_pid("garbage\n"), None);
}

#[test]
fn the_host() {
    // Root on the host: pid 1's namespace is the initial one.
    let v = view(&facts(Some(HOST), Some(HOST), &[4242], &[]));
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Host, Some(false))
    );
    assert!(v.host_pids_visible());
    // Unprivileged on the host (pid 1's link refused): hmn's own namespace decides.
    let v = view(&facts(Some(HOST), None, &[4242], &[]));
    assert_eq!(v.proc_root, ProcRootNamespace::Host);
    // A VM made from a container image keeps /.dockerenv: the inode wins over the marker.
    let v = view(&facts(Some(HOST), None, &[4242], &["/.dockerenv"]));
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Host, Some(false))
    );
}

#[test]
fn a_container_with_its_own_proc() {
    let v = view(&facts(Some(CTR), Some(CTR), &[7], &["/.dockerenv"]));
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Container, Some(true))
    );
    assert!(!v.host_pids_visible());
    // Without pid 1's link, hmn's own single-level NSpid in a non-initial namespace.
    let v = view(&facts(Some(CTR), None, &[7], &[]));
    assert_eq!(v.proc_root, ProcRootNamespace::Container);
    // Nothing but markers: hmn is in a container, but the proc root is not known to be its.
    let v = view(&facts(None, None, &[7], &["container=podman"]));
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Container, Some(true))
    );
    // An old kernel's sched line with the host pid.
    let mut f = facts(None, None, &[], &[]);
    f.sched_pid1 = Some(48213);
    assert_eq!(view(&f).proc_root, ProcRootNamespace::Container);
}

#[test]
fn a_container_with_the_host_proc_mounted() {
    // Root in the container: pid 1 of the mounted /proc is the host's init.
    let v = view(&facts(Some(CTR), Some(HOST), &[48213, 7], &["/.dockerenv"]));
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Host, Some(true))
    );
    assert!(v.host_pids_visible());
    // Without pid 1's link: hmn is deeper than the proc root.
    let v = view(&facts(Some(CTR), None, &[48213, 7], &[]));
    assert_eq!(v.proc_root, ProcRootNamespace::Ancestor);
    assert!(v.host_pids_visible());
    assert!(
        v.evidence.iter().any(|e| e.contains("pid 48213")),
        "{:?}",
        v.evidence
    );
}

#[test]
fn nothing_told() {
    let v = view(&NamespaceFacts::default());
    assert_eq!(
        (v.proc_root, v.in_container),
        (ProcRootNamespace::Unknown, None)
    );
    assert!(v.host_pids_visible(), "unknown is named as on a host");
}

/// A fixture proc root: `self` → `<self_pid>` with `NSpid`, optional `ns/pid` links.
fn fixture(self_nspid: &[u32], self_ns: Option<u64>, init_ns: Option<u64>) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let me = self_nspid[0];
    let pd = dir.path().join(me.to_string());
    std::fs::create_dir_all(pd.join("ns")).unwrap();
    let nspid: Vec<String> = self_nspid.iter().map(u32::to_string).collect();
    std::fs::write(
        pd.join("status"),
        format!("Name:\thmn\nPid:\t{me}\nNSpid:\t{}\n", nspid.join("\t")),
    )
    .unwrap();
    std::os::unix::fs::symlink(me.to_string(), dir.path().join("self")).unwrap();
    if let Some(ino) = self_ns {
        std::os::unix::fs::symlink(format!("pid:[{ino}]"), pd.join("ns/pid")).unwrap();
    }
    if let Some(ino) = init_ns {
        std::fs::create_dir_all(dir.path().join("1/ns")).unwrap();
        std::os::unix::fs::symlink(format!("pid:[{ino}]"), dir.path().join("1/ns/pid")).unwrap();
    }
    dir
}

#[test]
fn gathered_from_fixture_trees() {
    let roots = |d: &tempfile::TempDir| Roots::system().with_proc(d.path());
    let host = fixture(&[4242], Some(HOST), Some(HOST));
    assert_eq!(
        view(&gather(&roots(&host))).proc_root,
        ProcRootNamespace::Host
    );
    let own = fixture(&[7], Some(CTR), Some(CTR));
    std::fs::create_dir_all(own.path().join("7/root")).unwrap();
    std::fs::write(own.path().join("7/root/.dockerenv"), "").unwrap();
    std::fs::write(
        own.path().join("7/environ"),
        b"PATH=/bin\0KUBERNETES_SERVICE_HOST=10.0.0.1\0container=docker\0",
    )
    .unwrap();
    let f = gather(&roots(&own));
    assert_eq!(
        f.markers,
        ["/.dockerenv", "KUBERNETES_SERVICE_HOST", "container=docker"]
    );
    assert_eq!(view(&f).proc_root, ProcRootNamespace::Container);
    let mounted = fixture(&[48213, 7], Some(CTR), None);
    let f = gather(&roots(&mounted));
    assert_eq!(f.self_nspid, [48213, 7]);
    assert_eq!(view(&f).proc_root, ProcRootNamespace::Ancestor);
    assert_eq!(innermost_pid(&roots(&mounted), 48213), Some(7));
    assert_eq!(innermost_pid(&roots(&host), 4242), None, "same pid");
    assert_eq!(innermost_pid(&roots(&host), 1), None, "no status");
}

#[test]
fn this_machine_is_read_without_error() {
    // Whatever this machine is, the view is consistent with its own namespace link.
    let f = gather(&Roots::system());
    let v = view(&f);
    if f.self_ns == Some(INIT_PID_NS_INODE) {
        assert_eq!(v.in_container, Some(false));
        assert_eq!(v.proc_root, ProcRootNamespace::Host);
    }
}
