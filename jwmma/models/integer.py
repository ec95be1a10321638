"""Integer builtins: exact dot; without clamp the i32 result wraps mod 2**32; with clamp it
saturates to [-2**31, 2**31 - 1], either once at the end (``staging="final"``) or after each
of two stages (``staging="staged"``, NUMERICS.md section 4): the first half of the products in
K order, then the second (SWMMAC: compressed ck < Kc/2, i.e. lane half 0, then lane half 1;
dense WMMA: documented k < K/2 first). GoC's gfx1201 hardware digests need exactly this: 64/64
SWMMAC iu4 K64 digests and 384/384 dense WMMA digests (GoC's own stage labels
ck = 16*(l//8) + 8*s + l%8 are not the calculator's K labels; read in BUILTINS.md 2.2
coordinates its stage is ck // 16 for Kc = 32, not (ck // 8) % 2).
"""
from __future__ import annotations

from dataclasses import dataclass

import jax.numpy as jnp
from jax import lax

from .fields import Choice
from .base import Context, Model

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _wrap32(x):
    return (((x + 2**31) & 0xFFFFFFFF) - 2**31).astype(jnp.int32)


def _sat32(x):
    return jnp.clip(x, INT32_MIN, INT32_MAX).astype(jnp.int32)


__all__ = ["IntegerDot", "INT32_MIN", "INT32_MAX", "STAGINGS", "dense_a", "int_dot"]

STAGINGS = ("final", "staged")


def dense_a(a, pos):
    """Stored A values (..., M, Kc) at their dense positions (..., M, 2*Kc): group q's two values
    at 4q + pos (sum where both name one position: the hardware leaves that undefined)."""
    g = a.reshape(*a.shape[:-1], -1, 2)
    p = pos.reshape(*pos.shape[:-1], -1, 2)
    idx = jnp.arange(4, dtype=jnp.int32)
    d = jnp.where(p[..., 0, None] == idx, g[..., 0, None], 0) + jnp.where(p[..., 1, None] == idx, g[..., 1, None], 0)
    return d.reshape(*a.shape[:-1], 2 * a.shape[-1])


#: int8 matrix products take K in multiples of this (`int_dot`)
_INT8_K = 16


def int_dot(a, b, int8: bool = False):
    """a (..., M, K) @ b (..., K, N) of integer values with int32 accumulation (wrapping mod
    2**32); ``int8``: the caller knows every value fits int8, and the operands go in as int8
    (integer tensor cores on GPUs)."""
    if not int8:
        return jnp.matmul(a, b, preferred_element_type=jnp.int32, precision=lax.Precision.HIGHEST)
    # XLA:GPU (JAX 0.11.2, an H100) summed int8 products wrongly (benchmarks/RESULTS.md):
    # - for K = 3, 5, 13 or 53 (K = 1, 67 and multiples of 4 were right), also where the
    #   GEMM had padded its operands before the dot (the padding fused into the product);
    # - in the one grid GEMM whose padded A was square (64 x 64 with K = 64: XLA laid A out
    #   M-minor through a bitcast, and its Triton GEMM read the transposed int8 operand
    #   wrongly, whether B came as (K, N) or (N, K)); the int8 GEMMs of the 18 other builtins, K
    #   unlike M and N, were right.
    # So K becomes a multiple of _INT8_K that differs from M and N (zero columns of A and
    # rows of B: exact for integers), and a barrier hands the product whole operands
    m, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    kp = -(-k // _INT8_K) * _INT8_K
    while kp in (m, n):
        kp += _INT8_K
    a, b = a.astype(jnp.int8), b.astype(jnp.int8)
    if kp != k:
        a = jnp.pad(a, [(0, 0)] * (a.ndim - 1) + [(0, kp - k)])
        b = jnp.pad(b, [(0, 0)] * (b.ndim - 2) + [(0, kp - k), (0, 0)])
    a, b = lax.optimization_barrier((a, b))
    return jnp.matmul(a, b, preferred_element_type=jnp.int32, precision=lax.Precision.HIGHEST)


@dataclass(frozen=True)
class IntegerDot(Model):
    """The integer model: exact dot onto the i32 accumulator.

    staging: where clamp saturates (module doc): 'final' (once, the `exact` preset) or
    'staged' (after each K-half, the `staged_clamp` preset). Without clamp the
    result wraps mod 2**32 either way.
    """

    staging: str = "final"

    name = "integer"
    integer = True

    FIELDS = {"staging": Choice(values=STAGINGS)}

    def describe(self):
        return {"final": "exact", "staged": "staged_clamp"}[self.staging]

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """`Model.instruction` as integer matrix products: the stored A values placed at their
        dense positions (a pruned position holds 0: integers have no 0 x Inf) and multiplied
        with B by a dot with int32 accumulation (int8 operands where both fit: integer tensor
        cores on GPUs). Exact: one instruction's sum stays below 2**22, so only C + sum (or
        the stages') saturate or wrap, in int64."""
        ad = dense_a(a, pos)  # (..., M, Kd)
        k = ad.shape[-1]
        if not ctx.clamp or self.staging == "final":
            s = int_dot(ad, b).astype(jnp.int64)
            c = c.astype(jnp.int64)
            return _wrap32(c + s) if not ctx.clamp else _sat32(c + s)
        kc = a.shape[-1]  # staged: the first kc - kc//2 stored values (their dense groups) then the rest
        first = jnp.arange(k) < 4 * ((kc - kc // 2) // 2)
        s0 = int_dot(jnp.where(first, ad, 0), b).astype(jnp.int64)
        s1 = int_dot(jnp.where(first, 0, ad), b).astype(jnp.int64)
        return _sat32(_sat32(c.astype(jnp.int64) + s0).astype(jnp.int64) + s1)

    def gemm_sum(self, ctx: Context) -> bool:
        """Without clamp the i32 result wraps: a GEMM of many instructions is C plus every
        product mod 2**32 in any order, one integer matrix product (`Model.gemm_sum`)."""
        return not ctx.clamp

    def accumulate(self, a, b, c, ctx: Context, options=None):
        """`Model.accumulate` on sign/zero-extended int32 values."""
        p = a.astype(jnp.int64) * b.astype(jnp.int64)  # (..., K, N)
        c = c.astype(jnp.int64)
        if not ctx.clamp:
            return _wrap32(c + p.sum(axis=-2))
        if self.staging == "final":
            return _sat32(c + p.sum(axis=-2))
        k = p.shape[-2]
        stage = (jnp.arange(k) >= k - k // 2).astype(jnp.int32)  # second half: stage 1
        s0 = jnp.where((stage == 0)[:, None], p, 0).sum(axis=-2)
        s1 = jnp.where((stage == 1)[:, None], p, 0).sum(axis=-2)
        return _sat32(_sat32(c + s0).astype(jnp.int64) + s1)
