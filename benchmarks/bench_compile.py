"""First-call cost of builtin calls: trace, lower and XLA compile of `run_waves`, and program size.

    python benchmarks/bench_compile.py                                   # the issue-22 rows
    python benchmarks/bench_compile.py --rows smfmac_f32_16x16x64_f16:cdna3 --waves 1 4096

Each row is one builtin with one model over --waves waves (the program a first
``jwmma.<builtin>(...)`` call builds). Times are process CPU seconds (all threads) beside wall
seconds: on a shared machine the wall time measures the other jobs, the CPU time the work.
Program size: lines of the optimised HLO, its fusions, while loops and conditionals (the
compile time grows with them). Run it once per code base (PYTHONPATH) to compare two commits.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import ROWS as SHARED  # noqa: E402  (this folder: the shared rows)

import jwmma  # noqa: E402
from jwmma import models  # noqa: E402
from jwmma.engine import builtins  # noqa: E402
from jwmma.engine.options import resolve  # noqa: E402
from jwmma.engine.step import context  # noqa: E402
from jwmma.numerics.rounding import x64_scope  # noqa: E402

#: the default rows, builtin:model, of these `rows.ROWS`
ROWS = [f"{SHARED[r].builtin}:{SHARED[r].model_name}" for r in
        ("fp8_cdna3", "f16_cdna3", "bf16_cdna3", "f16_gfx12", "fp8_exact", "fp8_fma_chain", "int8_cdna4")]


def registers(name, waves):
    """Zero registers of ``waves`` waves (values do not matter for compiling): A, B, C, index and
    the two scale registers, as `jwmma.engine.builtins.call` passes them."""
    spec = jwmma.BUILTINS[name]

    def zeros(fmt, shape):
        return jnp.zeros(shape, fmt.dtype if fmt is not None else jnp.int8)

    one = [jwmma.pack_a(name, zeros(spec.a_format, (spec.m, spec.kc))),
           jwmma.pack_b(name, zeros(spec.b_format, (spec.k, spec.n))),
           jwmma.pack_c(name, jnp.zeros((spec.m, spec.n), spec.c_format.dtype if spec.c_format else jnp.int32)),
           jnp.zeros((spec.lanes,), jnp.int32)]
    one += [jnp.zeros((spec.lanes,), jnp.int32)] * 2  # scale registers (zero words where none)
    return [jnp.broadcast_to(r, (waves,) + r.shape) for r in one]


def row(name, model_name, waves):
    spec = jwmma.BUILTINS[name]
    model = models.resolve(model_name, context(spec), spec.default_model)
    opts = resolve(None, None)
    regs = registers(name, waves)
    marks = []

    def mark():
        marks.append((time.process_time(), time.perf_counter()))

    with x64_scope():
        mark()
        traced = builtins.run_waves.trace(spec, model, *regs, s=0, options=opts)
        mark()
        lowered = traced.lower()
        mark()
        compiled = lowered.compile()
        mark()
    hlo = compiled.as_text()
    cpu = [b[0] - a[0] for a, b in zip(marks, marks[1:])]
    wall = marks[-1][1] - marks[0][1]
    return dict(builtin=name, model=model.name, waves=waves, trace_cpu_s=round(cpu[0], 3),
                lower_cpu_s=round(cpu[1], 3), compile_cpu_s=round(cpu[2], 3), total_cpu_s=round(sum(cpu), 3),
                total_wall_s=round(wall, 3), hlo_lines=hlo.count("\n"), fusions=hlo.count("fusion("),
                whiles=hlo.count(" while("), conditionals=hlo.count(" conditional("),
                load=open("/proc/loadavg").read().split()[:3])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=ROWS, help="builtin:model (empty model: the row's default)")
    ap.add_argument("--waves", nargs="+", type=int, default=[4096])
    args = ap.parse_args(argv)
    print("#", jax.devices()[0].device_kind, jax.__version__, "jwmma from", jwmma.__file__)
    for r in args.rows:
        name, _, model = r.partition(":")
        for w in args.waves:
            print(json.dumps(row(name, model or None, w)), flush=True)


if __name__ == "__main__":
    main()
