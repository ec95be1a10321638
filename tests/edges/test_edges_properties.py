"""Property-based suite over the public API (issue #10, "make the class impossible").

For arbitrary shapes (zero-size included), dtypes and values, every call either returns what
an independent reference says (edges_oracles.py: spec formulas, Python ints and fractions,
never jwmma) or raises ValueError/TypeError whose message names the argument; never another
exception, never a silent change of value. Most properties also run under ``jax.jit``
(traced inputs must give the same bits).

Cost is compilation, not examples: the draws keep the number of distinct (function, shape,
dtype) combinations small in the default profile; ``--hypothesis-profile=slow`` (see
conftest.py) draws from all 25 builtins, more shapes and more models.
"""
from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np
import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

import jwmma
from jwmma import kernel

import edges_oracles as O
import edges_profile
from edges_helpers import CLI_ERROR, call_builtin, run_cli

WIDE = edges_profile.WIDE
E4M3, E5M2, BF16 = ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16
INT4, UINT4 = ml_dtypes.int4, ml_dtypes.uint4

ALL = list(O.NAMES)
FAST_INT = ["smfmac_i32_16x16x128_i8", "swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x64_iu4_w32",
            "swmmac_i32_16x16x32_iu4_w32", "smfmac_i32_32x32x64_i8"]
DEFAULT_FLOAT = ["smfmac_f32_16x16x128_fp8_bf8"]
BATCHES = edges_profile.sizes([(), (1,), (2,), (0,)] + ([(3,), (2, 1), (1, 3), (2, 0)] if WIDE else []))
seeds = st.integers(0, 2**32 - 1)
jit_flags = st.booleans()


def bits(x):
    return O.float_bits(np.asarray(x)).astype(np.int64)


# ------------------------------------------------------------------- data generators
FLAVORS = ["any_bits", "finite", "specials", "tiny"]


def float_codes(rng, fmt, shape, flavor):
    """Bit patterns of format ``fmt``: arbitrary, finite spread, specials mixed in, or tiny."""
    ebits, mbits, bias, has_inf, dt = O.FLOAT_FORMATS[fmt]
    width = 1 + ebits + mbits
    if flavor == "any_bits":
        return rng.integers(0, 1 << width, shape, dtype=np.int64)
    if flavor == "tiny":  # zeros and subnormals of both signs, a few normals
        mag = rng.integers(0, 1 << (mbits + 1), shape, dtype=np.int64)
    else:
        x = rng.standard_normal(shape) * 2.0 ** rng.integers(-6, 6, shape)
        codes = O.float_bits(x.astype(dt)).astype(np.int64)
        finite = np.vectorize(lambda v: O.decode(fmt, int(v))[0] == "num", otypes=[bool])(codes) if codes.size else codes.astype(bool)
        codes = np.where(finite, codes, 0)
        if flavor == "finite":
            return codes
        specials = [O.qnan_like(fmt), (1 << (width - 1)) | O.qnan_like(fmt), 1 << (width - 1), 0, 1,
                    (1 << (width - 1)) | 1, ((1 << ebits) - 2) << mbits | ((1 << mbits) - 1)]
        if has_inf:
            specials += [((1 << ebits) - 1) << mbits, (1 << (width - 1)) | ((1 << ebits) - 1) << mbits]
        pick = rng.random(shape) < 0.1
        return np.where(pick, rng.choice(specials, shape), codes)
    sign = rng.integers(0, 2, shape, dtype=np.int64) << (width - 1)
    return sign | mag


def values_of(fmt, codes):
    return O.codes_to_values(fmt, codes)


def int_values(rng, t, shape, signed, flavor):
    lo, hi = O.int_range(t, signed) if t != "i32" else (-(2**31), 2**31 - 1)
    if flavor == "specials":
        return rng.choice([lo, hi, 0, -1 if lo < 0 else 1, lo + 1, hi - 1], shape).astype(np.int64)
    return rng.integers(lo, hi, shape, endpoint=True, dtype=np.int64)


def int_dtype_for(t, signed, rng):
    """A numpy dtype that holds the element type's values: its own width or a wider int."""
    if t == "i32":
        return np.int32
    own = {("iu8", True): np.int8, ("iu8", False): np.uint8, ("i8", True): np.int8,
           ("iu4", True): INT4, ("iu4", False): UINT4}[(t, signed)]
    return [own, np.int32 if signed else np.uint16, np.int64][rng.integers(0, 3)]


def matrix_values(rng, t, shape, flavor, signed=True):
    """(values array, codes) of element type t."""
    if t in O.FLOAT_FORMATS:
        codes = float_codes(rng, t, shape, flavor)
        return values_of(t, codes), codes
    v = int_values(rng, t, shape, signed, flavor)
    dt = int_dtype_for(t, signed, rng)
    return v.astype(dt), O.value_codes(t, v)


def maybe_jit(fn, jit):
    return jax.jit(fn) if jit else fn


# ==================================================================== 1. the table
@pytest.mark.parametrize("name", ALL)
def test_table_and_layouts_follow_the_spec_formulas(name):
    bt = O.TABLE[name]
    spec = jwmma.BUILTINS[name]
    assert (spec.name, spec.arch, spec.wave, spec.m, spec.n, spec.k, spec.kc) == \
        (bt.name, bt.arch, bt.wave, bt.m, bt.n, bt.k, bt.kc)
    assert (spec.a_type, spec.b_type, spec.c_type) == (bt.a_type, bt.b_type, bt.c_type)
    la, lb, lc = O.layouts(bt)
    np.testing.assert_array_equal(np.asarray(spec.a_layout), la)
    np.testing.assert_array_equal(np.asarray(spec.b_layout), lb)
    np.testing.assert_array_equal(np.asarray(spec.c_layout), lc)
    for k, s in enumerate(bt.index_sets):
        for lane in (0, bt.wave // 2 + 1, bt.wave - 1):
            for e in range(bt.na):
                assert spec.index_bit(lane, e, k) == s + 2 * e


# ========================================================== 2. fragments: pack/unpack
@given(name=st.sampled_from(ALL), which=st.sampled_from("abc"), batch=st.sampled_from(BATCHES),
       flavor=st.sampled_from(FLAVORS), signed=st.booleans(), jit=jit_flags, seed=seeds)
def test_pack_matches_the_layout_and_unpack_inverts_it(name, which, batch, flavor, signed, jit, seed):
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    t = getattr(bt, f"{which}_type")
    signed = signed if t == "iu8" or t == "iu4" else True
    shape = batch + {"a": (bt.m, bt.kc), "b": (bt.k, bt.n), "c": (bt.m, bt.n)}[which]
    x, codes = matrix_values(rng, t, shape, flavor, signed)
    note(f"{name} {which} {x.dtype} {shape}")
    regs = maybe_jit(lambda v: getattr(jwmma, f"pack_{which}")(name, v), jit)(x)
    want = O.matrix_to_regs(bt, which, codes)
    assert regs.shape == want.shape and np.asarray(regs).dtype == want.dtype
    np.testing.assert_array_equal(bits(regs), bits(want))
    kw = {"signed": signed} if which != "c" else {}
    back = maybe_jit(lambda r: getattr(jwmma, f"unpack_{which}")(name, r, **kw), jit)(regs)
    assert back.shape == shape
    if t in O.FLOAT_FORMATS:
        assert np.asarray(back).dtype == x.dtype
        np.testing.assert_array_equal(bits(back), codes)
    else:
        np.testing.assert_array_equal(np.asarray(back).astype(np.int64), O.codes_to_values(t, codes, signed))


@given(name=st.sampled_from(ALL), which=st.sampled_from("abc"), batch=st.sampled_from(BATCHES), seed=seeds,
       jit=jit_flags)
def test_unpack_then_pack_gives_back_any_register_bits(name, which, batch, seed, jit):
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    for dtype in bt.reg_dtypes(which):
        n = bt.regs(which)
        raw = rng.integers(0, 2**32, batch + (bt.wave, n), dtype=np.uint64).astype(np.uint32)
        regs = raw.view(np.int32).view(dtype) if dtype.itemsize == 4 else raw.astype(np.uint16).view(dtype)
        fn = lambda r: getattr(jwmma, f"pack_{which}")(name, getattr(jwmma, f"unpack_{which}")(name, r))  # noqa: E731
        again = maybe_jit(fn, jit)(regs)
        np.testing.assert_array_equal(bits(again), bits(np.asarray(regs).view(bt.reg_dtypes(which)[0])))


INT_OPERANDS = [(n, w) for n in ALL for w in "ab" if getattr(O.TABLE[n], f"{w}_type") in ("iu8", "i8", "iu4")]


@given(case=st.sampled_from(INT_OPERANDS), where=st.floats(0, 1), excess=st.integers(1, 2**20), below=st.booleans())
def test_pack_refuses_integers_out_of_range(case, where, excess, below):
    name, which = case
    bt = O.TABLE[name]
    t = getattr(bt, f"{which}_type")
    shape = {"a": (bt.m, bt.kc), "b": (bt.k, bt.n), "c": (bt.m, bt.n)}[which]
    x = np.zeros(shape, np.int64)
    lo, hi = (-128, 255) if t == "iu8" else (-128, 127) if t == "i8" else (-8, 15)
    flat = x.reshape(-1)
    flat[int(where * (flat.size - 1))] = lo - excess if below else hi + excess
    arg = {"a": "a_comp", "b": "b", "c": "c"}[which]
    with pytest.raises(ValueError, match=rf"\b{arg}\b"):
        getattr(jwmma, f"pack_{which}")(name, x)


INDEX_SETS = [(n, k) for n in ALL for k in range(len(O.TABLE[n].index_sets))]


@given(case=st.sampled_from(INDEX_SETS), batch=st.sampled_from(BATCHES), seed=seeds, jit=jit_flags)
def test_pack_index_matches_the_bit_rule(case, batch, seed, jit):
    name, key = case
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 4, batch + (bt.m, bt.kc))
    s = bt.index_sets[key]
    idx = maybe_jit(lambda p: jwmma.pack_index(name, p, index_set=key), jit)(pos.astype(np.int32))
    want = O.pack_index(bt, pos, s)
    assert np.asarray(idx).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(idx), want)
    words = rng.integers(0, 2**32, batch + (bt.wave,), dtype=np.uint64).astype(np.uint32).view(np.int32)
    got = maybe_jit(lambda w: jwmma.unpack_index(name, w, index_set=key), jit)(words)
    np.testing.assert_array_equal(np.asarray(got), O.unpack_index(bt, words, s))


# ============================================================ 3. bad register inputs
WRONG_DTYPES = [np.float64, np.float32, np.float16, np.int8, np.int16, np.uint32, np.int64, np.bool_, E4M3, BF16]


@given(name=st.sampled_from(ALL), pos=st.integers(0, 3), kind=st.sampled_from(["dtype", "lanes", "n", "ndim"]),
       dtype=st.sampled_from(WRONG_DTYPES), delta=st.sampled_from([-1, 1, 32]))
def test_builtin_refuses_bad_registers_naming_the_operand(name, pos, kind, dtype, delta):
    bt = O.TABLE[name]
    args = [np.zeros((bt.wave, bt.regs(w)), bt.reg_dtypes(w)[0]) for w in "abc"] + [np.zeros(bt.wave, np.int32)]
    x = args[pos]
    if kind == "dtype":
        ok = [np.dtype(np.int32), np.dtype(np.uint32)] if pos == 3 else list(bt.reg_dtypes("abc"[pos]))
        assume(np.dtype(dtype) not in ok)
        args[pos] = x.astype(dtype)
    elif kind == "lanes":
        args[pos] = np.zeros((bt.wave + delta,) + x.shape[1:], x.dtype)
    elif kind == "n":
        assume(pos < 3 and x.shape[-1] + delta > 0)
        args[pos] = np.zeros(x.shape[:-1] + (x.shape[-1] + delta,), x.dtype)
    else:
        args[pos] = x[0]
    what = "abc"[pos] if pos < 3 else ("index" if bt.arch == "gfx12" else "idx")
    with pytest.raises((TypeError, ValueError), match=rf"\b{what}\b"):
        call_builtin(name, *args)


# ========================================================= 4. builtins vs the exact model
def builtin_cases():
    names = ALL if WIDE else FAST_INT + DEFAULT_FLOAT
    return st.sampled_from(names)


@given(name=builtin_cases(), shapes=st.sampled_from([((2,), (2,), (2,), (2,)), ((), (2,), (), (1,)),
                                                   ((1, 2), (3, 1), (), (2,)), ((), (), (), ())]),
       flavor=st.sampled_from(FLAVORS), idx_kind=st.sampled_from(["valid", "any_bits"]), signs=st.tuples(
           st.booleans(), st.booleans(), st.booleans()), jit=jit_flags, key=st.integers(0, 1), seed=seeds)
def test_builtin_matches_the_exact_reference(name, shapes, flavor, idx_kind, signs, jit, key, seed):
    bt = O.TABLE[name]
    if not WIDE and not bt.integer:  # a float builtin costs 8-20 s per compiled shape
        shapes, jit = ((2,), (2,), (2,), (2,)), False
    rng = np.random.default_rng(seed)
    regs = []
    for which, batch in zip("abc", shapes):
        t = getattr(bt, f"{which}_type")
        shape = batch + {"a": (bt.m, bt.kc), "b": (bt.k, bt.n), "c": (bt.m, bt.n)}[which]
        if t in O.FLOAT_FORMATS:
            codes = float_codes(rng, t, shape, flavor)
        else:
            codes = O.value_codes(t, int_values(rng, t, shape, True, flavor))
        regs.append(O.matrix_to_regs(bt, which, codes))
    if idx_kind == "valid":
        pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
        pick = pairs[rng.integers(0, 6, shapes[3] + (bt.m, bt.kc // 2))]
        idx = O.pack_index(bt, pick.reshape(shapes[3] + (bt.m, bt.kc)), 0)
    else:
        idx = rng.integers(0, 2**32, shapes[3] + (bt.wave,), dtype=np.uint64).astype(np.uint32).view(np.int32)
    a_signed, b_signed, clamp = signs if bt.signed_choice else (True, True, False)
    kw = dict(a_signed=a_signed, b_signed=b_signed, clamp=clamp)
    # gfx950 16-bit: cbsz=0, abid picks the set; RDNA4 16-bit: the builtin reads bits 15:0
    extra, s = {}, 0
    if bt.arch == "gfx950" and len(bt.index_sets) == 2:
        extra, s = dict(cbsz=0, abid=key), bt.index_sets[key]
    note(f"{name} shapes={shapes} flavor={flavor} idx={idx_kind} {kw} {extra}")
    fn = maybe_jit(lambda a, b, c, i: call_builtin(name, a, b, c, i, model="exact", **kw, **extra), jit)
    d = fn(*regs, idx)
    want = O.builtin_reference(bt, *regs, idx, s=s, **kw)
    assert d.shape == want.shape and np.asarray(d).dtype == regs[2].dtype
    if bt.integer:
        np.testing.assert_array_equal(np.asarray(d).astype(np.int64), want)
    else:
        got = bits(d)
        np.testing.assert_array_equal(np.where(want == -1, -1, got), want)
        nan_got = np.vectorize(lambda v: O.is_nan_bits(bt.c_type, int(v)), otypes=[bool])(got) if got.size else got
        np.testing.assert_array_equal(nan_got, want == -1)


# ============================================================================ 5. 2:4
PRUNE_DTYPES = [np.float16, BF16, np.float32, np.float64, E4M3, E5M2, np.int8, np.uint8, np.int16, np.uint16,
                np.int32, np.uint32, np.int64, np.uint64]
JIT_OK = {np.dtype(d) for d in (np.float16, BF16, np.float32, E4M3, E5M2, np.int8, np.uint8, np.int16, np.uint16,
                                np.int32, np.uint32)}
SHAPES_24 = edges_profile.sizes([(1, 4), (3, 8), (0, 8), (2, 0), (4,), (2, 1, 12)])


def adversarial(rng, dtype, shape, flavor):
    """Values of ``dtype``: extremes, ties, NaN payloads, -0, near-equal magnitudes."""
    dtype = np.dtype(dtype)
    n = int(np.prod(shape))
    if dtype.kind in "iu":
        info = np.iinfo(dtype)
        pool = [info.min, info.max, info.min + 1, info.max - 1, 0, 1, -1 if info.min < 0 else 2, 3]
        if flavor == "specials":
            v = rng.choice(np.array(pool, dtype), n)
        else:
            v = rng.integers(info.min, info.max, n, endpoint=True, dtype=dtype)
            v[rng.random(n) < 0.2] = 0
        return v.reshape(shape).astype(dtype)
    width = dtype.itemsize * 8
    fmt = {16: "f16", 32: "f32", 8: "fp8"}.get(width)
    if dtype == np.dtype(BF16):
        fmt = "bf16"
    if dtype == np.dtype(E5M2):
        fmt = "bf8"
    if width == 64:
        x = rng.standard_normal(n) * 2.0 ** rng.integers(-30, 30, n)
        if flavor == "specials":  # near-ties that only float64 can tell apart, NaN, -0, Inf
            pick = rng.random(n)
            x = np.where(pick < 0.4, 1.0 + rng.integers(0, 4, n) * 2.0**-52, x)
            x = np.where((pick >= 0.4) & (pick < 0.5), np.nan, x)
            x = np.where((pick >= 0.5) & (pick < 0.6), -0.0, x)
            x = np.where((pick >= 0.6) & (pick < 0.65), -np.inf, x)
        return x.reshape(shape)
    codes = float_codes(rng, fmt, (n,), flavor)
    return O.codes_to_values(fmt, codes).reshape(shape)


@given(dtype=st.sampled_from(PRUNE_DTYPES), shape=st.sampled_from(SHAPES_24), flavor=st.sampled_from(FLAVORS),
       jit=jit_flags, seed=seeds)
def test_prune_keeps_the_two_largest_magnitudes_bit_for_bit(dtype, shape, flavor, jit, seed):
    x = adversarial(np.random.default_rng(seed), dtype, shape, flavor)
    jit = jit and np.dtype(dtype) in JIT_OK      # a jit boundary itself narrows 64-bit inputs
    got = maybe_jit(jwmma.prune_2_4, jit)(x)
    assert got.shape == x.shape and np.asarray(got).dtype == x.dtype
    np.testing.assert_array_equal(bits(got), bits(O.prune_largest(x)))   # ints: same dtype, so bits = values


HIPSPARSELT_DTYPES = [np.float16, BF16, np.int8, E4M3, E5M2]


@given(dtype=st.sampled_from(HIPSPARSELT_DTYPES), shape=st.sampled_from(SHAPES_24), flavor=st.sampled_from(FLAVORS),
       jit=jit_flags, seed=seeds)
def test_prune_hipsparselt_rule_matches_the_kernel(dtype, shape, flavor, jit, seed):
    x = adversarial(np.random.default_rng(seed), dtype, shape, flavor)
    got = maybe_jit(lambda v: jwmma.prune_2_4(v, rule="hipsparselt"), jit)(x)
    assert got.shape == x.shape and np.asarray(got).dtype == x.dtype
    np.testing.assert_array_equal(bits(got), bits(O.prune_hipsparselt(x)))


def sparse_24(rng, dtype, shape, flavor):
    x = adversarial(rng, dtype, shape, flavor)
    x = O.prune_largest(x)
    drop = rng.random(x.shape) < 0.3     # groups with fewer than two non-zeros too
    x = np.where(drop, np.zeros((), x.dtype), x)
    if np.dtype(dtype).kind not in "iu" and x.size:
        neg0 = (rng.random(x.shape) < 0.2) & ~O.nonzero_mask(x)
        x = np.where(neg0, -np.zeros((), x.dtype), x)      # -0.0 counts as zero
    return x


@given(dtype=st.sampled_from(PRUNE_DTYPES), shape=st.sampled_from(SHAPES_24), flavor=st.sampled_from(FLAVORS),
       jit=jit_flags, seed=seeds)
def test_compress_matches_hipsparselt_format_and_decompress_inverts(dtype, shape, flavor, jit, seed):
    x = sparse_24(np.random.default_rng(seed), dtype, shape, flavor)
    jit = jit and np.dtype(dtype) in JIT_OK
    values, pos = maybe_jit(jwmma.compress_2_4, jit)(x)
    (w_values, w_pos, pad), _ = O.compress_reference(x)
    assert values.shape == w_values.shape == pos.shape and np.asarray(values).dtype == x.dtype
    np.testing.assert_array_equal(np.asarray(pos), w_pos)
    is_int = np.dtype(dtype).kind in "iu"
    got_v = np.asarray(values)
    if is_int:
        np.testing.assert_array_equal(got_v, w_values)
    else:  # kept slots bit for bit; padding slots a zero (either sign)
        np.testing.assert_array_equal(np.where(pad, 0, bits(got_v)), np.where(pad, 0, bits(w_values)))
        assert not O.nonzero_mask(got_v[pad]).any()
    dense = np.asarray(maybe_jit(jwmma.decompress_2_4, jit)(values, pos))
    assert dense.dtype == x.dtype and dense.shape == x.shape
    if is_int:
        np.testing.assert_array_equal(dense, x)
    else:
        nz = O.nonzero_mask(x)
        np.testing.assert_array_equal(np.where(nz, bits(dense), 0), np.where(nz, bits(x), 0))
        assert not O.nonzero_mask(dense[~nz]).any()


@given(dtype=st.sampled_from([np.float16, np.float32, np.int8, E5M2]), rows=st.integers(1, 4),
       groups=st.integers(1, 3), seed=seeds)
def test_compress_names_the_first_group_with_too_many_non_zeros(dtype, rows, groups, seed):
    rng = np.random.default_rng(seed)
    x = sparse_24(rng, dtype, (rows, 4 * groups), "finite")
    r, g = rng.integers(0, rows), rng.integers(0, groups)
    x[r, 4 * g:4 * g + 3] = np.ones(3, x.dtype)
    _, (row, q) = O.compress_reference(x)
    with pytest.raises(ValueError, match=rf"row {row[0]}\b.*group {q}\b"):
        jwmma.compress_2_4(x)


@given(kc=st.sampled_from([2, 4, 8]), seed=seeds, kind=st.sampled_from(["range", "duplicate", "shape", "odd"]))
def test_decompress_refuses_bad_positions(kc, seed, kind):
    rng = np.random.default_rng(seed)
    values = rng.standard_normal((3, kc)).astype(np.float32)
    pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
    pos = pairs[rng.integers(0, 6, (3, kc // 2))].reshape(3, kc)
    if kind == "range":
        pos[rng.integers(0, 3), rng.integers(0, kc)] = rng.choice([-1, 4, 7, 100])
        match = r"\bpos\b"
    elif kind == "duplicate":
        i, j = rng.integers(0, 3), 2 * rng.integers(0, kc // 2)
        pos[i, j + 1] = pos[i, j]
        match = r"\bpos\b"
    elif kind == "shape":
        pos = pos[:, :-2] if kc > 2 else pos[:1]
        match = r"\bvalues\b|\bpos\b"
    else:
        values, pos = values[:, :-1], pos[:, :-1]
        match = r"\bvalues\b"
    with pytest.raises(ValueError, match=match):
        jwmma.decompress_2_4(values, pos)


# ============================================================================ 6. gemm
GEMM_INT = ["smfmac_i32_16x16x128_i8", "swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32"]
DIMS_M = edges_profile.sizes([0, 1, 5, 16, 17] + ([33] if WIDE else []))
DIMS_K = edges_profile.sizes([0, 4, 6, 32, 130] + ([256, 260] if WIDE else []))


def gemm_int_operands(rng, bt, batch, m, n, k, signed_a=True, signed_b=True):
    lo_a, hi_a = O.int_range(bt.a_type, signed_a)
    lo_b, hi_b = O.int_range(bt.b_type, signed_b)
    a = rng.integers(lo_a, hi_a, batch + (m, k), endpoint=True)
    kq = -(-k // 4) * 4
    a_full = np.zeros(batch + (m, kq), np.int64)
    a_full[..., :k] = a
    a = O.prune_largest(a_full)[..., :k]
    b = rng.integers(lo_b, hi_b, batch + (k, n), endpoint=True)
    dt = lambda t, s: {("iu4", True): INT4, ("iu4", False): UINT4, ("i8", True): np.int8}.get(  # noqa: E731
        (t, s), np.int8 if s else np.uint8)
    return a.astype(dt(bt.a_type, signed_a)), b.astype(dt(bt.b_type, signed_b))


@given(name=st.sampled_from(GEMM_INT), batch=st.sampled_from(edges_profile.sizes([(), (2,), (0,)])), m=st.sampled_from(DIMS_M),
       n=st.sampled_from(DIMS_M), k=st.sampled_from(DIMS_K), with_c=st.booleans(), as_pair=st.booleans(),
       path=st.sampled_from(["matrix", "registers"]), jit=jit_flags, seed=seeds)
def test_gemm_signed_integers_match_the_kernel_reference(name, batch, m, n, k, with_c, as_pair, path, jit, seed):
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    a, b = gemm_int_operands(rng, bt, batch, m, n, k)
    c = rng.integers(-(2**31), 2**31, batch + (m, n), dtype=np.int64).astype(np.int32) if with_c else None
    arg_a = a
    if as_pair:
        kq = -(-k // 4) * 4
        full = np.zeros(batch + (m, kq), a.dtype)
        full[..., :k] = a
        (vals, pos, _), _ = O.compress_reference(full)
        arg_a = (vals.astype(a.dtype), pos.astype(np.int32))
        b_full = np.zeros(batch + (kq, n), b.dtype)   # a pair's K is 2 * values.shape[-1]
        b_full[..., :k, :] = b
        b = b_full
    note(f"{name} batch={batch} m={m} n={n} k={k} c={with_c} pair={as_pair} {path} jit={jit}")
    fn = maybe_jit(lambda a_, b_, c_: jwmma.gemm(a_, b_, c_, builtin=name, path=path), jit)
    d = fn(arg_a, b, c)
    want = O.gemm_reference(bt, arg_a if as_pair else a, b, c)
    assert d.shape == want.shape == batch + (m, n) and np.asarray(d).dtype == np.int32
    np.testing.assert_array_equal(np.asarray(d).astype(np.int64), want)


@given(name=st.sampled_from(["swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32"]),
       signs=st.sampled_from([(False, True), (True, False), (False, False)]), m=st.sampled_from([1, 16]),
       k=st.sampled_from([32, 36]), seed=seeds)
def test_gemm_takes_signedness_from_unsigned_dtypes(name, signs, m, k, seed):
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    a, b = gemm_int_operands(rng, bt, (), m, 16, k, *signs)
    d = jwmma.gemm(a, b, builtin=name)
    np.testing.assert_array_equal(np.asarray(d).astype(np.int64), O.gemm_reference(bt, a, b, None, a_signed=signs[0],
                                                                                   b_signed=signs[1]))


FLOAT_GEMMS = [("smfmac_f32_16x16x128_fp8_fp8", (5, 7, 130)), ("swmmac_f16_16x16x32_f16_w32", (3, 17, 40))]
if WIDE:
    FLOAT_GEMMS += [("swmmac_bf16_16x16x32_bf16_w32", (17, 3, 64)), ("smfmac_f32_32x32x32_bf16", (33, 5, 36)),
                    ("swmmac_f32_16x16x32_bf8_fp8_w32", (16, 16, 96))]


@given(case=st.sampled_from(FLOAT_GEMMS), flavor=st.sampled_from(["finite", "specials", "tiny"]),
       with_c=st.booleans(), seed=seeds)
def test_gemm_floats_match_the_kernel_reference(case, flavor, with_c, seed):
    name, (m, n, k) = case
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    a = values_of(bt.a_type, float_codes(rng, bt.a_type, (m, k), flavor))
    kq = -(-k // 4) * 4
    full = np.zeros((m, kq), a.dtype)
    full[:, :k] = a
    a = O.prune_largest(full)[:, :k]
    b = values_of(bt.b_type, float_codes(rng, bt.b_type, (k, n), flavor))
    c = values_of(bt.c_type, float_codes(rng, bt.c_type, (m, n), "finite")) if with_c else None
    d = jwmma.gemm(a, b, c, builtin=name, model="exact")
    want = O.gemm_reference(bt, a, b, c)
    got = bits(d)
    assert d.shape == (m, n)
    np.testing.assert_array_equal(np.where(want == -1, -1, got), want)


@given(kind=st.sampled_from(["a_dtype", "b_dtype", "c_dtype", "k_mismatch", "not_24", "pair_len", "pair_shape",
                             "c_shape", "a_ndim", "path", "batch"]), seed=seeds)
def test_gemm_refuses_bad_inputs_naming_the_argument(kind, seed):
    name = "smfmac_i32_16x16x128_i8"
    rng = np.random.default_rng(seed)
    a, b = gemm_int_operands(rng, O.TABLE[name], (), 16, 16, 128)
    c = np.zeros((16, 16), np.int32)
    kw = {}
    match = None
    if kind == "a_dtype":
        a, match = a.astype(np.float16), r"\ba\b"
    elif kind == "b_dtype":
        b, match = b.astype(np.float32), r"\bb\b"
    elif kind == "c_dtype":
        c, match = c.astype(np.float32), r"\bc\b"
    elif kind == "k_mismatch":
        b, match = b[:64], r"\bb\b"
    elif kind == "not_24":
        a, match = np.ones((16, 128), np.int8), r"\ba is not 2:4"
    elif kind == "pair_len":
        a, match = (a[:, :64], a[:, :64], a[:, :64]), r"\ba\b"
    elif kind == "pair_shape":
        a, match = (a[:, :64], np.zeros((16, 32), np.int32)), r"\ba\b"
    elif kind == "c_shape":
        c, match = c[:8], r"\bc\b"
    elif kind == "a_ndim":
        a, match = a[0], r"\ba\b"
    elif kind == "path":
        kw, match = {"path": "nope"}, r"\bpath\b"
    else:
        a, b, match = np.stack([a, a]), np.stack([b, b, b]), r"batch"
    with pytest.raises((TypeError, ValueError), match=match):
        jwmma.gemm(a, b, c, builtin=name, **kw)


# ============================================================================== 7. dot
DOT_FLOAT = [(np.float16, np.float16), (E4M3, E5M2)] + ([(BF16, BF16), (E5M2, E5M2), (E4M3, E4M3)] if WIDE else [])
DOT_INT = [(np.int8, np.int8), (np.uint8, np.int8), (INT4, UINT4)]
DOT_K = edges_profile.sizes([0, 5] + ([1, 16, 33] if WIDE else []))
FMT_OF = {np.dtype(np.float16): "f16", np.dtype(BF16): "bf16", np.dtype(E4M3): "fp8", np.dtype(E5M2): "bf8"}


@given(pair=st.sampled_from(DOT_FLOAT + DOT_INT), k=st.sampled_from(DOT_K), flavor=st.sampled_from(FLAVORS),
       jit=jit_flags, seed=seeds)
def test_dot_exact_matches_the_reference(pair, k, flavor, jit, seed):
    da, db = (np.dtype(d) for d in pair)
    rng = np.random.default_rng(seed)
    integer = da not in FMT_OF
    if integer:
        def vals(d):
            info = (-8, 7) if d == np.dtype(INT4) else (0, 15) if d == np.dtype(UINT4) else \
                (np.iinfo(d).min, np.iinfo(d).max)
            return rng.integers(info[0], info[1], (2, k), endpoint=True).astype(d)
        a, b = vals(da), vals(db)
        c = rng.integers(-(2**31), 2**31, (2,), dtype=np.int64).astype(np.int32)
    else:
        a = values_of(FMT_OF[da], float_codes(rng, FMT_OF[da], (2, k), flavor))
        b = values_of(FMT_OF[db], float_codes(rng, FMT_OF[db], (2, k), flavor))
        c = values_of("f32", float_codes(rng, "f32", (2,), "finite" if flavor == "any_bits" else flavor))
    d = maybe_jit(lambda a, b, c: jwmma.dot(a, b, c, model="exact"), jit)(a, b, c)
    assert d.shape == (2,) and np.asarray(d).dtype == c.dtype
    for r in range(2):
        if integer:
            want = O.wrap_or_clamp(int(c[r]) + sum(int(x) * int(y) for x, y in zip(a[r], b[r])), False)
            assert int(np.asarray(d)[r]) == want
        else:
            want = O.exact_dot(FMT_OF[da], FMT_OF[db], "f32", bits(a[r]), bits(b[r]), int(bits(c)[r]))
            got = int(bits(d)[r])
            if want == -1:
                assert O.is_nan_bits("f32", got)
            else:
                assert got == want, (hex(got), hex(want))


# ===================================================================== 8. kernel helpers
@given(x=st.one_of(st.integers(-(2**31), 2**32 - 1), st.integers(-(2**70), 2**70)))
def test_i32_keeps_32_bit_values_and_refuses_the_rest(x):
    if -(2**31) <= x < 2**32:
        got = kernel.i32(x)
        assert np.asarray(got).dtype == np.int32 and int(got) == O.i32_reference(x)
    else:
        with pytest.raises(ValueError, match="32"):
            kernel.i32(x)


@given(seed=seeds, shape=st.sampled_from(edges_profile.sizes([(4,), (2, 3), (0,)])), jit=jit_flags)
def test_pack_bytes_is_little_endian(seed, shape, jit):
    rng = np.random.default_rng(seed)
    bs = [rng.integers(0, 256, shape).astype(np.uint8) for _ in range(4)]
    got = np.asarray(maybe_jit(kernel.pack_bytes, jit)(*bs))
    assert got.dtype == np.int32 and got.shape == shape
    want = np.array([O.pack_bytes_reference(*(int(b[i]) for b in bs)) for i in np.ndindex(*shape)],
                    np.int64).reshape(shape)
    np.testing.assert_array_equal(got.astype(np.int64), want)


@given(seed=seeds, value=st.integers(256, 2**20), which=st.integers(0, 3))
def test_pack_bytes_refuses_values_that_are_not_bytes(seed, value, which):
    args = [np.uint8(1)] * 4
    args[which] = value
    with pytest.raises(ValueError, match=rf"\bb{which}\b"):
        kernel.pack_bytes(*args)


@given(seed=seeds, shape=st.sampled_from(edges_profile.sizes([(8,), (3, 16), (0, 8), (2, 0)])), bad=st.sampled_from([None, -1, 4, 9]),
       jit=jit_flags)
def test_metadata_bytes_follow_hipsparselt_order(seed, shape, bad, jit):
    rng = np.random.default_rng(seed)
    pos = rng.integers(0, 4, shape)
    if bad is None or pos.size == 0:
        got = np.asarray(maybe_jit(kernel.metadata, jit)(pos.astype(np.int32)))
        assert got.dtype == np.uint8
        np.testing.assert_array_equal(got, O.metadata_reference(pos))
    else:
        pos.reshape(-1)[rng.integers(0, pos.size)] = bad
        with pytest.raises(ValueError, match=r"\bpos"):
            kernel.metadata(pos)


# ========================================================================= 9. the CLI
def assert_clean(argv, options):
    """Exit 0, or exit 2 with a 'jwmma: error:' line naming one of ``options``; never a
    traceback."""
    rc, out, err, exc = run_cli(argv)
    assert exc is None, f"jwmma {' '.join(argv)}: {type(exc).__name__}: {exc}\n{err[-1500:]}"
    assert "Traceback" not in err, err[-1500:]
    if rc == 0:
        return out
    assert rc == 2, (rc, err[-1500:])
    m = CLI_ERROR.search(err)
    assert m, err[-1500:]
    line = err[m.start():].splitlines()[0]
    assert any(o in line for o in options), f"{line!r} names none of {options}"
    return None


lane_texts = st.lists(st.sampled_from(["0", "3", "16", "31", "63", "64", "-1", "3-1", "0-3", "5-", "-", "", "a", " 2",
                                       "1-1", "7-9"]), min_size=1, max_size=3).map(",".join)


@given(name=st.sampled_from(["smfmac_f32_16x16x64_f16", "swmmac_f32_16x16x32_f16_w32", "swmmac_i32_16x16x64_iu4_w32"]),
       operand=st.sampled_from(["a", "b", "c", "d", "index"]), lanes=st.one_of(st.none(), lane_texts),
       element=st.one_of(st.none(), st.sampled_from(["0,0", "1,2", "15,31", "99,0", "0", "a,b", "-1,0"])),
       panel=st.one_of(st.none(), st.sampled_from(["0", "1", "16", "-3", "x"])),
       index_set=st.one_of(st.none(), st.sampled_from(["0", "1", "2", "-1", "x"])), grid=st.booleans(),
       as_json=st.booleans())
def test_cli_layout_arguments(name, operand, lanes, element, panel, index_set, grid, as_json):
    argv = ["layout", name, "-o", operand]
    for opt, v in (("--lane", lanes), ("--element", element), ("--panel", panel), ("--index-set", index_set)):
        if v is not None:
            argv += [f"{opt}={v}"]
    argv += ["--grid"] * grid + ["--json"] * as_json
    out = assert_clean(argv, ["--lane", "--element", "--panel", "--index-set", "-o", "--operand"])
    if out is not None and lanes is not None and as_json:   # selected lanes only, and some
        rows = __import__("json").loads(out)
        wave = O.TABLE[name].wave
        asked = set()
        for part in lanes.split(","):
            m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+))?\s*", part)
            assert m, f"--lane {lanes!r} accepted although {part!r} is no lane range"
            lo, hi = int(m[1]), int(m[2] or m[1])
            assert lo <= hi, f"--lane {lanes!r} accepted with an empty range"
            asked |= set(range(lo, hi + 1))
        assert asked <= set(range(wave))
        if element is None:
            assert rows, f"--lane {lanes!r}: no entries"
        assert {r["lane"] for r in rows if "lane" in r} <= asked


dims = st.sampled_from(["-1", "0", "1", "16", "17", "x", "1e3", ""])


@given(m=dims, n=dims, k=st.sampled_from(["-4", "0", "4", "6", "128", "abc"]),
       batch=st.lists(st.sampled_from(["-2", "0", "1", "2", "x"]), max_size=2), seed=st.sampled_from(["0", "-1", "s"]))
def test_cli_gemm_arguments(m, n, k, batch, seed):
    argv = ["gemm", "--builtin", "smfmac_i32_16x16x128_i8", f"-m={m}", f"-n={n}", f"-k={k}", f"--seed={seed}",
            "--no-progress"]
    if batch:
        argv += ["--batch", *batch]
    out = assert_clean(argv, ["-m", "-n", "-k", "--batch", "--seed"])
    if out is not None:  # it ran: on exactly the sizes asked for (no silent default for -k 0)
        assert f"M={m} N={n} K={k} batch={tuple(int(x) for x in batch)}" in out, out[:400]


@given(k=st.sampled_from(["128", "abc", "128:", ":128", "0", "-4", "6", "128:64", "4:2"]),
       size=st.sampled_from(["16", "8x", "x8", "0", "16x16x2", "-4", "ax4"]),
       seeds_=st.sampled_from(["1", "0", "-1", "x"]))
def test_cli_study_arguments(k, size, seeds_, tmp_path_factory):
    out = tmp_path_factory.mktemp("study")
    argv = ["study", f"--k={k}", f"--size={size}", f"--seeds={seeds_}", "--model", "exact", "--format", "fp8",
            "--no-plots", "--no-progress", "--quiet", "--out", str(out)]
    assert_clean(argv, ["--k", "--size", "--seeds"])


# ================================================================ 10. vmap and checks
@given(name=st.sampled_from(FAST_INT), waves=st.sampled_from(edges_profile.sizes([1, 3, 0])), seed=seeds)
def test_builtin_composes_with_vmap(name, waves, seed):
    bt = O.TABLE[name]
    rng = np.random.default_rng(seed)
    regs = [O.matrix_to_regs(bt, w, O.value_codes(getattr(bt, f"{w}_type"), int_values(
        rng, getattr(bt, f"{w}_type"), (waves,) + {"a": (bt.m, bt.kc), "b": (bt.k, bt.n), "c": (bt.m, bt.n)}[w],
        True, "any_bits"))) for w in "abc"]
    idx = rng.integers(0, 2**32, (waves, bt.wave), dtype=np.uint64).astype(np.uint32).view(np.int32)
    one = lambda a, b, c, i: call_builtin(name, a, b, c, i, model="exact")  # noqa: E731
    np.testing.assert_array_equal(np.asarray(jax.vmap(one)(*regs, idx)), np.asarray(one(*regs, idx)))


CHECKED = {
    "pack_a": (lambda x: jwmma.pack_a("smfmac_i32_16x16x128_i8", x), lambda x: jwmma.pack_a(
        "smfmac_i32_16x16x128_i8", x, check=True), (16, 64), (-128, 127)),
    "pack_b": (lambda x: jwmma.pack_b("swmmac_i32_16x16x32_iu4_w32", x), lambda x: jwmma.pack_b(
        "swmmac_i32_16x16x32_iu4_w32", x, check=True), (32, 16), (-8, 15)),
    "pack_index": (lambda x: jwmma.pack_index("smfmac_f32_16x16x64_f16", x), lambda x: jwmma.pack_index(
        "smfmac_f32_16x16x64_f16", x, check=True), (16, 32), (0, 3)),
    "metadata": (kernel.metadata, lambda x: kernel.metadata(x, check=True), (2, 8), (0, 3)),
}


@given(which=st.sampled_from(sorted(CHECKED)), seed=seeds, bad=st.integers(1, 1000), below=st.booleans())
def test_checked_mode_under_jit_gives_the_concrete_message(which, seed, bad, below):
    """Traced inputs in checked mode: the same ValueError message as for concrete inputs."""
    plain, checked, shape, (lo, hi) = CHECKED[which]
    rng = np.random.default_rng(seed)
    x = rng.integers(lo, hi, shape, endpoint=True).astype(np.int32)
    x.reshape(-1)[rng.integers(0, x.size)] = lo - bad if below else hi + bad
    with pytest.raises(ValueError) as concrete:
        plain(x)
    from edges_helpers import assert_jit_reports

    assert_jit_reports(checked, (x,), re.escape(str(concrete.value)))
