//! Fixture `/sys` trees for DRM devices: `class/drm/<node>/device` links into
//! `devices/<pci-or-platform-name>/` with the attribute files of real drivers (amdgpu
//! `mem_info_*`, hwmon, `power/runtime_status`, `uevent`), and the AMD KFD files.

use std::path::{Path, PathBuf};

/// A fake GPU's sysfs description.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeGpu {
    /// PCI slot (`0000:03:00.0`), or a platform device name for SoC GPUs (`ae00000.gpu`).
    pub dir_name: String,
    /// Whether `dir_name` is a PCI slot (written as `PCI_SLOT_NAME`).
    pub pci: bool,
    /// PCI vendor id.
    pub vendor: Option<u16>,
    /// PCI device id.
    pub device: Option<u16>,
    /// Kernel driver.
    pub driver: String,
    /// DRM/accel node names (`card1`, `renderD128`, `accel0`).
    pub nodes: Vec<String>,
    /// `power/runtime_status`.
    pub runtime_status: String,
    /// Extra files relative to the device directory, with their content.
    pub files: Vec<(String, String)>,
}

impl FakeGpu {
    fn new(
        dir_name: &str,
        pci: bool,
        vendor: Option<u16>,
        device: Option<u16>,
        driver: &str,
        nodes: &[&str],
    ) -> Self {
        FakeGpu {
            dir_name: dir_name.to_string(),
            pci,
            vendor,
            device,
            driver: driver.to_string(),
            nodes: nodes.iter().map(|n| (*n).to_string()).collect(),
            runtime_status: "active".to_string(),
            files: Vec::new(),
        }
    }

    /// An 8 GiB amdgpu card (values from a real report: 6812925952 of 8573157376 bytes used),
    /// with hwmon (45 °C, 21 W; vddgfx, and no vddnb: a discrete card) and `gpu_busy_percent` 7.
    pub fn amdgpu(slot: &str, card: u32, render: u32) -> Self {
        FakeGpu::new(
            slot,
            true,
            Some(0x1002),
            Some(0x73ff),
            "amdgpu",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
        .file("mem_info_vram_total", "8573157376")
        .file("mem_info_vram_used", "6812925952")
        .file("mem_info_vis_vram_total", "268435456")
        .file("mem_info_vis_vram_used", "148897792")
        .file("mem_info_gtt_total", "16690659328")
        .file("mem_info_gtt_used", "60506112")
        .file("gpu_busy_percent", "7")
        .file("hwmon/hwmon4/name", "amdgpu")
        .file("hwmon/hwmon4/temp1_input", "45000")
        .file("hwmon/hwmon4/temp1_label", "edge")
        .file("hwmon/hwmon4/power1_average", "21000000")
        .file("hwmon/hwmon4/in0_label", "vddgfx")
    }

    /// An AMD APU (amdgpu), 1002:`device`: `mem_info_vram_*` (the carve-out) and
    /// `mem_info_gtt_*` as given (total, used), and hwmon as on an APU — `in0_label` vddgfx,
    /// `in1_label` vddnb, no `freq2_*`, `temp2_*` or `fan1_*` (`amdgpu_pm.c`
    /// `hwmon_attributes_visible()`); `gpu_busy_percent` 3.
    pub fn amd_apu(
        slot: &str,
        card: u32,
        render: u32,
        device: u16,
        vram: (u64, u64),
        gtt: (u64, u64),
    ) -> Self {
        FakeGpu::new(
            slot,
            true,
            Some(0x1002),
            Some(device),
            "amdgpu",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
        .file("mem_info_vram_total", &vram.0.to_string())
        .file("mem_info_vram_used", &vram.1.to_string())
        .file("mem_info_vis_vram_total", &vram.0.to_string())
        .file("mem_info_vis_vram_used", &vram.1.to_string())
        .file("mem_info_gtt_total", &gtt.0.to_string())
        .file("mem_info_gtt_used", &gtt.1.to_string())
        .file("gpu_busy_percent", "3")
        .file("hwmon/hwmon5/name", "amdgpu")
        .file("hwmon/hwmon5/temp1_input", "52000")
        .file("hwmon/hwmon5/temp1_label", "edge")
        .file("hwmon/hwmon5/power1_average", "18000000")
        .file("hwmon/hwmon5/in0_label", "vddgfx")
        .file("hwmon/hwmon5/in1_label", "vddnb")
    }

    /// A Ryzen AI Max+ 395 (Strix Halo, 1002:1586) on a default boot of a 128 GB machine: a
    /// 512 MiB carve-out ("512M of VRAM memory ready") with 148 MiB in use at idle
    /// (homelab-monitor PR #237: "148 MB / 512 MB"), GTT 65867993088 bytes (Ubuntu 6.17 dmesg:
    /// "TTM size has been set as 65867993088") with `gtt_used` bytes in use (COMPOSED).
    pub fn strix_halo(slot: &str, card: u32, render: u32, gtt_used: u64) -> Self {
        FakeGpu::amd_apu(
            slot,
            card,
            render,
            0x1586,
            (536_870_912, 155_189_248),
            (65_867_993_088, gtt_used),
        )
    }

    /// Removes the device's hwmon (as with `amdgpu.dpm=0`, or on an SR-IOV virtual function).
    #[must_use]
    pub fn without_hwmon(mut self) -> Self {
        self.files.retain(|(rel, _)| !rel.starts_with("hwmon/"));
        self
    }

    /// Removes the files whose path (relative to the device directory) ends with `suffix`.
    #[must_use]
    pub fn without(mut self, suffix: &str) -> Self {
        self.files.retain(|(rel, _)| !rel.ends_with(suffix));
        self
    }

    /// An Intel integrated GPU (i915) at 0000:00:02.0.
    pub fn i915_igpu(card: u32, render: u32) -> Self {
        FakeGpu::new(
            "0000:00:02.0",
            true,
            Some(0x8086),
            Some(0x9a49),
            "i915",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
    }

    /// An Intel integrated GPU on xe (Lunar Lake, 0x64a0) at 0000:00:02.0: no xe hwmon, which
    /// only discrete cards have.
    pub fn xe_igpu(card: u32, render: u32) -> Self {
        FakeGpu::new(
            "0000:00:02.0",
            true,
            Some(0x8086),
            Some(0x64a0),
            "xe",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
    }

    /// An Intel discrete GPU on xe, with xe hwmon energy.
    pub fn xe_dgpu(slot: &str, card: u32, render: u32) -> Self {
        FakeGpu::new(
            slot,
            true,
            Some(0x8086),
            Some(0xe20b),
            "xe",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
        .file("hwmon/hwmon2/name", "xe")
        .file("hwmon/hwmon2/energy1_input", "123456789")
        .file("tile0/gt0/freq0/act_freq", "2850")
    }

    /// An NVIDIA GPU's DRM nodes (nvidia-drm).
    pub fn nvidia(slot: &str, card: u32, render: u32) -> Self {
        FakeGpu::new(
            slot,
            true,
            Some(0x10de),
            Some(0x2330),
            "nvidia",
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
    }

    /// A SoC GPU on a platform bus (no PCI address).
    pub fn platform(name: &str, driver: &str, card: u32, render: u32) -> Self {
        FakeGpu::new(
            name,
            false,
            None,
            None,
            driver,
            &[&format!("card{card}"), &format!("renderD{render}")],
        )
    }

    /// A firmware framebuffer (simpledrm), which is not a GPU.
    pub fn simpledrm(card: u32) -> Self {
        FakeGpu::new(
            "simple-framebuffer.0",
            false,
            None,
            None,
            "simple-framebuffer",
            &[&format!("card{card}")],
        )
    }

    /// Marks the device runtime-suspended.
    #[must_use]
    pub fn suspended(mut self) -> Self {
        self.runtime_status = "suspended".to_string();
        self
    }

    /// amdgpu RAS files (`ras/umc_err_count` = `umc`, `ras/gfx_err_count` with no errors,
    /// `ras/features`, and `ras/gpu_vram_bad_pages` when given). **Composed** from the kernel's
    /// format strings in `amdgpu_ras.c` — `"%s: %lu\n%s: %lu\n"` with `ue` and `ce`, the UMC
    /// `de:` line of newer kernels, `"Query currently inaccessible\n"`, `"feature mask:
    /// 0x%x\n"`, and `"0x%08x : 0x%08x : %1s\n"` per bad page — not captured from a GPU.
    #[must_use]
    pub fn ras(self, umc: &str, bad_pages: Option<&str>) -> Self {
        let g = self
            .file("ras/umc_err_count", umc.trim_end())
            .file("ras/gfx_err_count", "ue: 0\nce: 0")
            .file("ras/features", "feature mask: 0x3fbf");
        match bad_pages {
            Some(p) => g.file("ras/gpu_vram_bad_pages", p.trim_end()),
            None => g,
        }
    }

    /// Adds (or replaces) a file relative to the device directory.
    #[must_use]
    pub fn file(mut self, rel: &str, content: &str) -> Self {
        self.files.retain(|(r, _)| r != rel);
        self.files.push((rel.to_string(), format!("{content}\n")));
        self
    }
}

/// A fixture `/sys` tree.
#[derive(Debug, Clone)]
pub struct SysFixture {
    root: PathBuf,
}

impl SysFixture {
    /// Creates (or reuses) the root.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        Ok(SysFixture {
            root: root.to_path_buf(),
        })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes a GPU: its device directory, and one `class/drm` (or `class/accel`) entry per
    /// node with a relative `device` link, as the kernel lays them out. A connector entry
    /// (`cardN-DP-1`) is added next to each card node, to be ignored.
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn gpu(&self, g: &FakeGpu) -> std::io::Result<&Self> {
        let dev = self.root.join("devices").join(&g.dir_name);
        std::fs::create_dir_all(dev.join("power"))?;
        let mut uevent = format!("DRIVER={}\n", g.driver);
        if g.pci {
            if let (Some(v), Some(d)) = (g.vendor, g.device) {
                uevent.push_str(&format!("PCI_CLASS=30000\nPCI_ID={v:04X}:{d:04X}\n"));
            }
            uevent.push_str(&format!("PCI_SLOT_NAME={}\n", g.dir_name));
        }
        crate::write_atomic(&dev.join("uevent"), uevent.as_bytes())?;
        if let Some(v) = g.vendor {
            crate::write_atomic(&dev.join("vendor"), format!("0x{v:04x}\n").as_bytes())?;
        }
        if let Some(d) = g.device {
            crate::write_atomic(&dev.join("device"), format!("0x{d:04x}\n").as_bytes())?;
        }
        crate::write_atomic(
            &dev.join("power/runtime_status"),
            format!("{}\n", g.runtime_status).as_bytes(),
        )?;
        for (rel, content) in &g.files {
            crate::write_atomic(&dev.join(rel), content.as_bytes())?;
        }
        for node in &g.nodes {
            let class = if node.starts_with("accel") {
                "accel"
            } else {
                "drm"
            };
            let entry = self.root.join("class").join(class).join(node);
            std::fs::create_dir_all(&entry)?;
            let link = entry.join("device");
            let _ = std::fs::remove_file(&link);
            crate::symlink(Path::new("../../../devices").join(&g.dir_name), link)?;
            if node.starts_with("card") {
                std::fs::create_dir_all(self.root.join("class/drm").join(format!("{node}-DP-1")))?;
            }
        }
        Ok(self)
    }

    /// Writes a KFD topology node for a GPU (`gpu_id`, and `properties` with `domain` and
    /// `location_id` = bus << 8 | device << 3 | function).
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn kfd_node(
        &self,
        node: u32,
        gpu_id: u64,
        domain: u32,
        bus: u8,
        device: u8,
        function: u8,
    ) -> std::io::Result<&Self> {
        let dir = self
            .root
            .join("class/kfd/kfd/topology/nodes")
            .join(node.to_string());
        std::fs::create_dir_all(&dir)?;
        crate::write_atomic(&dir.join("gpu_id"), format!("{gpu_id}\n").as_bytes())?;
        let location = (u32::from(bus) << 8) | (u32::from(device) << 3) | u32::from(function);
        let props =
            format!("cpu_cores_count 0\nsimd_count 304\nlocation_id {location}\ndomain {domain}\n");
        crate::write_atomic(&dir.join("properties"), props.as_bytes())?;
        Ok(self)
    }

    /// Writes a KFD process's VRAM on one GPU.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn kfd_process(&self, pid: u32, gpu_id: u64, vram_bytes: u64) -> std::io::Result<&Self> {
        let dir = self.root.join("class/kfd/kfd/proc").join(pid.to_string());
        std::fs::create_dir_all(&dir)?;
        crate::write_atomic(
            &dir.join(format!("vram_{gpu_id}")),
            format!("{vram_bytes}\n").as_bytes(),
        )?;
        crate::write_atomic(&dir.join("pasid"), b"32771\n")?;
        Ok(self)
    }
}
