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
import sys

GEMMS = {
    "fp8": ("smfmac_f32_16x16x128_fp8_fp8", None, {}),
    "bf16": ("smfmac_f32_16x16x64_bf16", None, {}),
    "f16_gfx12": ("swmmac_f32_16x16x32_f16_w32", None, {}),
    "mfma_fp8": ("mfma_f32_16x16x32_fp8_fp8", None, {}),
    "mx": ("mfma_scale_f32_16x16x128_f8f6f4", None, {"formats": (4, 0)}),
    "exact": ("smfmac_f32_16x16x128_fp8_fp8", "exact", {}),
}

_CHILD = r'''
import json, sys, time
row, waves, size = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
import jax, jax.numpy as jnp, numpy as np, ml_dtypes
jax.block_until_ready(jax.jit(lambda x: x * 2 + 1)(jnp.ones(8)))   # JAX's own warm-up
import jwmma
rng = np.random.default_rng(0)
FMT = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2, 2: ml_dtypes.float6_e2m3fn,
       3: ml_dtypes.float6_e3m2fn, 4: ml_dtypes.float4_e2m1fn}

def values(fmt_dtype, shape):
    return np.asarray(jwmma.numerics.cast(rng.standard_normal(shape), fmt_dtype))

if row.startswith("gemm:"):
    name, model, kw = GEMMS[row[5:]]
    spec = jwmma.BUILTINS[name]
    kw = dict(kw)
    fmts = kw.pop("formats", None)
    m = n = size; k = 4 * size
    if spec.scaled:
        a = values(FMT[fmts[0]], (m, k)).view(np.uint8); b = values(FMT[fmts[1]], (k, n)).view(np.uint8)
        kw.update(fmt_a=fmts[0], fmt_b=fmts[1], scale_a=rng.integers(120, 135, (m, k // 32)).astype(np.uint8),
                  scale_b=rng.integers(120, 135, (k // 32, n)).astype(np.uint8))
    else:
        a = values(spec.a_format.dtype, (m, k)); b = values(spec.b_format.dtype, (k, n))
    c = rng.standard_normal((m, n)).astype(np.float32)
    if not spec.dense:
        a = jwmma.compress_2_4(jwmma.prune_2_4(a))
    call = lambda: jwmma.gemm(a, b, c, builtin=name, model=model, **kw)
else:
    name, _, model = row.partition(":")
    spec = jwmma.BUILTINS[name]
    fn = getattr(jwmma, name)
    def reg(op, fmt):
        if op is None:
            return None
        shape = (waves, spec.lanes, op.n)
        if fmt is None:  # integers: random words of the register dtype
            info = np.iinfo(op.dtype)
            return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(op.dtype)
        if np.dtype(op.dtype).kind in "iu":  # packed sub-byte / scaled element words
            info = np.iinfo(op.dtype)
            return rng.integers(0, int(info.max) + 1, shape, dtype=np.int64).astype(op.dtype)
        return values(op.dtype, shape)
    a, b = reg(spec.a, spec.a_format), reg(spec.b, spec.b_format)
    c = reg(spec.c, spec.c_format)
    kwargs = {} if not model else {"model": model}
    for p, prm in fn.__signature__.parameters.items():  # every argument by name
        if p in ("a", "b", "c"):
            kwargs[p] = {"a": a, "b": b, "c": c}[p]
        elif p in ("index", "idx"):  # positions (0, 1), (0, 2)... in every nibble
            kwargs[p] = (rng.integers(0, 2**31 - 1, (waves, spec.lanes)).astype(np.int32) & 0x0E0E0E0E) | 0x04040404
        elif prm.default is prm.empty:  # sign and clamp modifiers
            kwargs[p] = False
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
    p = subprocess.run([sys.executable, "-c", code, row, str(waves), str(size)], capture_output=True, text=True,
                       env=env)
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
