"""First-call cost of builtin calls: trace, lower and XLA compile of the program a call builds,
and that program's size.

    python benchmarks/bench_compile.py                                   # the issue-22 rows
    python benchmarks/bench_compile.py --rows smfmac_f32_16x16x64_f16:cdna3 --waves 64 4096

Each row is one builtin with one model (empty: the row's default) over --waves waves of random
registers (`rows.call_arguments`, as `bench_first_call.py` makes them), called as a user calls
it: options settled for the call's work (the compile effort: 'fast' programs loop and compile
with LLVM at -O0, `jwmma.engine.effort`). Each row runs in a new process (rows in one process
would share JAX's traces of its own small functions, the first row paying for them). Times are
process CPU seconds (all threads) of each phase, taken at JAX's monitoring events, beside the
call's wall seconds: on a shared machine the wall time measures the other jobs, the CPU time
the work. Program size, of the optimised HLO that call compiled: its instructions (the lines
of its computations; the text also holds tables of source locations, which ``hlo_lines``
counts), its fused computations (XLA:CPU emits each as its own kernel), while loops and
conditionals. Run it once per code base (PYTHONPATH) to compare two commits.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time

import jax
import jax.numpy as jnp
from jax import monitoring

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import rows as shared_rows  # noqa: E402  (this folder: the shared rows)
from rows import ROWS as SHARED  # noqa: E402

import jwmma  # noqa: E402
from jwmma.engine import builtins  # noqa: E402
from jwmma.engine.effort import compiler_options  # noqa: E402
from jwmma.numerics.rounding import x64_scope  # noqa: E402

#: the default rows, builtin:model, of these `rows.ROWS`
ROWS = [f"{SHARED[r].builtin}:{SHARED[r].model_name}" for r in
        ("fp8_cdna3", "f16_cdna3", "bf16_cdna3", "f16_gfx12", "fp8_exact", "fp8_fma_chain", "int8_cdna4")]

_PHASES = {"jaxpr_trace_duration": "trace", "jaxpr_to_mlir_module_duration": "lower",
           "backend_compile_duration": "compile"}
_marks: list = []
monitoring.register_event_duration_secs_listener(
    lambda event, secs, **kw: _marks.append((event.rsplit("/", 1)[-1], time.process_time())))


def census(hlo: str) -> dict:
    """Size of an optimised HLO module's text: instructions (assignments inside computations),
    fused computations, while loops, conditionals, and all lines."""
    instructions = fused = 0
    inside = False
    for line in hlo.splitlines():
        if not line.startswith(" ") and line.rstrip().endswith("{"):
            inside = True
            fused += bool(re.match(r"%?fused_computation", line))
        elif line.strip() == "}":
            inside = False
        elif inside and " = " in line:
            instructions += 1
    return dict(instructions=instructions, fused_computations=fused, whiles=hlo.count(" while("),
                conditionals=hlo.count(" conditional("), hlo_lines=hlo.count("\n"))


def row(name, model_name, waves):
    """One first call of ``name`` (model ``model_name``, None: the default) over ``waves``
    waves: its phases' CPU seconds and its program's `census`."""
    kwargs = shared_rows.call_arguments(name, waves)
    if model_name:
        kwargs["model"] = model_name
    seen = {}
    folding = builtins._folding_vmap

    def capture(spec, m, opts, settled, products, key, statics, arrays):
        seen.update(spec=spec, model=m, settled=settled, statics=statics, arrays=arrays)
        return folding(spec, m, opts, settled, products, key, statics, arrays)

    builtins._folding_vmap = capture  # the program the call builds, with its settled options
    try:
        _marks.clear()
        t0c, t0w = time.process_time(), time.perf_counter()
        jax.block_until_ready(getattr(jwmma, name)(**kwargs))
        total_cpu, total_wall = time.process_time() - t0c, time.perf_counter() - t0w
    finally:
        builtins._folding_vmap = folding
    phases, prev = {}, t0c
    for event, t in _marks:
        if event in _PHASES:
            key = _PHASES[event] + "_cpu_s"
            phases[key] = round(phases.get(key, 0.0) + t - prev, 3)
            prev = t
    settled = seen["settled"]
    settings = dict(compiler_options(settled.platform, settled.compile_effort))
    with x64_scope():  # the same program again, for its text (JAX's caches make this cheap)
        lowered = builtins.run_call.lower(seen["spec"], seen["model"], *seen["arrays"], options=settled,
                                          **seen["statics"])
        hlo = lowered.compile(compiler_options=settings or None).as_text()
    return dict(builtin=name, model=seen["model"].name, waves=waves, effort=settled.compile_effort, **phases,
                total_cpu_s=round(total_cpu, 3), total_wall_s=round(total_wall, 3), **census(hlo),
                load=open("/proc/loadavg").read().split()[:3])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=ROWS, help="builtin:model (empty model: the row's default)")
    ap.add_argument("--waves", nargs="+", type=int, default=[64])
    args = ap.parse_args(argv)
    pairs = [(r, w) for r in args.rows for w in args.waves]
    print("#", jax.devices()[0].device_kind, jax.__version__, "jwmma from",
          os.path.relpath(os.path.dirname(jwmma.__file__)), flush=True)
    if len(pairs) > 1:  # each in a process of its own (the module doc), this script run again
        for r, w in pairs:
            out = subprocess.run([sys.executable, os.path.abspath(__file__), "--rows", r, "--waves", str(w)],
                                 capture_output=True, text=True)
            lines = [ln for ln in out.stdout.splitlines() if ln.startswith("{")]
            print(lines[-1] if lines else json.dumps(dict(row=r, waves=w, error=(out.stderr.strip().splitlines()
                                                                                   or ["?"])[-1][:300])), flush=True)
        return
    jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones(8)))  # JAX's own warm-up
    (r, w), = pairs
    name, _, model = r.partition(":")
    print(json.dumps(row(name, model or None, w)), flush=True)


if __name__ == "__main__":
    main()
