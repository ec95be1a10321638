"""Kernel-level time split of one GEMM emulation (jax.profiler perfetto trace -> top kernels).

    python benchmarks/profile_gpu.py --size 2048 --config fp8:cdna3 --out DIR
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import tempfile

import jax

import jwmma
from rows import BUILTIN, operands  # this folder: the shared rows and their operands


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--config", default="fp8:cdna3")
    ap.add_argument("--path", default="matrix")
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "jwmma_prof"))
    args = ap.parse_args()
    fmt, model = args.config.split(":")
    builtin = BUILTIN[fmt]
    a, b, _, _ = jax.device_put(operands(builtin, args.size, args.size, 2 * args.size, seed=0))
    f = lambda: jwmma.gemm(a, b, builtin=builtin, model=model, path=args.path)
    jax.block_until_ready(f())
    with jax.profiler.trace(args.out, create_perfetto_trace=True):
        jax.block_until_ready(f())
    files = glob.glob(os.path.join(args.out, "**", "*perfetto_trace.json.gz"), recursive=True)
    ev = json.load(gzip.open(files[0]))
    events = ev["traceEvents"] if isinstance(ev, dict) else ev
    tot = collections.Counter()
    cnt = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and "dur" in e:
            tot[e["name"]] += e["dur"]
            cnt[e["name"]] += 1
    print(f"{builtin} {model} {args.path} {args.size}: top events (us total, count)")
    for name, us in tot.most_common(25):
        print(f"{us:12.0f} {cnt[name]:6d}  {name[:110]}")


if __name__ == "__main__":
    main()
