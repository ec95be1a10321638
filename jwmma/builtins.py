"""The 25 builtins as jit-compiled JAX functions over batched waves (API.md section 1).

Each builtin: registers -> element codes -> matrices (static gathers through the table's
layouts) -> `core.step` with the chosen model -> D matrix -> registers. Leading dims are
independent waves and broadcast against each other.
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from . import core, fragments, models
from .isa import BUILTINS, BuiltinSpec, lookup
from .rounding import x64_scope
from .validation import as_array, broadcast_batch, check_static_bool, check_static_int, is_concrete


# ------------------------------------------------------------------------------ the kernel
@functools.partial(jax.jit, static_argnames=("spec", "model", "s", "a_signed", "b_signed", "clamp", "c_dtype"))
def _run(a, b, c, idx, *, spec, model, s, a_signed, b_signed, clamp, c_dtype):
    a_lane = fragments.regs_to_codes(spec.a, a)
    b_lane = fragments.regs_to_codes(spec.b, b)
    a_mat = fragments.lanes_to_matrix(spec.a_layout, (spec.m, spec.kc), a_lane)
    b_mat = fragments.lanes_to_matrix(spec.b_layout, (spec.k, spec.n), b_lane)
    pos = fragments.positions(spec, idx, s)
    if spec.c_type in ("f32", "i32"):
        c_lane = lax.bitcast_convert_type(c, jnp.int32)
    else:
        c_lane = fragments.regs_to_codes(spec.c, c)
    c_mat = fragments.lanes_to_matrix(spec.c_layout, (spec.m, spec.n), c_lane)
    d = core.step(spec, model, a_mat, pos, b_mat, c_mat, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
    d_lane = fragments.matrix_to_lanes(spec.c_layout, d.astype(jnp.int32))
    if spec.c_type == "f32":
        return lax.bitcast_convert_type(d_lane, jnp.float32)
    if spec.c_type == "i32":
        return d_lane
    return lax.bitcast_convert_type(d_lane.astype(jnp.uint16), np.dtype(c_dtype))


def call(spec: BuiltinSpec, a, b, c, idx, *, s=0, a_signed=True, b_signed=True, clamp=False, model=None, check=False):
    """Validate the operands of ``spec`` and run it. Shared by all 25 builtin functions."""
    a = _reg(spec, spec.a, a, "a")
    b = _reg(spec, spec.b, b, "b")
    c = _reg(spec, spec.c, c, "c")
    what = "index" if spec.arch == "gfx12" else "idx"
    idx = fragments._check_index(spec, as_array(idx, what), what)
    m = models.resolve(model, core.context(spec, clamp), spec.default_model)
    (a, b, c, idx), _ = broadcast_batch((a, 2), (b, 2), (c, 2), (idx, 1))
    if check:
        report_violations(spec, idx, s)
    with x64_scope():
        return _run(a, b, c, idx, spec=spec, model=m, s=s, a_signed=a_signed, b_signed=b_signed,
                    clamp=clamp, c_dtype=np.dtype(c.dtype).name)


def _reg(spec, op, x, what):
    x = as_array(x, what)
    if not fragments.reg_dtype_ok(op, x.dtype):
        allowed = ", ".join(np.dtype(d).name for d in (op.dtype, *op.also))
        raise TypeError(f"{spec.name}: {what} must have dtype {allowed}; got {x.dtype}")
    if x.ndim < 2 or tuple(x.shape[-2:]) != (spec.lanes, op.n):
        raise ValueError(
            f"{spec.name}: {what} must have shape (*batch, {spec.lanes}, {op.n}) "
            f"(lanes, HIP vector elements), got {tuple(x.shape)}"
        )
    return x


# ------------------------------------------------------------------------- index checking
def index_violations(name: str, idx, cbsz: int = 0, abid: int = 0, index_key: int = 0):
    """Boolean (*batch, lanes, pairs): True where a lane's stored pair (2t, 2t+1) has
    index0 >= index1. CDNA leaves such pairs undefined (ISA: index0 < index1); on RDNA4 an
    equal pair breaks the 2:4 rule of the seed page. Works inside jit."""
    spec = lookup(name)
    s = _index_offset(spec, cbsz, abid, index_key)
    idx = fragments._check_index(spec, as_array(idx, "idx"), "idx")
    return _violations(spec, jnp.asarray(idx), s)


def _violations(spec, idx, s):
    words = lax.bitcast_convert_type(idx.astype(jnp.int32), jnp.uint32)
    e = jnp.arange(spec.a.elems, dtype=jnp.uint32)
    fields = ((words[..., None] >> (s + 2 * e).astype(jnp.uint32)) & 3).astype(jnp.int32)
    p0, p1 = fields[..., 0::2], fields[..., 1::2]
    return (p0 >= p1) if spec.arch == "gfx950" else (p0 == p1)


def _describe(spec, bad: np.ndarray, idx: np.ndarray, s: int) -> str:
    where = np.argwhere(bad)
    first = tuple(int(x) for x in where[0])
    *batch, lane, t = first
    word = int(np.asarray(idx)[tuple(batch) + (lane,)]) & 0xFFFFFFFF
    p0 = (word >> (s + 4 * t)) & 3
    p1 = (word >> (s + 4 * t + 2)) & 3
    rule = "index0 < index1 (CDNA ISA restriction)" if spec.arch == "gfx950" else "two different positions (2:4 rule)"
    return (
        f"{spec.name}: {len(where)} index pair(s) the hardware leaves undefined; first at "
        f"wave {tuple(batch)} lane {lane} pair {t} (elements {2 * t},{2 * t + 1}, bits "
        f"{s + 4 * t + 3}:{s + 4 * t}): positions ({p0}, {p1}), expected {rule}"
    )


def report_violations(spec, idx, s):
    """Raise ValueError for undefined index pairs: now if ``idx`` is concrete, else when the
    jitted computation runs (through a host callback)."""
    if is_concrete(idx):
        bad = np.asarray(_violations(spec, jnp.asarray(idx), s))
        if bad.any():
            raise ValueError(_describe(spec, bad, np.asarray(idx), s))
        return

    def cb(bad, idx):
        if np.asarray(bad).any():
            raise ValueError(_describe(spec, np.asarray(bad), np.asarray(idx), s))

    jax.debug.callback(cb, _violations(spec, idx, s), idx)


def _index_offset(spec: BuiltinSpec, cbsz: int, abid: int, index_key: int) -> int:
    if spec.arch == "gfx950":
        cbsz = check_static_int(cbsz, "cbsz", 0, 7)
        abid = check_static_int(abid, "abid", 0, 15)
        if spec.a.elem_bits == 16 and (cbsz & 3) == 0:
            return 16 * (abid & 1)
        return 0
    index_key = check_static_int(index_key, "index_key", 0, len(spec.index_sets) - 1)
    return spec.index_sets[index_key]


# ------------------------------------------------------------------------ function makers
def _make(spec: BuiltinSpec):
    doc_tail = (
        f"\n\n{spec.signature()}\n\n{spec.arch}, wave{spec.wave}, {spec.m}x{spec.n}x{spec.k} "
        f"(dense K; A holds {spec.kc} compressed values per row). Registers: A {spec.a.n}, "
        f"B {spec.b.n}, C {spec.c.n} elements per lane; index (*batch, {spec.lanes}) int32.\n"
        f"Default model: {spec.default_model} ({spec.default_evidence})."
    )
    if spec.arch == "gfx950":

        def fn(a, b, c, idx, cbsz=0, abid=0, *, model=None, check=False):
            s = _index_offset(spec, cbsz, abid, 0)
            return call(spec, a, b, c, idx, s=s, model=model, check=check)

        fn.__doc__ = (
            "CDNA4 SMFMAC: D = A_sparse x B + C. cbsz/abid select the 16-bit index set of "
            "16-bit types (abid[0] when cbsz[1:0] == 0); 8-bit types use all 32 bits."
            + doc_tail
        )
    elif spec.signed_choice:

        def fn(a_neg, a, b_neg, b, c, index, clamp, *, model=None, index_key=0, check=False):
            a_neg = check_static_bool(a_neg, "a_neg")
            b_neg = check_static_bool(b_neg, "b_neg")
            clamp = check_static_bool(clamp, "clamp")
            s = _index_offset(spec, 0, 0, index_key)
            return call(spec, a, b, c, index, s=s, a_signed=a_neg, b_signed=b_neg, clamp=clamp,
                        model=model, check=check)

        fn.__doc__ = (
            "RDNA4 integer SWMMAC: a_neg/b_neg true = signed operand; clamp saturates the i32 "
            "result (default model: after each of two stages), otherwise it wraps." + doc_tail
        )
    else:

        def fn(a, b, c, index, *, model=None, index_key=0, check=False):
            s = _index_offset(spec, 0, 0, index_key)
            return call(spec, a, b, c, index, s=s, model=model, check=check)

        fn.__doc__ = (
            "RDNA4 SWMMAC: D = A_sparse x B + C. The builtin reads index bits 15:0 "
            "(index_key=1, the ISA's second set, reads 31:16)." + doc_tail
        )
    fn.__name__ = fn.__qualname__ = spec.name
    fn.spec = spec
    return fn


FUNCTIONS = {name: _make(spec) for name, spec in BUILTINS.items()}
