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

from .fields import Choice
from .base import Context, Model

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1


def _wrap32(x):
    return (((x + 2**31) & 0xFFFFFFFF) - 2**31).astype(jnp.int32)


def _sat32(x):
    return jnp.clip(x, INT32_MIN, INT32_MAX).astype(jnp.int32)


__all__ = ["IntegerDot", "INT32_MIN", "INT32_MAX", "STAGINGS"]

STAGINGS = ("final", "staged")


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
