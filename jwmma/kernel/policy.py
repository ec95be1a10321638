"""Kernel policies: one wave's code for one builtin, and the helpers it is written with.

See `jwmma.kernel` for how a policy is written and run.
"""
from __future__ import annotations

import dataclasses
from typing import Callable

import jax.numpy as jnp
import numpy as np

from jax import lax

from ..engine.builtins import FUNCTIONS
from ..engine.fragments import codes_to_regs, regs_to_codes
from ..engine.validation import as_array, check_bool_kw, check_range, check_values, is_concrete
from ..isa.conventions import hip_args
from ..isa.table import BuiltinSpec, lookup
from ..keywords import strict_keywords

__all__ = ["Policy", "as_policy", "name_of", "i32", "pack_bytes", "const_index", "metadata"]


@strict_keywords
def i32(x) -> np.int32:
    """A 32-bit constant as int32 with the same bits: ``i32(0x88888888)`` is
    ``static_cast<int>(0x88888888u)``. Only values with a 32-bit reading are taken (the int32
    and the uint32 ones, [-2**31, 2**32)); ValueError otherwise."""
    v = int(x)
    if not -(2**31) <= v < 2**32:
        raise ValueError(f"i32 takes a 32-bit value (an int32 or uint32 reading, in [-2**31, 2**32)), got {v}")
    return np.array(v & 0xFFFFFFFF, np.uint32).view(np.int32)[()]


@strict_keywords
def pack_bytes(b0, b1, b2, b3):
    """Four bytes -> one int32 word, little-endian (b0 in bits 7:0), as
    ``uint32_t(b0) | uint32_t(b1) << 8 | ...`` in HIP.

    Args:
        b0, b1, b2, b3: ints or arrays of bytes, broadcasting: concrete values must lie in
            [-128, 255] (-128..-1 are int8 bytes, their two's complement bits are used);
            traced values keep their low 8 bits.
    Returns:
        int32 words.
    """
    for name, b in (("b0", b0), ("b1", b1), ("b2", b2), ("b3", b3)):
        b = as_array(b, name)
        if is_concrete(b):
            check_range(b, -128, 255, name)
    w = [jnp.asarray(b).astype(jnp.int32).astype(jnp.uint32) & 0xFF for b in (b0, b1, b2, b3)]
    word = w[0] | (w[1] << 8) | (w[2] << 16) | (w[3] << 24)
    return lax.bitcast_convert_type(word, jnp.int32)


@strict_keywords
def const_index(value) -> Callable:
    """An ``index`` function returning the same word for every lane.

    Args:
        value: the 32-bit word, e.g. 0x88888888.
    Returns:
        ``index(sM, warp_m, lane, tm)`` for a policy.
    """
    word = i32(value)

    def index(sM, warp_m, lane, tm):
        return jnp.full(jnp.shape(lane), word, jnp.int32)

    index.__name__ = f"const_index_{int(value) & 0xFFFFFFFF:#010x}"
    return index


@strict_keywords
def metadata(pos, *, check: bool = False) -> jnp.ndarray:
    """2:4 positions -> hipSPARSELt metadata bytes.

    Args:
        pos: (..., Kc) ints 0..3, Kc divisible by 4.
        check: also check traced positions when the computation runs (concrete ones always
            are); with check=False a traced position keeps its low 2 bits (p mod 4).
    Returns:
        (..., Kc/4) uint8: byte b, bits [2s+1:2s] = position of compressed element 4b+s.
    """
    check = check_bool_kw(check, "check")
    pos = as_array(pos, "pos")
    if pos.ndim < 1 or pos.shape[-1] % 4:
        raise ValueError(f"pos needs a last axis (Kc) divisible by 4, got shape {tuple(pos.shape)}")
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"pos must hold integers 0..3, got {pos.dtype}")
    check_values(pos, 0, 3, "pos", check)
    p = (jnp.asarray(pos).astype(jnp.int32).astype(jnp.uint32) & 3).reshape(*pos.shape[:-1], pos.shape[-1] // 4, 4)
    byte = p[..., 0] | (p[..., 1] << 2) | (p[..., 2] << 4) | (p[..., 3] << 6)
    return byte.astype(jnp.uint8)




@dataclasses.dataclass(frozen=True)
class Policy:
    """One wave's code for one builtin (see the module docstring). Any object with these
    attributes (e.g. a class with plain functions) is accepted wherever a Policy is."""

    builtin: str
    load_a: Callable
    load_b: Callable
    index: Callable
    store_c: Callable
    mma: Callable | None = None
    name: str = ""
    target: str | None = None  # the chip, for a builtin that runs on several (None: the row's default)

    @property
    def spec(self) -> BuiltinSpec:
        """The builtin's table row, as decoded on ``target``."""
        return lookup(self.builtin, self.target)

    @property
    def blocks(self) -> int:
        """Independent blocks of one builtin call (1 but for the multi-block MFMA)."""
        return self.spec.blocks

    @property
    def thread_tile_m(self) -> int:
        """Rows of the wave tile: one block's M."""
        return self.spec.m

    @property
    def thread_tile_n(self) -> int:
        """Columns of the wave tile: the call's blocks side by side, ``blocks * N``."""
        return self.spec.blocks * self.spec.n

    @property
    def k_step(self) -> int:
        """Dense K consumed by one mma."""
        return self.spec.k

    @property
    def lanes(self) -> int:
        return self.spec.lanes

    @property
    def f64(self) -> bool:
        """Whether the registers and memory hold doubles (the f64 MFMA)."""
        return self.spec.c.elem_bits == 64

    def registers(self, which: str) -> tuple[int, tuple]:
        """(elements per lane, accepted dtypes) of the ``which`` ('a', 'b', 'c') registers the
        policy's functions give and take: the builtin's HIP storage, doubles as float64."""
        op = getattr(self.spec, which)
        if op.elem_bits == 64:
            return op.elems, (np.dtype(np.float64),)
        return op.n, (op.dtype, *op.also)

    def call_mma(self, d, a, b, idx, model=None, options=None):
        """One wave's mma: the policy's own ``mma(d, a, b, idx, model)``, or the builtin in
        HIP argument order with its default modifiers (cbsz = abid = 0, blgp = 0, signed
        integers, no clamp) and the execution ``options``.

        Args:
            d: the accumulator registers; a, b: the wave's registers; idx: its index words
                (all (lanes, n) as `registers` says; float64 doubles on an f64 row, inside
                `x64_scope`); model: the arithmetic model; options: resolved `jwmma.Options`.
        Returns:
            The new accumulator registers, as ``d``.
        """
        if self.mma is not None:
            return self.mma(d, a, b, idx, model)
        spec = self.spec
        kw = {"target": spec.target} if spec.convention.name_of("target") else {}  # fp8/bf8 decoding, chip
        if not self.f64:
            return FUNCTIONS[spec.name](*hip_args(spec.convention, a, b, d, idx), model=model, options=options, **kw)
        # f64: the builtin takes each double as two uint32 words; moved as int64 bits (a bit cast,
        # never float arithmetic, so subnormals and NaN payloads keep their bits)
        words = lambda op, x: codes_to_regs(op, lax.bitcast_convert_type(x, jnp.int64))  # noqa: E731
        out = FUNCTIONS[spec.name](*hip_args(spec.convention, words(spec.a, a), words(spec.b, b), words(spec.c, d)),
                                   model=model, options=options, **kw)
        return lax.bitcast_convert_type(regs_to_codes(spec.c, out), jnp.float64)


@strict_keywords
def as_policy(obj, target: str | None = None) -> Policy:
    """A `Policy` from any object with the policy attributes.

    Args:
        obj: a `Policy`, or e.g. a class with the functions as plain attributes (and
            optionally ``mma`` and ``target``).
        target: the chip the kernel runs on, for a builtin that runs on several (the CDNA3
            SMFMAC: 'gfx942', the default, FNUZ fp8/bf8, or 'gfx950', OCP); None: the
            policy's own ``target`` attribute, else the row's default.
    Returns:
        The `Policy`; TypeError for missing attributes, ValueError for declared tile sizes
        (thread_tile_m/n, k_step) that disagree with the builtin, for a target the builtin's
        row does not list, and for a ``target`` that contradicts the policy's own.
    """
    if target is not None and not isinstance(target, str):
        raise TypeError(f"target must be a chip name (str) or None, got {type(target).__name__}")
    if isinstance(obj, Policy):
        pol = obj
    else:
        missing = [k for k in ("builtin", "load_a", "load_b", "index", "store_c") if not hasattr(obj, k)]
        if missing:
            raise TypeError(
                f"{getattr(obj, '__name__', type(obj).__name__)} is not a kernel policy: missing "
                f"{', '.join(missing)} (needs builtin, load_a, load_b, index, store_c; mma optional)"
            )
        pol = Policy(obj.builtin, obj.load_a, obj.load_b, obj.index, obj.store_c,
                     getattr(obj, "mma", None), getattr(obj, "__name__", type(obj).__name__),
                     getattr(obj, "target", None))
    if target is not None:
        if pol.target is not None and pol.target != target:
            raise ValueError(f"target={target!r} contradicts {pol.name or 'the policy'}'s own target {pol.target!r}")
        pol = dataclasses.replace(pol, target=target)
    spec = pol.spec  # ValueError for a target the row does not list
    tile = "one builtin tile per wave" if spec.blocks == 1 else (
        f"a wave tile of its {spec.blocks} blocks side by side, {spec.m}x{spec.blocks * spec.n}")
    for attr, want in (("thread_tile_m", pol.thread_tile_m), ("thread_tile_n", pol.thread_tile_n),
                       ("k_step", pol.k_step)):
        got = getattr(obj, attr, want)
        if got != want:
            raise ValueError(f"{pol.name or 'policy'}: {attr} = {got}, but {spec.name} is "
                             f"{spec.m}x{spec.n}x{spec.k} ({tile}, dense K step {spec.k}): {attr} = {want}")
    return pol


def name_of(pol: Policy) -> str:
    """The policy's name for messages."""
    return pol.name or "policy"

