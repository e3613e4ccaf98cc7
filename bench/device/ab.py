"""Whole-process A/B timing on the device (issue 26): named commands run round-robin RUNS
times, wall and CPU by wait4 (timing.round_robin), medians and ratios against the first.

    ab.py OUT.json RUNS NAME 'COMMAND' [NAME 'COMMAND' ...]
"""
import json
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402


def medians(argvs, runs):
    """Per name: argv, runs, median and min wall ms, median CPU ms, exit statuses."""
    res = {}
    for k, c in timing.round_robin(argvs, runs).items():
        wall, cpu = c["seconds"], [x for x in c["cpu_s"] if x is not None]
        res[k] = {"argv": c["argv"], "runs": len(wall), "median_ms": round(statistics.median(wall) * 1000, 2),
                  "min_ms": round(min(wall) * 1000, 2),
                  "cpu_ms": round(statistics.median(cpu) * 1000, 2) if cpu else None,
                  "rcs": sorted(set(map(str, c["rcs"])))}
    return res


def main(out, runs, pairs):
    res = medians({name: shlex.split(cmd) for name, cmd in zip(pairs[::2], pairs[1::2])}, runs)
    base = next(iter(res.values()))["median_ms"]
    for v in res.values():
        v["ratio_to_first"] = round(v["median_ms"] / base, 3) if base else None
    json.dump(res, open(out, "w"), indent=1)
    for k, v in res.items():
        print(f"{k:24s} {v['median_ms']:8.2f} ms  cpu {v['cpu_ms']} ms  x{v['ratio_to_first']}  rc {v['rcs']}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
