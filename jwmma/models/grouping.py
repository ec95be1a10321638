"""Walk the K axis (-2) of decoded operands in consecutive groups, carrying the accumulator.

A few groups (one instruction) are unrolled; many (a long free-standing dot) go through
`lax.scan` so the program stays small. A last partial group is handled on its own. Under the
'fast' compile effort (`unroll_for`: a call of little work, `jwmma.engine.effort`) every
instruction loops: one traced copy of the group arithmetic, a program a fraction of the size,
the same bits.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax import lax

__all__ = ["over_groups", "UNROLL", "unroll_for", "loops"]

UNROLL = 16


def _slice(x, lo, hi):
    return jax.tree_util.tree_map(lambda t: t[..., lo:hi, :], x)


def _stack_groups(x, n, g):
    def f(t):
        t = t[..., : n * g, :]
        t = t.reshape(*t.shape[:-2], n, g, t.shape[-1])
        return jnp.moveaxis(t, -3, 0)

    return jax.tree_util.tree_map(f, x)


def loops(options, cpu: bool = False) -> bool:
    """Whether the program should loop over an instruction's groups or steps rather than
    unroll them: under the 'fast' compile effort (a call of little work, where compiling the
    unrolled copies costs more than their speed saves), and with ``cpu`` on a CPU
    (``options.platform``) at every effort, for the work that XLA:CPU runs as fast or faster
    as a loop (`unroll_for`'s ``cpu_loops``). Same bits either way."""
    if options is not None and getattr(options, "compile_effort", None) == "fast":
        return True
    return cpu and getattr(options, "platform", None) == "cpu"


def unroll_for(options, cpu_loops: bool = False) -> int:
    """The most groups `over_groups` unrolls for these options (`loops`: 1, else `UNROLL`).
    ``cpu_loops``: on a CPU (``options.platform``) loop at every effort: for the models whose
    group arithmetic XLA:CPU ran several times faster as a loop than unrolled, in builtin
    calls and GEMMs, and compiled faster (CDNA2, RDNA3; benchmarks/RESULTS.md "programs per
    new shape"; CDNA1's exact groups, once looped too, became cheap enough to unroll). A GPU
    keeps the unrolled groups, which XLA fuses into fewer kernels (a loop forced on an H100 ran
    RDNA3's calls 2.2x slower, CDNA2's the same)."""
    if loops(options, cpu=cpu_loops):
        return 1
    return UNROLL


def over_groups(a, b, acc, group: int, step, unroll: int = UNROLL):
    """acc <- step(a_group, b_group, acc) for consecutive groups of ``group`` along axis -2.
    ``acc`` may be a tuple of arrays (a carry of several parts), each broadcast to the
    output shape. Up to ``unroll`` whole groups are unrolled, more go through `lax.scan`."""
    k = jnp.broadcast_shapes(jax.tree_util.tree_leaves(a)[0].shape, jax.tree_util.tree_leaves(b)[0].shape)[-2]
    n_full, rest = divmod(k, group)
    shape = jnp.broadcast_shapes(
        jax.tree_util.tree_leaves(a)[0].shape[:-2] + jax.tree_util.tree_leaves(a)[0].shape[-1:],
        jax.tree_util.tree_leaves(b)[0].shape[:-2] + jax.tree_util.tree_leaves(b)[0].shape[-1:],
        *(t.shape for t in jax.tree_util.tree_leaves(acc)),
    )
    acc = jax.tree_util.tree_map(lambda t: jnp.broadcast_to(t, shape), acc)
    if n_full <= unroll:
        for i in range(n_full):
            acc = step(_slice(a, i * group, (i + 1) * group), _slice(b, i * group, (i + 1) * group), acc)
    else:
        xs = (_stack_groups(a, n_full, group), _stack_groups(b, n_full, group))
        acc, _ = lax.scan(lambda c, x: (step(x[0], x[1], c), None), acc, xs)
    if rest:
        acc = step(_slice(a, n_full * group, k), _slice(b, n_full * group, k), acc)
    return acc
