//! [`Sandbox`]: the test bed both crates' integration harnesses build on — a temporary
//! directory holding fixture `/proc` and `/sys` trees ([`World`]), wired by an [`Env`], with no
//! NVIDIA backend unless a test installs one (so a GPU on the test machine never leaks in).

use std::path::PathBuf;

use crate::{Env, FakeGpu, FakeNvml, ProcFixture, World};

/// A fixture `/proc` (24 GiB `meminfo`, kernel 6.18.44) and an empty `/sys` in a temporary
/// directory, and the [`Env`] that points a binary or a probe at them.
#[derive(Debug)]
pub struct Sandbox {
    /// The temporary directory; everything the sandbox writes is under it.
    pub dir: tempfile::TempDir,
    /// The fixture trees.
    pub world: World,
    /// What the binary or probe is pointed at.
    pub env: Env,
}

impl Sandbox {
    /// A sandbox with no GPU.
    ///
    /// # Panics
    /// When the temporary directory or the fixture trees cannot be created (test support).
    #[expect(
        clippy::expect_used,
        reason = "test support: a failed setup stops the test"
    )]
    pub fn new() -> Sandbox {
        let dir = tempfile::tempdir().expect("temporary directory");
        let world = World::new(dir.path()).expect("fixture /proc and /sys");
        let env = Env::new(dir.path());
        Sandbox { dir, world, env }
    }

    /// A sandbox whose NVML is this fake.
    pub fn with_nvml(fake: &FakeNvml) -> Sandbox {
        let mut s = Sandbox::new();
        s.install_nvml(fake);
        s
    }

    /// Installs this fake as the sandbox's NVML.
    ///
    /// # Panics
    /// When the fake cannot be installed.
    #[expect(
        clippy::expect_used,
        reason = "test support: a failed setup stops the test"
    )]
    pub fn install_nvml(&mut self, fake: &FakeNvml) {
        self.env.nvml = fake
            .install(&self.path("nvml"))
            .expect("install the fake NVML");
    }

    /// Reads this machine's `/proc` (for tests that follow real processes).
    #[must_use]
    pub fn real_proc(mut self) -> Sandbox {
        self.env = self.env.real_proc();
        self
    }

    /// A path in the sandbox's directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// The fixture `/proc`'s root.
    pub fn proc(&self) -> PathBuf {
        self.world.proc.root().to_path_buf()
    }

    /// The fixture `/proc`.
    pub fn fixture(&self) -> &ProcFixture {
        &self.world.proc
    }

    /// Adds a GPU to the fixture `/sys`.
    ///
    /// # Panics
    /// When the fixture cannot be written.
    #[expect(
        clippy::expect_used,
        reason = "test support: a failed setup stops the test"
    )]
    pub fn gpu(&self, g: FakeGpu) -> &Self {
        self.world.gpu(g).expect("write the fixture GPU");
        self
    }

    /// Adds one container of a Kubernetes pod to the kubelet's log layout under the log root
    /// (`pods/<namespace>_<pod>_<uid>/<container>/0.log` and the `containers/` symlink to it,
    /// as the kubelet lays them out: [`crate::kubelet_container`]).
    ///
    /// # Panics
    /// When the fixture cannot be written.
    #[expect(
        clippy::expect_used,
        reason = "test support: a failed setup stops the test"
    )]
    pub fn kubelet_container(
        &self,
        namespace: &str,
        pod: &str,
        uid: &str,
        container: &str,
        id: &str,
    ) -> &Self {
        crate::kubelet_container(&self.env.log, namespace, pod, uid, container, id)
            .expect("write the kubelet layout");
        self
    }

    /// Adds a DRM client process (see [`World::client`]).
    ///
    /// # Panics
    /// When the fixture cannot be written.
    #[expect(
        clippy::expect_used,
        reason = "test support: a failed setup stops the test"
    )]
    pub fn client(&self, pid: u32, comm: &str, fds: &[(u32, &str, &str)]) -> &Self {
        self.world
            .client(pid, comm, fds)
            .expect("write the fixture client");
        self
    }
}

impl Default for Sandbox {
    fn default() -> Self {
        Sandbox::new()
    }
}

/// Declares a harness's bed: a newtype over [`Sandbox`] that derefs to it (so a harness adds
/// its own methods, such as commands for a binary or a probe, and shares the rest), with
/// `new`, `with_nvml` and `real_proc`.
#[macro_export]
macro_rules! sandbox_newtype {
    ($(#[$meta:meta])* $vis:vis $name:ident) => {
        $(#[$meta])*
        $vis struct $name($crate::Sandbox);

        impl ::std::ops::Deref for $name {
            type Target = $crate::Sandbox;
            fn deref(&self) -> &$crate::Sandbox {
                &self.0
            }
        }

        impl ::std::ops::DerefMut for $name {
            fn deref_mut(&mut self) -> &mut $crate::Sandbox {
                &mut self.0
            }
        }

        impl $name {
            /// A bed with no GPU.
            pub fn new() -> $name {
                $name($crate::Sandbox::new())
            }

            /// A bed whose NVML is this fake.
            pub fn with_nvml(fake: &$crate::FakeNvml) -> $name {
                $name($crate::Sandbox::with_nvml(fake))
            }

            /// Reads this machine's `/proc` (for tests that follow real processes).
            pub fn real_proc(self) -> $name {
                $name(self.0.real_proc())
            }
        }
    };
}
