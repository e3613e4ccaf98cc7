//! `hmn serve` over the fake NVML and a DRM fixture: lint with `promtool`, a real Prometheus
//! server scraping it, bounded answers to malformed requests, and a load test.
//!
//! `promtool` and `prometheus` come from Debian's `prometheus` package, which `scripts/test.sh`
//! (called by `.ci/run`) installs.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use hmn_testbed::{FakeGpu, FakeNvml, FakeProc, FakeProcess, fdinfo_sample};

use crate::util::Bed;

/// A running `hmn serve`, killed on drop.
pub struct Server {
    pub child: Child,
    pub addr: String,
    pub bed: Bed,
    pub dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The `host:port` a just-started `hmn serve` prints in its first stderr line
/// (`… http://127.0.0.1:PORT/metrics …`).
fn listen_addr(child: &mut Child) -> String {
    let mut line = String::new();
    BufReader::new(child.stderr.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    line.split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string()
}

/// Starts `hmn serve` on a free loopback port over two fake H100s (with processes), an amdgpu
/// card with a client, and fixture /proc and /sys trees.
pub fn start(extra: &[&str], env: &[(&str, &str)]) -> Server {
    let fake = FakeNvml::h100s(2)
        .process(FakeProcess::compute(0, 4242, 10 << 30))
        .process(FakeProcess::compute(1, 5151, 20 << 30));
    let bed = Bed::with_nvml(&fake);
    let world = &bed.world;
    world.gpu(FakeGpu::amdgpu("0000:03:00.0", 1, 128)).unwrap();
    let era_d = fdinfo_sample("amdgpu-eraD.txt")
        .unwrap()
        .replace("0000:11:00.0", "0000:03:00.0");
    world
        .client(700, "blender", &[(5, "renderD128", &era_d)])
        .unwrap();
    world.proc.process(&FakeProc::new(4242, "python3")).unwrap();
    // pid 4242 runs in a Kubernetes pod; pid 700 in a systemd unit.
    std::fs::write(
        world.proc.root().join("4242/cgroup"),
        "0::/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1f2e3d4c_5b6a_7980_a1b2_c3d4e5f60718.slice/cri-containerd-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope\n",
    )
    .unwrap();
    std::fs::write(
        world.proc.root().join("700/cgroup"),
        "0::/user.slice/user-1000.slice/app-blender.scope\n",
    )
    .unwrap();
    let mut cmd = bed.cmd(&["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"]);
    cmd.args(extra).stdout(Stdio::null()).stderr(Stdio::piped());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let addr = listen_addr(&mut child);
    let path = bed.dir.path().to_path_buf();
    let server = Server {
        child,
        addr,
        bed,
        dir: path,
    };
    // Wait for the first collection.
    let deadline = Instant::now() + Duration::from_secs(20);
    while get(&server.addr, "/healthz", &[]).0 != 200 {
        assert!(Instant::now() < deadline, "no collection within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
    server
}

/// Starts `hmn serve` over `bed`, takes one scrape of `/metrics` once it answers, stops it, and
/// returns the exposition after checking it with `promtool`.
pub fn scrape_lint_clean(bed: &Bed) -> String {
    scrape_lint_clean_once(bed, |_| true)
}

/// [`scrape_lint_clean`] of the first exposition `ready` accepts (within 10 s): for series that
/// appear only once a background thread is up.
pub fn scrape_lint_clean_once(bed: &Bed, ready: impl Fn(&str) -> bool) -> String {
    let mut child = bed
        .cmd(&["serve", "--listen", "127.0.0.1:0", "--interval", "200ms"])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let addr = listen_addr(&mut child);
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (status, _, body) = get(&addr, "/metrics", &[]);
        if status == 200 && ready(&body) {
            break body;
        }
        assert!(Instant::now() < deadline, "no metrics (ready)");
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = child.kill();
    let _ = child.wait();
    let (ok, lint) = promtool(&body);
    assert!(ok, "{lint}\n{body}");
    body
}

/// One HTTP/1.1 request on a new connection: (status, headers, body).
pub fn get(addr: &str, path: &str, headers: &[&str]) -> (u16, String, String) {
    let mut s = TcpStream::connect(addr).unwrap();
    let mut req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nConnection: close\r\n");
    for h in headers {
        req.push_str(h);
        req.push_str("\r\n");
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).unwrap();
    let mut text = String::new();
    let _ = s.read_to_string(&mut text);
    parse_response(&text)
}

fn parse_response(text: &str) -> (u16, String, String) {
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((text, ""));
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    (status, head.to_string(), body.to_string())
}

pub fn promtool(text: &str) -> (bool, String) {
    let mut p = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("promtool: {e} — install Debian's prometheus package (scripts/test.sh does)")
        });
    p.stdin.take().unwrap().write_all(text.as_bytes()).unwrap();
    let o = p.wait_with_output().unwrap();
    (
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr),
    )
}

#[test]
fn scrape_is_lint_clean_and_complete() {
    let s = start(&[], &[]);
    let (status, head, body) = get(&s.addr, "/metrics", &[]);
    assert_eq!(status, 200);
    assert!(
        head.contains("content-type: text/plain; version=0.0.4"),
        "{head}"
    );
    let (ok, problems) = promtool(&body);
    assert!(
        ok && problems.trim().is_empty(),
        "promtool found problems:\n{problems}\n{body}"
    );
    for needle in [
        "hmn_device_memory_total_bytes{gpu=\"0\",",
        "hmn_device_memory_used_bytes{gpu=\"2\",gpu_uuid=\"\"} 6812925952",
        "hmn_device_memory_region_total_bytes{gpu=\"2\",gpu_uuid=\"\",region=\"gtt\"} 16690659328",
        "hmn_device_info{gpu=\"2\",gpu_uuid=\"\",vendor=\"amd\"",
        "hmn_device_utilization_ratio{gpu=\"0\"",
        "hmn_device_energy_joules_total{gpu=\"0\"",
        "hmn_process_gpu_memory_bytes{gpu=\"0\",gpu_uuid=\"GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000\",pid=\"4242\",comm=\"python3\"} 10737418240",
        "hmn_process_gpu_memory_bytes{gpu=\"2\",gpu_uuid=\"\",pid=\"700\",comm=\"blender\"} 61501440",
        "hmn_hidden_processes 0",
        "hmn_cgroup_gpu_memory_bytes{gpu=\"0\",gpu_uuid=\"GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000\",kind=\"pod\",name=\"1f2e3d4c-5b6a-7980-a1b2-c3d4e5f60718\"} 10737418240",
        "hmn_cgroup_gpu_memory_bytes{gpu=\"2\",gpu_uuid=\"\",kind=\"unit\",name=\"app-blender.scope\"} 61501440",
        "hmn_collector_success{collector=\"nvml\"} 1",
        "hmn_collector_success{collector=\"drm\"} 1",
        "hmn_build_info{version=",
    ] {
        assert!(body.contains(needle), "missing {needle:?} in\n{body}");
    }
    assert!(
        body.contains("hmn_device_temperature_celsius{gpu=\"2\",gpu_uuid=\"\"} 45"),
        "the amdgpu hwmon temperature is exported:\n{body}"
    );
    assert!(
        !body.contains("nan") && !body.contains("NaN"),
        "no sentinel values"
    );
    // OpenMetrics on request.
    let (status, head, om) = get(
        &s.addr,
        "/metrics",
        &["Accept: application/openmetrics-text; version=1.0.0"],
    );
    assert_eq!(status, 200);
    assert!(head.contains("application/openmetrics-text"), "{head}");
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE hmn_device_energy_joules counter"));
}

/// An NVML that cannot start (a driver upgraded under a running library) is the failure an
/// alert on `hmn_collector_success{collector="nvml"} == 0` is for: the series says 0, it is
/// not left out (QA: a failed backend had no series at all).
#[test]
fn a_failed_nvml_is_a_collector_at_0_not_a_missing_series() {
    let bed = Bed::with_nvml(&hmn_testbed::FakeNvml::h100s(1).version_mismatch());
    let body = scrape_lint_clean_once(&bed, |b| b.contains("hmn_collector_success{"));
    assert!(
        body.contains("hmn_collector_success{collector=\"nvml\"} 0"),
        "{body}"
    );
}

#[test]
fn unknown_paths_methods_and_malformed_requests_get_bounded_answers() {
    let s = start(&[], &[("HMN_SERVE_CONN_TIMEOUT_MS", "500")]);
    assert_eq!(get(&s.addr, "/", &[]).0, 404);
    assert_eq!(get(&s.addr, "/metrics/../etc/passwd", &[]).0, 404);
    // Wrong method.
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.write_all(
        b"POST /metrics HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
    )
    .unwrap();
    let mut text = String::new();
    let _ = c.read_to_string(&mut text);
    assert_eq!(parse_response(&text).0, 405, "{text}");
    // A 20 KiB header and 100 headers: refused.
    let big = format!("X-Big: {}", "a".repeat(20 * 1024));
    assert_eq!(get(&s.addr, "/metrics", &[&big]).0, 431);
    let many: Vec<String> = (0..100).map(|i| format!("X-H{i}: v")).collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    let status = get(&s.addr, "/metrics", &many).0;
    assert!(status == 431 || status == 0, "{status}");
    // Garbage instead of HTTP.
    let mut c = TcpStream::connect(&s.addr).unwrap();
    c.write_all(b"\x16\x03\x01 not http\r\n\r\n").unwrap();
    let mut text = String::new();
    let _ = c.read_to_string(&mut text);
    assert!(
        text.is_empty() || text.starts_with("HTTP/1.1 400"),
        "{text}"
    );
    // A slow client that never finishes its request head is cut off.
    let mut slow = TcpStream::connect(&s.addr).unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    slow.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n")
        .unwrap();
    let started = Instant::now();
    let mut buf = Vec::new();
    let _ = slow.read_to_end(&mut buf);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "the connection was held open"
    );
    // The server is still serving.
    assert_eq!(get(&s.addr, "/metrics", &[]).0, 200);
}

/// VmRSS of a process, bytes.
fn rss(pid: u32) -> u64 {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let kb: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .unwrap()
        .parse()
        .unwrap();
    kb * 1024
}

/// Sends `n` requests over one keep-alive connection; returns the number of errors.
fn keep_alive_requests(addr: &str, n: usize) -> usize {
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut reader = BufReader::new(s.try_clone().unwrap());
    let mut errors = 0;
    for _ in 0..n {
        if s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\n\r\n")
            .is_err()
        {
            return errors + 1;
        }
        let mut status = String::new();
        if reader.read_line(&mut status).is_err() || !status.starts_with("HTTP/1.1 200") {
            errors += 1;
            return errors;
        }
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            if reader.read_line(&mut h).is_err() {
                return errors + 1;
            }
            if h == "\r\n" {
                break;
            }
            if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                len = v.trim().parse().unwrap_or(0);
            }
        }
        let mut body = vec![0u8; len];
        if reader.read_exact(&mut body).is_err() {
            return errors + 1;
        }
    }
    errors
}

#[test]
fn many_requests_no_errors_no_growth() {
    let s = start(&[], &[]);
    let n: usize = std::env::var("HMN_LOAD_REQUESTS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(20_000);
    // Warm up allocator and caches, then measure.
    assert_eq!(keep_alive_requests(&s.addr, 1000), 0);
    let before = rss(s.child.id());
    let threads: Vec<_> = (0..4)
        .map(|_| {
            let addr = s.addr.clone();
            std::thread::spawn(move || keep_alive_requests(&addr, n / 4))
        })
        .collect();
    let errors: usize = threads.into_iter().map(|t| t.join().unwrap()).sum();
    let after = rss(s.child.id());
    assert_eq!(errors, 0);
    let growth = after.saturating_sub(before);
    assert!(
        growth < 1 << 20,
        "RSS grew by {growth} bytes over {n} requests ({before} -> {after})"
    );
}

#[test]
fn textfile_is_written_atomically_and_lint_clean() {
    let dir = tempfile::tempdir().unwrap();
    let tf = dir.path().to_str().unwrap().to_string();
    let s = start(&["--textfile", &tf], &[]);
    let file = dir.path().join("hmn.prom");
    let deadline = Instant::now() + Duration::from_secs(10);
    while !file.exists() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = std::fs::read_to_string(&file).unwrap();
    let (ok, problems) = promtool(&text);
    assert!(ok && problems.trim().is_empty(), "{problems}");
    assert!(text.contains("hmn_device_memory_total_bytes"));
    // A collection every 200 ms may be writing its temporary at any one look; temporaries
    // must not stay (a look between writes finds none).
    let stray = || -> Vec<_> {
        std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name() != "hmn.prom")
            .collect()
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    while !stray().is_empty() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(stray().is_empty(), "no temporary files left: {:?}", stray());
    drop(s);
}

#[test]
fn bad_serve_arguments() {
    let bed = Bed::new();
    let run = |args: &[&str]| bed.cmd(&["serve"]).args(args).output().unwrap();
    let o = run(&["--listen", "nonsense"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        String::from_utf8(o.stderr)
            .unwrap()
            .starts_with("hmn: --listen nonsense")
    );
    let o = run(&["--listen", "127.0.0.1:0", "--textfile", "/nonexistent/dir"]);
    assert_eq!(o.status.code(), Some(2));
    assert_eq!(
        String::from_utf8(o.stderr).unwrap(),
        "hmn: --textfile /nonexistent/dir: No such file or directory (os error 2)\n",
        "what it is, not 'not a directory'"
    );
    // The timeouts hmn reads from the environment: refused, not ignored (QA).
    for (name, value) in [
        ("HMN_SERVE_CONN_TIMEOUT_MS", "abc"),
        ("HMN_SERVE_CONN_TIMEOUT_MS", "0"),
        ("HMN_SERVE_CONN_TIMEOUT_MS", "99999999999999999999"),
        ("HMN_NVIDIA_SMI_TIMEOUT_MS", "-5"),
    ] {
        let o = bed
            .cmd(&["serve", "--listen", "127.0.0.1:0"])
            .env(name, value)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{name}={value}");
        assert_eq!(
            String::from_utf8(o.stderr).unwrap(),
            format!("hmn: {name}={value:?}: expected whole milliseconds from 1 to 86400000\n")
        );
    }
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap().to_string();
    let o = run(&["--listen", &addr]);
    assert_eq!(o.status.code(), Some(2), "port in use");
    assert_eq!(String::from_utf8(o.stderr).unwrap().lines().count(), 1);
}

/// A free loopback port (bound and released).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

#[test]
fn a_real_prometheus_server_scrapes_it() {
    let s = start(&[], &[]);
    let prom_dir = s.dir.join("prometheus");
    std::fs::create_dir_all(&prom_dir).unwrap();
    let config = prom_dir.join("prometheus.yml");
    std::fs::write(
        &config,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: hmn\n    static_configs:\n      - targets: ['{}']\n",
            s.addr
        ),
    )
    .unwrap();
    let port = free_port();
    let mut prom = Command::new("prometheus")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!(
            "--storage.tsdb.path={}",
            prom_dir.join("data").display()
        ))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| {
            panic!("prometheus: {e} — install Debian's prometheus package (scripts/test.sh does)")
        });
    let api = format!("127.0.0.1:{port}");
    let deadline = Instant::now() + Duration::from_secs(90);
    let mut last = String::new();
    let found = loop {
        if Instant::now() > deadline {
            break false;
        }
        std::thread::sleep(Duration::from_millis(500));
        if TcpStream::connect(&api).is_err() {
            continue;
        }
        let (status, _, body) = get(
            &api,
            "/api/v1/query?query=hmn_device_memory_used_bytes%7Bgpu%3D%220%22%7D",
            &[],
        );
        last = body.clone();
        if status == 200 && body.contains("\"result\":[{") {
            break true;
        }
    };
    let _ = prom.kill();
    let _ = prom.wait();
    assert!(
        found,
        "Prometheus never returned the metric; last answer: {last}"
    );
    let v: serde_json::Value = serde_json::from_str(&last).unwrap();
    let r = &v["data"]["result"][0];
    assert_eq!(r["metric"]["job"], "hmn");
    assert_eq!(
        r["metric"]["gpu_uuid"],
        "GPU-3a1f7c2e-5b9d-4e61-8f0a-9c2d4b7e0000"
    );
    // FakeDevice::h100: 4 MiB used.
    assert_eq!(r["value"][1], "4194304");
}

#[test]
fn deploy_files_are_valid_and_use_exported_names() {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../deploy");
    let o = Command::new("promtool")
        .args(["check", "config"])
        .arg(root.join("prometheus.yml"))
        .output()
        .unwrap_or_else(|e| panic!("promtool: {e}"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stdout));
    let dash: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(root.join("grafana-dashboard.json")).unwrap(),
    )
    .unwrap();
    let s = start(&[], &[]);
    let body = get(&s.addr, "/metrics", &[]).2;
    let mut names = Vec::new();
    for p in dash["panels"].as_array().unwrap() {
        for t in p["targets"].as_array().into_iter().flatten() {
            let expr = t["expr"].as_str().unwrap();
            for (i, _) in expr.match_indices("hmn_") {
                let name: String = expr[i..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                    .collect();
                names.push(name);
            }
        }
    }
    assert!(names.len() >= 10, "{names:?}");
    for n in names {
        assert!(
            body.contains(&format!("# TYPE {n} ")),
            "the dashboard uses {n}, which hmn does not export"
        );
    }
    let unit = std::fs::read_to_string(root.join("hmn-serve.service")).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/hmn serve --listen 127.0.0.1:9835"));
}
