#!/usr/bin/env python3
"""Prints the ratios the docs quote, from criterion's estimates of the last `cargo bench` run.

Run `cargo bench -p hypomnesis --all-features` first (benches: rss, nvml, drm). Each ratio compares two functions
measured in the same run of the same binary, so machine speed cancels out.
"""
import json
import pathlib
import sys

import os

# CRITERION_HOME as criterion reads it (the Wine run of the benches writes elsewhere).
ROOT = pathlib.Path(
    os.environ.get("CRITERION_HOME")
    or pathlib.Path(__file__).resolve().parent.parent / "target" / "criterion"
)


def median_ns(group: str, bench: str) -> float:
    path = ROOT / group / bench / "new" / "estimates.json"
    with open(path) as f:
        return json.load(f)["median"]["point_estimate"]


def show(label: str, num: tuple, den: tuple, goal: str) -> None:
    try:
        a, b = median_ns(*num), median_ns(*den)
    except FileNotFoundError as e:
        print(f"{label}: missing {e.filename} (run cargo bench first)")
        return
    print(f"{label}: {a:,.0f} ns vs {b:,.0f} ns = {a / b:.2f}x  (goal {goal})")


show("process_rss / bare statm read", ("own_rss", "process_rss"), ("own_rss", "bare_statm_read"), "<= 1.5x")
show("process_rss / bare pread of an open fd", ("own_rss", "process_rss"), ("own_rss", "bare_pread_open_fd"), "<= 1.5x")
show("sysinfo refresh one / process_rss", ("own_rss", "sysinfo_refresh_one"), ("own_rss", "process_rss"), ">= 20x")
show("init per call / long-lived probe", ("device_query", "init_per_call"), ("device_query", "long_lived_probe"), ">= 100x")
show("cached-index tick / full DRM scan (idle /proc)", ("drm_query", "cached_index_tick"), ("drm_query", "full_scan"), "<= 0.10x")
show("Probe device query / bare NVML handle + memory info (the floor)", ("device_query", "long_lived_probe"), ("device_query", "bare_nvml_memory_info"), "<= 3x")
show("Probe device query / the same NVML calls, bare (what the Probe layer adds)", ("device_query", "long_lived_probe"), ("device_query", "bare_nvml_same_calls"), "<= 1.5x")
show("Windows: process_rss / bare GetProcessMemoryInfo (the floor)", ("own_rss", "process_rss"), ("own_rss", "bare_get_process_memory_info"), "<= 1.5x")
sys.exit(0)
