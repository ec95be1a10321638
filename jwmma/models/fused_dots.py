"""Group sums of the fused-group models from matrix products (8-bit operands, whole matrices).

The per-product path of `FusedGroups` costs a dozen vector operations per product. For fp8/bf8
operands the same numbers follow from three matrix products per group half, which XLA runs on
its GEMM kernels, whenever no product of the half falls below the ``frac_bits`` window (then
nothing is truncated and the aligned sum is the exact sum):

* the half's largest product exponent E_T from exponent-encoded operands:
  X[i,k] = 2**(4 (ea - a0)), Y[k,j] = 2**(4 (eb - b0)) (0 for zero values), T = X @ Y is a
  sum of at most 8 powers 2**(4 (E - a0 - b0)), so floor(log2 T / 4) = E_T - a0 - b0 (the
  largest term dominates and 8 < 2**4); zero products are left out, as in MMA-Sim 2.x;
* the smallest product exponent E_min likewise, from the negated encodings;
* the exact sum V = A_s @ B in float64: when E_T - E_min <= frac_bits - mab every product is
  a multiple of 2**(E_T - frac_bits) and the sum of 8 fits in 30 bits, so any summation
  order is exact; S = V * 2**(frac_bits - E_T) is the aligned integer sum.

A_s is the compressed A of one half (the first or the second stored value of every 2:4
block) placed at its dense positions. Its zeros multiply B values that are finite (the
caller has checked that no operand is NaN/Inf), so they add exact zeros and nothing leaks
from pruned rows. If any half of the step fails the window test, the caller runs the
per-product path instead: the result is the same bits either way.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from ..numerics.formats import F32, decode, pow2_f32
from ..numerics.rounding import pow2_f64
from .base import Context

__all__ = ["NO_EXP", "applies", "group_sums", "sums", "accumulate", "fold", "foldable", "dense_dot"]

NO_EXP = -(2**20)  # exponent of a zero product that must not set the group maximum
#: outputs of one folded matrix product below which the per-product path is faster (direct
#: builtin calls: 4096 waves of 16 x 16 as batched dots ran 2x slower than per product)
MIN_DOT_OUTPUTS = 2**12


def applies(model, ctx: Context, a_shape, b_shape) -> bool:
    """Static test: can `group_sums` stand in for the per-product path of ``model`` (a
    `FusedGroups`) on one step of A (..., M, Kc) and B (..., Kd, N)?

    Args:
        model: the fused-group model; ctx: the formats; a_shape, b_shape: the operand shapes.
    Returns:
        True for f32-accumulating 8-bit truncating two-stage models whose groups tile Kc and
        whose exponent encodings stay normal float32 numbers.
    """
    if ctx.integer or ctx.c != F32:
        return False
    if ctx.a.bits != 8 or ctx.b.bits != 8 or model.product_rounding != "truncate":
        return False
    if model.zero_exponent is not None or model.frac_bits > 28:
        return False
    group, two, _ = model.resolved(ctx)
    kc = a_shape[-1]
    if not two or group % 2 or group > 16 or kc % group:
        return False
    if not foldable(a_shape, b_shape):
        return False
    # every encoding 2**(+-4 (e - e0)) and product of two stays a normal float32
    for f in (ctx.a, ctx.b):
        c = _center(f)
        if 4 * max(f.max_exp - c, c - f.min_exp) > 63:
            return False
    return True


def foldable(a_shape, b_shape) -> bool:
    """Static test: do the batch dims of A (..., M, Kc) and B (..., Kd, N) fold into matrix
    products worth taking (`fold`)? False when they do not broadcast, and for many small
    independent products (direct builtin calls over waves: batched 16 x 16 dots lose to the
    per-product path)."""
    ba, bb = tuple(a_shape[:-2]), tuple(b_shape[:-2])
    try:
        np.broadcast_shapes(ba, bb)
    except ValueError:
        return False
    nb = max(len(ba), len(bb))
    ba, bb = (1,) * (nb - len(ba)) + ba, (1,) * (nb - len(bb)) + bb
    rows = a_shape[-2] * int(np.prod([x for x, y in zip(ba, bb) if y == 1 and x != 1], dtype=np.int64))
    cols = b_shape[-1] * int(np.prod([y for x, y in zip(ba, bb) if x == 1 and y != 1], dtype=np.int64))
    batched = any(x == y and x > 1 for x, y in zip(ba, bb))
    return not (batched and rows * cols < MIN_DOT_OUTPUTS)


def _center(fmt) -> int:
    return (fmt.max_exp + fmt.min_exp) // 2


def _encode(e, nonzero, sign: int, center: int):
    """2**(+-4 (e - center)), or 0: powers of two in [2**-63, 2**63]."""
    return jnp.where(nonzero, pow2_f32(sign * 4 * (e - center)), 0.0)


def _dot(x, y, dtype):
    """Batched (..., G, M, 32) x (..., G, 32, N) -> (..., G, M, N), exact inputs, no TF32."""
    nb = x.ndim - 2
    dims = (((x.ndim - 1,), (y.ndim - 2,)), (tuple(range(nb)), tuple(range(nb))))
    return lax.dot_general(x, y, dims, precision=lax.Precision.HIGHEST, preferred_element_type=dtype)


def dense_dot(a_val, pos, b_val, dtype):
    """sum_c a[..., i, c] * b[..., 4*(c//2) + pos[..., i, c], j] as one matrix product: A placed
    at its dense positions (two stored values at one position add up) times B, in ``dtype``.

    a_val: (..., M, Kc); pos: (..., M, Kc); b_val: (..., Kd, N) finite values. Exact when
    every partial sum of the products is representable in ``dtype`` (the caller proves it)."""
    *lead, m, kc = a_val.shape
    onehot = pos[..., None] == jnp.arange(4)  # (..., M, Kc, 4)
    x = jnp.where(onehot, a_val.astype(dtype)[..., None], jnp.zeros((), dtype))
    x = x.reshape(*lead, m, kc // 2, 2, 4).sum(axis=-2).reshape(*lead, m, 2 * kc)
    nb = x.ndim - 2
    dims = (((x.ndim - 1,), (b_val.ndim - 2,)), (tuple(range(nb)), tuple(range(nb))))
    return lax.dot_general(x, b_val.astype(dtype), dims, precision=lax.Precision.HIGHEST,
                           preferred_element_type=dtype)


def _exponent(t):
    """floor(log2 t) of positive normal float32 values (0 gives a very negative number)."""
    e = ((lax.bitcast_convert_type(t, jnp.int32) >> 23) & 0xFF) - 127
    return jnp.where(t > 0, e, NO_EXP)


def group_sums(model, ctx: Context, a, pos, b):
    """Aligned group sums by matrix products.

    a: decoded A (..., M, Kc); pos: (..., M, Kc); b: decoded B (..., Kd, N); no operand NaN/Inf.
    Returns (S, E, ok): S (int64) and E (int32) of shape (..., G, M, N) for the G groups of
    the step, the quantities `FusedGroups.combine` takes, and ok, (G,) booleans: True where no
    product of the group (in any output) was truncated (else its S is not to be used)."""
    group, _, _ = model.resolved(ctx)
    F = model.frac_bits
    mab = ctx.a.mbits + ctx.b.mbits
    *lead, m, kc = a.sig.shape
    kd, n = b.sig.shape[-2:]
    ng, blocks = kc // group, group // 2
    ca, cb = _center(ctx.a), _center(ctx.b)

    def by_group(t):  # (..., M, Kc) -> (..., G, M, blocks, 2): group, row, 2:4 block, slot
        t = t.reshape(*lead, m, ng, blocks, 2)
        return jnp.moveaxis(t, -3, -4)

    a_nz = by_group(a.sig != 0)
    a_e, a_v, p = by_group(a.exp), by_group(a.val), by_group(pos)
    onehot = p[..., None] == jnp.arange(4)  # (..., G, M, blocks, 2, 4)

    def dense(x, slot):  # (..., G, M, blocks, 2) values -> (..., G, M, 4*blocks) at their k
        d = jnp.where(onehot[..., slot, :], x[..., slot, None], jnp.zeros((), x.dtype))
        return d.reshape(*d.shape[:-2], 4 * blocks)

    def b_groups(x):  # (..., Kd, N) -> (..., G, 4*blocks, N)
        return x.reshape(*lead, ng, 4 * blocks, n)

    b_nz = b.sig != 0
    yb_max = b_groups(_encode(b.exp, b_nz, 1, cb))
    yb_min = b_groups(_encode(b.exp, b_nz, -1, cb))
    yb_val = b_groups(b.val.astype(jnp.float64))
    halves = []
    for slot in (0, 1):  # even compressed positions, then odd ones (MMA-Sim's two stages)
        t_max = _dot(dense(_encode(a_e, a_nz, 1, ca), slot), yb_max, jnp.float32)
        t_min = _dot(dense(_encode(a_e, a_nz, -1, ca), slot), yb_min, jnp.float32)
        v = _dot(dense(a_v.astype(jnp.float64), slot), yb_val, jnp.float64)
        e_top = _exponent(t_max)
        e_t = jnp.where(t_max > 0, (e_top >> 2) + ca + cb, NO_EXP)  # floor division by 4
        e_min = ca + cb - (_exponent(t_min) >> 2)
        exact = (t_max == 0) | (e_t - e_min <= F - mab)
        s = jnp.where(t_max > 0, v * pow2_f64(jnp.clip(F - e_t, -1000, 1000)), 0.0)
        halves.append((s.astype(jnp.int64), e_t, jnp.all(exact, axis=tuple(i for i in range(exact.ndim) if i != exact.ndim - 3))))
    (s0, e0, ok0), (s1, e1, ok1) = halves
    e = jnp.maximum(e0, e1)
    s = (s0 >> jnp.minimum(e - e0, 63).astype(jnp.int64)) + (s1 >> jnp.minimum(e - e1, 63).astype(jnp.int64))
    return s, e, ok0 & ok1


def sums(model, ctx: Context, a, pos, b, c_bits):
    """`group_sums` for one instruction step in the layout of the per-product path: tiles
    folded into matrix products (`fold`) and back.

    Args:
        model, ctx, a, pos, b: as `group_sums`; c_bits: (..., M, N) C (only its shape is used).
    Returns:
        (S, E, ok): S int64 and E int32 of shape (G, *batch, M, N), ok as `group_sums`.
    """
    a, pos, b, _, unfold = fold(a, pos, b, c_bits)
    s, e, ok = group_sums(model, ctx, a, pos, b)
    back = lambda t: jax.vmap(unfold)(jnp.moveaxis(t, -3, 0))  # noqa: E731
    return back(s), back(e), ok


def accumulate(model, ctx: Context, a, pos, b, c_bits):
    """(bits, ok): the model's D from the group sums of `group_sums`, group after group
    (`FusedGroups._unrolled_instruction`); ok: a scalar, every group's window test passed."""
    _, _, drop = model.resolved(ctx)
    a, pos, b, c_bits, unfold = fold(a, pos, b, c_bits)
    s, e, ok = group_sums(model, ctx, a, pos, b)
    acc = c_bits
    for g in range(s.shape[-3]):
        cf = decode(F32, acc)
        acc = model.finish(model.combine(s[..., g, :, :], e[..., g, :, :], cf, drop), cf)
    return unfold(acc), jnp.all(ok)


def fold(a, pos, b, c):
    """Batch dims where only A varies become rows, where only B varies become columns: tiles
    of one output matrix (A (TM, 1, m, Kc), B (1, TN, Kd, n)) turn back into one matrix
    product. Returns the folded operands and the function that unfolds D."""
    ba, bb = a.sig.shape[:-2], b.sig.shape[:-2]
    nb = max(len(ba), len(bb), c.ndim - 2)
    ba, bb = (1,) * (nb - len(ba)) + ba, (1,) * (nb - len(bb)) + bb
    batch = tuple(np.broadcast_shapes(ba, bb, c.shape[:-2]))
    keep = [i for i in range(nb) if ba[i] == bb[i]]
    to_m = [i for i in range(nb) if ba[i] != bb[i] and bb[i] == 1]
    to_n = [i for i in range(nb) if ba[i] != bb[i] and ba[i] == 1]
    if not to_m and not to_n:
        return a, pos, b, jnp.broadcast_to(c, batch + c.shape[-2:]), lambda d: d
    kb = tuple(batch[i] for i in keep)
    tm, tn = int(np.prod([batch[i] for i in to_m])), int(np.prod([batch[i] for i in to_n]))

    def fold_a(x):  # (..batch.., M, Kc) -> (keep, TM*M, Kc)
        x = jnp.broadcast_to(x, ba + x.shape[-2:]).reshape(ba + x.shape[-2:])
        x = jnp.transpose(x, keep + to_m + to_n + [nb, nb + 1])
        x = x.reshape(kb + (tm,) + x.shape[-2:])  # the to_n axes have size 1
        return x.reshape(kb + (tm * x.shape[-2], x.shape[-1]))

    def fold_b(x):  # (..batch.., Kd, N) -> (keep, Kd, TN*N)
        x = jnp.broadcast_to(x, bb + x.shape[-2:]).reshape(bb + x.shape[-2:])
        x = jnp.transpose(x, keep + to_m + [nb] + to_n + [nb + 1])
        kd, n = x.shape[len(keep) + len(to_m)], x.shape[-1]
        return x.reshape(kb + (kd, tn * n))

    m, n = c.shape[-2:]
    cb = jnp.broadcast_to(c, batch + (m, n))
    cf = jnp.transpose(cb, keep + to_m + [nb] + to_n + [nb + 1]).reshape(kb + (tm * m, tn * n))
    order = keep + to_m + [nb] + to_n + [nb + 1]
    inverse = list(np.argsort(order))

    def unfold(d):
        d = d.reshape(kb + tuple(batch[i] for i in to_m) + (m,) + tuple(batch[i] for i in to_n) + (n,))
        return jnp.transpose(d, inverse)

    fa = jax.tree_util.tree_map(fold_a, a)
    fb = jax.tree_util.tree_map(fold_b, b)
    return fa, fold_a(pos), fb, cf, unfold
