"""Single builtin calls over many waves with device-resident registers (RESULTS.md "Final H200 run").

    python benchmarks/bench_calls.py --waves 65536 --rows fp8:cdna3 fp8:exact f16:gfx12_dot4
    python benchmarks/bench_calls.py --waves 65536 --backend pallas     # each wave on the Pallas kernels
    python benchmarks/bench_calls.py --rows mfma_f32_16x16x32_fp8_fp8:cdna3 mfma_scale_f32_16x16x128_f8f6f4:cdna4_mx
    python benchmarks/bench_calls.py --jit      # also under a user's jax.jit: time, first call, same bits

A row is ``fmt:model`` (fmt: a key of `rows.BUILTIN`, the sparse rows: registers packed from
pruned normal values) or ``builtin:model`` for any builtin (an empty model: its default):
random registers of `rows.registers` (normal values; the index words of a sparse builtin; a
block-scaled builtin gets random scale words, exponents 2**-7 to 2**7 in every byte).

Rate = emulated multiply-adds = compressed products (waves x M x N x K/2) per second, the
unit of benchmarks/RESULTS.md;
the registers are placed on the device first, so host transfers are not timed; ``first_s`` is
the first call (trace, compile and run). ``--mmasim``
also times MMA-Sim in the same run on the CDNA3-datapath rows (`rows.mmasim_rate`: its
per-product rate on 16 rows of a 256-column GEMM of depth 2048) and prints the ratio.
"""
from __future__ import annotations

import argparse
import json
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import BUILTIN, call_arguments, mmasim_rate, timed  # noqa: E402  (this folder: the shared rows and timer)

import jwmma  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", nargs="+", default=["fp8:cdna3", "fp8:exact", "f16:gfx12_dot4"])
    ap.add_argument("--waves", type=int, default=65536)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--mmasim", action="store_true", help="also time MMA-Sim on the cdna3 rows (CPU, about a minute each)")
    ap.add_argument("--backend", choices=("auto", "xla", "pallas"), default=None,
                    help="the calls' backend (default: the options' own, 'auto'); 'pallas' runs each wave's "
                         "instruction on the family's kernel (jwmma.backends.pallas.call_kernel)")
    ap.add_argument("--jit", action="store_true",
                    help="also time each call inside a user's jax.jit (registers as its arguments: the kernels are "
                         "then lowered with the user's program) and say whether its bits equal the eager call's")
    args = ap.parse_args()
    print("#", jax.devices()[0].device_kind, jax.__version__, "waves", args.waves)
    for row in args.rows:
        fmt, _, model = row.partition(":")
        name = BUILTIN.get(fmt, fmt)
        if name not in jwmma.BUILTINS:
            ap.error(f"row {row!r}: {fmt!r} is neither a key of rows.BUILTIN ({', '.join(BUILTIN)}) nor a builtin")
        spec = jwmma.BUILTINS[name]
        regs, extra = _registers(fmt, name, spec, args.waves)
        fn = getattr(jwmma, name)
        kw = {} if args.backend is None else {"backend": args.backend}
        kw.update(extra)
        if model:
            kw["model"] = model
        t = timed(lambda: fn(*regs, **kw), args.repeat)
        sec = t.median
        macs = args.waves * spec.m * spec.n * spec.kc * spec.blocks
        out = dict(row=row, builtin=name, backend=args.backend or "auto", seconds=sec, mac_per_s=macs / sec,
                   first_s=round(t.first, 3))  # trace, compile and run of the first call (issue 35)
        if args.jit:
            out.update(_jitted(fn, regs, kw, args.repeat, macs))
        if args.mmasim:
            rate = mmasim_rate(name, model, 256, 2048)
            out.update(mmasim_mac_per_s=rate, speedup_vs_mmasim=None if rate is None else macs / sec / rate)
        print(json.dumps(out))


def jitted_call(fn, regs, kw):
    """(a user's ``jax.jit`` of the call, its arguments): the registers and the keyword arrays
    are the program's arguments, the other keywords (model, backend) static."""
    arrays = {k: v for k, v in kw.items() if isinstance(v, jax.Array)}
    static = {k: v for k, v in kw.items() if k not in arrays}
    return jax.jit(lambda regs, arrays: fn(*regs, **arrays, **static)), (regs, arrays)


def _jitted(fn, regs, kw, repeat, macs):
    """The same call inside a user's ``jax.jit``, the arrays as its arguments: time, first call,
    and whether every output word equals the eager call's (NaN by NaN-ness)."""
    jitted, args = jitted_call(fn, regs, kw)
    t = timed(lambda: jitted(*args), repeat)
    eager, inside = (np.asarray(x) for x in (fn(*regs, **kw), jitted(*args)))
    same = _same_words(eager, inside)
    return dict(jit_seconds=t.median, jit_mac_per_s=macs / t.median, jit_first_s=round(t.first, 3),
                jit_identical=same)


def _same_words(x, y) -> bool:
    """Word for word, a float NaN matching any NaN (the fidelity rule)."""
    if x.shape != y.shape or x.dtype != y.dtype:
        return False
    if x.dtype.kind in "fV":  # numpy floats and ml_dtypes' (bfloat16 and the fp8 types: kind 'V')
        both_nan = np.isnan(x.astype(np.float32)) & np.isnan(y.astype(np.float32))
        bits = f"uint{x.dtype.itemsize * 8}"
        return bool(np.all((x.view(bits) == y.view(bits)) | both_nan))
    return bool(np.array_equal(x, y))


def _registers(fmt, name, spec, waves):
    """(positional registers on the device, keyword registers) of ``waves`` waves (module doc)."""
    if fmt in BUILTIN:  # the sparse rows as they were always timed: packed from pruned normal values
        ka, kb, kc = jax.random.split(jax.random.PRNGKey(0), 3)
        a = jax.random.normal(ka, (waves, spec.m, spec.k), jnp.float32).astype(spec.a_format.dtype)
        b = jax.random.normal(kb, (waves, spec.k, spec.n), jnp.float32).astype(spec.b_format.dtype)
        c = jax.random.normal(kc, (waves, spec.m, spec.n), jnp.float32)
        values, pos = jwmma.compress_2_4(jwmma.prune_2_4(a))
        return jax.block_until_ready([jax.device_put(r) for r in (
            jwmma.pack_a(name, values), jwmma.pack_b(name, b), jwmma.pack_c(name, c), jwmma.pack_index(name, pos))]), {}
    extra = {p: jax.device_put(x) if isinstance(x, np.ndarray) else x for p, x in call_arguments(name, waves).items()}
    if spec.scaled:
        rng = np.random.default_rng(1)
        words = rng.integers(120, 135, (2, waves, spec.lanes, 4), dtype=np.uint64).astype(np.uint32)
        words = (words << (8 * np.arange(4, dtype=np.uint32))).sum(-1, dtype=np.uint32).view(np.int32)
        extra.update(scale_a=jax.device_put(words[0]), scale_b=jax.device_put(words[1]))
    return [], jax.block_until_ready(extra)


if __name__ == "__main__":
    main()
