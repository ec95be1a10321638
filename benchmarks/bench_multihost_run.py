"""Two processes vs one on this machine, side by side in one run (RESULTS.md "Several processes").

    python benchmarks/bench_multihost_run.py [-m 1024 -n 1024 -k 2048 --model cdna3 --reps 5 --rounds 2]

Configurations (each a fresh job on 127.0.0.1 through `tests/multihost/launch.py`), interleaved over
``--rounds`` rounds so that the load of other users of the machine hits all alike:

* 1p x 1d     one process, one XLA CPU device (no distribution);
* 1p x 2d     one process, two forced CPU devices, rows split over them (RESULTS.md "CPU devices (1 vs 2)");
* 2p x 1d     two processes with one device each, one global mesh (rows split over hosts);
* 2p x 2d     two processes with two devices each (4 global devices);
* 1p x 1d pin / 2p x 1d pin: the same pinned with taskset, one core per process.

Prints a table and writes benchmarks/results/multihost.json (every run's JSON line).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "tests"))
from multihost import launch as mh_launch  # noqa: E402

p = argparse.ArgumentParser()
p.add_argument("-m", type=int, default=1024)
p.add_argument("-n", type=int, default=1024)
p.add_argument("-k", type=int, default=2048)
p.add_argument("--model", default="cdna3")
p.add_argument("--reps", type=int, default=5)
p.add_argument("--rounds", type=int, default=2)
p.add_argument("--out", default=os.path.join(HERE, "results", "multihost.json"))
args = p.parse_args()

CONFIGS = [("1p x 1d", 1, 1, False), ("1p x 2d", 1, 2, False), ("2p x 1d", 2, 1, False), ("2p x 2d", 2, 2, False)]
if shutil.which("taskset") and os.cpu_count() >= 2:
    CONFIGS += [("1p x 1d pin", 1, 1, True), ("2p x 1d pin", 2, 1, True)]

worker = [os.path.join(HERE, "bench_multihost.py"), "-m", str(args.m), "-n", str(args.n), "-k", str(args.k),
          "--model", args.model, "--reps", str(args.reps)]
results = []
for rnd in range(args.rounds):
    for label, procs, devs, pin in CONFIGS:
        cmd = worker + ["--label", label]
        python = sys.executable
        if pin:  # one core each: process i on core i (a wrapper keeps the launcher generic)
            python = os.path.join(HERE, "pinned_python.sh")
        res = mh_launch.launch(cmd, num_processes=procs, devices=devs, timeout=600, python=python,
                               via_env=procs > 1, extra_env={"MH_PYTHON": sys.executable}, cwd=HERE)
        line = [x for x in res.output[0].splitlines() if x.startswith("{")]
        if res.returncode != [0] * procs or not line:
            print(f"{label}: failed\n{res.tail(2000)}", file=sys.stderr)
            continue
        r = json.loads(line[-1])
        r["round"] = rnd
        results.append(r)
        print(f"round {rnd} {label:12s} median {r['median_s']:.3f} s  min {r['min_s']:.3f} s  "
              f"{r['macs_per_s']:.3e} MAC/s  CPU {r['cpu_s']:.2f} core-s/GEMM  first call {r['first_s']:.1f} s  "
              f"load {r['load']:.1f}  D {r['digest']}", flush=True)

print("load average at the end:", open("/proc/loadavg").read().strip(), flush=True)
with open(args.out, "w") as f:
    json.dump(results, f, indent=1)
base = [r["median_s"] for r in results if r["label"] == "1p x 1d"]
if base:
    ref = min(base)
    print(f"\n{args.model} M={args.m} N={args.n} K={args.k}; speed-up = best 1p x 1d median / best median")
    for label, *_ in CONFIGS:
        got = [r["median_s"] for r in results if r["label"] == label]
        if got:
            cpu = min(r["cpu_s"] for r in results if r["label"] == label)
            print(f"  {label:12s} best median {min(got):.3f} s  speed-up {ref / min(got):.2f}x  "
                  f"least CPU {cpu:.2f} core-s/GEMM")
    print("D digests:", sorted({r["digest"] for r in results}))
