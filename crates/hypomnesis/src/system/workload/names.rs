//! Workload names without an API call: the Kubernetes namespace, pod and container names, and
//! Docker's container names, from the files the node keeps ([`Names`]; [`NameCache`] fills a
//! [`WorkloadInfo`]).
//!
//! | Source | What | Readable by |
//! |---|---|---|
//! | the kubelet's log layout under the log root (`HMN_LOG_ROOT`, default `/var/log`): `containers/<pod>_<namespace>_<container>-<64 hex id>.log`, a symlink to `pods/<namespace>_<pod>_<uid>/<container>/<n>.log` | container id → namespace, pod, container; pod UID → namespace, pod | listing the directories (the links are read, never followed; no log is opened) |
//! | `pods/<namespace>_<pod>_<uid>/` alone | pod UID → namespace, pod | as above |
//! | Docker's `containers/<id>/config.v2.json` (`Name`, and the `io.kubernetes.*` labels of cri-dockerd) | container id → name | root (the file is 0600: it holds the container's environment, which is never kept or logged) |
//! | the OCI bundle's `config.json` annotations: containerd (`io.containerd.runtime.v2.task/k8s.io/<id>/`), CRI-O (`overlay-containers/<id>/userdata/`) | container id → namespace, pod, container | root |
//!
//! The JSON sources need feature `container-names` (serde_json). Every name is checked against
//! Kubernetes' rules (DNS-1123: lower-case letters, digits, `-`, and `.` in pod names; at most
//! 63 characters, 253 for pods) or Docker's (`[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 255): a name
//! with anything else (a control character, `/`, `_` where a separator goes) is not used.
//! Listings stop at [`MAX_ENTRIES`]; a config file larger than [`MAX_CONFIG`] is not read.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::system::roots::Roots;
use crate::types::workload::{ContainerRuntime, NameSource, WorkloadInfo, WorkloadKind};

/// Entries read from one directory listing, at most.
pub const MAX_ENTRIES: usize = 65_536;
/// The largest container config read, bytes.
pub const MAX_CONFIG: u64 = 4 << 20;
/// How long a kubelet index is reused before a miss rebuilds it.
const INDEX_AGE: Duration = Duration::from_secs(5);

/// Names of one workload.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Names {
    /// Kubernetes namespace.
    pub namespace: Option<String>,
    /// Pod name.
    pub pod: Option<String>,
    /// Container name.
    pub container: Option<String>,
}

/// A DNS-1123 label: `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63.
fn dns_label(s: &str) -> bool {
    dns_name(s, 63, false)
}

/// A pod name (DNS-1123 subdomain): labels of `[a-z0-9-]` joined by `.`, at most 253.
fn pod_name(s: &str) -> bool {
    dns_name(s, 253, true)
}

fn dns_name(s: &str, max: usize, dots: bool) -> bool {
    let b = s.as_bytes();
    let edge = |c: Option<&u8>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    !b.is_empty()
        && b.len() <= max
        && edge(b.first())
        && edge(b.last())
        && b.iter().all(|c| {
            c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-' || (dots && *c == b'.')
        })
}

/// A Docker container name (`/` stripped): `[A-Za-z0-9][A-Za-z0-9_.-]*`, at most 255.
#[cfg_attr(not(feature = "container-names"), allow(dead_code))]
fn docker_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 255
        && b.first().is_some_and(u8::is_ascii_alphanumeric)
        && b.iter()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-'))
}

/// A 64-hex-digit container id.
fn is_id(s: &str) -> bool {
    s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// A pod UID (36 characters, hex and dashes).
fn is_uid(s: &str) -> bool {
    s.len() == 36 && s.bytes().all(|b| b.is_ascii_hexdigit() || b == b'-')
}

/// `<namespace>_<pod>_<uid>` (a directory under `pods/`), checked.
pub fn parse_pod_dir(name: &str) -> Option<(String, String, String)> {
    let mut parts = name.split('_');
    let (ns, pod, uid) = (parts.next()?, parts.next()?, parts.next()?);
    (parts.next().is_none() && dns_label(ns) && pod_name(pod) && is_uid(uid))
        .then(|| (ns.to_string(), pod.to_string(), uid.to_ascii_lowercase()))
}

/// One `containers/` link: its name (`<pod>_<namespace>_<container>-<id>.log`) and target
/// (`…/pods/<namespace>_<pod>_<uid>/<container>/<n>.log`): the container id, its names and the
/// pod UID. The names come from the target (the file name is cut at 255 bytes for long names);
/// the id from the file name. `None` when either does not have that shape.
pub fn parse_container_link(file_name: &str, target: &[u8]) -> Option<(String, Names, String)> {
    let stem = file_name.strip_suffix(".log")?;
    let (_, id) = stem.rsplit_once('-')?;
    if !is_id(id) {
        return None;
    }
    let target = std::str::from_utf8(target).ok()?;
    let mut comps = target.rsplit('/');
    let (_file, container, pod_dir) = (comps.next()?, comps.next()?, comps.next()?);
    let (ns, pod, uid) = parse_pod_dir(pod_dir)?;
    if !dns_label(container) {
        return None;
    }
    let names = Names {
        namespace: Some(ns),
        pod: Some(pod),
        container: Some(container.to_string()),
    };
    Some((id.to_ascii_lowercase(), names, uid))
}

/// What the kubelet's log layout names.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KubeletIndex {
    /// Container id → names.
    pub containers: HashMap<String, Names>,
    /// Pod UID → (namespace, pod).
    pub pods: HashMap<String, (String, String)>,
}

/// Reads the kubelet's layout under `log_root` (see the [module docs](self)): an empty index
/// when neither directory can be listed.
pub fn read_kubelet(log_root: &Path) -> KubeletIndex {
    let mut idx = KubeletIndex::default();
    if let Ok(dir) = std::fs::read_dir(log_root.join("pods")) {
        for entry in dir.flatten().take(MAX_ENTRIES) {
            if let Some((ns, pod, uid)) = entry.file_name().to_str().and_then(parse_pod_dir) {
                idx.pods.insert(uid, (ns, pod));
            }
        }
    }
    if let Ok(dir) = std::fs::read_dir(log_root.join("containers")) {
        for entry in dir.flatten().take(MAX_ENTRIES) {
            let name = entry.file_name();
            let Some(name) = name.to_str() else {
                continue;
            };
            // `read_link` reads the link itself: a loop or a dangling target is never followed.
            let Ok(target) = std::fs::read_link(entry.path()) else {
                continue;
            };
            let bytes = target.as_os_str().as_encoded_bytes();
            if let Some((id, names, uid)) = parse_container_link(name, bytes) {
                if let (Some(ns), Some(pod)) = (&names.namespace, &names.pod) {
                    idx.pods.entry(uid).or_insert((ns.clone(), pod.clone()));
                }
                idx.containers.insert(id, names);
            }
        }
    }
    idx
}

/// Names from a Docker `config.v2.json` (pure): `Name` without its `/`, or the cri-dockerd
/// labels (`io.kubernetes.pod.namespace`, `io.kubernetes.pod.name`,
/// `io.kubernetes.container.name`) when present.
#[cfg(feature = "container-names")]
pub fn parse_docker_config(json: &[u8]) -> Option<Names> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let labels = v.get("Config").and_then(|c| c.get("Labels"));
    if let Some(k) = kubernetes_names(
        labels,
        [
            "io.kubernetes.pod.namespace",
            "io.kubernetes.pod.name",
            "io.kubernetes.container.name",
        ],
    ) {
        return Some(k);
    }
    let name = v.get("Name")?.as_str()?;
    let name = name.strip_prefix('/').unwrap_or(name);
    docker_name(name).then(|| Names {
        container: Some(name.to_string()),
        ..Names::default()
    })
}

/// Names from an OCI runtime bundle's `config.json` annotations (pure): containerd's
/// `io.kubernetes.cri.sandbox-namespace`, `…cri.sandbox-name`, `…cri.container-name`, or
/// CRI-O's `io.kubernetes.pod.namespace`, `io.kubernetes.pod.name`,
/// `io.kubernetes.container.name`.
#[cfg(feature = "container-names")]
pub fn parse_oci_config(json: &[u8]) -> Option<Names> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    let a = v.get("annotations");
    kubernetes_names(
        a,
        [
            "io.kubernetes.cri.sandbox-namespace",
            "io.kubernetes.cri.sandbox-name",
            "io.kubernetes.cri.container-name",
        ],
    )
    .or_else(|| {
        kubernetes_names(
            a,
            [
                "io.kubernetes.pod.namespace",
                "io.kubernetes.pod.name",
                "io.kubernetes.container.name",
            ],
        )
    })
}

/// Namespace, pod and container from three keys of a JSON object, each checked.
#[cfg(feature = "container-names")]
fn kubernetes_names(map: Option<&serde_json::Value>, keys: [&str; 3]) -> Option<Names> {
    let get = |k: &str| map?.get(k)?.as_str();
    let (ns, pod) = (get(keys[0])?, get(keys[1])?);
    if !dns_label(ns) || !pod_name(pod) {
        return None;
    }
    Some(Names {
        namespace: Some(ns.to_string()),
        pod: Some(pod.to_string()),
        container: get(keys[2]).filter(|c| dns_label(c)).map(str::to_string),
    })
}

/// A container's config, read when it is a regular file no larger than [`MAX_CONFIG`].
#[cfg(feature = "container-names")]
fn read_config(path: &Path) -> Option<Vec<u8>> {
    crate::system::fsread::read_bounded(path, crate::system::fsread::Cap::bytes(MAX_CONFIG))
        .ok()
        .flatten()
}

/// Names of container `id` from its runtime's own files (Docker's config, the OCI bundle of
/// containerd or CRI-O), where readable.
#[cfg(feature = "container-names")]
fn runtime_names(
    roots: &Roots,
    runtime: Option<ContainerRuntime>,
    id: &str,
) -> Option<(Names, NameSource)> {
    let docker = || {
        read_config(
            &roots
                .docker
                .join("containers")
                .join(id)
                .join("config.v2.json"),
        )
        .and_then(|j| parse_docker_config(&j))
        .map(|n| (n, NameSource::Docker))
    };
    let containerd = || {
        read_config(
            &roots
                .containerd
                .join("io.containerd.runtime.v2.task/k8s.io")
                .join(id)
                .join("config.json"),
        )
        .and_then(|j| parse_oci_config(&j))
        .map(|n| (n, NameSource::OciBundle))
    };
    let crio = || {
        read_config(
            &roots
                .crio
                .join("overlay-containers")
                .join(id)
                .join("userdata/config.json"),
        )
        .and_then(|j| parse_oci_config(&j))
        .map(|n| (n, NameSource::OciBundle))
    };
    match runtime {
        Some(ContainerRuntime::Docker) => docker(),
        Some(ContainerRuntime::Containerd) => containerd(),
        Some(ContainerRuntime::CriO) => crio(),
        Some(ContainerRuntime::Podman) => None,
        None => containerd().or_else(crio).or_else(docker),
    }
}

#[cfg(not(feature = "container-names"))]
fn runtime_names(
    _roots: &Roots,
    _runtime: Option<ContainerRuntime>,
    _id: &str,
) -> Option<(Names, NameSource)> {
    None
}

/// Fills workloads' names, keeping what it read: the kubelet index (rebuilt on a miss at most
/// every few seconds) and each container's runtime names (read once per id).
#[derive(Debug, Default)]
pub struct NameCache {
    kubelet: Mutex<Option<(Instant, KubeletIndex)>>,
    runtime: Mutex<HashMap<String, Option<(Names, NameSource)>>>,
}

impl NameCache {
    /// An empty cache.
    pub fn new() -> NameCache {
        NameCache::default()
    }

    /// Fills `w`'s names from the node's files under `roots`, where they name it.
    pub fn fill(&self, roots: &Roots, w: &mut WorkloadInfo) {
        if !matches!(w.kind, WorkloadKind::Pod | WorkloadKind::Container) {
            return;
        }
        if let Some(names) = self.kubelet_names(roots, w) {
            apply(w, names, NameSource::KubeletLogs);
            return;
        }
        let Some(id) = w.container_id.clone() else {
            return;
        };
        let found = {
            let mut cache = match self.runtime.lock() {
                Ok(g) => g,
                Err(p) => p.into_inner(),
            };
            if cache.len() > MAX_ENTRIES {
                cache.clear();
            }
            cache
                .entry(id.clone())
                .or_insert_with(|| runtime_names(roots, w.runtime, &id))
                .clone()
        };
        if let Some((names, source)) = found {
            apply(w, names, source);
        }
    }

    /// The kubelet's names of `w`: by container id, else by pod UID.
    fn kubelet_names(&self, roots: &Roots, w: &WorkloadInfo) -> Option<Names> {
        let mut slot = match self.kubelet.lock() {
            Ok(g) => g,
            Err(p) => p.into_inner(),
        };
        let look = |idx: &KubeletIndex| {
            w.container_id
                .as_ref()
                .and_then(|id| idx.containers.get(id).cloned())
                .or_else(|| {
                    let (ns, pod) = idx.pods.get(w.pod_uid.as_ref()?)?;
                    Some(Names {
                        namespace: Some(ns.clone()),
                        pod: Some(pod.clone()),
                        container: None,
                    })
                })
        };
        if let Some((_, idx)) = slot.as_ref() {
            if let Some(n) = look(idx) {
                return Some(n);
            }
        }
        let fresh = slot
            .as_ref()
            .is_some_and(|(at, _)| at.elapsed() < INDEX_AGE);
        if fresh {
            return None;
        }
        let idx = read_kubelet(&roots.log);
        let found = look(&idx);
        *slot = Some((Instant::now(), idx));
        found
    }
}

fn apply(w: &mut WorkloadInfo, n: Names, source: NameSource) {
    if n.namespace.is_none() && n.pod.is_none() && n.container.is_none() {
        return;
    }
    w.namespace = n.namespace;
    w.pod_name = n.pod;
    w.container_name = n.container;
    w.names_from = Some(source);
}

#[cfg(test)]
mod tests {
    use super::*;

    const ID: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    const UID: &str = "1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718";

    #[test]
    fn the_kubelet_layout_names_pod_namespace_and_container() {
        let target = format!("/var/log/pods/ml_trainer-7d9f.x_{UID}/worker/0.log");
        let (id, n, uid) = parse_container_link(
            &format!("trainer-7d9f.x_ml_worker-{ID}.log"),
            target.as_bytes(),
        )
        .unwrap();
        assert_eq!((id.as_str(), uid.as_str()), (ID, UID));
        assert_eq!(n.namespace.as_deref(), Some("ml"));
        assert_eq!(n.pod.as_deref(), Some("trainer-7d9f.x"));
        assert_eq!(n.container.as_deref(), Some("worker"));
        assert_eq!(
            parse_pod_dir(&format!("kube-system_coredns-abc_{UID}")),
            Some(("kube-system".into(), "coredns-abc".into(), UID.into()))
        );
    }

    #[test]
    fn hostile_or_malformed_names_are_not_used() {
        for bad in [
            format!("ml_pod\u{1b}[31m_{UID}"),
            format!("ML_pod_{UID}"),
            format!("ml_pod_extra_{UID}"),
            format!("ml__{UID}"),
            "ml_pod_not-a-uid".to_string(),
            format!("{}_pod_{UID}", "n".repeat(64)),
            format!("ml_pod/../x_{UID}"),
        ] {
            assert_eq!(parse_pod_dir(&bad), None, "{bad:?}");
        }
        let good_target = format!("/var/log/pods/ml_p_{UID}/c/0.log");
        // A cut id (a long name truncated at 255 bytes), no `.log`, a bad container.
        assert!(
            parse_container_link(&format!("p_ml_c-{}.log", &ID[..40]), good_target.as_bytes())
                .is_none()
        );
        assert!(parse_container_link(&format!("p_ml_c-{ID}"), good_target.as_bytes()).is_none());
        let bad_container = format!("/var/log/pods/ml_p_{UID}/C_1/0.log");
        assert!(
            parse_container_link(&format!("p_ml_c-{ID}.log"), bad_container.as_bytes()).is_none()
        );
        assert!(parse_container_link(&format!("p_ml_c-{ID}.log"), b"\xff\xfe").is_none());
        assert!(parse_container_link(&format!("p_ml_c-{ID}.log"), b"relative").is_none());
        assert!(docker_name("web-1") && docker_name("A.b_c"));
        assert!(!docker_name("-x") && !docker_name("a/b") && !docker_name("a\nb"));
        assert!(!docker_name(&"a".repeat(256)));
    }

    #[cfg(feature = "container-names")]
    #[test]
    fn docker_and_oci_configs() {
        let d = br#"{"ID":"x","Name":"/web","Config":{"Env":["SECRET=1"],"Labels":{}}}"#;
        assert_eq!(
            parse_docker_config(d).unwrap().container.as_deref(),
            Some("web")
        );
        let k = br#"{"Name":"/k8s_worker_trainer_ml_uid_0","Config":{"Labels":{"io.kubernetes.pod.namespace":"ml","io.kubernetes.pod.name":"trainer","io.kubernetes.container.name":"worker"}}}"#;
        let n = parse_docker_config(k).unwrap();
        assert_eq!(
            (n.namespace.as_deref(), n.container.as_deref()),
            (Some("ml"), Some("worker"))
        );
        assert_eq!(parse_docker_config(br#"{"Name":"/bad name"}"#), None);
        assert_eq!(parse_docker_config(b"{not json"), None);
        let c = br#"{"annotations":{"io.kubernetes.cri.sandbox-namespace":"ml","io.kubernetes.cri.sandbox-name":"trainer","io.kubernetes.cri.container-name":"worker"}}"#;
        assert_eq!(parse_oci_config(c).unwrap().pod.as_deref(), Some("trainer"));
        let crio = br#"{"annotations":{"io.kubernetes.pod.namespace":"ml","io.kubernetes.pod.name":"p","io.kubernetes.container.name":"Bad_Name"}}"#;
        let n = parse_oci_config(crio).unwrap();
        assert_eq!((n.pod.as_deref(), n.container), (Some("p"), None));
    }

    #[test]
    fn the_cache_fills_a_pod_from_the_log_layout_and_rebuilds_on_a_miss() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path();
        std::fs::create_dir_all(log.join("containers")).unwrap();
        std::fs::create_dir_all(log.join(format!("pods/ml_trainer_{UID}/worker"))).unwrap();
        let roots = Roots::system()
            .with_log(log)
            .with_runtimes_under(dir.path());
        // As `classify` reads a kubelet's containerd scope (built here: `names` is below the
        // module of `classify` and never imports it).
        let mut w = WorkloadInfo::new(
            WorkloadKind::Pod,
            format!(
                "/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{ID}.scope",
                UID.replace('-', "_")
            ),
        );
        w.runtime = Some(ContainerRuntime::Containerd);
        w.container_id = Some(ID.to_string());
        w.pod_uid = Some(UID.to_string());
        w.unit = Some(format!("cri-containerd-{ID}.scope"));
        let cache = NameCache::new();
        cache.fill(&roots, &mut w);
        assert_eq!(w.pod_name.as_deref(), Some("trainer"), "from pods/ alone");
        assert_eq!(w.container_name, None);
        assert_eq!(w.label(), "ml/trainer");
        // The link appears: a miss after the index's age rebuilds it (here: a new cache).
        #[cfg(unix)]
        std::os::unix::fs::symlink(
            format!("/var/log/pods/ml_trainer_{UID}/worker/0.log"),
            log.join(format!("containers/trainer_ml_worker-{ID}.log")),
        )
        .unwrap();
        #[cfg(unix)]
        {
            let mut w2 = w.clone();
            w2.container_name = None;
            NameCache::new().fill(&roots, &mut w2);
            assert_eq!(w2.label(), "ml/trainer/worker");
            assert_eq!(w2.names_from, Some(NameSource::KubeletLogs));
        }
    }

    #[cfg(unix)]
    #[test]
    fn symlink_loops_and_unlistable_roots_are_no_names() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path();
        std::fs::create_dir_all(log.join("containers")).unwrap();
        let a = log.join(format!("containers/p_ml_c-{ID}.log"));
        std::os::unix::fs::symlink(&a, &a).unwrap();
        std::os::unix::fs::symlink(log.join("pods"), log.join("pods")).unwrap();
        let idx = read_kubelet(log);
        assert!(idx.containers.is_empty() && idx.pods.is_empty());
        assert_eq!(read_kubelet(&log.join("missing")), KubeletIndex::default());
    }
}
