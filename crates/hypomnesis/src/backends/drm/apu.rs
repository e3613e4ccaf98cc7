//! Whether an amdgpu device is an APU (its VRAM a BIOS carve-out, its working memory GTT), from
//! sysfs alone: the rule ([`decide`], pure) over what the device's hwmon shows of amdgpu's
//! voltage channels ([`HwmonVoltages::read`], which only lists directories and reads the two
//! constant label files — never a sensor, so it never wakes the GPU).
//!
//! # The signal
//! amdgpu's hwmon has `in0_*` (vddgfx, the GPU's voltage) and `in1_*` (vddnb, the Northbridge
//! voltage). The kernel's thermal documentation (`Documentation/gpu/amdgpu/thermal.rst`, 5.19
//! to 6.12 alike) says "Northbridge voltage (APUs only)", and `amdgpu_pm.c`
//! `hwmon_attributes_visible()` hides `in1_input`/`in1_label` on every device without
//! `AMD_IS_APU` ("only APUs have vddnb", since 4.17, commit 2bd376bf8f4d). The same function
//! hides both channels on the multi-AID parts (GC 9.4.3 / 9.4.4 / 9.5.0: the MI300 class, APU
//! or not; `amdgpu_is_multi_aid()` in the newest form) and vddgfx alone on SI and Kaveri
//! ("not implemented yet"; Jean Delvare's 2019 patch). So vddnb means an APU; vddgfx without
//! vddnb means not one; neither decides nothing. `in1_label` holds the constant `vddnb`
//! (`amdgpu_hwmon_show_vddnb_label`, no hardware access). The attributes' *existence* is
//! decided when hwmon is registered; the value of `in1_input` is never read (it asks the SMU,
//! and fails on a suspended device). fastfetch (`gpu_linux.c`, 2024) and glances (PR #3377)
//! use the same channel.
//!
//! hwmon is registered only with power management on (`amdgpu_pm_sysfs_init` returns early
//! when `dpm_enabled` is 0) and not on an SR-IOV virtual function: without it the question is
//! left open — never answered "discrete" — with a hint when the VRAM is smaller than GTT (as
//! on an APU, but also on a small card in a large host: a hint, never a fact). A device with
//! no VRAM at all and GTT (the MI300A reports a zero carve-out) is an APU whatever its hwmon.

use std::path::Path;

use crate::system::fsread;

/// What a device's hwmon directories show of amdgpu's voltage channels.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct HwmonVoltages {
    /// The device has at least one `hwmon/hwmonN` directory.
    pub hwmon: bool,
    /// `in0_label` (vddgfx) exists.
    pub vddgfx: bool,
    /// `in1_label` (vddnb): `None` absent; `Some(Ok(text))` read (trimmed); `Some(Err(why))`
    /// present but unreadable.
    pub vddnb: Option<Result<String, String>>,
}

impl HwmonVoltages {
    /// Reads `dev/hwmon/hwmon*/in{0,1}_label` (existence; the label's text).
    pub(crate) fn read(dev: &Path) -> HwmonVoltages {
        let mut v = HwmonVoltages::default();
        let mut dirs = fsread::list_dir(&dev.join("hwmon")).unwrap_or_default();
        dirs.sort();
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            v.hwmon = true;
            v.vddgfx |= dir.join("in0_label").symlink_metadata().is_ok();
            let label = dir.join("in1_label");
            if v.vddnb.is_none() && label.symlink_metadata().is_ok() {
                v.vddnb = Some(
                    fsread::read_trimmed(&label).map_err(|e| format!("{}: {e}", label.display())),
                );
            }
        }
        v
    }
}

/// The answer, with its evidence (or why there is none).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Apu {
    /// An APU.
    Yes(String),
    /// Not an APU.
    No(String),
    /// Cannot be told from sysfs.
    Unknown(String),
}

const DOC: &str = "kernel Documentation/gpu/amdgpu/thermal.rst: \"Northbridge voltage (APUs \
    only)\"; amdgpu_pm.c hwmon_attributes_visible()";

/// Decides from the voltage channels and the two memory sizes (`mem_info_vram_total`,
/// `mem_info_gtt_total`). See the [module docs](self).
pub(crate) fn decide(v: &HwmonVoltages, vram: Option<u64>, gtt: Option<u64>) -> Apu {
    match &v.vddnb {
        Some(Ok(label)) if label == "vddnb" => {
            return Apu::Yes(format!(
                "amdgpu hwmon has in1_label \"vddnb\", the Northbridge voltage, shown on APUs \
                 only ({DOC})"
            ));
        }
        Some(Err(why)) => {
            return Apu::Yes(format!(
                "amdgpu hwmon has in1_label (vddnb), which the kernel creates on APUs only \
                 ({DOC}); its text could not be read ({why})"
            ));
        }
        Some(Ok(other)) => {
            return Apu::Unknown(format!(
                "amdgpu hwmon in1_label reads {other:?}, not the kernel's \"vddnb\": not \
                 amdgpu's Northbridge channel{}",
                hint(vram, gtt)
            ));
        }
        None => {}
    }
    // No vddnb. A device without VRAM of its own is no discrete card.
    if vram == Some(0) && gtt.is_some_and(|g| g > 0) {
        return Apu::Yes(
            "amdgpu with no VRAM carve-out (mem_info_vram_total 0) and GTT: a multi-AID APU \
             (MI300A class), whose hwmon has no voltage channels by design (GC 9.4.3 family, \
             hwmon_attributes_visible())"
                .to_string(),
        );
    }
    match (v.hwmon, v.vddgfx) {
        (true, true) => Apu::No(format!(
            "amdgpu hwmon has vddgfx (in0_label) and no vddnb (in1_label): the kernel shows \
             vddnb on every APU that shows vddgfx ({DOC})"
        )),
        (true, false) => Apu::Unknown(format!(
            "amdgpu hwmon shows neither vddgfx nor vddnb (in0_label, in1_label), as on SI or a \
             multi-AID MI300-class part, APU or not: whether it is an APU cannot be told from \
             sysfs{}",
            hint(vram, gtt)
        )),
        (false, _) => Apu::Unknown(format!(
            "amdgpu registered no hwmon (power management off, amdgpu.dpm=0, or an SR-IOV \
             virtual function): whether it is an APU cannot be told from sysfs{}",
            hint(vram, gtt)
        )),
    }
}

/// The size-shape hint for an undecided device.
fn hint(vram: Option<u64>, gtt: Option<u64>) -> &'static str {
    match (vram, gtt) {
        (Some(v), Some(g)) if v < g => {
            "; its VRAM is smaller than GTT, as on an APU (not proof: a small card in a large \
             host looks the same)"
        }
        _ => "",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const VRAM: Option<u64> = Some(536_870_912);
    const GTT: Option<u64> = Some(65_867_993_088);

    fn v(hwmon: bool, vddgfx: bool, vddnb: Option<Result<&str, &str>>) -> HwmonVoltages {
        HwmonVoltages {
            hwmon,
            vddgfx,
            vddnb: vddnb.map(|r| r.map(str::to_string).map_err(str::to_string)),
        }
    }

    #[test]
    fn vddnb_means_apu() {
        let a = decide(&v(true, true, Some(Ok("vddnb"))), VRAM, GTT);
        assert!(
            matches!(&a, Apu::Yes(e) if e.contains("thermal.rst")),
            "{a:?}"
        );
        // Sizes do not matter once the channel is there (a large carve-out).
        let big = decide(
            &v(true, true, Some(Ok("vddnb"))),
            Some(8 << 30),
            Some(4 << 30),
        );
        assert!(matches!(big, Apu::Yes(_)));
    }

    #[test]
    fn an_unreadable_label_still_exists() {
        let a = decide(&v(true, true, Some(Err("EACCES"))), VRAM, GTT);
        assert!(
            matches!(&a, Apu::Yes(e) if e.contains("could not be read (EACCES)")),
            "{a:?}"
        );
    }

    #[test]
    fn another_label_decides_nothing() {
        let a = decide(&v(true, true, Some(Ok("vin1"))), VRAM, GTT);
        assert!(
            matches!(&a, Apu::Unknown(e) if e.contains("\"vin1\"") && e.contains("smaller than GTT")),
            "{a:?}"
        );
    }

    #[test]
    fn vddgfx_without_vddnb_is_discrete() {
        let a = decide(&v(true, true, None), Some(8 << 30), Some(16 << 30));
        assert!(matches!(&a, Apu::No(e) if e.contains("vddgfx")), "{a:?}");
    }

    #[test]
    fn no_vram_at_all_is_the_mi300a_class() {
        for hw in [v(true, false, None), v(false, false, None)] {
            let a = decide(&hw, Some(0), Some(128 << 30));
            assert!(matches!(&a, Apu::Yes(e) if e.contains("MI300A")), "{a:?}");
        }
        // No GTT either: nothing to go on.
        assert!(matches!(
            decide(&v(false, false, None), Some(0), None),
            Apu::Unknown(_)
        ));
    }

    #[test]
    fn without_hwmon_it_is_unknown_with_a_hint_never_discrete() {
        let a = decide(&v(false, false, None), VRAM, GTT);
        assert!(
            matches!(&a, Apu::Unknown(e) if e.contains("amdgpu.dpm=0") && e.contains("not proof")),
            "{a:?}"
        );
        let big_card = decide(&v(false, false, None), Some(24 << 30), Some(16 << 30));
        assert!(
            matches!(&big_card, Apu::Unknown(e) if !e.contains("smaller than GTT")),
            "{big_card:?}"
        );
        let no_channels = decide(&v(true, false, None), VRAM, GTT);
        assert!(
            matches!(&no_channels, Apu::Unknown(e) if e.contains("neither") && e.contains("MI300")),
            "{no_channels:?}"
        );
    }

    #[test]
    fn reading_the_labels() {
        let dir = tempfile::tempdir().unwrap();
        let dev = dir.path();
        assert_eq!(HwmonVoltages::read(dev), HwmonVoltages::default());
        let h = dev.join("hwmon/hwmon3");
        std::fs::create_dir_all(&h).unwrap();
        std::fs::write(h.join("in0_label"), "vddgfx\n").unwrap();
        assert_eq!(HwmonVoltages::read(dev), v(true, true, None));
        std::fs::write(h.join("in1_label"), "vddnb\n").unwrap();
        assert_eq!(HwmonVoltages::read(dev), v(true, true, Some(Ok("vddnb"))));
        // A label that is not a regular file: present, unreadable.
        std::fs::remove_file(h.join("in1_label")).unwrap();
        std::fs::create_dir(h.join("in1_label")).unwrap();
        let got = HwmonVoltages::read(dev);
        assert!(
            matches!(&got.vddnb, Some(Err(e)) if e.contains("in1_label")),
            "{got:?}"
        );
    }
}
