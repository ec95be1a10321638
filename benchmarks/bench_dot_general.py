"""A transformer's forward pass with every contraction through a `jwmma.Unit`, beside the same
pass with native float32 contractions (precision HIGHEST), in the same run on the same device.

The model (Flax Linen: `jwmma.study.transformer.transformer`, the transformer study's model,
without its position embedding): token embedding, ``--layers`` pre-norm blocks of causal
multi-head attention (a fused q/k/v projection and the output projection: ``DenseGeneral``;
scores and weighted values: einsums) and an MLP (two ``Dense``, GELU), then tied-embedding
logits: 6 contractions per block and one for the logits. The blocks are one ``linen.scan`` (the
compiler sees one block, as in production models; each emulated GEMM instance in a program costs
seconds of compile time on a CPU). Its contractions are injected: ``dot_general=`` of every Dense
layer and the logits, and the einsum of the attention. The emulated pass uses ``functools.partial(jwmma.dot_general, unit=unit)`` and
``functools.partial(jwmma.einsum, unit=unit)`` (attention through the unit as well); the native
one ``jax.lax.dot_general`` / ``jnp.einsum`` with precision HIGHEST.

Both passes are ``jax.jit(model.apply)``; for each the first call (tracing, compiling and one
run) and the median of ``--repeat`` further calls are timed, and the ratio emulated / native is
printed (a table; ``--json PATH`` writes the rows).

    python benchmarks/bench_dot_general.py                 # 4 layers, d 512, 8 heads, MLP 2048, 8 x 1024 tokens
    python benchmarks/bench_dot_general.py --small         # a 2-core CPU: 1 layer, d 64, 2 x 16 tokens (~30 s,
                                                           # nearly all of it compiling the 7 emulated GEMMs)
    python benchmarks/bench_dot_general.py --batch 2 --seq 256 --json out.json
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from rows import timed  # noqa: E402  (this folder: the benchmarks' timer)

import jwmma  # noqa: E402

HI = jax.lax.Precision.HIGHEST
FULL = dict(layers=4, d_model=512, heads=8, mlp=2048, vocab=2048, batch=8, seq=1024)
SMALL = dict(layers=1, d_model=64, heads=2, mlp=128, vocab=64, batch=2, seq=16)


def transformer(layers, d_model, heads, mlp, vocab, dot_general, einsum):
    """The Linen model with the given contractions (module doc): `jwmma.study.transformer`'s
    model (the one the transformer study trains), its blocks as one ``linen.scan`` and without
    the study's position embedding."""
    from jwmma.study.transformer import transformer as model

    return model(layers, d_model, heads, mlp, vocab, dot_general, einsum, scan=True)


def native_contractions():
    """``(dot_general, einsum)``: float32 contractions at precision HIGHEST whatever precision
    a layer passes (Flax's Dense passes its own, None)."""

    def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=HI,
                                   preferred_element_type=preferred_element_type)

    def einsum(subscripts, lhs, rhs, precision=None, **kw):
        return jnp.einsum(subscripts, lhs, rhs, precision=HI, **kw)

    return dot_general, einsum


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--small", action="store_true", help=f"the CPU size: {SMALL} (other flags override it)")
    for name, v in FULL.items():
        ap.add_argument(f"--{name.replace('_', '-')}", type=int, default=None, help=f"({v}; --small: {SMALL[name]})")
    ap.add_argument("--builtin", default="smfmac_f32_16x16x128_fp8_fp8")
    ap.add_argument("--model", default="cdna3", help="the unit's model (cdna3)")
    ap.add_argument("--scaling", default="row", help="the unit's scaling (row)")
    ap.add_argument("--repeat", type=int, default=3, help="timed calls after the first (3; the median is reported)")
    ap.add_argument("--json", default=None, help="write the rows as JSON here")
    args = ap.parse_args(argv)
    size = dict(SMALL if args.small else FULL)
    size.update({k: getattr(args, k) for k in FULL if getattr(args, k) is not None})
    unit = jwmma.Unit(args.builtin, model=args.model, scaling=args.scaling)

    tok = jax.random.randint(jax.random.PRNGKey(0), (size["batch"], size["seq"]), 0, size["vocab"])
    arch = {k: size[k] for k in ("layers", "d_model", "heads", "mlp", "vocab")}
    native = transformer(**arch, **dict(zip(("dot_general", "einsum"), native_contractions())))
    emulated = transformer(**arch, dot_general=functools.partial(jwmma.dot_general, unit=unit),
                           einsum=functools.partial(jwmma.einsum, unit=unit))
    params = jax.jit(native.init)(jax.random.PRNGKey(1), tok)
    dev = jax.devices()[0]
    print(f"# device: {dev.device_kind} ({jax.default_backend()}, {platform.machine()}), JAX {jax.__version__}, "
          f"{os.cpu_count()} CPUs")
    print(f"# transformer: {size}; unit {unit.builtin} model {unit.model} scaling {unit.scaling}, attention "
          f"through the unit too", flush=True)

    rows = []
    outs = {}
    for name, model in (("native f32 HIGHEST", native), (f"unit {unit.builtin} {unit.model} {unit.scaling}", emulated)):
        f = jax.jit(model.apply)
        first, median, out = timed(lambda: f(params, tok), args.repeat)
        outs[name] = np.asarray(out)
        rows.append(dict(pass_=name, first_call_s=first, median_s=median, repeat=args.repeat, **size,
                         builtin=unit.builtin, model=unit.model, scaling=unit.scaling, device=dev.device_kind,
                         backend=jax.default_backend(), jax=jax.__version__))
        print(f"  {name}: first call {first:.3f} s, median {median:.4f} s", flush=True)
    nat, emu = rows
    ratio = dict(pass_="ratio unit / native", first_call_s=emu["first_call_s"] / nat["first_call_s"],
                 median_s=emu["median_s"] / nat["median_s"])
    a, b = outs.values()
    rel = float(np.linalg.norm(b - a) / np.linalg.norm(a))
    print()
    print(f"| pass | first call (s) | median of {args.repeat} (s) |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r['pass_']} | {r['first_call_s']:.3f} | {r['median_s']:.4f} |")
    print(f"| {ratio['pass_']} | x{ratio['first_call_s']:.1f} | x{ratio['median_s']:.1f} |")
    print(f"\nlogits: relative difference of the unit's pass from the native one {rel:.3g}")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(rows=rows, ratio=ratio, logits_relative_difference=rel), fh, indent=1)
    return rows, ratio


if __name__ == "__main__":
    main()
