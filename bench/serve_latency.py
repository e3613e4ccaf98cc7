#!/usr/bin/env python3
"""hmn serve under a large node: 8 GPUs x 200 processes on the fake NVML.

Measures the scrape latency (p50/p99 over keep-alive GET /metrics) and hmn's RSS when idle
(after the first collections, before scraping) and after REQUESTS scrapes.
Usage: cargo build --release -p hmn && cargo build -p hmn-testbed && python3 bench/serve_latency.py
Environment: REQUESTS (default 100000 for the load figures), LATENCY_SAMPLES (2000).
"""
import glob, http.client, os, re, shutil, subprocess, sys, tempfile, time

root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
fake = sorted(glob.glob(f"{root}/target/debug/build/hmn-testbed-*/out/modern/libnvidia-ml.so.1"), key=os.path.getmtime)[-1]
hmn = f"{root}/target/release/hmn"
tmp = tempfile.mkdtemp()
os.makedirs(f"{tmp}/nvml"); os.makedirs(f"{tmp}/sys")
shutil.copy(fake, f"{tmp}/nvml/libnvidia-ml.so.1")
conf = ["driver_version = 550.54.15", "process_stride = 24"]
for d in range(8):
    conf += ["[device]", "name = NVIDIA H100 80GB HBM3", f"uuid = GPU-00000000-0000-0000-0000-{d:012x}",
             f"pci_bus_id = 00000000:{0x1a + d:02X}:00.0", "memory_total = 85520809984",
             "memory_reserved = 566231040", "memory_used = 42949672960", "utilization_gpu = 50",
             "temperature_c = 55", "power_mw = 400000", "energy_mj = 123456789"]
for d in range(8):
    for i in range(200):
        conf += ["[process]", f"device = {d}", f"pid = {100000 + d * 1000 + i}", f"used = {(i + 1) << 20}"]
open(f"{tmp}/nvml/fake-nvml.conf", "w").write("\n".join(conf) + "\n")

env = dict(os.environ, HMN_SYS_ROOT=f"{tmp}/sys", HMN_NVML_LIB=f"{tmp}/nvml/libnvidia-ml.so.1", HMN_NVIDIA_SMI="/nonexistent")
p = subprocess.Popen([hmn, "serve", "--listen", "127.0.0.1:0", "--interval", "5s", "--processes", "20"],
                     env=env, stderr=subprocess.PIPE, text=True)
line = p.stderr.readline()
host, port = re.search(r"http://([\d.]+):(\d+)/", line).groups()

def rss_kib():
    for l in open(f"/proc/{p.pid}/status"):
        if l.startswith("VmRSS:"):
            return int(l.split()[1])

def get(conn):
    conn.request("GET", "/metrics")
    r = conn.getresponse(); body = r.read()
    assert r.status == 200, r.status
    return body

conn = http.client.HTTPConnection(host, int(port))
for _ in range(200):
    try:
        body = get(conn); break
    except Exception:
        time.sleep(0.05); conn = http.client.HTTPConnection(host, int(port))
time.sleep(6)  # two collections
idle = rss_kib()
lat = []
for _ in range(int(os.environ.get("LATENCY_SAMPLES", 2000))):
    t = time.perf_counter(); get(conn); lat.append((time.perf_counter() - t) * 1000)
lat.sort()
n = int(os.environ.get("REQUESTS", 100000))
errors = 0
before = rss_kib()
for _ in range(n):
    try:
        get(conn)
    except Exception:
        errors += 1; conn = http.client.HTTPConnection(host, int(port))
after = rss_kib()
p.terminate(); p.wait()
shutil.rmtree(tmp)
series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
print(f"exposition: {len(body)} bytes, {series} series (8 GPUs x 200 processes, top 20 per GPU + other)")
print(f"scrape latency: p50 {lat[len(lat)//2]:.2f} ms, p99 {lat[int(len(lat)*0.99)]:.2f} ms (goal p99 < 5 ms)")
print(f"idle RSS: {idle/1024:.1f} MiB (goal < 10 MiB)")
print(f"{n} requests: {errors} errors, RSS {before} -> {after} KiB ({after - before:+d} KiB; goal growth < 1024 KiB)")
sys.exit(1 if errors else 0)
