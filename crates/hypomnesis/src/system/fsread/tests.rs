use super::*;

fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

#[test]
fn pids_are_the_numeric_entries() {
    let dir = tree(&[
        ("1/stat", ""),
        ("42/stat", ""),
        ("4000000/stat", ""),
        ("meminfo", ""),
        ("self/stat", ""),
        ("12a/stat", ""),
        ("+7/stat", ""),
        ("99999999999/stat", ""),
    ]);
    let mut pids = list_pids(dir.path()).unwrap();
    pids.sort_unstable();
    assert_eq!(pids, vec![1, 42, 4_000_000]);
    let gone = list_pids(&dir.path().join("nope")).unwrap_err();
    assert!(gone.is_not_found(), "{gone}");
    assert!(gone.to_string().contains("nope"), "{gone}");
}

#[test]
fn a_walk_opens_below_an_open_directory() {
    let dir = tree(&[("7/fd/3", ""), ("7/fd/10", ""), ("7/fd/x", "")]);
    let proc = open_dir(dir.path()).unwrap();
    let mut fds = numeric_entries(&mut open_dir_at(&proc, dir.path(), "7/fd").unwrap());
    fds.sort_unstable();
    assert_eq!(fds, vec![3, 10]);
    let err = open_dir_at(&proc, dir.path(), "8/fd").unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("8/fd"), "{err}");
}

#[test]
fn a_vanished_pid_is_not_found() {
    let dir = tree(&[]);
    let roots = Roots::system().with_proc(dir.path());
    let err = read_pid_file(&roots, 4242, "stat", |t| Ok(t.len())).unwrap_err();
    assert!(err.is_not_found(), "{err}");
    assert!(err.to_string().contains("4242/stat"), "{err}");
}

#[test]
fn a_parse_error_names_the_path_and_line() {
    let dir = tree(&[("5/status", "Name:\tx\nVmRSS:\tlots kB\n")]);
    let roots = Roots::system().with_proc(dir.path());
    let err = read_pid_file(
        &roots,
        5,
        "status",
        crate::system::host::parse::parse_status,
    )
    .unwrap_err()
    .to_string();
    let path = dir.path().join("5/status");
    assert!(err.starts_with(&format!("{}:2: ", path.display())), "{err}");
    let ok = read_pid_file(&roots, 5, "status", |t| Ok(t.lines().count())).unwrap();
    assert_eq!(ok, 2);
}

#[test]
fn non_utf8_text_is_an_io_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("comm");
    std::fs::write(&p, b"\xff\xfe\n").unwrap();
    assert!(matches!(read_string(&p, Cap::COMM), Err(Error::Io { .. })));
    assert_eq!(read_bytes(&p, Cap::COMM).unwrap(), b"\xff\xfe\n");
}

#[test]
fn sysfs_values_ignore_surrounding_whitespace() {
    let dir = tree(&[
        ("total", " 17163091968 \n"),
        ("vendor", "0x1002\n"),
        ("device", "73bf"),
        ("name", "  AMD Radeon RX 6800 XT\n\n"),
        ("bad", "max\n"),
        ("wide", "0x10000\n"),
    ]);
    let p = |n: &str| dir.path().join(n);
    assert_eq!(read_u64(&p("total")).unwrap(), 17_163_091_968);
    assert_eq!(read_hex_u16(&p("vendor")).unwrap(), 0x1002);
    assert_eq!(read_hex_u16(&p("device")).unwrap(), 0x73bf);
    assert_eq!(read_trimmed(&p("name")).unwrap(), "AMD Radeon RX 6800 XT");
    let err = read_u64(&p("bad")).unwrap_err();
    assert!(matches!(err, Error::Parse { .. }), "{err}");
    assert!(err.to_string().contains("bad: not a number"), "{err}");
    assert!(read_hex_u16(&p("wide")).is_err(), "beyond 16 bits");
    assert!(read_hex_u16(&p("bad")).is_err());
    assert!(read_u64(&p("absent")).unwrap_err().is_not_found());
}

#[test]
fn caps_refuse_longer_files_unread() {
    let dir = tree(&[("f", "0123456789")]);
    let p = dir.path().join("f");
    assert_eq!(read_bounded(&p, Cap::bytes(10)).unwrap().unwrap().len(), 10);
    assert!(read_bounded(&p, Cap::bytes(9)).unwrap().is_none());
    let err = read_bytes(&p, Cap::bytes(9)).unwrap_err();
    assert!(err.to_string().contains("larger than 9 bytes"), "{err}");
    assert!(
        read_bounded(&dir.path().join("g"), Cap::bytes(9))
            .unwrap_err()
            .is_not_found()
    );
}

#[test]
fn fifos_and_devices_are_refused_without_blocking() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo");
    nix::unistd::mkfifo(&fifo, Mode::S_IRWXU).unwrap();
    let zero = dir.path().join("zero");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    for (path, kind) in [
        (fifo.as_path(), "fifo"),
        (Path::new("/dev/zero"), "character device"),
        (zero.as_path(), "character device"),
        (dir.path(), "directory"),
    ] {
        let err = read_bytes(path, Cap::FDINFO).unwrap_err();
        assert!(
            matches!(&err, Error::NotAFile { kind: k, .. } if *k == kind),
            "{}: {err}",
            path.display()
        );
        assert!(err.to_string().contains("not a regular file"), "{err}");
        assert!(read_prefix(path, Cap::CMDLINE_PREFIX).is_err());
        assert!(open(path).is_err());
        assert!(open_sized(path).is_err());
    }
}

#[test]
fn kernel_files_are_regular_files() {
    // procfs files report size 0 and are read to their end all the same.
    let status = read_string(Path::new("/proc/self/status"), Cap::STATUS).unwrap();
    assert!(status.contains("VmRSS:"), "{status}");
    assert!(
        !read_bytes(Path::new("/proc/self/stat"), Cap::STAT)
            .unwrap()
            .is_empty()
    );
    let f = open(Path::new("/proc/self/statm")).unwrap();
    let mut buf = [0u8; 256];
    assert!(read_at_start(&f, &mut buf, Path::new("statm")).unwrap() > 0);
}

#[test]
fn a_huge_file_is_read_only_to_its_cap() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("fdinfo");
    let f = File::create(&p).unwrap();
    std::io::Write::write_all(&mut &f, b"drm-driver:\tamdgpu\n").unwrap();
    f.set_len(1 << 30).unwrap(); // sparse: 1 GiB on paper, nothing on disk
    let err = read_bytes(&p, Cap::FDINFO).unwrap_err();
    assert!(
        matches!(err, Error::TooLarge { limit, .. } if limit == Cap::FDINFO.limit()),
        "{err}"
    );
    assert!(read_bounded(&p, Cap::FDINFO).unwrap().is_none());
    let start = read_prefix(&p, Cap::CMDLINE_PREFIX).unwrap();
    assert_eq!(start.len() as u64, Cap::CMDLINE_PREFIX.limit());
    assert!(start.starts_with(b"drm-driver:"));
    let short = dir.path().join("short");
    std::fs::write(&short, b"abc").unwrap();
    assert_eq!(read_prefix(&short, Cap::CMDLINE_PREFIX).unwrap(), b"abc");
}

#[test]
fn each_pid_file_has_its_own_cap() {
    assert_eq!(Cap::of_pid_file("stat"), Cap::STAT);
    assert_eq!(Cap::of_pid_file("status"), Cap::STATUS);
    assert_eq!(Cap::of_pid_file("smaps_rollup"), Cap::SMAPS_ROLLUP);
    assert_eq!(Cap::of_pid_file("cgroup"), Cap::PROC_CGROUP);
    assert_eq!(Cap::of_pid_file("environ"), Cap::PROC_OTHER);
    let dir = tree(&[("5/stat", &"x".repeat(5000))]);
    let roots = Roots::system().with_proc(dir.path());
    let err = read_pid_file(&roots, 5, "stat", |t| Ok(t.len())).unwrap_err();
    assert!(matches!(err, Error::TooLarge { limit: 4096, .. }), "{err}");
}

#[test]
fn reads_from_the_start_of_a_kept_file() {
    let dir = tree(&[("statm", "12 34 5\n")]);
    let p = dir.path().join("statm");
    let f = open(&p).unwrap();
    let mut buf = [0u8; 4];
    assert_eq!(
        read_at_start(&f, &mut buf, &p).unwrap(),
        4,
        "the buffer is the cap"
    );
    let mut buf = [0u8; 64];
    let n = read_at_start(&f, &mut buf, &p).unwrap();
    assert_eq!(&buf[..n], b"12 34 5\n");
    let (_, len) = open_sized(&p).unwrap();
    assert_eq!(len, 8);
    assert!(open(&dir.path().join("x")).unwrap_err().is_not_found());
}
