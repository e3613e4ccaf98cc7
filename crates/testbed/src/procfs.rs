//! Fixture `/proc` trees: `meminfo` and per-process `comm`, `cmdline`, `status`, `statm`,
//! with the layout of real Linux 6.x files (the `status` template is a real
//! `/proc/self/status` from Linux 6.18 with the values substituted).

use std::path::{Path, PathBuf};

/// A process to write into a fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FakeProc {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// `comm` (the kernel would cut it at 15 bytes; a fixture may write anything).
    pub comm: String,
    /// Arguments.
    pub cmdline: Vec<String>,
    /// Real, effective, saved and filesystem UID.
    pub uid: u32,
    /// `VmRSS`, KiB.
    pub rss_kib: u64,
    /// `VmHWM`, KiB.
    pub hwm_kib: u64,
    /// `VmSwap`, KiB.
    pub swap_kib: u64,
}

impl FakeProc {
    /// A root-owned process with `cmdline = [comm]` and a 1748 KiB RSS.
    pub fn new(pid: u32, comm: &str) -> Self {
        FakeProc {
            pid,
            ppid: 1,
            comm: comm.to_string(),
            cmdline: vec![comm.to_string()],
            uid: 0,
            rss_kib: 1748,
            hwm_kib: 1748,
            swap_kib: 0,
        }
    }

    /// Sets the UID.
    #[must_use]
    pub fn uid(mut self, uid: u32) -> Self {
        self.uid = uid;
        self
    }

    /// Sets the parent.
    #[must_use]
    pub fn ppid(mut self, ppid: u32) -> Self {
        self.ppid = ppid;
        self
    }

    /// Sets the arguments.
    #[must_use]
    pub fn cmdline(mut self, args: &[&str]) -> Self {
        self.cmdline = args.iter().map(|a| (*a).to_string()).collect();
        self
    }

    /// Sets RSS (and raises the peak to it if lower).
    #[must_use]
    pub fn rss_kib(mut self, kib: u64) -> Self {
        self.rss_kib = kib;
        self.hwm_kib = self.hwm_kib.max(kib);
        self
    }

    /// Sets the peak RSS.
    #[must_use]
    pub fn hwm_kib(mut self, kib: u64) -> Self {
        self.hwm_kib = kib;
        self
    }

    /// Sets swap.
    #[must_use]
    pub fn swap_kib(mut self, kib: u64) -> Self {
        self.swap_kib = kib;
        self
    }

    /// The `status` text.
    pub fn status_text(&self) -> String {
        let name: String = self.comm.chars().filter(|c| *c != '\n').collect();
        let (pid, ppid, uid) = (self.pid, self.ppid, self.uid);
        let anon = self.rss_kib.saturating_sub(self.rss_kib / 4);
        let file = self.rss_kib - anon;
        let kb = |v: u64| format!("{v:>8} kB");
        let vm_size = self.rss_kib * 2 + 1312;
        [
            format!("Name:\t{name}"),
            "Umask:\t0022".to_string(),
            "State:\tS (sleeping)".to_string(),
            format!("Tgid:\t{pid}"),
            "Ngid:\t0".to_string(),
            format!("Pid:\t{pid}"),
            format!("PPid:\t{ppid}"),
            "TracerPid:\t0".to_string(),
            format!("Uid:\t{uid}\t{uid}\t{uid}\t{uid}"),
            format!("Gid:\t{uid}\t{uid}\t{uid}\t{uid}"),
            "FDSize:\t256".to_string(),
            "Groups:\t ".to_string(),
            format!("NStgid:\t{pid}"),
            format!("NSpid:\t{pid}"),
            format!("NSpgid:\t{pid}"),
            format!("NSsid:\t{pid}"),
            "Kthread:\t0".to_string(),
            format!("VmPeak:\t{}", kb(vm_size)),
            format!("VmSize:\t{}", kb(vm_size)),
            format!("VmLck:\t{}", kb(0)),
            format!("VmPin:\t{}", kb(0)),
            format!("VmHWM:\t{}", kb(self.hwm_kib)),
            format!("VmRSS:\t{}", kb(self.rss_kib)),
            format!("RssAnon:\t{}", kb(anon)),
            format!("RssFile:\t{}", kb(file)),
            format!("RssShmem:\t{}", kb(0)),
            format!("VmData:\t{}", kb(anon + 248)),
            format!("VmStk:\t{}", kb(132)),
            format!("VmExe:\t{}", kb(20)),
            format!("VmLib:\t{}", kb(1528)),
            format!("VmPTE:\t{}", kb(48)),
            format!("VmSwap:\t{}", kb(self.swap_kib)),
            format!("HugetlbPages:\t{}", kb(0)),
            "CoreDumping:\t0".to_string(),
            "THP_enabled:\t1".to_string(),
            "untag_mask:\t0xffffffffffffffff".to_string(),
            "Threads:\t1".to_string(),
            "SigQ:\t0/96365".to_string(),
            "SigPnd:\t0000000000000000".to_string(),
            "ShdPnd:\t0000000000000000".to_string(),
            "SigBlk:\t0000000000000000".to_string(),
            "SigIgn:\t0000000000000000".to_string(),
            "SigCgt:\t0000000000000000".to_string(),
            "CapInh:\t0000000000000000".to_string(),
            "CapPrm:\t0000000000000000".to_string(),
            "CapEff:\t0000000000000000".to_string(),
            "CapBnd:\t000001ffffffffff".to_string(),
            "CapAmb:\t0000000000000000".to_string(),
            "NoNewPrivs:\t0".to_string(),
            "Seccomp:\t0".to_string(),
            "Seccomp_filters:\t0".to_string(),
            "Speculation_Store_Bypass:\tvulnerable".to_string(),
            "SpeculationIndirectBranch:\talways enabled".to_string(),
            "Cpus_allowed:\t3".to_string(),
            "Cpus_allowed_list:\t0-1".to_string(),
            "Mems_allowed:\t00000000,00000001".to_string(),
            "Mems_allowed_list:\t0".to_string(),
            "voluntary_ctxt_switches:\t3".to_string(),
            "nonvoluntary_ctxt_switches:\t0".to_string(),
        ]
        .join("\n")
            + "\n"
    }
}

/// A fixture `/proc` tree rooted at a directory.
#[derive(Debug, Clone)]
pub struct ProcFixture {
    root: PathBuf,
}

impl ProcFixture {
    /// Creates (or reuses) the root directory.
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(root: &Path) -> std::io::Result<Self> {
        std::fs::create_dir_all(root)?;
        Ok(ProcFixture {
            root: root.to_path_buf(),
        })
    }

    /// The root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Writes `meminfo` (the layout of a real Linux 6.18 file; sizes in KiB).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn meminfo(&self, total_kib: u64, available_kib: u64) -> std::io::Result<&Self> {
        let free = available_kib.saturating_sub(available_kib / 20);
        let cached = available_kib.saturating_sub(free);
        let rows: [(&str, u64); 24] = [
            ("MemTotal", total_kib),
            ("MemFree", free),
            ("MemAvailable", available_kib),
            ("Buffers", 1936),
            ("Cached", cached),
            ("SwapCached", 0),
            ("Active", cached / 2),
            ("Inactive", cached / 2),
            ("Active(anon)", 12_000),
            ("Inactive(anon)", 0),
            ("Active(file)", cached / 2),
            ("Inactive(file)", cached / 2),
            ("Unevictable", 0),
            ("Mlocked", 0),
            ("SwapTotal", 0),
            ("SwapFree", 0),
            ("Dirty", 12),
            ("Writeback", 0),
            ("AnonPages", 11_980),
            ("Mapped", 18_300),
            ("Shmem", 400),
            ("KReclaimable", 9_000),
            ("Slab", 30_000),
            ("CommitLimit", total_kib / 2),
        ];
        let text: String = rows
            .iter()
            .map(|(k, v)| format!("{:<16}{v:>8} kB\n", format!("{k}:")))
            .collect();
        crate::write_atomic(&self.root.join("meminfo"), text.as_bytes())?;
        Ok(self)
    }

    /// Writes `<pid>/comm`, `cmdline`, `status` and `statm` (4096-byte pages).
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn process(&self, p: &FakeProc) -> std::io::Result<&Self> {
        let dir = self.root.join(p.pid.to_string());
        std::fs::create_dir_all(&dir)?;
        crate::write_atomic(&dir.join("comm"), format!("{}\n", p.comm).as_bytes())?;
        let mut cmdline = Vec::new();
        for a in &p.cmdline {
            cmdline.extend_from_slice(a.as_bytes());
            cmdline.push(0);
        }
        crate::write_atomic(&dir.join("cmdline"), &cmdline)?;
        crate::write_atomic(&dir.join("status"), p.status_text().as_bytes())?;
        let pages = |kib: u64| kib / 4;
        let statm = format!(
            "{} {} {} 5 0 {} 0\n",
            pages(p.rss_kib * 2 + 1312),
            pages(p.rss_kib),
            pages(p.rss_kib / 4),
            pages(p.rss_kib)
        );
        crate::write_atomic(&dir.join("statm"), statm.as_bytes())?;
        Ok(self)
    }

    /// Adds fd `fd` to `<pid>/fd` as a symlink whose text is `target` (the kernel shows the
    /// opened path, e.g. `/dev/dri/renderD128`; the link need not resolve).
    ///
    /// # Errors
    /// When the link cannot be created.
    pub fn fd(&self, pid: u32, fd: u32, target: &str) -> std::io::Result<&Self> {
        let dir = self.root.join(pid.to_string()).join("fd");
        std::fs::create_dir_all(&dir)?;
        let link = dir.join(fd.to_string());
        let _ = std::fs::remove_file(&link);
        crate::symlink(target, link)?;
        Ok(self)
    }

    /// Writes `<pid>/fdinfo/<fd>`.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn fdinfo(&self, pid: u32, fd: u32, text: &str) -> std::io::Result<&Self> {
        let dir = self.root.join(pid.to_string()).join("fdinfo");
        std::fs::create_dir_all(&dir)?;
        crate::write_atomic(&dir.join(fd.to_string()), text.as_bytes())?;
        Ok(self)
    }

    /// A DRM fd: the link to `/dev/dri/<node>` plus its fdinfo.
    ///
    /// # Errors
    /// When the files cannot be written.
    pub fn drm_fd(&self, pid: u32, fd: u32, node: &str, fdinfo: &str) -> std::io::Result<&Self> {
        self.fd(pid, fd, &format!("/dev/dri/{node}"))?
            .fdinfo(pid, fd, fdinfo)
    }

    /// Writes `sys/kernel/osrelease` (the kernel release DRM drivers are versioned with).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn osrelease(&self, release: &str) -> std::io::Result<&Self> {
        crate::write_atomic(
            &self.root.join("sys/kernel/osrelease"),
            format!("{release}\n").as_bytes(),
        )?;
        Ok(self)
    }

    /// Writes `<pid>/stat` as the kernel prints it (state `S`, the pid its own group and
    /// session): parent `ppid`, start time `1000 + pid` ticks, `rss_pages` resident pages.
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn stat(&self, pid: u32, comm: &str, ppid: u32, rss_pages: u64) -> std::io::Result<&Self> {
        let start = 1000 + u64::from(pid);
        let line = format!(
            "{pid} ({comm}) S {ppid} {pid} {pid} 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 {start} 1000000 {rss_pages} 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0\n"
        );
        std::fs::create_dir_all(self.root.join(pid.to_string()))?;
        crate::write_atomic(&self.root.join(format!("{pid}/stat")), line.as_bytes())?;
        Ok(self)
    }

    /// Writes any file under the root (`rel` such as `42/cgroup` or `1/sched`).
    ///
    /// # Errors
    /// When the file cannot be written.
    pub fn file(&self, rel: &str, content: &str) -> std::io::Result<&Self> {
        crate::write_atomic(&self.root.join(rel), content.as_bytes())?;
        Ok(self)
    }

    /// Makes `<pid>/ns/pid` a link to `pid:[inode]`, as the kernel shows a PID namespace
    /// (4026531836 is the host's initial one).
    ///
    /// # Errors
    /// When the link cannot be created.
    pub fn pid_ns(&self, pid: u32, inode: u64) -> std::io::Result<&Self> {
        let dir = self.root.join(pid.to_string()).join("ns");
        std::fs::create_dir_all(&dir)?;
        let link = dir.join("pid");
        let _ = std::fs::remove_file(&link);
        crate::symlink(format!("pid:[{inode}]"), link)?;
        Ok(self)
    }

    /// Makes `self` a symlink to `<pid>`.
    ///
    /// # Errors
    /// When the link cannot be created.
    pub fn self_link(&self, pid: u32) -> std::io::Result<&Self> {
        let link = self.root.join("self");
        let _ = std::fs::remove_file(&link);
        crate::symlink(pid.to_string(), link)?;
        Ok(self)
    }
}
