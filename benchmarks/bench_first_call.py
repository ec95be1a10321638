"""First calls as a user meets them: one fresh process per row, process CPU seconds.

    python benchmarks/bench_first_call.py                          # every builtin (default model) + the GEMM rows
    python benchmarks/bench_first_call.py --rows smfmac_f32_16x16x64_bf16 smfmac_f32_16x16x128_fp8_fp8:exact
    python benchmarks/bench_first_call.py --rows gemm:fp8 gemm:mx --json first.json

A row runs in a new Python process: import jax and jwmma, warm JAX up with a trivial jitted
program (JAX's own start-up cost is not ours), make the operands with numpy, then time the
first call: ``jwmma.<builtin>`` over ``--waves`` waves of random registers, or a first
``jwmma.gemm`` (``gemm:fp8``: fp8 cdna3, 256 x 256 x 1024 dense K; ``gemm:mx``: MXFP4 x MXFP8 on
``mfma_scale_f32_16x16x128_f8f6f4``, 256 x 256 x 1024; ``gemm:bf16``, ``gemm:f16_gfx12``...).
"first" is trace + compile + run with ``block_until_ready``, as process CPU seconds (every
thread; comparable on a loaded machine) beside wall seconds; "second" is the next call with
the same shapes (the run alone). A builtin row is ``name`` or ``name:model``.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess

from children import child_command  # this folder's: the child imports the jwmma this process would

#: gemm:<kind> -> row of `rows.ROWS` (this folder's shared rows)
GEMMS = {
    "fp8": "fp8_cdna3",
    "bf16": "bf16_cdna3",
    "f16_gfx12": "f16_gfx12",
    "mfma_fp8": "mfma_fp8_cdna3",
    "mx": "mxfp4_mxfp8_cdna4_mx",
    "exact": "fp8_exact",
}

_CHILD = r'''
import json, sys, time
row, waves, size, here = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
import jax, jax.numpy as jnp, numpy as np
jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones(8)))   # JAX's own warm-up
import jwmma
sys.path.insert(0, here)
import rows

if row.startswith("gemm:"):
    r = rows.ROWS[GEMMS[row[5:]]]
    a, b, c, kw = rows.operands(r, size, size, 4 * size)
    call = lambda: jwmma.gemm(a, b, c, builtin=r.builtin, model=r.model, **kw)
else:
    name, _, model = row.partition(":")
    fn = getattr(jwmma, name)
    kwargs = rows.call_arguments(name, waves)  # every argument by name, the modifiers False
    if model:
        kwargs["model"] = model
    call = lambda: fn(**kwargs)

t0c, t0w = time.process_time(), time.perf_counter()
jax.block_until_ready(call())
first = (time.process_time() - t0c, time.perf_counter() - t0w)
t0c, t0w = time.process_time(), time.perf_counter()
jax.block_until_ready(call())
second = (time.process_time() - t0c, time.perf_counter() - t0w)
print(json.dumps(dict(row=row, first_cpu_s=round(first[0], 3), first_wall_s=round(first[1], 3),
                      second_cpu_s=round(second[0], 3), second_wall_s=round(second[1], 3),
                      load=open("/proc/loadavg").read().split()[:3])))
'''


def run_row(row: str, waves: int, size: int, env=None) -> dict:
    """One row in a new process; its JSON line as a dict (or an ``error`` entry)."""
    code = f"GEMMS = {GEMMS!r}\n" + _CHILD
    here = os.path.dirname(os.path.abspath(__file__))
    p = subprocess.run(child_command(code, row, str(waves), str(size), here), capture_output=True, text=True, env=env)
    lines = [ln for ln in p.stdout.splitlines() if ln.startswith("{")]
    if p.returncode or not lines:
        return dict(row=row, error=(p.stderr.strip().splitlines() or ["?"])[-1][:300])
    return json.loads(lines[-1])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=None, help="builtin[:model] or gemm:<kind> (default: all)")
    ap.add_argument("--waves", type=int, default=64)
    ap.add_argument("--size", type=int, default=256, help="GEMM rows M = N (K = 4 x size)")
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    if args.rows is None:
        import jwmma
        args.rows = list(jwmma.BUILTINS) + [f"gemm:{g}" for g in GEMMS]
    env = dict(os.environ)
    env.setdefault("JAX_PLATFORMS", "cpu")
    out = []
    for row in args.rows:
        r = run_row(row, args.waves, args.size, env)
        print(json.dumps(r), flush=True)
        out.append(r)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
