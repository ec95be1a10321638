"""CPU rows of builtin calls and GEMMs (RESULTS.md "CPU speed of builtin calls and `exact`"),
old code against new side by side in one run (ratios, not absolute rates).

The parent runs this same file as a child once per code base (``--child``): the new code with
this interpreter and this checkout on the path, the old one with ``--old-python`` from a
directory outside the checkouts (so that it imports its own installed jwmma). The children
alternate row by row (old, new, old, new ...) so that a change of load hits both alike.

Rows: whole GEMMs (M = N = --size, K = --k, matrix path) and single builtin calls over
--waves waves (random finite operands, index pairs (0, 1)); rate = compressed products / s.

    python benchmarks/bench_speed.py                          # all rows, old vs new
    python benchmarks/bench_speed.py --rows gemm:f16c:cdna3 call:fp8:cdna3
    python benchmarks/bench_speed.py --old-python ../ref/.venv/bin/python --old-cwd ..

``--old-python`` defaults to ``$JWMMA_REF_PYTHON`` (the interpreter of the other version);
``--old-cwd`` to the system's temporary directory.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROWS = [
    "gemm:fp8:cdna3", "gemm:f16c:cdna3", "gemm:bf16:cdna3", "gemm:f16:gfx12_dot4", "gemm:fp8:exact",
    "gemm:fp8:fma_chain",
    "call:fp8:cdna3", "call:f16c:cdna3", "call:bf16:cdna3", "call:f16:gfx12_dot4", "call:fp8:exact",
    "call:fp8:fma_chain",
]


def child(row, size, k, waves, repeat):
    import jax
    import jax.numpy as jnp
    import numpy as np

    import jwmma
    from rows import BUILTIN  # this file's folder: the shared rows and timer
    from rows import timed as timed_repeat

    kind, fmt, model = row.split(":")
    name = BUILTIN[fmt]
    spec = jwmma.BUILTINS[name]

    def timed(fn):
        return timed_repeat(fn, repeat).median

    key = jax.random.PRNGKey(0)
    ka, kb, kc = jax.random.split(key, 3)
    if kind == "gemm":
        a = jax.random.normal(ka, (size, k), jnp.float32).astype(spec.a_format.dtype)
        b = jax.random.normal(kb, (k, size), jnp.float32).astype(spec.b_format.dtype)
        av = jwmma.compress_2_4(jwmma.prune_2_4(a))
        t = timed(lambda: jwmma.gemm(av, b, builtin=name, model=model))
        products = size * size * k // 2
    else:
        a = jax.random.normal(ka, (waves, spec.m, spec.k), jnp.float32).astype(spec.a_format.dtype)
        b = jax.random.normal(kb, (waves, spec.k, spec.n), jnp.float32).astype(spec.b_format.dtype)
        c = jax.random.normal(kc, (waves, spec.m, spec.n), jnp.float32)
        values, pos = jwmma.compress_2_4(jwmma.prune_2_4(a))
        regs = (jwmma.pack_a(name, values), jwmma.pack_b(name, b), jwmma.pack_c(name, c),
                jwmma.pack_index(name, pos))
        regs = [np.asarray(r) for r in regs]
        fn = getattr(jwmma, name)
        t = timed(lambda: fn(*regs, model=model))
        products = waves * spec.m * spec.n * spec.kc
    return dict(row=row, seconds=t, rate=products / t)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=ROWS)
    ap.add_argument("--size", type=int, default=256)
    ap.add_argument("--k", type=int, default=2048)
    ap.add_argument("--waves", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--old-python", default=os.environ.get("JWMMA_REF_PYTHON"),
                    help="python of the old code (default: $JWMMA_REF_PYTHON)")
    ap.add_argument("--old-cwd", default=tempfile.gettempdir())
    ap.add_argument("--child", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.child:
        for row in args.rows:
            print(json.dumps(child(row, args.size, args.k, args.waves, args.repeat)), flush=True)
        return 0
    if not args.old_python:
        ap.error("--old-python (or $JWMMA_REF_PYTHON) names the python of the old code")
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    me = os.path.abspath(__file__)
    common = ["--size", str(args.size), "--k", str(args.k), "--waves", str(args.waves), "--repeat", str(args.repeat)]
    envs = {
        "old": (args.old_python, args.old_cwd, {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}),
        "new": (sys.executable, here, dict(os.environ, PYTHONPATH=here)),
    }
    out = []
    print(f"# load average before: {open('/proc/loadavg').read().split()[:3]}", flush=True)
    for row in args.rows:
        res = {}
        for which in ("old", "new"):
            py, cwd, env = envs[which]
            p = subprocess.run([py, me, "--child", "--rows", row, *common], cwd=cwd, env=env, capture_output=True,
                               text=True)
            if p.returncode:
                res[which] = None
                print(f"{row} {which}: failed\n{p.stderr[-1500:]}", flush=True)
                continue
            res[which] = json.loads(p.stdout.strip().splitlines()[-1])
        load = open("/proc/loadavg").read().split()[:3]
        o, n = res.get("old"), res.get("new")
        ratio = (n["rate"] / o["rate"]) if (o and n) else float("nan")
        print(f"{row:24s} old {o['rate'] if o else float('nan'):.3e}/s  new {n['rate'] if n else float('nan'):.3e}/s"
              f"  x{ratio:.2f}  load {' '.join(load)}", flush=True)
        out.append(dict(row=row, old=o, new=n, ratio=ratio, load=load))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
