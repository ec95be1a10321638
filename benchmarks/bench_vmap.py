"""Builtin calls under ``jax.vmap`` beside one call over the same waves (RESULTS.md "CPU,
2026-12-06, after the H100 round").

    python benchmarks/bench_vmap.py                                     # 64 x 64 waves, four rows
    python benchmarks/bench_vmap.py --shape 256 256 --rows fp8_cdna3    # a GPU size

A row is a label of `rows.ROWS`, optionally ``label:model``. Its registers (`rows.registers`,
normal values) of ``prod(--shape)`` waves are placed on the device and shaped (*shape, lanes,
n); each is timed three ways: ``jax.jit(jax.vmap(f))`` over the first axis with ``f`` calling
the builtin on the rest, ``jax.vmap(f)`` eagerly, and one call of the builtin on all the waves
flattened. ``first`` is the first call (trace, compile, run), then the median of ``--repeat``.
The waves are independent instructions: all three give the same bits.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

import jax

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import ROWS, call_arguments, timed  # noqa: E402  (this folder: the shared rows and timer)

import jwmma  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=["fp8_cdna3", "bf16_cdna3", "f16_gfx12", "bf16_cdna3:exact"])
    ap.add_argument("--shape", nargs=2, type=int, default=[64, 64], help="the mapped axis and the waves of each call")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    waves = math.prod(args.shape)
    print("#", jax.devices()[0].device_kind, jax.__version__, "waves", args.shape)
    for row in args.rows:
        label, _, model = row.partition(":")
        if label not in ROWS:
            ap.error(f"row {row!r}: {label!r} is not a label of rows.ROWS")
        name = ROWS[label].builtin
        found = call_arguments(label, waves)
        arrays = {k: jax.device_put(v.reshape(tuple(args.shape) + v.shape[1:]))
                  for k, v in found.items() if hasattr(v, "shape")}
        kw = {k: v for k, v in found.items() if not hasattr(v, "shape")}
        if model:
            kw["model"] = model
        fn = getattr(jwmma, name)
        keys = list(arrays)

        def one(*xs):
            return fn(**dict(zip(keys, xs)), **kw)

        flat = {k: v.reshape((waves,) + v.shape[2:]) for k, v in arrays.items()}
        jv = jax.jit(jax.vmap(one))
        out = {"row": row, "builtin": name}
        for how, f in (("jit_vmap", lambda: jv(*arrays.values())), ("vmap", lambda: jax.vmap(one)(*arrays.values())),
                       ("one_call", lambda: fn(**flat, **kw))):
            t = timed(f, args.repeat)
            out[how] = round(t.median, 4)
            out[how + "_first"] = round(t.first, 2)
        print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
