"""Time one benchmark under two code trees in alternating processes: A, B, A, B, ...

    python benchmarks/ab_trees.py --a ../base --b . --pairs 4 -- \
        benchmarks/bench_calls.py --waves 4096 --repeat 9 --rows wmma_f32_16x16x16_f16_w32:
    python benchmarks/ab_trees.py --a ../base --b . --metric first_cpu_s -- \
        benchmarks/bench_first_call.py --rows wmma_f32_16x16x16_f16_w32

A shared 2-core VM's speed drifts by up to 25 % within minutes (benchmarks/RESULTS.md, "CPU
and one H100, 2026-12-06, late"): one run of each tree compares the two moments as much as
the two trees. Alternating processes put both trees through the same drift, and each pair's
ratio B / A is taken within the pair. A tree is a folder holding a ``jwmma/`` package (a
checkout, or a copy of an older commit's ``jwmma/``); the benchmark script is this folder's
and runs with ``PYTHONPATH`` set to the tree. Every JSON line the benchmark prints that has a
``row`` and the metric is collected.

Prints one line per row: each tree's values in run order, and the pairs' ratios B / A with
their median. Exit status 1 if some run printed no result.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def run_once(tree: str, command: list[str], metrics: list[str]) -> dict:
    """One process of ``command`` (a benchmark script and its arguments) with ``tree`` first on
    PYTHONPATH; {(row, metric): value} of its JSON lines."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.abspath(tree)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep)
                                                                     if p])
    script = command[0] if os.path.isabs(command[0]) else os.path.join(HERE, os.path.basename(command[0]))
    proc = subprocess.run([sys.executable, script, *command[1:]], capture_output=True, text=True, env=env)
    out = {}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            d = json.loads(line)
            for metric in metrics:
                if "row" in d and metric in d:
                    out[(d["row"], metric)] = float(d[metric])
    if not out:
        sys.stderr.write(f"no result from {tree}:\n{(proc.stdout + proc.stderr)[-2000:]}\n")
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="the first tree (the baseline)")
    ap.add_argument("--b", required=True, help="the second tree")
    ap.add_argument("--pairs", type=int, default=4)
    ap.add_argument("--metric", default="mac_per_s", help="the JSON fields to compare, comma-separated "
                                                          "(bench_calls: mac_per_s, first_s; bench_first_call: "
                                                          "first_cpu_s)")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS...: the benchmark to run")
    args = ap.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        ap.error("give the benchmark after --, e.g. -- benchmarks/bench_calls.py --rows fp8:cdna3")
    for tree in (args.a, args.b):
        if not os.path.isdir(os.path.join(tree, "jwmma")):
            ap.error(f"--a/--b must be folders holding a jwmma/ package, got {tree!r}")
    metrics = args.metric.split(",")
    runs = {"a": [], "b": []}
    for i in range(args.pairs):
        for side, tree in (("a", args.a), ("b", args.b)):
            runs[side].append(run_once(tree, command, metrics))
            print(f"# pair {i + 1} {side}: " + ", ".join(f"{r} {m} {v:.4g}" for (r, m), v in runs[side][-1].items()),
                  flush=True)
    failed = any(not r for side in runs.values() for r in side)
    rows = [r for r in runs["a"][0] if all(r in x for side in runs.values() for x in side)]
    print(f"# A {args.a}, B {args.b}, {args.pairs} alternating pairs")
    for row in rows:
        a = [x[row] for x in runs["a"]]
        b = [x[row] for x in runs["b"]]
        ratios = [y / x for x, y in zip(a, b) if x]
        print(f"{row[0]} {row[1]}: A {' '.join(f'{x:.4g}' for x in a)} | B {' '.join(f'{y:.4g}' for y in b)} | "
              f"B/A {' '.join(f'{r:.3f}' for r in ratios)} (median {statistics.median(ratios):.3f})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
