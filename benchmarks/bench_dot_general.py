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

Then how far the unit moves the logits, split as `benchmarks/STUDY.md` section 7 splits each
contraction's error (`jwmma.study.transformer.exact_twin`): every number is a relative
Frobenius norm, ||x - y||_F / ||native||_F, of two passes' logits (end to end, on this
script's random initial weights and tokens; section 7 measures each contraction of a trained
network on its float32 operands, against their float64 product):

* accumulator: the unit's pass against its exact twin's (the same builtin, scaling and
  pruning under ``model="exact"``: the same quantised operands, their products summed
  exactly with one float32 rounding per instruction); what the unit's accumulator adds;
* quantisation: the twin's pass against the native one, or for a unit that prunes (a sparse
  builtin) against the native pass with the same 2:4 pruning: rounding the operands into the
  builtin's formats under the unit's scaling;
* pruning (units that prune): the native pass with each contraction's A operand 2:4-pruned
  as the unit prunes it (random weights, no fine-tuning: most of the change) against the
  native pass;
* total: the unit's pass against the native one.

The twin pass and the pruned native pass are one untimed call each (the twin compiles like
the unit's pass). A block-scaled unit (``--scaling mx``) has no exact model that applies its
block scales: its accumulator's share is not split off (section 7 uses
`jwmma.quant.effective_product` there, a float64 product outside any program).

    python benchmarks/bench_dot_general.py                 # 4 layers, d 512, 8 heads, MLP 2048, 8 x 1024 tokens
    python benchmarks/bench_dot_general.py --small         # a 2-core CPU: 1 layer, d 64, 2 x 16 tokens (~1 min,
                                                           # nearly all of it compiling the 7 emulated GEMMs twice:
                                                           # the unit's pass and its exact twin's)
    python benchmarks/bench_dot_general.py --batch 2 --seq 256 --json out.json
"""
from __future__ import annotations

import argparse
import functools
import json
import math
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
from jwmma.study.transformer import exact_twin  # noqa: E402

HI = jax.lax.Precision.HIGHEST
FULL = dict(layers=4, d_model=512, heads=8, mlp=2048, vocab=2048, batch=8, seq=1024)
SMALL = dict(layers=1, d_model=64, heads=2, mlp=128, vocab=64, batch=2, seq=16)


def transformer(layers, d_model, heads, mlp, vocab, dot_general, einsum):
    """The Linen model with the given contractions (module doc): `jwmma.study.transformer`'s
    model (the one the transformer study trains), its blocks as one ``linen.scan`` and without
    the study's position embedding."""
    from jwmma.study.transformer import transformer as model

    return model(layers, d_model, heads, mlp, vocab, dot_general, einsum, scan=True)


def native_contractions(prune_a=None):
    """``(dot_general, einsum)``: float32 contractions at precision HIGHEST whatever precision
    a layer passes (Flax's Dense passes its own, None), optionally with the operand that
    ``prune_a`` names ('lhs' or 'rhs': a unit's A) 2:4-pruned as the unit prunes it."""

    def dot_general(lhs, rhs, dimension_numbers, precision=None, preferred_element_type=None, **kw):
        (lc, rc), _ = dimension_numbers
        if prune_a == "rhs":
            rhs = pruned(rhs, rc)
        elif prune_a == "lhs":
            lhs = pruned(lhs, lc)
        return jax.lax.dot_general(lhs, rhs, dimension_numbers, precision=HI,
                                   preferred_element_type=preferred_element_type)

    def einsum(subscripts, lhs, rhs, precision=None, **kw):
        if prune_a is not None:  # K: the contracted labels in A's order, as jwmma.einsum takes them
            inputs, out = subscripts.replace(" ", "").split("->")  # explicit subscripts (the model's)
            ls, rs = inputs.split(",")
            a_labels = rs if prune_a == "rhs" else ls
            k = [c for c in a_labels if c in ls and c in rs and c not in out]
            if prune_a == "rhs":
                rhs = pruned(rhs, tuple(rs.index(c) for c in k))
            else:
                lhs = pruned(lhs, tuple(ls.index(c) for c in k))
        return jnp.einsum(subscripts, lhs, rhs, precision=HI, **kw)

    return dot_general, einsum


def pruned(x, k_dims):
    """``x`` 2:4-pruned along its dims ``k_dims`` taken together as K in that order (groups of
    four along K, zero-padded to whole groups), as a unit prunes its A (`jwmma.prune_2_4`)."""
    perm = [d for d in range(x.ndim) if d not in k_dims] + list(k_dims)
    moved = jnp.transpose(x, perm)
    k = math.prod(x.shape[d] for d in k_dims)
    flat = moved.reshape(-1, k)
    kept = jwmma.prune_2_4(jnp.pad(flat, ((0, 0), (0, -k % 4))))[:, :k]
    return jnp.transpose(kept.reshape(moved.shape), np.argsort(perm))


def relative(x, y, ref) -> float:
    """||x - y||_F / ||ref||_F (float64)."""
    x, y, ref = (np.asarray(v, np.float64) for v in (x, y, ref))
    return float(np.linalg.norm(x - y) / np.linalg.norm(ref))


def logit_errors(unit, native_out, unit_out, apply_with) -> dict:
    """The split of the unit's change of the logits (module doc): ``accumulator``,
    ``quantisation``, ``pruning`` (None for a unit that does not prune), ``total``,
    ``differing`` (logits whose bits the accumulator changed) and ``logits`` (their count).
    ``apply_with(dot_general, einsum)`` runs the model with those contractions."""
    ref = native_out
    twin = None if unit.scaling == "mx" else exact_twin(unit)
    if twin is None:
        twin_out = None
    elif twin == unit:  # the unit is exact already
        twin_out = unit_out
    else:
        twin_out = apply_with(functools.partial(jwmma.dot_general, unit=twin),
                              functools.partial(jwmma.einsum, unit=twin))
    base = apply_with(*native_contractions(unit.a)) if unit.prune else ref  # native, pruned as the unit prunes
    out = dict(norm="||x - y||_F / ||native||_F", total=relative(unit_out, ref, ref),
               accumulator=None, quantisation=None, pruning=relative(base, ref, ref) if unit.prune else None,
               differing=None, logits=int(np.size(ref)),
               twin=None if twin is None else dict(builtin=twin.builtin, model=twin.model, scaling=twin.scaling,
                                                   prune=twin.prune))
    if twin_out is not None:
        bits = np.asarray(unit_out).view(np.uint32) != np.asarray(twin_out).view(np.uint32)
        out.update(accumulator=relative(unit_out, twin_out, ref), quantisation=relative(twin_out, base, ref),
                   differing=int(bits.sum()))
    return out


def print_errors(e, unit):
    """The split (module doc), one line per share."""
    spec = unit.spec
    print(f"\nlogits, relative Frobenius norm of two passes' difference {e['norm']} (random initial weights):")
    if e["accumulator"] is None:
        print("  accumulator   -         not split off: no exact model applies a block-scaled unit's scales")
    else:
        print(f"  accumulator   {e['accumulator']:<9.3g} unit vs its exact twin (model 'exact', same operands): what "
              f"the {unit.model or spec.default_model} accumulator adds ({e['differing']} of {e['logits']} logits "
              f"differ)")
        same_pruning = " with the same 2:4 pruning" if unit.prune else ""
        print(f"  quantisation  {e['quantisation']:<9.3g} exact twin vs native{same_pruning}: operands rounded to "
              f"{spec.a_type} x {spec.b_type} ({unit.scaling} scaling)")
    if e["pruning"] is not None:
        print(f"  pruning       {e['pruning']:<9.3g} native with each contraction's A 2:4-pruned vs native (no "
              f"fine-tuning after pruning)")
    print(f"  total         {e['total']:<9.3g} unit vs native")


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

    def apply_with(dot_general, einsum):  # one untimed pass with other contractions
        return np.asarray(jax.jit(transformer(**arch, dot_general=dot_general, einsum=einsum).apply)(params, tok))

    errors = logit_errors(unit, *outs.values(), apply_with)
    print()
    print(f"| pass | first call (s) | median of {args.repeat} (s) |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r['pass_']} | {r['first_call_s']:.3f} | {r['median_s']:.4f} |")
    print(f"| {ratio['pass_']} | x{ratio['first_call_s']:.1f} | x{ratio['median_s']:.1f} |")
    print_errors(errors, unit)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(dict(rows=rows, ratio=ratio, logit_errors=errors), fh, indent=1)
    return rows, ratio, errors


if __name__ == "__main__":
    main()
