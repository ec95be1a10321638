"""The 2:4 helpers' work on the host (API.md section 4, BUILTINS.md section 5): small operands
in numpy, larger ones in the compiled program of a bucket of rows.

Why: `jwmma.engine.sparsity`'s programs compile once per dtype and bucket, 0.1-0.4 CPU s each
(a first `compress_2_4` of a 16 x 128 fp8 A: 0.42 s; the 2:4 check of a first `jwmma.gemm`:
0.23 s; a first `prune_2_4`: 0.16 s), while numpy prunes, counts and gathers a small operand's
groups in milliseconds. Operands of at most `HOST_MAX_GROUPS` groups in host memory (numpy
arrays, JAX arrays on one CPU device) are pruned (rule "largest"; "hipsparselt" keeps its
program), checked and compressed here, with nothing to compile; a bucket's program runs at
least `BUCKET_MIN_GROUPS` groups, so numpy is the faster below that size anyway.

The numpy forms compute what `sparsity._summary_2_4`, `sparsity._compress_core` and
`sparsity._prune` compute (the non-zero rule, `nonzero`, and the pruning rank, `keep_largest`,
are one function for both), on the same bits (floats as
unsigned ints of their width, -0 counted as zero where the format has one, values copied bit
for bit); the tests check both forms against each other and against references written from
the spec.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

__all__ = ["HOST_MAX_GROUPS", "BUCKET_MIN_GROUPS", "BUCKET_GROWTH", "BUCKET_MAX_GROUPS", "is_float", "signed_zero",
           "small", "nonzero", "magnitude_key", "keep_largest", "count_summary", "summary", "compress", "prune",
           "bucket_rows", "cut"]

#: the most groups of four a numpy form takes: at 2**17 groups, 3-4 ms to check, 20-24 ms to
#: compress and 4 ms to prune on a 2-core Zen 1, against 0.15-0.4 CPU s to compile a bucket's
#: program (at 2**14, a 64 x 2048 GEMM operand's check compiled one: 0.2 s of `jwmma demo`)
HOST_MAX_GROUPS = 2**17

#: a numpy operand (or a JAX array on one CPU device, read through numpy) of at most
#: `BUCKET_MAX_GROUPS` groups, and more than `HOST_MAX_GROUPS`, runs in the program of its
#: bucket: its groups, flattened to rows, zero-padded to BUCKET_MIN_GROUPS * BUCKET_GROWTH**j
#: rows (`bucket_rows`), and the result cut on the host. Every helper works group by group and
#: a padding group touches no other, so the results are the unpadded ones; operands of many
#: shapes then share one program per dtype (issue 35 goal 5: a sweep's pruning, compressing,
#: and `jwmma.gemm`'s 2:4 check had compiled one program per shape each). Larger operands keep
#: their shape: their run outweighs a compile, and the host round trip would cost memory.
BUCKET_MIN_GROUPS, BUCKET_GROWTH, BUCKET_MAX_GROUPS = 2**16, 4, 2**20


def is_float(dtype) -> bool:
    """Whether ``dtype`` is a float format (numpy's and ml_dtypes')."""
    return np.dtype(dtype).kind == "f" or jnp.issubdtype(dtype, jnp.floating)


def signed_zero(dtype) -> bool:
    """Whether ``dtype``'s sign bit alone is a zero (-0): floats but the fnuz formats, whose
    pattern 0x80 is their one NaN (all-zero bits are their only zero, as for integers). What
    the ``float_bits`` of `sparsity.check_2_4` and `sparsity.compress_groups` say about bit
    patterns."""
    return is_float(dtype) and "fnuz" not in np.dtype(dtype).name


def small(bits) -> bool:
    """Whether ``bits`` is a numpy array of at most `HOST_MAX_GROUPS` groups of four."""
    return isinstance(bits, np.ndarray) and bits.size // 4 <= HOST_MAX_GROUPS


def nonzero(g, float_bits: bool):
    """Non-zero mask of integer values (and fnuz bits), or of float bit patterns with a -0
    (``float_bits``, `sparsity.signed_zero`: -0 is zero, NaN is not): the one rule of both
    forms, for numpy arrays here and for JAX arrays in `sparsity`'s programs."""
    if not float_bits:
        return g != 0
    # the mask in g's own dtype: a Python int beside uint64 would promote to float64 in NumPy 1
    magnitude = np.array((1 << (np.dtype(g.dtype).itemsize * 8 - 1)) - 1).astype(g.dtype)
    return (g & magnitude) != 0


def magnitude_key(g, dtype):
    """An unsigned key ordered as |value|, exact in ``dtype``'s precision; NaN ranks as an
    infinite magnitude (ties with Inf; above every finite value in formats without Inf).
    ``g``: integer values, or the bit patterns of a float ``dtype``; a numpy array (the key
    in numpy) or a JAX array (in `sparsity`'s programs): the one rule of both forms."""
    xp = np if isinstance(g, np.ndarray) else jnp
    dtype = np.dtype(dtype)
    if not is_float(dtype):
        ukey = np.uint64 if dtype.itemsize == 8 else np.uint32  # |x| of any int fits the unsigned width
        if dtype.kind == "u":
            return g.astype(ukey)
        if dtype.itemsize == 8:
            u = g.view(np.uint64) if xp is np else lax.bitcast_convert_type(g, jnp.uint64)
        else:
            u = g.astype(np.int32).astype(np.uint32)
        return xp.where(g < 0, ukey(0) - u, u)  # two's complement negation: |int min| exactly
    width = dtype.itemsize * 8
    ukey = np.uint64 if width == 64 else np.uint32
    key = (g & np.array((1 << (width - 1)) - 1).astype(g.dtype)).astype(ukey)
    if not signed_zero(dtype):  # fnuz: the one NaN is the negative-zero code: |NaN| would read 0
        return xp.where(g == np.array(1 << (width - 1)).astype(g.dtype), ukey((1 << (width - 1)) - 1), key)
    if np.isinf(np.array(np.inf, dtype)):  # IEEE: NaNs lie above the Inf code
        inf_key = int(np.array(np.inf, dtype).view(np.dtype(f"u{dtype.itemsize}")))
        return xp.minimum(key, ukey(inf_key))
    return key  # E4M3FN: the NaN codes are the largest magnitudes already


def keep_largest(g, dtype):
    """Which elements of the groups ``g`` (..., 4) `prune_2_4`'s rule "largest" keeps (bool,
    g's shape): the two of largest `magnitude_key`, ties to the lower position; numpy or JAX
    as ``g``."""
    key = magnitude_key(g, dtype)
    # rank of each element within its group: how many others beat it (a tie goes to the lower
    # position). numpy counts pair by pair (six comparisons: 15x faster than all 4 x 4 at once);
    # a program compares all 4 x 4 at once (the pairwise form compiled 2.5-4.5x slower in XLA)
    if isinstance(g, np.ndarray):
        k = [key[..., p] for p in range(4)]
        rank = [np.zeros(key.shape[:-1], np.int8) for _ in range(4)]
        for i in range(4):
            for j in range(i + 1, 4):
                j_wins = (k[j] > k[i]).astype(np.int8)
                rank[i], rank[j] = rank[i] + j_wins, rank[j] + (1 - j_wins)
        return np.stack([r < 2 for r in rank], -1)
    idx = jnp.arange(4)
    beats = (key[..., None, :] > key[..., :, None]) | (
        (key[..., None, :] == key[..., :, None]) & (idx[None, :] < idx[:, None]))
    return beats.sum(-1) < 2


def prune(bits: np.ndarray, dtype) -> np.ndarray:
    """`prune_2_4` (rule "largest") of ``bits`` (..., K), K divisible by 4: the bits of float
    ``dtype`` as unsigned ints of its width, or integer values; the pruned bits (values),
    dropped elements zero (+0)."""
    g = bits.reshape(*bits.shape[:-1], bits.shape[-1] // 4, 4)
    return np.where(keep_largest(g, dtype), g, np.zeros((), g.dtype)).reshape(bits.shape)


def count_summary(count) -> tuple:
    """(groups with more than two non-zeros, flat index of the first (0 when none), that
    group's non-zero count) of the non-zero counts ``count`` of a non-empty operand's groups:
    Python ints."""
    flat = np.asarray(count).reshape(-1)
    bad = flat > 2
    first = int(np.argmax(bad))
    return int(bad.sum()), first, int(flat[first])


def summary(bits: np.ndarray, float_bits: bool) -> tuple:
    """`count_summary` of ``bits`` (..., K), K divisible by 4, non-empty."""
    return count_summary(nonzero(bits.reshape(-1, 4), float_bits).sum(-1))


def compress(bits: np.ndarray, float_bits: bool) -> tuple:
    """("consecutive" compression, `jwmma.engine.sparsity`'s doc) of ``bits`` (..., K):
    (values (..., K/2) of bits' dtype, positions (..., K/2) int32, non-zero count per group
    (..., K/4)). A group of more than two non-zeros keeps its first two (callers check)."""
    g = bits.reshape(*bits.shape[:-1], bits.shape[-1] // 4, 4)
    nz = nonzero(g, float_bits)
    count = nz.sum(-1, dtype=np.int32)
    idx = np.arange(4, dtype=np.int32)
    p_first = np.where(nz, idx, 4).min(-1)
    p_second = np.where(nz & (idx > p_first[..., None]), idx, 4).min(-1)
    pos0 = np.where(count >= 2, p_first, np.where((count == 1) & (p_first < 3), p_first, 2))
    pos1 = np.where(count >= 2, p_second, 3)
    v0 = np.take_along_axis(g, pos0[..., None], -1)[..., 0]
    v1 = np.take_along_axis(g, pos1[..., None], -1)[..., 0]
    # padding: no non-zero gives zeros; a lone one below position 3 sits in slot 0 with a zero
    # in slot 1 (position 3), a lone one at position 3 in slot 1 with a zero in slot 0
    zero = np.zeros((), g.dtype)  # (a Python 0 would promote uint64 to float64 in NumPy 1)
    v0 = np.where((count == 0) | ((count == 1) & (p_first == 3)), zero, v0)
    v1 = np.where((count == 0) | ((count == 1) & (p_first < 3)), zero, v1)
    half = (*bits.shape[:-1], bits.shape[-1] // 2)
    values = np.stack([v0, v1], -1).reshape(half)
    pos = np.stack([pos0, pos1], -1).astype(np.int32).reshape(half)
    return values, pos, count


def bucket_rows(x, width: int):
    """(rows, n) for a numpy array ``x`` (..., K), K a multiple of ``width``: its n = size /
    width rows of ``width`` elements zero-padded to a bucket of rows (`BUCKET_MIN_GROUPS`; a
    few milliseconds of host work for a tiny operand, where a compile costs 0.1-0.3 s); None
    for other arrays (JAX arrays, traced values, more than `BUCKET_MAX_GROUPS` rows)."""
    if not isinstance(x, np.ndarray) or x.size == 0 or x.size // width > BUCKET_MAX_GROUPS:
        return None
    n = x.size // width
    rows = BUCKET_MIN_GROUPS
    while rows < n:
        rows *= BUCKET_GROWTH
    out = np.zeros((rows, width), x.dtype)
    out[:n] = x.reshape(n, width)
    return out, n


def cut(y, n: int, shape):
    """A bucket's result ``y`` (rows, width) cut to its first ``n`` rows on the host, in ``shape``,
    back on the device (no program per shape)."""
    return jax.device_put(np.ascontiguousarray(np.asarray(y)[:n].reshape(shape)))
