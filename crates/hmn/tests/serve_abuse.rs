//! `hmn serve` under hostile clients and a hung driver (issue 17): scrapes still succeed with
//! 500 slowloris sockets and with 64 idle keep-alive clients; a collector stuck in the driver
//! is reported stale (success 0, its age in a timestamp) and does not delay SIGTERM; SIGHUP
//! does not stop the server; a textfile target that is not a regular file is refused, and the
//! textfile never reads fresh before the first collection or after the server has stopped.

// The measured rates are printed for the record (`cargo test -- --nocapture`).
#![allow(clippy::print_stderr)]

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::serve::{get, start};
use crate::util::Bed;

/// Raises this process's open-file limit to its hard limit (500 sockets and the rest of the
/// test suite must fit).
fn raise_fd_limit() {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    if let Ok((_, hard)) = getrlimit(Resource::RLIMIT_NOFILE) {
        let _ = setrlimit(Resource::RLIMIT_NOFILE, hard, hard);
    }
}

/// One scrape on a new connection, within `limit`: true when it got a 200 with a complete
/// exposition.
fn scrape(addr: &SocketAddr, limit: Duration) -> bool {
    let started = Instant::now();
    let Ok(mut s) = TcpStream::connect_timeout(addr, limit) else {
        return false;
    };
    let left = limit
        .saturating_sub(started.elapsed())
        .max(Duration::from_millis(1));
    let _ = s.set_read_timeout(Some(left));
    let _ = s.set_write_timeout(Some(left));
    if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
        .is_err()
    {
        return false;
    }
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    text.starts_with("HTTP/1.1 200") && text.contains("hmn_build_info")
}

/// A slowloris: keeps `n` sockets open, each sending a request head one header line at a
/// time and never finishing it; a socket the server closed is opened again on the next sweep.
struct Slowloris {
    stop: Arc<AtomicBool>,
    reconnects: Arc<AtomicUsize>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Slowloris {
    fn start(addr: SocketAddr, n: usize) -> Slowloris {
        let stop = Arc::new(AtomicBool::new(false));
        let reconnects = Arc::new(AtomicUsize::new(0));
        let (s, r) = (Arc::clone(&stop), Arc::clone(&reconnects));
        let open = move || -> Option<TcpStream> {
            let mut t = TcpStream::connect_timeout(&addr, Duration::from_millis(500)).ok()?;
            t.write_all(b"GET /metrics HTTP/1.1\r\nHost: slow\r\n")
                .ok()?;
            t.set_nonblocking(true).ok()?;
            Some(t)
        };
        let thread = std::thread::spawn(move || {
            let mut socks: Vec<Option<TcpStream>> = (0..n).map(|_| open()).collect();
            while !s.load(Ordering::Relaxed) {
                for slot in &mut socks {
                    let alive = slot.as_mut().is_some_and(|t| {
                        let mut b = [0u8; 64];
                        match t.read(&mut b) {
                            Ok(0) => false,
                            Ok(_) => true,
                            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                                // One more header line, never the blank line that ends the head.
                                !matches!(t.write(b"X-a: b\r\n"), Err(e) if e.kind() != ErrorKind::WouldBlock)
                            }
                            Err(_) => false,
                        }
                    });
                    if !alive {
                        *slot = open();
                        r.fetch_add(1, Ordering::Relaxed);
                    }
                }
                std::thread::sleep(Duration::from_millis(200));
            }
        });
        Slowloris {
            stop,
            reconnects,
            thread: Some(thread),
        }
    }
}

impl Drop for Slowloris {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Runs `n` scrapes, `gap` apart, each within 2 s; returns how many succeeded.
fn scrapes(addr: &SocketAddr, n: usize, gap: Duration) -> usize {
    (0..n)
        .filter(|_| {
            let ok = scrape(addr, Duration::from_secs(2));
            std::thread::sleep(gap);
            ok
        })
        .count()
}

#[test]
fn scrapes_succeed_under_a_500_socket_slowloris() {
    raise_fd_limit();
    let s = start(&[], &[]);
    let addr: SocketAddr = s.addr.parse().unwrap();
    let attack = Slowloris::start(addr, 500);
    // Let the attack fill every slot first.
    std::thread::sleep(Duration::from_millis(500));
    let n = 40;
    let ok = scrapes(&addr, n, Duration::from_millis(25));
    let reconnects = attack.reconnects.load(Ordering::Relaxed);
    drop(attack);
    eprintln!("slowloris (500 sockets, {reconnects} reconnects): {ok}/{n} scrapes succeeded");
    assert!(
        ok * 100 >= n * 95,
        "{ok}/{n} scrapes succeeded under a slowloris"
    );
}

#[test]
fn scrapes_succeed_with_64_idle_keep_alive_clients() {
    raise_fd_limit();
    let s = start(&[], &[]);
    let addr: SocketAddr = s.addr.parse().unwrap();
    // 64 clients ask once on a keep-alive connection, read the answer, and then sit idle.
    let idle: Vec<TcpStream> = (0..64)
        .map(|_| {
            let mut t = TcpStream::connect(addr).unwrap();
            t.write_all(b"GET /healthz HTTP/1.1\r\nHost: idle\r\n\r\n")
                .unwrap();
            let mut r = BufReader::new(t.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            assert!(line.starts_with("HTTP/1.1 200"), "{line}");
            t
        })
        .collect();
    let n = 50;
    let ok = scrapes(&addr, n, Duration::from_millis(5));
    // Each scrape took the slot of the longest-idle client.
    let evicted = idle
        .iter()
        .filter(|t| {
            t.set_nonblocking(true).unwrap();
            let mut b = [0u8; 4096];
            let mut t = *t;
            loop {
                match t.read(&mut b) {
                    Ok(0) => return true,
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => return false,
                    Err(_) => return true,
                }
            }
        })
        .count();
    eprintln!("64 idle keep-alive clients: {ok}/{n} scrapes succeeded, {evicted} idle evicted");
    assert!(ok * 100 >= n * 95, "{ok}/{n} scrapes succeeded");
    assert!(evicted >= 1, "idle clients are what makes room");
}

#[test]
fn a_silent_connection_is_closed_after_the_timeout() {
    let s = start(&[], &[("HMN_SERVE_CONN_TIMEOUT_MS", "300")]);
    // Never sends a byte.
    let mut silent = TcpStream::connect(&s.addr).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    let started = Instant::now();
    let mut b = [0u8; 16];
    assert_eq!(silent.read(&mut b).unwrap_or(0), 0);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
    // Idle after one answer on a keep-alive connection: closed too.
    let mut kept = TcpStream::connect(&s.addr).unwrap();
    kept.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    kept.write_all(b"GET /healthz HTTP/1.1\r\nHost: t\r\n\r\n")
        .unwrap();
    let started = Instant::now();
    let mut all = Vec::new();
    let _ = kept.read_to_end(&mut all);
    assert!(String::from_utf8_lossy(&all).starts_with("HTTP/1.1 200"));
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

/// The `hmn_collector_success` samples of an exposition.
fn successes(body: &str) -> Vec<&str> {
    body.lines()
        .filter(|l| l.starts_with("hmn_collector_success{"))
        .collect()
}

fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

#[test]
fn a_hung_driver_is_reported_stale_and_does_not_delay_sigterm() {
    use nix::sys::signal::{Signal, kill};
    let mut s = start(&[], &[]);
    let pid = nix::unistd::Pid::from_raw(i32::try_from(s.child.id()).unwrap());
    let body = get(&s.addr, "/metrics", &[]).2;
    assert!(
        body.contains("hmn_collector_success{collector=\"nvml\"} 1"),
        "{body}"
    );
    let stamp = |body: &str| -> f64 {
        body.lines()
            .find_map(|l| l.strip_prefix("hmn_collector_last_success_timestamp_seconds "))
            .unwrap_or_else(|| panic!("no timestamp in {body}"))
            .parse()
            .unwrap()
    };
    assert!((unix_now() - stamp(&body)).abs() < 5.0);

    // SIGHUP: noted, not fatal.
    kill(pid, Signal::SIGHUP).unwrap();
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(get(&s.addr, "/metrics", &[]).0, 200, "alive after SIGHUP");

    // The driver hangs: the next collection never completes.
    let flag = hmn_testbed::nvml_hang_flag(&s.bed.env.nvml);
    std::fs::write(&flag, "").unwrap();
    let hung_at = unix_now();
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        assert!(Instant::now() < deadline, "never reported stale");
        let (_, _, body) = get(&s.addr, "/metrics", &[]);
        let zero = |l: &&str| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) == Some(0.0);
        if successes(&body).iter().all(zero) {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!successes(&body).is_empty(), "{body}");
    assert!(
        stamp(&body) <= hung_at + 0.5,
        "the age shows: the timestamp is that of the last completed collection"
    );
    assert_eq!(get(&s.addr, "/healthz", &[]).0, 503);
    let (ok, problems) = crate::serve::promtool(&body);
    assert!(ok && problems.trim().is_empty(), "{problems}");

    // SIGTERM: out within a second although the collector is stuck in the driver.
    let started = Instant::now();
    kill(pid, Signal::SIGTERM).unwrap();
    let status = loop {
        if let Some(st) = s.child.try_wait().unwrap() {
            break st;
        }
        assert!(
            started.elapsed() < Duration::from_secs(5),
            "still running after SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(10));
    };
    let took = started.elapsed();
    eprintln!("SIGTERM with a hung collector: exited in {took:?}");
    assert!(status.success(), "{status:?}");
    assert!(took < Duration::from_secs(1), "exit took {took:?}");
    let _ = std::fs::remove_file(flag);
}

#[test]
fn a_textfile_target_that_is_not_a_regular_file_is_refused() {
    let bed = Bed::new();
    let dir = bed.path("tf");
    std::fs::create_dir(&dir).unwrap();
    let victim = bed.path("victim");
    std::fs::write(&victim, "keep").unwrap();
    std::os::unix::fs::symlink(&victim, dir.join("hmn.prom")).unwrap();
    let o = bed
        .cmd(&["serve", "--listen", "127.0.0.1:0", "--textfile"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8(o.stderr).unwrap();
    assert!(err.contains("hmn.prom: is a symbolic link"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep");
    std::fs::remove_file(dir.join("hmn.prom")).unwrap();
    nix::unistd::mkfifo(&dir.join("hmn.prom"), nix::sys::stat::Mode::S_IRWXU).unwrap();
    let o = bed
        .cmd(&["serve", "--listen", "127.0.0.1:0", "--textfile"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("is a FIFO"), "{err}");
    assert!(!err.contains("- writes"), "--textfile takes no `-`: {err}");
}

/// A target that becomes a FIFO while serving: never written (a FIFO would block the
/// collector), a warning naming the file, and serving goes on.
#[test]
fn a_textfile_that_becomes_a_fifo_is_a_warning_naming_it() {
    use std::io::BufRead as _;
    let bed = Bed::with_nvml(&hmn_testbed::FakeNvml::h100s(1));
    let dir = bed.path("tf");
    std::fs::create_dir(&dir).unwrap();
    let file = dir.join("hmn.prom");
    let mut child = bed
        .cmd(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--interval",
            "100ms",
            "--textfile",
        ])
        .arg(&dir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !std::fs::read_to_string(&file)
        .unwrap_or_default()
        .contains("hmn_collector_success{collector=\"nvml\"} 1")
    {
        assert!(Instant::now() < deadline, "never written");
        std::thread::sleep(Duration::from_millis(20));
    }
    std::fs::remove_file(&file).unwrap();
    nix::unistd::mkfifo(&file, nix::sys::stat::Mode::S_IRWXU).unwrap();
    let mut err = std::io::BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    let warning = loop {
        line.clear();
        assert!(err.read_line(&mut line).unwrap() > 0, "no warning");
        if line.contains("warning") {
            break line.clone();
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(
        warning.starts_with("hmn: serve: warning: --textfile ")
            && warning.contains("tf/hmn.prom: is a FIFO"),
        "{warning}"
    );
}

#[test]
fn the_textfile_goes_stale_while_the_driver_hangs() {
    let dir = tempfile::tempdir().unwrap();
    let tf = dir.path().to_str().unwrap().to_string();
    let s = start(&["--textfile", &tf], &[]);
    let file = dir.path().join("hmn.prom");
    let successes = |text: &str| -> Vec<f64> {
        text.lines()
            .filter(|l| l.starts_with("hmn_collector_success{"))
            .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
            .collect()
    };
    // Waits (up to a minute) for a fresh textfile (NVML answered) or a stale one (every
    // success 0).
    let wait_for = |fresh: bool| -> String {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let text = std::fs::read_to_string(&file).unwrap_or_default();
            let all = successes(&text);
            let done = if fresh {
                text.contains("hmn_collector_success{collector=\"nvml\"} 1")
            } else {
                !all.is_empty() && all.iter().all(|v| *v == 0.0)
            };
            if done {
                return text;
            }
            assert!(Instant::now() < deadline, "never fresh={fresh}: {text}");
            std::thread::sleep(Duration::from_millis(50));
        }
    };
    let fresh = wait_for(true);
    let stamp = |text: &str| -> String {
        text.lines()
            .find(|l| l.starts_with("hmn_collector_last_success_timestamp_seconds "))
            .unwrap_or_else(|| panic!("no timestamp in {text}"))
            .to_string()
    };
    assert!(!stamp(&fresh).is_empty());
    let flag = hmn_testbed::nvml_hang_flag(&s.bed.env.nvml);
    std::fs::write(&flag, "").unwrap();
    let stale = wait_for(false);
    // The age shows: the timestamp stays that of the last completed collection.
    let hung = stamp(&stale);
    std::thread::sleep(Duration::from_millis(600));
    let later = std::fs::read_to_string(&file).unwrap();
    assert_eq!(stamp(&later), hung, "no collection completes while hung");
    let (ok, problems) = crate::serve::promtool(&stale);
    assert!(ok && problems.trim().is_empty(), "{problems}");
    // The driver answers again: fresh figures come back.
    std::fs::remove_file(&flag).unwrap();
    wait_for(true);
    drop(s);
}

#[test]
fn a_textfile_never_reads_fresh_before_the_first_collection_or_after_the_server() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let bed = Bed::with_nvml(&hmn_testbed::FakeNvml::h100s(1));
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("hmn.prom");
    // An earlier run's file, fresh when it was written; the driver hangs from the start.
    std::fs::write(
        &file,
        "# an earlier run\nhmn_collector_success{collector=\"nvml\"} 1\n",
    )
    .unwrap();
    let flag = hmn_testbed::nvml_hang_flag(&bed.env.nvml);
    std::fs::write(&flag, "").unwrap();
    let mut child = bed
        .cmd(&["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"])
        .arg("--textfile")
        .arg(dir.path())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let read = || std::fs::read_to_string(&file).unwrap_or_default();
    let deadline = Instant::now() + Duration::from_secs(10);
    while read().contains("an earlier run") {
        assert!(
            Instant::now() < deadline,
            "the earlier file stays: {}",
            read()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // Three intervals and more: no collection has completed, and the file says so.
    std::thread::sleep(Duration::from_millis(800));
    let starting = read();
    // Every collector at 0, the GPU backends' too (QA: an alert on nvml's never fired).
    for collector in ["nvml", "drm", "host", "processes"] {
        assert!(
            starting.contains(&format!(
                "hmn_collector_success{{collector=\"{collector}\"}} 0"
            )),
            "{collector}: {starting}"
        );
    }
    assert!(
        !starting.contains("} 1") && !starting.contains("hmn_device_memory"),
        "{starting}"
    );
    let (ok, problems) = crate::serve::promtool(&starting);
    assert!(ok && problems.trim().is_empty(), "{problems}");
    // The driver answers: fresh figures; then SIGTERM: the file is left stale, not fresh.
    std::fs::remove_file(&flag).unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !read().contains("hmn_collector_success{collector=\"nvml\"} 1") {
        assert!(Instant::now() < deadline, "never fresh: {}", read());
        std::thread::sleep(Duration::from_millis(20));
    }
    kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM).unwrap();
    assert!(child.wait().unwrap().success());
    let left = read();
    let successes: Vec<&str> = left
        .lines()
        .filter(|l| l.starts_with("hmn_collector_success{"))
        .collect();
    assert!(
        !successes.is_empty()
            && successes
                .iter()
                .all(|l| l.ends_with(" 0") || l.ends_with(" 0.0")),
        "{left}"
    );
    assert!(
        left.contains("hmn_device_memory_total_bytes"),
        "the last figures kept: {left}"
    );
}
