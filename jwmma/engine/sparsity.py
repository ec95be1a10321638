"""2:4 structured sparsity helpers (API.md section 4, BUILTINS.md section 5).

Compression is "consecutive": the two stored values of every group of four along the last
axis keep their order, with positions increasing. Groups with fewer than two non-zeros are
padded as hipSPARSELt does: the default metadata is positions (2, 3); a lone non-zero at
position p < 3 is stored as (p, 3) with a zero second value, one at position 3 as (2, 3) with
a zero first value. -0.0 counts as zero; NaN does not, also in the fnuz formats, where its
code 0x80 is the pattern of -0 elsewhere (`signed_zero`). Small operands in host memory are
pruned (rule "largest"), checked and compressed in numpy, nothing compiled (`host_sparsity`).

Every helper keeps the input's dtype (int64, uint64, float64 too, whatever
``jax_enable_x64`` says), compares in the input's own precision (on bit patterns: subnormals
are not zero) and copies kept values bit for bit (NaN payloads and signs included).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from ..keywords import strict_keywords
from ..numerics.formats import F32, format_of, decode
from ..numerics.rounding import fields_to_f64, round_f64, x64_scope
from . import host_sparsity
from .host_sparsity import BUCKET_MAX_GROUPS, bucket_rows as _bucket_rows, cut as _cut
from .host_sparsity import is_float as _is_float, signed_zero
from .validation import as_array, check_bool_kw, check_values, fail_if, host_readable, is_concrete as jax_concrete

__all__ = ["prune_2_4", "compress_2_4", "decompress_2_4", "RULES", "check_2_4", "compress_groups", "signed_zero"]

#: the pruning rules of `prune_2_4`
RULES = ("largest", "hipsparselt")
_UINT = {1: jnp.uint8, 2: jnp.uint16, 4: jnp.uint32, 8: jnp.uint64}
_HIPSPARSELT_DTYPES = ("float16", "bfloat16", "int8", "float8_e4m3fn", "float8_e5m2")


def _groups(x, what):
    """(x, its groups (..., K/4, 4)) with floats as their bit patterns (unsigned ints of their
    width): every helper moves and compares bits, never float values. XLA:CPU is free to
    route a float copy, pad or select through float32 and back (docs/ARCHITECTURE.md, "Same
    bits on every device"): JAX 0.11's narrowing flushes bf16 subnormals there and JAX
    0.10's quiets NaN payloads."""
    x = _operand(x, what)
    if _is_float(x.dtype):
        x = _as_bits(x)
    x = jnp.asarray(x)  # inside x64_scope: int64/float64 stay 64-bit
    return x, _in_groups(x)


def _in_groups(x):
    """``x`` (..., K) as its groups of four along K: (..., K/4, 4)."""
    return x.reshape(*x.shape[:-1], x.shape[-1] // 4, 4)


def _operand(x, what):
    """``x`` as an array (numpy stays numpy), checked: a last axis divisible by 4, floats of
    8 bits or more or integers."""
    x = as_array(x, what)
    if x.ndim < 1 or x.shape[-1] % 4:
        raise ValueError(f"{what} must have a last axis (K) divisible by 4, got shape {tuple(x.shape)}")
    if not (_is_float(x.dtype) or jnp.issubdtype(x.dtype, jnp.integer)):
        raise TypeError(f"{what} must hold floats or integers, got {x.dtype}")
    _check_width(x.dtype, what)
    return x


def _check_width(dtype, what):
    """TypeError for 4- and 6-bit floats: their codes fill part of a byte (sign at bit 3 or 5,
    which the byte-wide bit rules here would misread, and a bit cast back adds an axis), and
    no sparse builtin reads them."""
    if _is_float(dtype) and ml_dtypes.finfo(dtype).bits < 8:
        raise TypeError(f"{what} holds {np.dtype(dtype).name} values, which the 2:4 helpers do not take (no sparse "
                        f"builtin reads 4- or 6-bit floats); prune their float32 values, which are exact, e.g. "
                        f"jwmma.prune_2_4(np.asarray({what}, np.float32)), and cast back with jwmma.numerics.cast")


def _host_bits(x):
    """A numpy float array as its bits (a free view; the program bit casts JAX arrays itself).
    A JAX array on one CPU device that fits a bucket is read through numpy first
    (`host_readable`), so that it takes its bucket's program as numpy operands do
    (`_bucket_rows`); a larger one stays as it is (no host copy)."""
    if host_readable(x) and x.size <= 4 * BUCKET_MAX_GROUPS:
        x = np.asarray(x)
    return _as_bits(x) if isinstance(x, np.ndarray) and _is_float(x.dtype) else x


def _to_bits(x):
    """Inside a program: floats as their bit patterns, integers as they are."""
    return _as_bits(x) if _is_float(x.dtype) else x


def _as_bits(x):
    """A float array's bit patterns, unsigned ints of its width (a numpy view is free; a JAX
    array gets one bit cast, the first operation that touches it)."""
    width = _UINT[np.dtype(x.dtype).itemsize]
    if isinstance(x, np.ndarray):
        return x.view(np.dtype(width))
    return lax.bitcast_convert_type(x, width)



def _from_bits(bits, dtype):
    return lax.bitcast_convert_type(bits, dtype)


def _keep_hipsparselt(g, dtype):
    """hipSPARSELt's prune_strip_kernel: pair scores |a| + |b| in float32 (exactly rounded
    here, subnormals kept), pairs (0,1), (0,2), (0,3), (1,2), (1,3), (2,3) in order, a pair
    replaces the best only if its score is strictly greater (best starts at -1 at (0, 0)).
    ``g``: integer values, or the bit patterns of a float ``dtype``."""
    dtype = np.dtype(dtype)
    if _is_float(dtype):
        fmt = format_of(dtype)
        code = g.astype(jnp.int32)
        f = decode(fmt, code)
        mag = fields_to_f64(jnp.zeros_like(f.sign), f.sig, f.exp, fmt.mbits)
        mag = jnp.where(f.inf, jnp.inf, mag)
        nan = f.nan
    else:
        mag = jnp.abs(g.astype(jnp.float64))
        nan = jnp.zeros(g.shape, bool)
    best = jnp.full(g.shape[:-1], -1, jnp.int64)  # f32 scores are >= 0: their bits order them
    pa = jnp.zeros(g.shape[:-1], jnp.int32)
    pb = jnp.zeros(g.shape[:-1], jnp.int32)
    for i in range(4):
        for j in range(i + 1, 4):
            score = round_f64(mag[..., i] + mag[..., j], F32).astype(jnp.int64)
            better = ~(nan[..., i] | nan[..., j]) & (score > best)
            best = jnp.where(better, score, best)
            pa, pb = jnp.where(better, i, pa), jnp.where(better, j, pb)
    idx = jnp.arange(4)
    return (idx == pa[..., None]) | (idx == pb[..., None])


@strict_keywords
def prune_2_4(a, rule: str = "largest"):
    """Prune to 2:4: keep 2 of every 4 values along the last axis, zero (+0) the others.

    ``rule="largest"`` (default): the 2 largest magnitudes, compared exactly in the input's
    precision (subnormals are not zero); ties go to the lower position. NaN rule: a NaN ranks
    as an infinite magnitude, so it is kept (it stays visible); a NaN and an Inf tie (the
    lower position wins).

    ``rule="hipsparselt"``: hipSPARSELt's ``prune_strip_kernel`` (for parity with that
    library; float16, bfloat16, int8, float8_e4m3fn, float8_e5m2 only): of the pairs (0,1),
    (0,2), (0,3), (1,2), (1,3), (2,3) in that order, the first with the greatest float32
    score |a| + |b| wins; NaN scores never win (a group whose every pair holds a NaN keeps
    position 0 only), the first pair holding an Inf wins, float32 rounding ties keep the
    earlier pair.

    Args:
        a: (..., K) array, K divisible by 4 (floats or integers of any width).
        rule: "largest" or "hipsparselt".
    Returns:
        The pruned array, same shape and dtype (kept values copied bit for bit).
    """
    if not isinstance(rule, str) or rule not in RULES:
        raise ValueError(f"rule must be one of {RULES}, got {rule!r}")
    with x64_scope():
        a = _operand(a, "a")
        dtype = np.dtype(a.dtype)
        if rule == "hipsparselt" and dtype.name not in _HIPSPARSELT_DTYPES:
            raise TypeError(f"a must have one of the dtypes hipSPARSELt prunes ({', '.join(_HIPSPARSELT_DTYPES)}) "
                            f"for rule='hipsparselt', got {dtype}")
        bits = _host_bits(a)
        if rule == "largest" and host_sparsity.small(bits):  # numpy: nothing to compile (host_sparsity)
            out = host_sparsity.prune(bits, dtype)
            return jax.device_put(out.view(dtype) if _is_float(dtype) else out)
        bucket = _bucket_rows(bits, 4)
        if bucket is not None:
            return _cut(_prune_array(bucket[0], rule, dtype.name), bucket[1], a.shape)
        return _prune_array(bits, rule, dtype.name)


@functools.partial(jax.jit, static_argnames=("rule", "dtype"))
def _prune_array(a, rule, dtype):
    """`prune_2_4` of ``a`` (..., K), its values or (numpy floats) their bits, as one program:
    a new shape compiles this one program and nothing else. Returns ``dtype`` values."""
    dtype = jnp.dtype(dtype)
    bits = _to_bits(a)
    if bits.size == 0:
        out = bits
    else:
        g = _in_groups(bits)
        out = _prune(g, rule, dtype.name).reshape(bits.shape)
    return _from_bits(out, dtype) if _is_float(dtype) else out


def prune_bits(a, dtype, rule: str = "largest"):
    """`prune_2_4` of values given as bits: ``a`` (..., K), K divisible by 4, holds the bit
    patterns of float ``dtype`` as unsigned ints of its width (or integer values of ``dtype``);
    the pruned bits come back. For callers that keep operands as bits (`jwmma.gemm`)."""
    dtype = np.dtype(dtype)
    with x64_scope():
        a = a if isinstance(a, (np.ndarray, jax.Array)) else jnp.asarray(a)  # numpy goes in as it is
        if a.size == 0:
            return jnp.asarray(a)
        return _prune_bits_array(a, rule, dtype.name)


@functools.partial(jax.jit, static_argnames=("rule", "dtype"))
def _prune_bits_array(a, rule, dtype):
    """`prune_bits` as one program: eagerly, the two reshapes around `_prune` were programs of
    their own, compiled again for every shape."""
    g = _in_groups(a)
    return _prune(g, rule, dtype).reshape(a.shape)


@functools.partial(jax.jit, static_argnames=("rule", "dtype"))
def _prune(g, rule, dtype):
    """Groups (..., G, 4) pruned by ``rule``: one fused program (no eager temporaries); ``g``
    holds integer values, or the bits of a float ``dtype`` (its name)."""
    dtype = jnp.dtype(dtype)
    keep = host_sparsity.keep_largest(g, dtype) if rule == "largest" else _keep_hipsparselt(g, dtype)
    return jnp.where(keep, g, jnp.zeros((), g.dtype))


def _message_2_4(what, first, nonzeros, total):
    *row, group = first
    return (
        f"{what} is not 2:4 sparse: row {tuple(row) if len(row) != 1 else row[0]} group {group} "
        f"(elements {4 * group}..{4 * group + 3}) has {int(nonzeros)} non-zeros "
        f"({int(total)} such group(s)); prune it first (jwmma.prune_2_4)"
        + (", or pass prune=True" if what == "a" else "")
    )


def _raise_if_not_2_4(what, summary, groups):
    """The ValueError of a concrete ``summary`` (failing groups, flat index of the first, its
    non-zero count) of an operand of ``groups`` groups, if any group fails."""
    total, first, nonzeros = (int(v) for v in summary)
    if total:
        raise ValueError(_message_2_4(what, tuple(int(i) for i in np.unravel_index(first, groups)), nonzeros, total))


def _describe_2_4(what):
    def describe(groups, first, nonzeros):  # `fail_if`'s summary: failing groups, the first, its count
        return _message_2_4(what, first, nonzeros, groups)

    return describe


@strict_keywords
def compress_2_4(a24, *, what: str = "a24"):
    """Compress a 2:4-sparse array ("consecutive" compression, module doc).

    Args:
        a24: (..., K) array with at most two non-zeros in every group of four along K.
    Returns:
        (values (..., K/2) of a24's dtype, bits copied; positions (..., K/2) int32,
        increasing per group). Raises ValueError naming the first row and group with more
        than two non-zeros (for traced input, when the computation runs; `jwmma.checked`
        makes that a ValueError inside jit).
    """
    with x64_scope():
        a24 = _operand(a24, "a24")
        dtype = np.dtype(a24.dtype)
        if a24.size == 0:
            half = (*a24.shape[:-1], a24.shape[-1] // 2)
            return jnp.zeros(half, dtype), jnp.zeros(half, jnp.int32)
        bits = _host_bits(a24)
        groups = (*a24.shape[:-1], a24.shape[-1] // 4)
        if host_sparsity.small(bits):  # numpy: nothing to compile (host_sparsity)
            values, pos, count = host_sparsity.compress(bits, signed_zero(dtype))
            _raise_if_not_2_4(what, host_sparsity.count_summary(count), groups)
            return (jax.device_put(values.view(dtype) if _is_float(dtype) else values), jax.device_put(pos))
        bucket = _bucket_rows(bits, 4)
        values, pos, count, summary = _compress_array(bits if bucket is None else bucket[0], dtype.name)
        if jax_concrete(count):  # the summary came from the same program: nothing more to compile
            _raise_if_not_2_4(what, summary, groups)  # a bucket's padding groups are zeros: never the first bad group
        else:
            fail_if(count > 2, _describe_2_4(what), count)
        if bucket is not None:
            half = (*a24.shape[:-1], a24.shape[-1] // 2)
            return _cut(values, bucket[1], half), _cut(pos, bucket[1], half)
        return values, pos


@functools.partial(jax.jit, static_argnames="dtype")
def _compress_array(a24, dtype):
    """`compress_2_4` of ``a24`` (..., K), its values or (numpy floats) their bits, as one
    program: (values of ``dtype``, positions, non-zero count per group, and (groups with
    more than two non-zeros, flat index of the first, its count) for the error message)."""
    dtype = jnp.dtype(dtype)
    bits = _to_bits(a24)
    g = _in_groups(bits)
    values, pos, count = _compress_core(g, host_sparsity.nonzero(g, signed_zero(dtype)))
    bad = (count > 2).reshape(-1)
    first = jnp.argmax(bad)
    summary = (jnp.sum(bad, dtype=jnp.int32), first, count.reshape(-1)[first])
    return (_from_bits(values, dtype) if _is_float(dtype) else values), pos, count, summary


def check_2_4(a24, *, what: str = "a24", float_bits: bool = False) -> None:
    """Raise the ValueError of `compress_2_4` where ``a24`` (..., K), K divisible by 4, is not
    2:4 sparse, without compressing it: concrete input is summarised by one fused reduction
    (three scalars come back, no temporary of A's size); traced input is checked when the
    computation runs, as `compress_2_4` checks it. Floats are read as their bits (no float
    operation); ``float_bits``: ``a24`` holds float bit patterns already (unsigned ints of
    their width) of a format with a -0 (`signed_zero`; fnuz bits pass False). For callers
    that compress later, block by block (`jwmma.gemm`, `compress_groups`)."""
    x = _operand(a24, what)
    if x.size == 0:
        return
    with x64_scope():
        float_bits = float_bits or signed_zero(x.dtype)
        if jax_concrete(x):
            bits = _host_bits(x)
            if host_sparsity.small(bits):  # numpy: nothing to compile (host_sparsity)
                summary = host_sparsity.summary(bits, float_bits)
            else:
                bucket = _bucket_rows(bits, 4)  # padding groups are zeros: never counted, never first
                summary = _summary_2_4(bits if bucket is None else bucket[0], float_bits)
            _raise_if_not_2_4(what, summary, (*x.shape[:-1], x.shape[-1] // 4))
            return
        x, g = _groups(x, what)
        count = _compress(g, float_bits)[2]
        fail_if(count > 2, _describe_2_4(what), count)


@functools.partial(jax.jit, static_argnums=1)
def _summary_2_4(x, float_bits: bool):
    """(groups with more than two non-zeros, flat index of the first, its non-zero count) of
    ``x`` (..., K), as one program (a JAX array's bit cast and grouping included: eagerly each
    was a program of its own, compiled again for every shape)."""
    bits = _to_bits(x)
    g = _in_groups(bits)
    bad = (host_sparsity.nonzero(g, float_bits).sum(-1, dtype=jnp.int32) > 2).reshape(-1)
    first = jnp.argmax(bad)
    return (jnp.sum(bad, dtype=jnp.int32), first,
            host_sparsity.nonzero(g.reshape(-1, 4)[first], float_bits).sum(dtype=jnp.int32))


def compress_groups(a24, *, float_bits: bool = False):
    """`compress_2_4` without its check, for traced code that checked ``a24`` already
    (`check_2_4`): (values, positions int32) of a (..., K) array, K divisible by 4. Groups with
    more than two non-zeros keep their first two (undefined for a caller that did not check).
    ``float_bits``: ``a24`` holds the bit patterns of floats with a -0 (`signed_zero`; fnuz
    bits pass False) as unsigned ints of their width (-0 counts as zero; the values come back
    as bits): no float operation at all."""
    g = _in_groups(a24)
    values, pos, _ = _compress(g, float_bits)
    return values, pos


@functools.partial(jax.jit, static_argnums=1)
def _compress(g, float_bits: bool):
    """(values, positions, non-zero count per group) of groups (..., G, 4) of integer values
    or float bits: one fused program (no eager temporaries of A's size)."""
    return _compress_core(g, host_sparsity.nonzero(g, float_bits))


def _compress_core(vals, nz):
    """`_compress` on values (floats as their bits) and their non-zero mask."""
    count = nz.sum(-1, dtype=jnp.int32)
    idx = jnp.arange(4, dtype=jnp.int32)
    four = jnp.int32(4)
    # first and second non-zero positions (4 = none)
    p_first = jnp.min(jnp.where(nz, idx, four), -1)
    p_second = jnp.min(jnp.where(nz & (idx > p_first[..., None]), idx, four), -1)
    two, three = jnp.int32(2), jnp.int32(3)
    pos0 = jnp.where(count >= 2, p_first, jnp.where(count == 1, jnp.where(p_first == 3, two, p_first), two))
    pos1 = jnp.where(count >= 2, p_second, three)
    zero = jnp.zeros((), vals.dtype)
    v0 = jnp.where(count >= 1, jnp.take_along_axis(vals, pos0[..., None], -1)[..., 0], zero)
    v1 = jnp.where(count >= 1, jnp.take_along_axis(vals, pos1[..., None], -1)[..., 0], zero)
    # a lone non-zero below position 3 sits in slot 0; slot 1 (position 3) is a padding zero
    v1 = jnp.where((count == 1) & (p_first < 3), zero, v1)
    v0 = jnp.where((count == 1) & (p_first == 3), zero, v0)
    half = (*vals.shape[:-2], vals.shape[-2] * 2)
    values = jnp.stack([v0, v1], -1).reshape(half)
    pos = jnp.stack([pos0, pos1], -1).reshape(half)
    return values, pos, count


@strict_keywords
def decompress_2_4(values, pos, *, check: bool = False):
    """Inverse of `compress_2_4`.

    Args:
        values: (..., K/2) stored values; pos: (..., K/2) their positions 0..3 (two different
            positions per group).
        check: also check traced positions (when the computation runs). Concrete positions
            are always checked; traced ones, with ``check=False``, keep their low 2 bits
            (position p reads as p mod 4, as the index register would).
    Returns:
        (..., K) dense array of values' dtype (bits copied), zeros elsewhere.
    """
    check = check_bool_kw(check, "check")
    values = as_array(values, "values")
    pos = as_array(pos, "pos")
    if values.shape != pos.shape:
        raise ValueError(f"values and pos must have the same shape, got {tuple(values.shape)} and {tuple(pos.shape)}")
    if values.ndim < 1 or values.shape[-1] % 2:
        raise ValueError(f"values must have an even last axis (K/2), got shape {tuple(values.shape)}")
    if not jnp.issubdtype(pos.dtype, jnp.integer):
        raise TypeError(f"pos must hold integers 0..3, got {pos.dtype}")
    _check_width(values.dtype, "values")
    with x64_scope():
        dtype = np.dtype(values.dtype)
        if values.size == 0:
            return jnp.zeros((*values.shape[:-1], values.shape[-1] * 2), dtype)
        check_values(pos, 0, 3, "pos", check)

        def same(count, first):
            return f"pos selects the same position twice in group {first}"

        concrete = jax_concrete(pos)
        if concrete or check:  # concrete positions on the host: no program of their own
            pr = (np if concrete else jnp).asarray(pos).reshape(*pos.shape[:-1], -1, 2) & 3
            fail_if(pr[..., 0] == pr[..., 1], same)
        bits = _host_bits(values)
        bucket = _bucket_rows(bits, 2)
        pos = np.asarray(pos) if host_readable(pos) else pos
        if bucket is not None and isinstance(pos, np.ndarray):  # rows of one group: 2 values, 2 positions
            rows = _bucket_rows(pos, 2)[0]
            full = (*values.shape[:-1], values.shape[-1] * 2)
            return _cut(_decompress_array(bucket[0], rows, dtype.name), bucket[1], full)
        return _decompress_array(bits, jnp.asarray(pos), dtype.name)


@functools.partial(jax.jit, static_argnames="dtype")
def _decompress_array(values, pos, dtype):
    """`decompress_2_4` of checked ``values`` (..., K/2), their values or (numpy floats) their
    bits, as one program (op by op, a first call of a new shape took 0.6 CPU s). Returns
    ``dtype`` values (..., K)."""
    dtype = jnp.dtype(dtype)
    vals = _to_bits(values)
    full = (*vals.shape[:-1], vals.shape[-1] * 2)
    pr = pos.reshape(*pos.shape[:-1], -1, 2) & 3
    v = vals.reshape(*vals.shape[:-1], -1, 2)
    idx = jnp.arange(4)
    zero = jnp.zeros((), vals.dtype)
    dense = jnp.where(pr[..., 0, None] == idx, v[..., 0, None], zero)
    dense = jnp.where(pr[..., 1, None] == idx, v[..., 1, None], dense).reshape(full)
    return _from_bits(dense, dtype) if _is_float(dtype) else dense
