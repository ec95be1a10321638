"""`jwmma.gemm`: whole GEMMs as the tiled kernel that issues one builtin per K step.

Every expectation here comes from code that does not go through `gemm`:

* `stepwise`: the spec'd definition of gemm (API.md section 5) written out literally, tile by
  tile and K step by K step, with the public fragment helpers (pack_a/pack_b/pack_c/pack_index)
  and the builtin functions themselves, on operands zero-padded here (A's padding groups:
  values 0, positions (2, 3), as hipSPARSELt pads);
* `exact_float_ref` / `int_ref`: independent scalar references (Python integers, one rounding
  per instruction for the `exact` model, wrap mod 2**32 or saturation for integers);
* `np_compress` / `np_prune`: 2:4 compression / pruning re-implemented in numpy from the
  documented conventions.

Compilation dominates the run time, so the default run covers a representative subset and
the problems reuse the same padded shapes; the sweep over all 25 builtins (default and
`exact` models, every sign/clamp combination) is marked slow.
"""
from __future__ import annotations

import math
import re
import zlib

import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles.scaled import round_scaled, to_scaled_int

#: the 25 sparse builtins of the seed pages (the siblings' gemm: tests/test_siblings_gemm.py)
BUILTINS = {n: s for n, s in jwmma.BUILTINS.items() if s.family in ("RDNA4 SWMMAC", "CDNA4 SMFMAC")}
FLOAT_DT = {"f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
            "bf8": ml_dtypes.float8_e5m2}
ACC_DT = {"f32": np.dtype(np.float32), "f16": np.dtype(np.float16),
          "bf16": np.dtype(ml_dtypes.bfloat16), "i32": np.dtype(np.int32)}
HAS_INF = {"f16": True, "bf16": True, "fp8": False, "bf8": True}
INT_BITS = {"iu8": 8, "i8": 8, "iu4": 4}
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
FP8 = "smfmac_f32_16x16x128_fp8_fp8"


# ===================================================================== independent helpers
def int_range(t: str, signed: bool):
    bits = INT_BITS[t]
    return (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)


def rand_values(rng, t: str, shape, signed=True):
    """Random logical values of element type ``t`` (finite, varied exponents, no zeros)."""
    if t in FLOAT_DT:
        x = rng.standard_normal(shape) * np.exp2(rng.integers(-4, 5, shape))
        x = np.where(x == 0, 1.0, x)
        v = x.astype(FLOAT_DT[t])
        return np.where(v.astype(np.float64) == 0, np.ones((), v.dtype), v).astype(FLOAT_DT[t])
    lo, hi = int_range(t, signed)
    v = rng.integers(lo, hi + 1, shape)
    v = np.where(v == 0, hi, v)
    return v.astype(np.int8 if lo < 0 else np.uint8)


def sparse_a(rng, t: str, shape, signed=True, zero_frac=0.2):
    """A dense 2:4-sparse (*batch, M, K) matrix (K need not be a multiple of 4: the last group
    is cut). About ``zero_frac`` of the kept values are zero, so groups with fewer than two
    non-zeros (hipSPARSELt padding) occur."""
    *lead, m, k = shape
    g = -(-k // 4)
    pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)])
    choice = pairs[rng.integers(0, 6, (*lead, m, g))]  # (..., g, 2)
    vals = rand_values(rng, t, (*lead, m, g, 2), signed)
    vals = np.where(rng.random(vals.shape) < zero_frac, np.zeros((), vals.dtype), vals)
    dense = np.zeros((*lead, m, g, 4), vals.dtype)
    np.put_along_axis(dense, choice, vals, axis=-1)
    return dense.reshape(*lead, m, 4 * g)[..., :k]


def rand_b(rng, t: str, shape, signed=True, zero_frac=0.05):
    v = rand_values(rng, t, shape, signed)
    return np.where(rng.random(shape) < zero_frac, np.zeros((), v.dtype), v)


def rand_c(rng, c_type: str, shape):
    if c_type == "i32":  # a mix of small values and values near the i32 limits
        small = rng.integers(-(2**20), 2**20, shape)
        off = np.where(rng.random(shape) < 0.5, rng.integers(0, 16, shape), rng.integers(0, 2**12, shape))
        edge = np.where(rng.random(shape) < 0.5, INT32_MAX - off, INT32_MIN + off)
        return np.where(rng.random(shape) < 0.5, small, edge).astype(np.int32)
    x = rng.standard_normal(shape) * np.exp2(rng.integers(-3, 4, shape))
    x = np.where(rng.random(shape) < 0.05, -0.0, x)
    return x.astype(ACC_DT[c_type])


def is_nonzero(x):
    x = np.asarray(x)
    if np.issubdtype(x.dtype, np.integer):
        return x != 0
    f = x.astype(np.float64)
    return (f != 0) | np.isnan(f)


def np_compress(dense):
    """Numpy 2:4 compression with the documented conventions (BUILTINS.md section 5,
    `jwmma.sparsity`): the two non-zeros in order; a group with none: positions (2, 3);
    a lone non-zero at p < 3: (p, 3) with a zero second value; at 3: (2, 3) with a zero first
    value. K is zero-padded to a multiple of 4 first. Padding values are +0."""
    dense = np.asarray(dense)
    k = dense.shape[-1]
    k4 = -(-k // 4) * 4
    if k4 != k:
        dense = np.concatenate([dense, np.zeros(dense.shape[:-1] + (k4 - k,), dense.dtype)], -1)
    g = dense.reshape(*dense.shape[:-1], k4 // 4, 4)
    nz = is_nonzero(g)
    count = nz.sum(-1)
    assert count.max(initial=0) <= 2, "test data must be 2:4 sparse"
    first = np.argmax(nz, -1)
    second = np.argmax(nz & (np.cumsum(nz, -1) == 2), -1)
    p0 = np.where(count == 2, first, np.where((count == 1) & (first < 3), first, 2))
    p1 = np.where(count == 2, second, 3)
    zero = np.zeros((), g.dtype)
    v0 = np.take_along_axis(g, p0[..., None], -1)[..., 0]
    v1 = np.take_along_axis(g, p1[..., None], -1)[..., 0]
    v0 = np.where((count == 0) | ((count == 1) & (first == 3)), zero, v0)
    v1 = np.where((count == 0) | ((count == 1) & (first < 3)), zero, v1)
    vals = np.stack([v0, v1], -1).reshape(*g.shape[:-2], k4 // 2).astype(dense.dtype)
    pos = np.stack([p0, p1], -1).reshape(vals.shape).astype(np.int32)
    return vals, pos


def np_prune(a):
    """Keep the 2 largest |values| of every 4 (ties: lower position; NaN the largest)."""
    a = np.asarray(a)
    g = a.reshape(*a.shape[:-1], -1, 4)
    mag = np.abs(g.astype(np.float64))
    mag = np.where(np.isnan(mag), np.inf, mag)
    out = np.zeros_like(g)
    # stable sort on -|x| keeps the lower position first among ties
    order = np.argsort(-mag, axis=-1, kind="stable")[..., :2]
    np.put_along_axis(out, order, np.take_along_axis(g, order, -1), -1)
    return out.reshape(a.shape)


def assert_same_bits(got, want, what=""):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (what, got.shape, want.shape)
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if np.issubdtype(got.dtype, np.integer):
        bad = got != want
        gb, wb = got, want
    else:
        u = {4: np.uint32, 2: np.uint16}[got.dtype.itemsize]
        gn, wn = np.isnan(got.astype(np.float32)), np.isnan(want.astype(np.float32))
        gb, wb = got.view(u), want.view(u)
        bad = (gn != wn) | (~gn & (gb != wb))
    if bad.any():
        i = tuple(int(x) for x in np.argwhere(bad)[0])
        raise AssertionError(
            f"{what}: {int(bad.sum())} of {bad.size} outputs differ; first at {i}: got "
            f"{got[i]!r} ({int(gb[i]):#x}), want {want[i]!r} ({int(wb[i]):#x})"
        )


def index_kw(spec, index_set):
    """gemm keyword selecting index set ``index_set``."""
    if spec.arch == "gfx950":
        return {"abid": index_set}  # cbsz = 0: abid[0] picks the 16-bit set (8-bit: one set)
    return {"index_key": index_set}


def last_index_set(spec):
    return len(spec.index_sets) - 1


# ============================================================ the spec'd definition of gemm
def _call(spec, a_r, b_r, c_r, idx, *, model, a_neg, b_neg, clamp, index_set):
    fn = getattr(jwmma, spec.name)
    if spec.arch == "gfx950":
        return fn(a_r, b_r, c_r, idx, 0, index_set, model=model)
    if spec.signed_choice:
        return fn(a_neg, a_r, b_neg, b_r, c_r, idx, clamp, model=model, index_key=index_set)
    return fn(a_r, b_r, c_r, idx, model=model, index_key=index_set)


def pad_operands(spec, vals, pos, b, c):
    """Zero-pad compressed A (values, positions), B and C to whole tiles / K steps; A's
    padding groups select positions (2, 3). Returns padded arrays, broadcast to the batch."""
    vals, pos, b = np.asarray(vals), np.asarray(pos), np.asarray(b)
    m_dim, kc_in = vals.shape[-2:]
    k_dim, n_dim = b.shape[-2:]
    assert 2 * kc_in >= k_dim and kc_in % 2 == 0
    mp = -(-m_dim // spec.m) * spec.m
    np_ = -(-n_dim // spec.n) * spec.n
    kp = -(-max(k_dim, 2 * kc_in) // spec.k) * spec.k
    if c is None:
        c = np.zeros((m_dim, n_dim), ACC_DT[spec.c_type])
    c = np.asarray(c)
    batch = np.broadcast_shapes(vals.shape[:-2], b.shape[:-2], c.shape[:-2])
    vp = np.zeros(batch + (mp, kp // 2), vals.dtype)
    vp[..., :m_dim, :kc_in] = vals
    pp = np.broadcast_to(np.tile(np.array([2, 3], np.int32), kp // 4), batch + (mp, kp // 2)).copy()
    pp[..., :m_dim, :kc_in] = pos
    bp = np.zeros(batch + (kp, np_), b.dtype)
    bp[..., :k_dim, :n_dim] = b
    cp = np.zeros(batch + (mp, np_), c.dtype)
    cp[..., :m_dim, :n_dim] = c
    return vp, pp, bp, cp, batch, (m_dim, n_dim)


def stepwise(name, vals, pos, b, c=None, *, model=None, a_neg=True, b_neg=True, clamp=False,
             index_set=0):
    """D of the tiled kernel, literally: for every batch entry, output tile and K step (in
    order) one builtin call on packed fragments, whose D is the next step's C."""
    spec = BUILTINS[name]
    vp, pp, bp, cp, batch, (m_dim, n_dim) = pad_operands(spec, vals, pos, b, c)
    m, n, k, kc = spec.m, spec.n, spec.k, spec.kc
    out = np.empty_like(cp)
    for bi in np.ndindex(*batch):
        for ti in range(cp.shape[-2] // m):
            rows = slice(ti * m, (ti + 1) * m)
            for tj in range(cp.shape[-1] // n):
                cols = slice(tj * n, (tj + 1) * n)
                acc = jwmma.pack_c(name, cp[bi][rows, cols])
                for s in range(bp.shape[-2] // k):
                    ks, kcs = slice(s * k, (s + 1) * k), slice(s * kc, (s + 1) * kc)
                    a_r = jwmma.pack_a(name, vp[bi][rows, kcs])
                    idx = jwmma.pack_index(name, pp[bi][rows, kcs], index_set)
                    b_r = jwmma.pack_b(name, bp[bi][ks, cols])
                    acc = _call(spec, a_r, b_r, acc, idx, model=model, a_neg=a_neg, b_neg=b_neg,
                                clamp=clamp, index_set=index_set)
                out[bi][rows, cols] = np.asarray(jwmma.unpack_c(name, acc))
    return out[..., :m_dim, :n_dim]


# ================================================================ exact scalar references
# (to_scaled_int, round_scaled: tests/oracles/scaled.py)


def sel_rows(pos):
    """Dense B row of every compressed A element: 4*(c//2) + pos."""
    kc = pos.shape[-1]
    return 4 * (np.arange(kc) // 2) + pos


def exact_float_ref(name, vals, pos, b, c, per_step=True):
    """The `exact` model through the tiled kernel: per output and K step, the exact sum of
    the step's products and the running C, rounded once to the accumulator format. Finite
    data only. Python integers, one output at a time. ``per_step=False``: one rounding of
    the whole sum instead (what a single instruction over all of K would give)."""
    spec = BUILTINS[name]
    vp, pp, bp, cp, batch, (m_dim, n_dim) = pad_operands(spec, vals, pos, b, c)
    a64, b64 = vp.astype(np.float64), bp.astype(np.float64)
    c64 = cp.astype(np.float64)
    out = np.zeros(batch + (m_dim, n_dim), np.float64)
    kc, steps = spec.kc, bp.shape[-2] // spec.k
    if not per_step:
        kc, steps = kc * steps, 1
    for bi in np.ndindex(*batch):
        rows = sel_rows(pp[bi])
        for i in range(m_dim):
            prods = a64[bi][i][:, None] * b64[bi][rows[i], :n_dim]  # (Kc, N), exact in f64
            p_int = [[to_scaled_int(float(x)) for x in col] for col in prods.T]
            for j in range(n_dim):
                acc = float(c64[bi][i, j])
                for s in range(steps):
                    part = prods[s * kc:(s + 1) * kc, j]
                    t = sum(p_int[j][s * kc:(s + 1) * kc]) + to_scaled_int(acc)
                    if t == 0:  # IEEE sum rule: -0 only if every term is -0
                        neg = bool(np.all(np.signbit(part))) and math.copysign(1.0, acc) < 0
                        acc = -0.0 if neg else 0.0
                    else:
                        acc = round_scaled(t, spec.c_type)
                out[bi][i, j] = acc
    return out.astype(ACC_DT[spec.c_type])


def int_ref(name, vals, pos, b, c, *, a_neg=True, b_neg=True, clamp=False, staging="final"):
    """Integer builtins through the tiled kernel in int64: without clamp the i32 result wraps;
    with clamp it saturates after every instruction ('final') or after each of the two
    stages of an instruction ('staged': the first and the second half of its compressed
    positions, the rule GoC's gfx1201 digests fix for the K = 64 iu4 row too, where the
    interleaved (ck // 8) % 2 split fails them: tests/test_integer_clamp_hardware.py)."""
    spec = BUILTINS[name]
    vp, pp, bp, cp, batch, (m_dim, n_dim) = pad_operands(spec, vals, pos, b, c)
    bits = INT_BITS[spec.a_type]

    def ext(x, signed):
        x = x.astype(np.int64) & ((1 << bits) - 1)
        return np.where(signed & (x >= 1 << (bits - 1)), x - (1 << bits), x)

    av, bv = ext(vp, a_neg), ext(bp, b_neg)
    rows = sel_rows(pp)  # (..., M, Kc)
    bsel = np.take_along_axis(bv[..., None, :, :], rows[..., None], axis=-2)  # (..., M, Kc, N)
    prods = av[..., None] * bsel
    acc = cp.astype(np.int64)
    kc = spec.kc
    sat = lambda x: np.clip(x, INT32_MIN, INT32_MAX)  # noqa: E731
    for s in range(bp.shape[-2] // spec.k):
        p = prods[..., s * kc:(s + 1) * kc, :]
        if not clamp:
            acc = acc + p.sum(-2)
        elif staging == "final":
            acc = sat(acc + p.sum(-2))
        else:
            stage = (np.arange(kc) >= kc - kc // 2).astype(int)
            acc = sat(sat(acc + p[..., stage == 0, :].sum(-2)) + p[..., stage == 1, :].sum(-2))
    if not clamp:
        acc = (acc + 2**31) % 2**32 - 2**31
    return acc[..., :m_dim, :n_dim].astype(np.int32)


# ======================================================================= shared problems
def odd_shape(spec, dense: bool):
    """M = tile + 3, N = tile - 5, K = 1.5 instruction steps + a few (two K steps); dense
    inputs get K = 2 mod 4 (a cut last group), compressed ones a whole number of groups."""
    return spec.m + 3, spec.n - 5, spec.k * 3 // 2 + (6 if dense else 4)


def make_problem(name, *, seed, a_neg=True, b_neg=True, dense=True, batch=(2,), specials=False):
    """(a as given to gemm, (values, positions) for the reference, b, c)."""
    spec = BUILTINS[name]
    rng = np.random.default_rng(seed)
    m, n, k = odd_shape(spec, dense)
    a = sparse_a(rng, spec.a_type, batch + (m, k), a_neg)
    b = rand_b(rng, spec.b_type, batch + (k, n), b_neg)
    c = rand_c(rng, spec.c_type, batch + (m, n))
    if specials and not spec.integer:
        nan = np.array(np.nan, b.dtype)
        b[(0,) * len(batch) + (1, 2)] = nan  # in a pruned or a selected row, depending on A
        b[(0,) * len(batch) + (k - 1, 0)] = nan
        if HAS_INF[spec.b_type]:
            b[(-1,) * len(batch) + (5, n - 1)] = np.array(np.inf, b.dtype)
            b[(-1,) * len(batch) + (9, n - 2)] = np.array(-np.inf, b.dtype)
        c[(-1,) * len(batch) + (m - 1, 3)] = np.array(np.inf, c.dtype)
    vals, pos = np_compress(a)
    return (a if dense else (vals, pos)), (vals, pos), b, c


# Sign/clamp flags the default-run tests share for the RDNA4 iu8 builtin (one compilation)
IU8 = "swmmac_i32_16x16x32_iu8_w32"
SHARED_KW = {IU8: dict(a_neg=False, b_neg=True, clamp=True)}


def shared_kw(name):
    return dict(SHARED_KW.get(name, {}))


# ============================================= 1. gemm == step-by-step builtin calls
FAST_STEPWISE = {
    ("smfmac_f32_16x16x128_fp8_fp8", None),
    ("swmmac_f32_16x16x32_f16_w32", None),
    ("swmmac_i32_16x16x32_iu8_w32", None, False, True, True),
    ("smfmac_i32_16x16x128_i8", None),
}


def _stepwise_cases():
    cases = []
    for i, (name, spec) in enumerate(BUILTINS.items()):
        dense = i % 2 == 0
        models = [None] if spec.default_model == "exact" else [None, "exact"]
        for model in models:
            if spec.signed_choice:
                for a_neg in (True, False):
                    for b_neg in (True, False):
                        for clamp in (False, True):
                            key = (name, model, a_neg, b_neg, clamp)
                            marks = () if key in FAST_STEPWISE else (pytest.mark.slow,)
                            cases.append(pytest.param(name, model, a_neg, b_neg, clamp, dense,
                                                      marks=marks, id=f"{name}-{model}-{a_neg:d}{b_neg:d}{clamp:d}"))
            else:
                marks = () if (name, model) in FAST_STEPWISE else (pytest.mark.slow,)
                cases.append(pytest.param(name, model, True, True, False, dense, marks=marks,
                                          id=f"{name}-{model}"))
    return cases


@pytest.mark.parametrize("name,model,a_neg,b_neg,clamp,dense", _stepwise_cases())
def test_gemm_equals_stepwise_builtin_calls(name, model, a_neg, b_neg, clamp, dense):
    spec = BUILTINS[name]
    a, (vals, pos), b, c = make_problem(name, seed=zlib.crc32(name.encode()) % 1000, a_neg=a_neg, b_neg=b_neg,
                                        dense=dense, specials=True)
    iset = last_index_set(spec)
    kw = dict(a_neg=a_neg, b_neg=b_neg, clamp=clamp) if spec.signed_choice else {}
    got = jwmma.gemm(a, b, c, builtin=name, model=model, **kw, **index_kw(spec, iset))
    want = stepwise(name, vals, pos, b, c, model=model, a_neg=a_neg, b_neg=b_neg, clamp=clamp,
                    index_set=iset)
    assert got.shape == (2,) + c.shape[-2:]
    assert_same_bits(got, want, f"{name} model={model}")
    if not spec.integer:
        assert np.isnan(np.asarray(want, np.float32)).any()  # the specials did reach outputs


def test_stepwise_cases_cover_every_builtin():
    names = {p.values[0] for p in _stepwise_cases()}
    assert names == set(BUILTINS) and len(names) == 25


# =============================================== 2. register path == matrix path
REGISTER_CASES = [
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", None, {}, id="fp8-cdna3"),
    pytest.param("swmmac_i32_16x16x64_iu4_w32", None, dict(a_neg=False, b_neg=True, clamp=True), id="iu4x64-staged"),
    pytest.param("swmmac_f32_16x16x32_f16_w32", None, {}, id="f16-gfx12_dot4", marks=pytest.mark.slow),
    pytest.param("swmmac_f16_16x16x32_f16_w32", None, {}, id="f16out-gfx12_dot4", marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x64_bf16", "exact", {}, id="bf16-exact", marks=pytest.mark.slow),
    pytest.param("swmmac_bf16_16x16x32_bf16_w32", "exact", {}, id="bf16out-exact", marks=pytest.mark.slow),
    pytest.param("smfmac_f32_32x32x32_f16", None, {}, id="32x32-f16-cdna3", marks=pytest.mark.slow),
    pytest.param("smfmac_i32_32x32x64_i8", None, {}, id="32x32-i8", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name,model,kw", REGISTER_CASES)
def test_register_path_equals_matrix_path(name, model, kw):
    spec = BUILTINS[name]
    a, _, b, c = make_problem(name, seed=7, a_neg=kw.get("a_neg", True), b_neg=kw.get("b_neg", True),
                              dense=True, specials=True)
    for iset in range(len(spec.index_sets)):  # the index set changes nothing numerically
        args = dict(builtin=name, model=model, **kw, **index_kw(spec, iset))
        for cc in (c, None):
            want = jwmma.gemm(a, b, cc, path="matrix", **args)
            got = jwmma.gemm(a, b, cc, path="registers", **args)
            assert_same_bits(got, want, f"{name} index set {iset} c={'None' if cc is None else 'given'}")


# ================================== 3. exact gemm == independent exact references
FAST_EXACT = {"smfmac_f32_16x16x128_fp8_fp8"}


@pytest.mark.parametrize("name", [
    pytest.param(n, marks=() if n in FAST_EXACT else (pytest.mark.slow,))
    for n, s in BUILTINS.items() if not s.integer
])
def test_exact_float_equals_scalar_reference(name):
    spec = BUILTINS[name]
    a, (vals, pos), b, c = make_problem(name, seed=11, dense=True)
    got = jwmma.gemm(a, b, c, builtin=name, model="exact")
    want = exact_float_ref(name, vals, pos, b, c)
    assert_same_bits(got, want, f"{name} exact")
    assert np.asarray(got).dtype == ACC_DT[spec.c_type]
    # one rounding per instruction, not per GEMM: on these data the single rounding of the
    # whole sum differs somewhere, so the test does see the K steps
    once = exact_float_ref(name, vals, pos, b, c, per_step=False)
    assert (np.asarray(once).view(np.uint32 if once.itemsize == 4 else np.uint16)
            != want.view(np.uint32 if want.itemsize == 4 else np.uint16)).any()


def test_round_scaled_reference():
    """The reference's rounding: nearest even, gradual underflow, overflow to Inf."""
    assert round_scaled(to_scaled_int(1.0) + 1, "f32") == 1.0
    assert round_scaled(to_scaled_int(1.0) + to_scaled_int(2.0**-24), "f32") == 1.0  # tie -> even
    assert round_scaled(to_scaled_int(1.0) + to_scaled_int(2.0**-24) + 1, "f32") == 1.0 + 2.0**-23
    assert round_scaled(to_scaled_int(65520.0), "f16") == math.inf
    assert round_scaled(to_scaled_int(65519.0), "f16") == 65504.0
    assert round_scaled(to_scaled_int(2.0**-150), "f32") == 0.0  # tie to even (zero)
    assert round_scaled(to_scaled_int(3 * 2.0**-151), "f32") == 2.0**-149


INT_EXACT_CASES = [
    pytest.param("swmmac_i32_16x16x32_iu4_w32", "exact", False, True, True, id="iu4-exact-clamp"),
    pytest.param("swmmac_i32_16x16x32_iu4_w32", None, False, False, True, id="iu4-staged-clamp"),
    pytest.param("swmmac_i32_16x16x32_iu4_w32", None, True, False, False, id="iu4-wrap"),
    pytest.param("smfmac_i32_16x16x128_i8", None, True, True, False, id="i8-wrap"),
    pytest.param("swmmac_i32_16x16x32_iu8_w32", "exact", True, True, True, id="iu8-exact-clamp", marks=pytest.mark.slow),
    pytest.param("swmmac_i32_16x16x32_iu8_w32", None, False, False, True, id="iu8-staged-clamp", marks=pytest.mark.slow),
    pytest.param("swmmac_i32_16x16x64_iu4_w32", None, True, True, True, id="iu4x64-staged-clamp", marks=pytest.mark.slow),
    pytest.param("swmmac_i32_16x16x64_iu4_w32", "exact", False, True, False, id="iu4x64-exact-wrap", marks=pytest.mark.slow),
    pytest.param("smfmac_i32_32x32x64_i8", None, True, True, False, id="i8-32x32-wrap", marks=pytest.mark.slow),
]


@pytest.mark.parametrize("name,model,a_neg,b_neg,clamp", INT_EXACT_CASES)
def test_integer_gemm_equals_int64_reference(name, model, a_neg, b_neg, clamp):
    spec = BUILTINS[name]
    a, (vals, pos), b, c = make_problem(name, seed=13, a_neg=a_neg, b_neg=b_neg, dense=True)
    kw = dict(a_neg=a_neg, b_neg=b_neg, clamp=clamp) if spec.signed_choice else {}
    got = np.asarray(jwmma.gemm(a, b, c, builtin=name, model=model, **kw))
    staging = "staged" if (model or spec.default_model) == "staged_clamp" else "final"
    want = int_ref(name, vals, pos, b, c, a_neg=a_neg, b_neg=b_neg, clamp=clamp, staging=staging)
    assert_same_bits(got, want, name)
    if not clamp:  # wrap: order-free, equals one int64 matmul mod 2**32
        a64 = np.asarray(a).astype(np.int64)
        if not a_neg:
            a64 &= (1 << INT_BITS[spec.a_type]) - 1
        b64 = np.asarray(b).astype(np.int64)
        if not b_neg:
            b64 &= (1 << INT_BITS[spec.b_type]) - 1
        full = (a64 @ b64 + c.astype(np.int64) + 2**31) % 2**32 - 2**31
        assert np.array_equal(got, full)
    else:  # the data do saturate somewhere, or the test would not see clamp at all
        assert ((got == INT32_MAX) | (got == INT32_MIN)).any()


def test_staged_and_final_clamp_differ_where_documented():
    """NUMERICS.md section 4 example: C = 2**31 - 101, stage sums +16129*8 and -16129*8 ->
    single (final) clamp 2147483547, staged clamp 2147354615."""
    name = "swmmac_i32_16x16x32_iu8_w32"
    a = np.zeros((1, 32), np.int8)
    b = np.zeros((32, 1), np.int8)
    # compressed positions 0..7 (stage 0) = groups 0..3; 8..15 (stage 1) = groups 4..7
    for grp in range(8):
        sgn = 1 if grp < 4 else -1
        a[0, 4 * grp], a[0, 4 * grp + 1] = 127, 127
        b[4 * grp, 0], b[4 * grp + 1, 0] = sgn * 127, sgn * 127
    c = np.array([[2**31 - 101]], np.int32)
    kw = dict(builtin=name, a_neg=True, b_neg=True, clamp=True)
    assert int(jwmma.gemm(a, b, c, model="exact", **kw)[0, 0]) == 2147483547
    assert int(jwmma.gemm(a, b, c, **kw)[0, 0]) == 2147354615
    assert int(jwmma.gemm(a, b, c, **{**kw, "clamp": False})[0, 0]) == 2**31 - 101


# ================================================================== 4. padding
@pytest.mark.parametrize("name,model", [
    ("smfmac_f32_16x16x128_fp8_fp8", None),
    ("swmmac_i32_16x16x32_iu8_w32", None),
    pytest.param("swmmac_f32_16x16x32_f16_w32", None, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_32x32x64_bf8_fp8", None, marks=pytest.mark.slow),
    pytest.param("swmmac_bf16_16x16x32_bf16_w32", None, marks=pytest.mark.slow),
])
def test_odd_shape_equals_zero_embedded_problem(name, model):
    """An odd problem gives the cropped result of the same problem written into a larger
    zero matrix: to the whole tiles (same K steps), and for integers also with extra tiles
    and extra all-zero K steps."""
    spec = BUILTINS[name]
    kw = dict(builtin=name, model=model, **shared_kw(name))
    a, _, b, c = make_problem(name, seed=17, a_neg=kw.get("a_neg", True), b_neg=kw.get("b_neg", True))
    m, k = a.shape[-2:]
    n = b.shape[-1]
    got = jwmma.gemm(a, b, c, **kw)
    mp, np_, kp = -(-m // spec.m) * spec.m, -(-n // spec.n) * spec.n, -(-k // spec.k) * spec.k
    # floats: to the whole tiles; integers (exact arithmetic): extra tiles and zero K steps
    sizes = [(mp + spec.m + 1, np_ + 2 * spec.n, kp + spec.k + 8)] if spec.integer else [(mp, np_, kp)]
    for mb, nb, kb in sizes:
        a_big = np.zeros(a.shape[:-2] + (mb, kb), a.dtype)
        a_big[..., :m, :k] = a
        b_big = np.zeros(b.shape[:-2] + (kb, nb), b.dtype)
        b_big[..., :k, :n] = b
        c_big = np.zeros(c.shape[:-2] + (mb, nb), c.dtype)
        c_big[..., :m, :n] = c
        big = np.asarray(jwmma.gemm(a_big, b_big, c_big, **kw))
        assert_same_bits(got, big[..., :m, :n], f"{name} embedded in {(mb, nb, kb)}")


def test_dense_compression_convention_decides_selected_b_rows():
    """Groups with fewer than two non-zeros select B rows by hipSPARSELt's convention: none
    -> (2, 3); a lone non-zero at p < 3 -> (p, 3); at 3 -> (2, 3). A NaN in a B row that is
    not selected must not leak; one that is selected (times a stored zero) gives NaN. Same
    bits as the step-by-step reference on the numpy-compressed operands."""
    name = FP8
    spec = BUILTINS[name]
    m, n, k = odd_shape(spec, dense=True)
    a = np.zeros((2, m, k), ml_dtypes.float8_e4m3fn)
    b = np.ones((2, k, n), ml_dtypes.float8_e4m3fn)
    nan = np.array(np.nan, b.dtype)
    one = np.array(1.0, a.dtype)
    # row 0: empty group 0, NaN in B rows 0, 1 (not selected) -> finite
    b[:, 0:2, 0] = nan
    # row 1: lone non-zero at position 1 of group 1 -> (1, 3); NaN in row 4+2 (not selected)
    a[:, 1, 5] = one
    b[:, 6, 1] = nan
    # row 2: lone non-zero at position 3 of group 2 -> (2, 3); NaN in rows 8, 9 (not selected)
    a[:, 2, 11] = one
    b[:, 8:10, 2] = nan
    # row 3: lone non-zero at position 0 of group 3 -> (0, 3); NaN in row 12+3 IS selected
    a[:, 3, 12] = one
    b[:, 15, 3] = nan
    got = np.asarray(jwmma.gemm(a, b, builtin=name), np.float32)
    assert np.isfinite(got[:, 0, 0]).all() and np.isfinite(got[:, 1, 1]).all()
    assert np.isfinite(got[:, 2, 2]).all() and np.isnan(got[:, 3, 3]).all()
    vals, pos = np_compress(a)
    assert_same_bits(got, stepwise(name, vals, pos, b, None).astype(np.float32), "convention")


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x128_fp8_fp8", "swmmac_i32_16x16x32_iu8_w32"])
def test_values_positions_input_equals_dense_input(name):
    spec = BUILTINS[name]
    kw = dict(builtin=name, **shared_kw(name))
    a, (vals, pos), b, c = make_problem(name, seed=19, a_neg=kw.get("a_neg", True), b_neg=kw.get("b_neg", True))
    want = jwmma.gemm(a, b, c, **kw)
    # K of the problem is 2 mod 4: the compressed form covers the zero-padded K
    b_pad = np.concatenate([b, np.zeros(b.shape[:-2] + (2, b.shape[-1]), b.dtype)], -2)
    assert_same_bits(jwmma.gemm((vals, pos), b_pad, c, **kw), want, "numpy compressed")
    jv, jp = jwmma.compress_2_4(np.concatenate([a, np.zeros(a.shape[:-1] + (2,), a.dtype)], -1))
    assert_same_bits(jwmma.gemm((jv, jp), b_pad, c, **kw), want, "compress_2_4")
    # and the dense matrix decompressed from the pair
    dense = np.asarray(jwmma.decompress_2_4(vals, pos))
    assert_same_bits(jwmma.gemm(dense, b_pad, c, **kw), want, "decompressed")
    assert want.shape == (2, spec.m + 3, spec.n - 5)


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x128_fp8_fp8", "swmmac_i32_16x16x32_iu8_w32"])
def test_prune_true_equals_pruning_first(name):
    spec = BUILTINS[name]
    kw = dict(builtin=name, **shared_kw(name))
    rng = np.random.default_rng(23)
    m, n, k = odd_shape(spec, dense=False)
    a = rand_values(rng, spec.a_type, (2, m, k), kw.get("a_neg", True))
    a[0, 0, :4] = a[0, 0, 0]  # ties: the lower positions are kept
    b = rand_b(rng, spec.b_type, (2, k, n), kw.get("b_neg", True))
    c = rand_c(rng, spec.c_type, (2, m, n))
    got = jwmma.gemm(a, b, c, prune=True, **kw)
    pruned = np_prune(a)
    assert_same_bits(got, jwmma.gemm(pruned, b, c, **kw), "numpy prune")
    assert_same_bits(got, jwmma.gemm(np.asarray(jwmma.prune_2_4(a)), b, c, **kw), "prune_2_4")
    # prune=True on a matrix that is already 2:4 changes nothing
    assert_same_bits(jwmma.gemm(pruned, b, c, prune=True, **kw), got, "prune idempotent")


def test_unpruned_a_raises_naming_row_and_group():
    name = "smfmac_f32_16x16x128_fp8_fp8"
    rng = np.random.default_rng(29)
    a = sparse_a(rng, "fp8", (2, 19, 134))
    b = rand_b(rng, "fp8", (134, 11))
    a[1, 5, 12:16] = np.array([1, 2, 3, 0], a.dtype)  # group 3 of row (1, 5): three non-zeros
    a[1, 7, 0:4] = np.array([1, 2, 3, 4], a.dtype)  # a later offender
    with pytest.raises(ValueError, match=r"not 2:4 sparse.*row \(1, 5\) group 3") as e:
        jwmma.gemm(a, b, builtin=name)
    assert "prune" in str(e.value)
    # unbatched: the row is a plain index
    a2 = sparse_a(rng, "fp8", (19, 134))
    a2[3, 128:132] = np.array([1, 1, 1, 0], a2.dtype)
    a2[4, 0:4] = np.array([1, 1, 1, 1], a2.dtype)
    with pytest.raises(ValueError, match=r"row 3 group 32"):
        jwmma.gemm(a2, b, builtin=name)
    # integers too
    ai = np.zeros((19, 8), np.int8)
    ai[2, 4:8] = [1, -1, 1, 0]
    bi = np.ones((8, 11), np.int8)
    with pytest.raises(ValueError, match=r"row 2 group 1"):
        jwmma.gemm(ai, bi, builtin="smfmac_i32_16x16x128_i8")


# ================================================================== 5. errors
def _fp8(shape, rng=np.random.default_rng(0)):
    return rand_values(rng, "fp8", shape)


def _small():
    rng = np.random.default_rng(31)
    return sparse_a(rng, "fp8", (19, 36)), _fp8((36, 11)), rand_c(rng, "f32", (19, 11))


def test_error_mismatched_k():
    a, b, _ = _small()
    with pytest.raises(ValueError, match=r"disagree on K.*K=36.*\(40, 11\)"):
        jwmma.gemm(a, _fp8((40, 11)), builtin=FP8)
    vals, pos = np_compress(a)
    with pytest.raises(ValueError, match=r"K"):
        jwmma.gemm((vals, pos), _fp8((32, 11)), builtin=FP8)


@pytest.mark.parametrize("name,bad", [
    (FP8, np.float32), (FP8, ml_dtypes.float8_e5m2), ("smfmac_f32_16x16x64_f16", np.float32),
    ("smfmac_f32_16x16x64_bf16", np.float16), ("swmmac_f32_16x16x32_bf16_w32", np.int16),
    ("swmmac_f32_16x16x32_bf8_fp8_w32", ml_dtypes.float8_e5m2),
])
def test_error_wrong_b_dtype_has_working_conversion_hint(name, bad):
    spec = BUILTINS[name]
    rng = np.random.default_rng(37)
    a = sparse_a(rng, spec.a_type, (3, spec.k))
    b_ok = rand_values(rng, spec.b_type, (spec.k, 5))
    b = b_ok.astype(np.float64).astype(bad)
    with pytest.raises(TypeError) as e:
        jwmma.gemm(a, b, builtin=name)
    msg = str(e.value)
    want = np.dtype(FLOAT_DT[spec.b_type]).name
    assert msg.startswith("b ") and want in msg and np.dtype(bad).name in msg and "astype" in msg
    # every conversion the hint suggests must run and give an acceptable b
    import jax.numpy as jnp

    hints = re.findall(r"(b\.astype\([\w.]+\)|jnp\.asarray\(b, [\w.]+\)|jwmma\.numerics\.cast\(b, [\w.]+\))", msg)
    assert hints, msg
    for h in hints:
        conv = eval(h, {"b": b, "np": np, "jnp": jnp, "ml_dtypes": ml_dtypes, "jwmma": jwmma})  # noqa: S307
        assert np.dtype(conv.dtype) == np.dtype(FLOAT_DT[spec.b_type]), h


def test_error_wrong_a_dtype():
    a, b, _ = _small()
    with pytest.raises(TypeError, match=r"^a must be float8_e4m3fn.*float16"):
        jwmma.gemm(a.astype(np.float16), b, builtin=FP8)
    with pytest.raises(TypeError, match=r"a must hold integers"):
        jwmma.gemm(a.astype(np.float32), np.ones((36, 11), np.int8), builtin="smfmac_i32_16x16x128_i8")
    with pytest.raises(TypeError, match=r"b must hold integers"):
        jwmma.gemm(np.zeros((3, 8), np.int8), np.ones((8, 11), np.float32), builtin="smfmac_i32_16x16x128_i8")
    with pytest.raises(ValueError, match=r"a must hold values in \[-128, 127\]"):
        jwmma.gemm(np.array([[200, 0, 0, 0, 0, 0, 0, 0]], np.int16), np.ones((8, 11), np.int8),
                   builtin="smfmac_i32_16x16x128_i8")
    # int8 says signed: iu4 values in [-8, 7]; uint8 says unsigned: [0, 15] (issue #10 item 2)
    with pytest.raises(ValueError, match=r"b must hold values in \[-8, 7\]"):
        jwmma.gemm(np.zeros((3, 8), np.int8), np.full((8, 11), 16, np.int8), builtin="swmmac_i32_16x16x32_iu4_w32")
    with pytest.raises(ValueError, match=r"b must hold values in \[0, 15\]"):
        jwmma.gemm(np.zeros((3, 8), np.int8), np.full((8, 11), 16, np.uint8), builtin="swmmac_i32_16x16x32_iu4_w32")


def test_error_wrong_c():
    a, b, c = _small()
    with pytest.raises(TypeError, match=r"^c must be float32.*float16.*astype"):
        jwmma.gemm(a, b, c.astype(np.float16), builtin=FP8)
    with pytest.raises(TypeError, match=r"^c must be bfloat16.*ml_dtypes.bfloat16"):
        jwmma.gemm(sparse_a(np.random.default_rng(1), "bf16", (3, 32)), rand_values(np.random.default_rng(2), "bf16", (32, 5)),
                   np.zeros((3, 5), np.float32), builtin="swmmac_bf16_16x16x32_bf16_w32")
    with pytest.raises(TypeError, match=r"^c must be int32"):
        jwmma.gemm(np.zeros((3, 8), np.int8), np.ones((8, 11), np.int8), np.zeros((3, 11), np.int64),
                   builtin="smfmac_i32_16x16x128_i8")
    with pytest.raises(ValueError, match=r"^c must be \(\*batch, M, N\) = \(\*batch, 19, 11\), got \(19, 12\)"):
        jwmma.gemm(a, b, np.zeros((19, 12), np.float32), builtin=FP8)
    with pytest.raises(ValueError, match=r"^c must be"):
        jwmma.gemm(a, b, np.zeros((11,), np.float32), builtin=FP8)


def test_error_unknown_builtin_model_path():
    a, b, _ = _small()
    with pytest.raises(ValueError, match=r"unknown builtin 'smfmac_f32_16x16x128_fp8'.*did you mean"):
        jwmma.gemm(a, b, builtin="smfmac_f32_16x16x128_fp8")
    with pytest.raises(TypeError, match=r"builtin name must be a str"):
        jwmma.gemm(a, b, builtin=3)
    with pytest.raises(ValueError, match=r"unknown model 'cdna4'.*exact"):
        jwmma.gemm(a, b, builtin=FP8, model="cdna4")
    with pytest.raises(ValueError, match=r"does not apply to integer builtins"):
        jwmma.gemm(np.zeros((3, 8), np.int8), np.ones((8, 11), np.int8), builtin="smfmac_i32_16x16x128_i8", model="cdna3")
    with pytest.raises(ValueError, match=r"path must be one of \('matrix', 'registers'\), got 'regs'"):
        jwmma.gemm(a, b, builtin=FP8, path="regs")
    with pytest.raises(TypeError, match=r"model must be a name or a jwmma.models.Model"):
        jwmma.gemm(a, b, builtin=FP8, model=3)


def test_error_batch_dims_do_not_broadcast():
    rng = np.random.default_rng(41)
    a = sparse_a(rng, "fp8", (2, 19, 36))
    b = _fp8((3, 36, 11))
    with pytest.raises(ValueError, match=r"batch dims of a \(2,\), b \(3,\) and c \(\) do not broadcast"):
        jwmma.gemm(a, b, builtin=FP8)
    with pytest.raises(ValueError, match=r"batch dims of a \(2,\), b \(\) and c \(4,\) do not broadcast"):
        jwmma.gemm(a, _fp8((36, 11)), np.zeros((4, 19, 11), np.float32), builtin=FP8)


def test_error_bad_shapes_and_flags():
    a, b, _ = _small()
    with pytest.raises(ValueError, match=r"^a must be \(\*batch, M, K\)"):
        jwmma.gemm(a[0], b, builtin=FP8)
    with pytest.raises(ValueError, match=r"^b must be \(\*batch, K, N\)"):
        jwmma.gemm(a, b[:, 0], builtin=FP8)
    vals, pos = np_compress(a)
    with pytest.raises(ValueError, match=r"values and positions must have the same shape"):
        jwmma.gemm((vals, pos[:, :-2]), b, builtin=FP8)
    with pytest.raises(ValueError, match=r"must be \(values, positions\), got 3"):
        jwmma.gemm((vals, pos, pos), b, builtin=FP8)
    with pytest.raises(ValueError, match=r"a positions must hold values in \[0, 3\]"):
        jwmma.gemm((vals, pos + 1), b, builtin=FP8)
    with pytest.raises(TypeError, match=r"a positions must be integers"):
        jwmma.gemm((vals, pos.astype(np.float32)), b, builtin=FP8)
    with pytest.raises(ValueError, match=r"abid must be in \[0, 15\]"):
        jwmma.gemm(a, b, builtin=FP8, abid=16)
    with pytest.raises(ValueError, match=r"index_key must be in \[0, 0\]"):
        jwmma.gemm(np.zeros((3, 64), np.int8), np.ones((64, 5), np.int8), builtin="swmmac_i32_16x16x64_iu4_w32",
                   index_key=1)
    with pytest.raises(TypeError, match=r"prune"):
        jwmma.gemm(a, b, builtin=FP8, prune="yes")
    with pytest.raises(TypeError, match=r"clamp"):
        jwmma.gemm(np.zeros((3, 32), np.int8), np.ones((32, 5), np.int8), builtin="swmmac_i32_16x16x32_iu8_w32",
                   clamp="no")


# ================================================================== 7. batching
def test_batched_equals_per_batch_and_broadcasts():
    """Batched == per-batch gemms; batch dims broadcast (every form below pads to the same
    (2, 3) batch, so one compilation serves them all)."""
    name = IU8
    spec = BUILTINS[name]
    rng = np.random.default_rng(43)
    m, n, k = odd_shape(spec, dense=True)
    a = sparse_a(rng, "iu8", (2, 3, m, k), signed=False)
    b = rand_b(rng, "iu8", (2, 3, k, n))
    c = rand_c(rng, "i32", (2, 3, m, n))
    kw = dict(builtin=name, **shared_kw(name))
    got = np.asarray(jwmma.gemm(a, b, c, **kw))
    assert got.shape == (2, 3, m, n) and got.dtype == np.int32
    for i in np.ndindex(2, 3):
        assert np.array_equal(got[i], np.asarray(jwmma.gemm(a[i], b[i], c[i], **kw))), i
    # a batched (2, 1), b batched (3,), c unbatched -> (2, 3)
    got = np.asarray(jwmma.gemm(a[:, :1], b[0], c[0, 0], **kw))
    assert got.shape == (2, 3, m, n)
    for i, j in np.ndindex(2, 3):
        assert np.array_equal(got[i, j], np.asarray(jwmma.gemm(a[i, 0], b[0, j], c[0, 0], **kw))), (i, j)
    vals, pos = np_compress(a[:, :1])
    want = int_ref(name, vals, pos, b[0], c[0, 0], staging="staged", **shared_kw(name))
    assert np.array_equal(got, want)
    # a batched, b unbatched (the common "weights" case), c None
    got = np.asarray(jwmma.gemm(a, b[0, 0], None, **kw))
    assert got.shape == (2, 3, m, n)
    for i in np.ndindex(2, 3):
        assert np.array_equal(got[i], np.asarray(jwmma.gemm(a[i], b[0, 0], **kw))), i
    # only c batched: the batch comes from c
    got = np.asarray(jwmma.gemm(a[0, 0], b[0, 0], c, **kw))
    assert got.shape == (2, 3, m, n)
    for i in np.ndindex(2, 3):
        assert np.array_equal(got[i], np.asarray(jwmma.gemm(a[0, 0], b[0, 0], c[i], **kw))), i


def test_float_batch_broadcast_equals_stepwise():
    """fp8 cdna3 with a batched and b unbatched (the shapes of the main test)."""
    name = FP8
    a, (vals, pos), b, c = make_problem(name, seed=47, dense=True)
    got = jwmma.gemm(a, b[0], c, builtin=name)
    assert_same_bits(got, stepwise(name, vals, pos, b[0], c), "a batched, b unbatched")


# ============================================================== result types
@pytest.mark.parametrize("name", ["swmmac_f16_16x16x32_f16_w32", "swmmac_bf16_16x16x32_bf16_w32"])
@pytest.mark.slow
def test_16bit_accumulator_roundtrip_types(name):
    spec = BUILTINS[name]
    a, (vals, pos), b, c = make_problem(name, seed=53, dense=False)
    got = jwmma.gemm(a, b, c, builtin=name)
    assert np.asarray(got).dtype == ACC_DT[spec.c_type]
    assert_same_bits(got, stepwise(name, vals, pos, b, c), name)
