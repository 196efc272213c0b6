"""Summary of scripts/bench-loadtest.sh: reads its cells' files and prints the markdown of build/bench-loadtest.md.

Usage: loadtest_summary.py OUTDIR RUNS USERS DURATION LOAD_START LOAD_END CORES SLEEP
Each cell RUN-TOOL-TARGET left: .time (GNU time: user s, system s, elapsed s), .load (load average before it) and
the tool's own output: mce loadtest's report.json (RUN-mce-TARGET/), Locust's CSV (RUN-locust-TARGET_stats.csv) or
wrk's BENCH line (RUN-wrk-TARGET.log, from bench/wrk.lua).
"""

import csv
import json
import os
import sys

out, runs, users, dur, load_start, load_end, cores, sleep = sys.argv[1:9]
runs = int(runs)
CELLS = [("wrk", "trivial"), ("mce", "trivial"), ("locust", "trivial"), ("mce", "mce"), ("locust", "mce"),
         ("mce", "slow"), ("locust", "slow")]
TOOL = {"wrk": "wrk -t1", "mce": "mce loadtest", "locust": "Locust + boto3"}
TARGET = {"trivial": "trivial (nginx 200)", "mce": "mce → probe", "slow": "mce → probe, %s a call" % sleep}


def read_cell(run, tool, target):
    base = os.path.join(out, "%d-%s-%s" % (run, tool, target))
    with open(base + ".time") as f:
        user, system, elapsed = (float(x) for x in f.read().split()[-3:])
    with open(base + ".load") as f:
        load = f.read().split()[0]
    c = {"load": load, "cpu_s": user + system, "elapsed_s": elapsed}
    if tool == "mce":
        with open(os.path.join(base, "report.json")) as f:
            st = json.load(f)["stages"][0]
        c.update(requests=st["completed"], rps=st["rps"], p50=st["p50_ms"], p90=st["p90_ms"], p99=st["p99_ms"],
                 max=st["max_ms"], errors=st["errors"])
    elif tool == "locust":
        with open(base + "_stats.csv") as f:
            row = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated"][0]
        # Requests over the run's duration, as mce loadtest counts them (Locust's own Requests/s divides by the
        # span from its stats' start to its last request, which leaves out part of the ramp).
        c.update(requests=int(row["Request Count"]), rps=int(row["Request Count"]) / float(dur),
                 locust_rps=float(row["Requests/s"]), p50=float(row["50%"]),
                 p90=float(row["90%"]), p99=float(row["99%"]), max=float(row["Max Response Time"]),
                 errors=int(row["Failure Count"]))
    else:
        with open(base + ".log") as f:
            line = [x for x in f if x.startswith("BENCH ")][0]
        v = dict(kv.split("=") for kv in line.split()[1:])
        n = int(v["requests"])
        c.update(requests=n, rps=n / (int(v["duration_us"]) / 1e6), p50=int(v["p50_us"]) / 1000, p90=None,
                 p99=int(v["p99_us"]) / 1000, max=None,
                 errors=sum(int(v[k]) for k in ("status", "connect", "read", "write", "timeout")))
    c["cores"] = c["cpu_s"] / c["elapsed_s"] if c["elapsed_s"] else 0
    c["cpu_us_per_req"] = c["cpu_s"] * 1e6 / c["requests"] if c["requests"] else 0
    return c


def fmt(x, nd=1):
    return "–" if x is None else ("%.*f" % (nd, x))


cells = {(r, t, g): read_cell(r, t, g) for r in range(1, runs + 1) for t, g in CELLS}

print("## mce loadtest against Locust and its own ceiling")
print()
print("%s cores; load average %s before the first cell, %s after the last; each cell %s users (closed loop, no think"
      " time, all started in the first second) for %s s, a 64-byte POST; cells run one after the other in the order"
      " of the table. req/s = requests / the cell's duration (mce loadtest's own figure; for Locust, its own Requests/s"
      " is in its _stats.csv). Latency percentiles in ms (Locust's are whole ms below 100 ms). CPU = the"
      " generator's user+system time (GNU time), its whole life (Locust's includes about a second of start-up)."
      % (cores, load_start, load_end, users, dur))
print()
print("| run | generator | endpoint | load avg | requests | req/s | p50 | p90 | p99 | max | errors | CPU s | cores | CPU µs/req |")
print("|---:|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
for r in range(1, runs + 1):
    for t, g in CELLS:
        c = cells[(r, t, g)]
        print("| %d | %s | %s | %s | %d | %.0f | %s | %s | %s | %s | %d | %.1f | %.2f | %.0f |" % (
            r, TOOL[t], TARGET[g], c["load"], c["requests"], c["rps"], fmt(c["p50"], 2), fmt(c["p90"], 2),
            fmt(c["p99"], 2), fmt(c["max"], 1), c["errors"], c["cpu_s"], c["cores"], c["cpu_us_per_req"]))
print()
print("### Ratios measured within each run")
print()
for r in range(1, runs + 1):
    g = lambda t, e: cells[(r, t, e)]  # noqa: E731
    print("- run %d: mce loadtest / Locust req/s: trivial %.2f×, through mce %.2f×, %s a call %.2f×; p50 Locust −"
          " mce loadtest at %s a call %+.2f ms, p99 %+.2f ms; CPU µs per request, Locust /"
          " mce loadtest: trivial %.1f×, through mce %.1f×; p50 Locust − mce loadtest: trivial %+.2f ms, through mce"
          " %+.2f ms; mce loadtest / wrk req/s on the trivial endpoint %.2f; mce loadtest through mce / against the"
          " trivial endpoint %.2f" % (
              r, g("mce", "trivial")["rps"] / g("locust", "trivial")["rps"],
              g("mce", "mce")["rps"] / g("locust", "mce")["rps"], sleep,
              g("mce", "slow")["rps"] / g("locust", "slow")["rps"], sleep,
              g("locust", "slow")["p50"] - g("mce", "slow")["p50"], g("locust", "slow")["p99"] - g("mce", "slow")["p99"],
              g("locust", "trivial")["cpu_us_per_req"] / g("mce", "trivial")["cpu_us_per_req"],
              g("locust", "mce")["cpu_us_per_req"] / g("mce", "mce")["cpu_us_per_req"],
              g("locust", "trivial")["p50"] - g("mce", "trivial")["p50"],
              g("locust", "mce")["p50"] - g("mce", "mce")["p50"],
              g("mce", "trivial")["rps"] / g("wrk", "trivial")["rps"],
              g("mce", "mce")["rps"] / g("mce", "trivial")["rps"]))
if runs >= 2:
    print()
    print("### Spread between runs (max − min) / mean")
    print()
    for t, e in CELLS:
        parts = []
        for k in ("rps", "p50", "p99"):
            vals = [cells[(r, t, e)][k] for r in range(1, runs + 1)]
            if None in vals:
                continue
            mean = sum(vals) / len(vals)
            parts.append("%s %s (%.0f %%)" % (k, " / ".join(fmt(v, 2 if k != "rps" else 0) for v in vals),
                                            100 * (max(vals) - min(vals)) / mean if mean else 0))
        print("- %s → %s: %s" % (TOOL[t], TARGET[e], "; ".join(parts)))
