//! A fixture world: a `/proc` and a `/sys` tree side by side, with the defaults every DRM test
//! needs (a real-looking `meminfo`, a kernel release), and the recorded fdinfo samples.

use std::path::{Path, PathBuf};

use crate::{FakeGpu, FakeProc, ProcFixture, SysFixture};

/// The directory of recorded DRM fdinfo samples (`crates/hypomnesis/tests/fixtures/fdinfo`).
pub fn fdinfo_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../hypomnesis/tests/fixtures/fdinfo")
}

/// One recorded fdinfo sample, by file name (provenance in the fixtures' README).
///
/// # Errors
/// When the file cannot be read.
pub fn fdinfo_sample(name: &str) -> std::io::Result<String> {
    let path = fdinfo_dir().join(name);
    std::fs::read_to_string(&path)
        .map_err(|e| std::io::Error::new(e.kind(), format!("{}: {e}", path.display())))
}

/// `<root>/proc` and `<root>/sys` fixture trees.
#[derive(Debug, Clone)]
pub struct World {
    /// The `/proc` tree.
    pub proc: ProcFixture,
    /// The `/sys` tree.
    pub sys: SysFixture,
}

impl World {
    /// Creates both trees under `root`, with a 24 GiB `meminfo` and kernel release 6.18.44.
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn new(root: &Path) -> std::io::Result<World> {
        let proc = ProcFixture::new(&root.join("proc"))?;
        proc.meminfo(24_684_084, 24_444_784)?;
        proc.osrelease("6.18.44")?;
        let sys = SysFixture::new(&root.join("sys"))?;
        Ok(World { proc, sys })
    }

    /// Adds a GPU to `/sys`.
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn gpu(&self, g: FakeGpu) -> std::io::Result<&Self> {
        self.sys.gpu(&g)?;
        Ok(self)
    }

    /// Adds a process with fds 0 (`/dev/null`) and 1 (a socket) plus DRM fds given as
    /// `(fd, node, fdinfo text)`.
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn client(
        &self,
        pid: u32,
        comm: &str,
        fds: &[(u32, &str, &str)],
    ) -> std::io::Result<&Self> {
        self.proc.process(&FakeProc::new(pid, comm))?;
        self.proc.fd(pid, 0, "/dev/null")?;
        self.proc.fd(pid, 1, "socket:[12345]")?;
        for (fd, node, text) in fds {
            self.proc.drm_fd(pid, *fd, node, text)?;
        }
        Ok(self)
    }
}

/// Writes one container of a Kubernetes pod into the kubelet's log layout under `log_root`, as
/// `kubernetes/pkg/kubelet/kuberuntime` names it: the directory
/// `pods/<namespace>_<pod>_<uid>/<container>/` with an empty `0.log`, and the symlink
/// `containers/<pod>_<namespace>_<container>-<id>.log` → the absolute host path
/// `/var/log/pods/<namespace>_<pod>_<uid>/<container>/0.log` (dangling here, as it is when
/// the host's `/var/log` is mounted elsewhere; hmn reads the link, never follows it).
///
/// # Errors
/// When the files cannot be written.
pub fn kubelet_container(
    log_root: &Path,
    namespace: &str,
    pod: &str,
    uid: &str,
    container: &str,
    id: &str,
) -> std::io::Result<()> {
    let pod_dir = format!("{namespace}_{pod}_{uid}");
    let dir = log_root.join("pods").join(&pod_dir).join(container);
    std::fs::create_dir_all(&dir)?;
    std::fs::write(dir.join("0.log"), b"")?;
    let links = log_root.join("containers");
    std::fs::create_dir_all(&links)?;
    let link = links.join(format!("{pod}_{namespace}_{container}-{id}.log"));
    let _ = std::fs::remove_file(&link);
    crate::symlink(
        Path::new("/var/log/pods")
            .join(pod_dir)
            .join(container)
            .join("0.log"),
        link,
    )
}
