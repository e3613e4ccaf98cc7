//! What a process does on a GPU: [`ProcessKind`] (an NVIDIA row's lists, a DRM row's engine
//! classes), [`EngineClass`] and [`EngineClasses`].

use std::fmt;
use std::str::FromStr;

use super::spelling::{UnknownSpelling, spelled, text_serde};

/// What kind of GPU context a process holds. NVIDIA rows are `compute`, `graphics` or
/// `compute+graphics` (the NVML lists they are in); a DRM row is the set of engine classes
/// its clients used ([`EngineClasses`]: `video`, `graphics+copy`, …, `idle` for none yet), and
/// `unknown` when its driver prints no engine counters. A DRM set that is exactly one of the
/// NVIDIA spellings is that variant, so the same text always means the same thing. Under MPS an
/// NVIDIA row is `mps` (a client) or `mps-server` (the server).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProcessKind {
    /// A compute context (CUDA, OpenCL, ROCm).
    Compute,
    /// A graphics context (OpenGL, Vulkan, a display server).
    Graphics,
    /// Both.
    ComputeGraphics,
    /// The engine classes a DRM client used, when not one of the above.
    Engines(EngineClasses),
    /// A DRM client whose driver prints no engine counters.
    Unreported,
    /// An MPS client: listed by `nvmlDeviceGetMPSComputeRunningProcesses` (its work runs in
    /// the MPS server's context; `M+C` in `nvidia-smi pmon`).
    Mps,
    /// The MPS server (`nvidia-cuda-mps-server`): the shared context its clients' work runs
    /// in.
    MpsServer,
}

// The spellings of the kinds that are no set of engine classes, written once for
// `ProcessKind::as_str` and `ProcessKind`'s `FromStr` (and its message).
const UNREPORTED: &str = "unknown";
const MPS: &str = "mps";
const MPS_SERVER: &str = "mps-server";

impl ProcessKind {
    /// The JSON spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            ProcessKind::Compute => "compute",
            ProcessKind::Graphics => "graphics",
            ProcessKind::ComputeGraphics => "compute+graphics",
            ProcessKind::Engines(set) => set.as_str(),
            ProcessKind::Unreported => UNREPORTED,
            ProcessKind::Mps => MPS,
            ProcessKind::MpsServer => MPS_SERVER,
        }
    }

    /// The kind of a DRM row whose clients used `set` (normalised: see the type's docs).
    pub const fn from_engines(set: EngineClasses) -> ProcessKind {
        match set.bits() {
            EngineClasses::COMPUTE_BIT => ProcessKind::Compute,
            EngineClasses::GRAPHICS_BIT => ProcessKind::Graphics,
            b if b == EngineClasses::COMPUTE_BIT | EngineClasses::GRAPHICS_BIT => {
                ProcessKind::ComputeGraphics
            }
            _ => ProcessKind::Engines(set),
        }
    }

    /// The engine classes this kind names (`None` for [`ProcessKind::Unreported`]; an MPS
    /// client or server is compute).
    pub const fn engines(self) -> Option<EngineClasses> {
        match self {
            ProcessKind::Compute | ProcessKind::Mps | ProcessKind::MpsServer => {
                Some(EngineClasses::from_bits(EngineClasses::COMPUTE_BIT))
            }
            ProcessKind::Graphics => Some(EngineClasses::from_bits(EngineClasses::GRAPHICS_BIT)),
            ProcessKind::ComputeGraphics => Some(EngineClasses::from_bits(
                EngineClasses::COMPUTE_BIT | EngineClasses::GRAPHICS_BIT,
            )),
            ProcessKind::Engines(set) => Some(set),
            ProcessKind::Unreported => None,
        }
    }

    /// The kind of a process seen in both lists (or with both sets of engines): an MPS role
    /// wins (an MPS client is in the compute list too), then the engine sets combine.
    #[must_use]
    pub const fn merge(self, other: ProcessKind) -> ProcessKind {
        match (self, other) {
            (ProcessKind::MpsServer, _) | (_, ProcessKind::MpsServer) => {
                return ProcessKind::MpsServer;
            }
            (ProcessKind::Mps, _) | (_, ProcessKind::Mps) => return ProcessKind::Mps,
            _ => {}
        }
        match (self.engines(), other.engines()) {
            (Some(a), Some(b)) => {
                ProcessKind::from_engines(EngineClasses::from_bits(a.bits() | b.bits()))
            }
            (Some(_), None) => self,
            (None, _) => other,
        }
    }
}

impl FromStr for ProcessKind {
    type Err = UnknownSpelling;

    /// The kind spelled `s`, as [`ProcessKind::as_str`] writes it (a set of engine classes is
    /// normalised as [`ProcessKind::from_engines`] does).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            UNREPORTED => ProcessKind::Unreported,
            MPS => ProcessKind::Mps,
            MPS_SERVER => ProcessKind::MpsServer,
            set => ProcessKind::from_engines(set.parse().map_err(|_| {
                UnknownSpelling::new(
                    "ProcessKind",
                    set,
                    &format!(
                        "{UNREPORTED}, {MPS}, {MPS_SERVER}, idle or a +-joined set of compute, \
                         graphics, video, copy, other"
                    ),
                )
            })?),
        })
    }
}

impl fmt::Display for ProcessKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

text_serde!(ProcessKind);

spelled! {
    /// The engine classes DRM drivers name their engines by: what a client's work was.
    #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
    #[non_exhaustive]
    pub enum EngineClass {
        /// Compute queues (amdgpu `compute`, i915 `compute`, xe `ccs`, v3d `csd`).
        Compute = "compute",
        /// 3D / render (amdgpu `gfx`, i915 `render`, xe `rcs`, panfrost `fragment`,
        /// `vertex-tiler`, v3d `bin`, `render`).
        Graphics = "graphics",
        /// Video decode, encode and processing (amdgpu `dec`, `enc`, `jpeg`, `vpe`, i915
        /// `video`, `video-enhance`, xe `vcs`, `vecs`).
        Video = "video",
        /// Copy / DMA (amdgpu `dma`, i915 `copy`, xe `bcs`, v3d `tfu`).
        Copy = "copy",
        /// An engine name this table does not know (msm's single `gpu`, v3d `cache_clean`, …).
        Other = "other",
    }
}

impl EngineClass {
    /// The class of engine `engine` (as fdinfo names it, `drm-engine-<engine>`).
    pub fn of(engine: &str) -> EngineClass {
        let e = engine.trim_end_matches(|c: char| c.is_ascii_digit() || c == '_');
        match e {
            "gfx" | "render" | "rcs" | "fragment" | "vertex-tiler" | "bin" => EngineClass::Graphics,
            "compute" | "comp" | "ccs" | "csd" => EngineClass::Compute,
            "dma" | "sdma" | "copy" | "bcs" | "tfu" => EngineClass::Copy,
            "dec" | "enc" | "jpeg" | "vpe" | "uvd" | "vce" | "vcn" | "video" | "video-enhance"
            | "vcs" | "vecs" => EngineClass::Video,
            _ => EngineClass::Other,
        }
    }

    const fn bit(self) -> u8 {
        match self {
            EngineClass::Compute => EngineClasses::COMPUTE_BIT,
            EngineClass::Graphics => EngineClasses::GRAPHICS_BIT,
            EngineClass::Video => 4,
            EngineClass::Copy => 8,
            EngineClass::Other => 16,
        }
    }
}

/// A set of [`EngineClass`]es: the engines a DRM client used (a nonzero busy time, cycle count
/// or busy percent). Spelled `+`-joined in the order compute, graphics, video, copy, other;
/// the empty set is `idle`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EngineClasses(u8);

/// Every set's spelling, by its bits.
const ENGINE_SET_NAMES: [&str; 32] = [
    "idle",
    "compute",
    "graphics",
    "compute+graphics",
    "video",
    "compute+video",
    "graphics+video",
    "compute+graphics+video",
    "copy",
    "compute+copy",
    "graphics+copy",
    "compute+graphics+copy",
    "video+copy",
    "compute+video+copy",
    "graphics+video+copy",
    "compute+graphics+video+copy",
    "other",
    "compute+other",
    "graphics+other",
    "compute+graphics+other",
    "video+other",
    "compute+video+other",
    "graphics+video+other",
    "compute+graphics+video+other",
    "copy+other",
    "compute+copy+other",
    "graphics+copy+other",
    "compute+graphics+copy+other",
    "video+copy+other",
    "compute+video+copy+other",
    "graphics+video+copy+other",
    "compute+graphics+video+copy+other",
];

impl EngineClasses {
    /// The bit of [`EngineClass::Compute`].
    pub const COMPUTE_BIT: u8 = 1;
    /// The bit of [`EngineClass::Graphics`].
    pub const GRAPHICS_BIT: u8 = 2;

    /// The set with these bits (bits beyond the five classes are dropped).
    pub const fn from_bits(bits: u8) -> EngineClasses {
        EngineClasses(bits & 31)
    }

    /// The set's bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// Adds a class.
    pub fn insert(&mut self, class: EngineClass) {
        self.0 |= class.bit();
    }

    /// Whether the set holds `class`.
    pub const fn contains(self, class: EngineClass) -> bool {
        self.0 & class.bit() != 0
    }

    /// The spelling (`video`, `graphics+copy`, `idle`).
    pub const fn as_str(self) -> &'static str {
        ENGINE_SET_NAMES[(self.0 & 31) as usize]
    }
}

impl FromStr for EngineClasses {
    type Err = UnknownSpelling;

    /// The set spelled `s` (`video`, `graphics+copy`, `idle`), as [`EngineClasses::as_str`]
    /// writes it.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        (0u8..32)
            .map(EngineClasses::from_bits)
            .find(|set| set.as_str() == s)
            .ok_or_else(|| {
                UnknownSpelling::new(
                    "EngineClasses",
                    s,
                    "idle or a +-joined set of compute, graphics, video, copy, other",
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kinds_without_engines_read_back_as_spelled_and_the_error_names_them() {
        for k in [
            ProcessKind::Unreported,
            ProcessKind::Mps,
            ProcessKind::MpsServer,
        ] {
            assert_eq!(k.as_str().parse::<ProcessKind>(), Ok(k));
        }
        let e = "gfx".parse::<ProcessKind>().unwrap_err();
        assert_eq!(
            e.expected,
            "unknown, mps, mps-server, idle or a +-joined set of compute, graphics, video, \
             copy, other"
        );
    }

    #[test]
    fn every_engine_set_is_spelled_by_its_classes() {
        let names: Vec<&str> = EngineClass::ALL.iter().map(|c| c.as_str()).collect();
        for bits in 0u8..32 {
            let parts: Vec<&str> = (0..5)
                .filter(|b| bits >> b & 1 == 1)
                .map(|b| names[b])
                .collect();
            let want = if parts.is_empty() {
                "idle".to_string()
            } else {
                parts.join("+")
            };
            assert_eq!(EngineClasses::from_bits(bits).as_str(), want);
        }
        assert_eq!(EngineClasses::from_bits(0xff).bits(), 31);
    }

    #[test]
    fn kinds_normalise_and_merge() {
        use ProcessKind::*;
        let set = |classes: &[EngineClass]| {
            let mut s = EngineClasses::default();
            for c in classes {
                s.insert(*c);
            }
            s
        };
        assert_eq!(
            ProcessKind::from_engines(set(&[EngineClass::Compute])),
            Compute
        );
        assert_eq!(
            ProcessKind::from_engines(set(&[EngineClass::Graphics, EngineClass::Compute])),
            ComputeGraphics
        );
        let video = ProcessKind::from_engines(set(&[EngineClass::Video]));
        assert_eq!(video.as_str(), "video");
        assert_eq!(video.merge(Graphics).as_str(), "graphics+video");
        assert_eq!(Unreported.merge(Compute), Compute);
        assert_eq!(Compute.merge(Unreported), Compute);
        assert_eq!(Unreported.as_str(), "unknown");
        assert_eq!(
            Mps.merge(Compute),
            Mps,
            "an MPS client is in the compute list too"
        );
        assert_eq!(Graphics.merge(MpsServer), MpsServer);
        assert_eq!(Mps.as_str(), "mps");
        assert_eq!(MpsServer.as_str(), "mps-server");
        assert_eq!(
            ProcessKind::from_engines(EngineClasses::default()).as_str(),
            "idle"
        );
        assert_eq!(EngineClass::of("enc_1"), EngineClass::Video);
        assert_eq!(EngineClass::of("video-enhance"), EngineClass::Video);
        assert_eq!(EngineClass::of("gpu"), EngineClass::Other);
        assert!(set(&[EngineClass::Copy]).contains(EngineClass::Copy));
    }
}
