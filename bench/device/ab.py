"""Whole-process A/B timing on the device (issue 26): named commands run round-robin RUNS
times, wall and CPU by wait4 (timing.run_once), medians and ratios against the first.

    ab.py OUT.json RUNS NAME 'COMMAND' [NAME 'COMMAND' ...]
"""
import json
import os
import shlex
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import timing  # noqa: E402


def main(out, runs, pairs):
    cmds = {name: shlex.split(cmd) for name, cmd in zip(pairs[::2], pairs[1::2])}
    got = {k: ([], [], set()) for k in cmds}
    for _ in range(runs):
        for k, argv in cmds.items():
            rc, wall, cpu = timing.run_once(argv)
            got[k][0].append(wall)
            if cpu is not None:
                got[k][1].append(cpu)
            got[k][2].add(str(rc))
    res = {}
    for k, (wall, cpu, rcs) in got.items():
        res[k] = {"argv": cmds[k], "runs": len(wall), "median_ms": round(statistics.median(wall) * 1000, 2),
                  "min_ms": round(min(wall) * 1000, 2),
                  "cpu_ms": round(statistics.median(cpu) * 1000, 2) if cpu else None, "rcs": sorted(rcs)}
    base = next(iter(res.values()))["median_ms"]
    for v in res.values():
        v["ratio_to_first"] = round(v["median_ms"] / base, 3) if base else None
    json.dump(res, open(out, "w"), indent=1)
    for k, v in res.items():
        print(f"{k:24s} {v['median_ms']:8.2f} ms  cpu {v['cpu_ms']} ms  x{v['ratio_to_first']}  rc {v['rcs']}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3:])
