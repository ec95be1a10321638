"""The 25 sibling builtins (issue #13: 14 CDNA3 SMFMAC, 11 RDNA4 dense WMMA) against the
independent oracles of tests/oracles/sib_*.py (transcriptions of BUILTINS_MORE.md 1.1-1.3 and
2.1-2.2, a slow scalar reference with its own FNUZ/OCP decoding; they never import jwmma).

Table rows, layouts, index fields and CBSZ/ABID ranges, pack/unpack, every builtin under
`exact` on random and adversarial registers (every fp8 byte on both targets, garbage outside
the selected index set, duplicate positions, NaN/Inf in pruned B rows), the integer sign/wrap/
clamp modes, and the defaults' shape. The exhaustive sweeps (every builtin x target) are
`slow`; the default run takes one builtin of every kind.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles import sib_layouts as L
from oracles import sib_reference as R
from oracles.sib_table import NAMES, ROWS, SMFMAC, WMMA

FAST_SM = ["smfmac_f32_16x16x32_f16", "smfmac_f32_32x32x16_bf16", "smfmac_i32_16x16x64_i8",
           "smfmac_f32_16x16x64_fp8_bf8"]
FAST_WM = ["wmma_f16_16x16x16_f16_w32_gfx12", "wmma_i32_16x16x32_iu4_w32_gfx12", "wmma_f32_16x16x16_bf8_fp8_w32_gfx12"]
#: (builtin, target) pairs of the random SMFMAC test in the default run (the rest: slow)
FAST_SM_RANDOM = [("smfmac_f32_16x16x32_f16", "gfx942"), ("smfmac_i32_16x16x64_i8", "gfx950")]
TYPES = {"f16": "f16", "bf16": "bf16", "i8": "i8", "iu8": "iu8", "iu4": "iu4", "f32": "f32", "i32": "i32"}


def _slow_rest(names, fast):
    return [n if n in fast else pytest.param(n, marks=pytest.mark.slow) for n in names]


def rand_regs(rng, name, which):
    r = ROWS[name]
    w = L.elem_width(name, which)
    codes = rng.integers(0, 1 << w, (r.wave, L.elems(name, which))).tolist()
    return R.codes_to_regs(name, which, codes)


def rand_idx(rng, lanes=64):
    return rng.integers(0, 2**32, lanes, dtype=np.uint64).astype(np.uint32).view(np.int32)


def assert_same(name, got, want):
    bad = R.same_bits(name, np.asarray(got), want)
    assert not bad, f"{name}: {len(bad)} D elements differ, first (lane, t, got, want): {bad[:4]}"


# ------------------------------------------------------------------------------ the table
@pytest.mark.parametrize("name", NAMES)
def test_table_row(name):
    o, s = ROWS[name], jwmma.BUILTINS[name]
    assert (s.wave, s.m, s.n, s.k) == (o.wave, o.m, o.n, o.k)
    assert s.dense == (not o.sparse)
    assert s.kc == (o.kc if o.sparse else o.k)
    assert (s.a.elems, s.b.elems, s.c.elems) == (o.na, o.nb, o.nc)
    assert [p.name for p in s.convention.params] == [
        {"a": "a", "b": "b", "c": "c", "idx": "idx", "cbsz": "cbsz", "abid": "abid", "a_sign": "a_sign",
         "b_sign": "b_sign", "clamp": "clamp"}[x] for x in o.args]
    assert s.c_type == o.c_type
    assert np.dtype(s.a.dtype) == R.reg_dtype(name, "a") or R.reg_dtype(name, "a") in s.a.also
    assert np.dtype(s.c.dtype) == R.reg_dtype(name, "c") or R.reg_dtype(name, "c") in s.c.also
    if o.sparse:
        assert s.arch == "gfx942" and s.targets == ("gfx942", "gfx950")
        assert s.n_sets == 32 // o.index_bits and s.index.abid_max is None
        fnuz = {"fp8": "fp8_fnuz", "bf8": "bf8_fnuz"}
        assert (s.a_type, s.b_type) == (fnuz.get(o.a_type, o.a_type), fnuz.get(o.b_type, o.b_type))
        ocp = jwmma.isa.table.lookup(name, "gfx950")
        assert (ocp.a_type, ocp.b_type, ocp.arch) == (o.a_type, o.b_type, "gfx950")
    else:
        assert s.arch == "gfx12" and (s.a_type, s.b_type) == (o.a_type, o.b_type)
        assert s.convention.index_name is None


@pytest.mark.parametrize("name", NAMES)
def test_layouts(name):
    s = jwmma.BUILTINS[name]
    for which, arr in (("a", s.a_layout), ("b", s.b_layout), ("c", s.c_layout)):
        lanes, n, _ = arr.shape
        want = [[L.coord(name, which, lane, x) for x in range(n)] for lane in range(lanes)]
        assert arr.tolist() == [[list(t) for t in row] for row in want], which


@pytest.mark.parametrize("name", SMFMAC)
def test_index_fields_and_cbsz_abid(name):
    s = jwmma.BUILTINS[name]
    sets = L.index_sets(name)
    for cbsz in range(4):
        for abid in range(sets):
            off = jwmma.engine.index.index_offset(s, cbsz, abid)
            assert off == L.index_offset(name, cbsz, abid)
            for e in range(s.a.elems):
                assert off + 2 * e == L.index_field(name, e, cbsz, abid)[0]
    fn = getattr(jwmma, name)
    a, b, c = (np.zeros((64, op.n), op.dtype) for op in (s.a, s.b, s.c))
    idx = np.zeros(64, np.int32)
    for cbsz, abid in ((4, 0), (7, 0), (-1, 0), (0, -1), (0, sets), (1, sets), (0, 15)):
        with pytest.raises(ValueError, match="cbsz" if cbsz not in range(4) else "abid"):
            fn(a, b, c, idx, cbsz, abid)
    with pytest.raises(TypeError):
        fn(a, b, c, idx, 0.0, 0)
    with pytest.raises(ValueError, match="target"):
        fn(a, b, c, idx, target="gfx90a")


def _values(type_name, codes):
    t = jwmma.isa.types.element_type(type_name)
    codes = np.asarray(codes, np.int64)
    if t.is_float:
        dt = t.format.dtype
        return codes.astype({1: np.uint8, 2: np.uint16, 4: np.uint32}[dt.itemsize]).view(dt)
    bits = t.bits
    v = np.where(codes >= 1 << (bits - 1), codes - (1 << bits), codes)
    return v.astype(np.int32)


def _bits(x):
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


@pytest.mark.parametrize("name", _slow_rest(NAMES, FAST_SM + FAST_WM + ["wmma_i32_16x16x16_iu4_w32_gfx12"]))
def test_pack_unpack_against_the_oracle(name, rng):
    s = jwmma.BUILTINS[name]
    for which in ("a", "b", "c"):
        rows, cols = L.shape(name, which)
        w = L.elem_width(name, which)
        codes = rng.integers(0, 1 << w, (rows, cols))
        if getattr(s, f"{which}_type") in ("fp8_fnuz", "bf8_fnuz"):
            codes[0, 0] = 0x80  # the FNUZ NaN travels as its bits
        vals = _values(getattr(s, f"{which}_type"), codes)
        regs = np.asarray(getattr(jwmma, f"pack_{which}")(name, vals))
        want = R.pack(name, which, codes.tolist())
        assert regs.dtype.itemsize == want.dtype.itemsize
        assert np.array_equal(_bits(regs), _bits(want)), which
        back = np.asarray(getattr(jwmma, f"unpack_{which}")(name, regs))
        if vals.dtype.kind == "i":  # integers: the values (i8/iu4 come back in their narrow dtypes)
            assert np.array_equal(back.astype(np.int64), vals.astype(np.int64)), which
        else:
            assert back.dtype == vals.dtype and np.array_equal(_bits(back), _bits(vals)), which


# ---------------------------------------------------------------- arithmetic under `exact`
@pytest.mark.parametrize("name, target", [
    (n, t) if (n, t) in FAST_SM_RANDOM else pytest.param(n, t, marks=pytest.mark.slow)
    for n in SMFMAC for t in ("gfx942", "gfx950")])
def test_smfmac_exact_random(name, target, rng):
    """Random registers (every bit pattern possible, invalid and duplicate positions too) and
    an abid that selects a set other than 0."""
    a, b, c = (rand_regs(rng, name, w) for w in "abc")
    idx = rand_idx(rng)
    got = getattr(jwmma, name)(a, b, c, idx, 0, 1, model="exact", target=target)
    assert_same(name, got, R.smfmac(name, a, b, c, idx, 0, 1, target=target))


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x64_fp8_bf8", pytest.param(
    "smfmac_f32_32x32x32_bf8_fp8", marks=pytest.mark.slow)])
@pytest.mark.parametrize("target", ["gfx942", "gfx950"])
def test_every_byte_as_a_and_as_b(name, target, rng):
    """All 256 codes of both operands' formats through the builtin: FNUZ and OCP differ in
    NaN (0x80 vs 0x7F/0xFF...), zero (no -0 in FNUZ), bias and Inf."""
    s = jwmma.BUILTINS[name]
    per = s.a.n * 4 * 64  # bytes of A registers
    a_bytes = (np.arange(per) % 256).astype(np.uint8)
    rng.shuffle(a_bytes)
    a = a_bytes.view(np.int32).reshape(64, s.a.n)
    b_bytes = (np.arange(s.b.n * 4 * 64) % 256).astype(np.uint8)
    rng.shuffle(b_bytes)
    b = b_bytes.view(np.int32).reshape(64, s.b.n)
    c = rand_regs(rng, name, "c")
    idx = rand_idx(rng)
    got = getattr(jwmma, name)(a, b, c, idx, model="exact", target=target)
    assert_same(name, got, R.smfmac(name, a, b, c, idx, target=target))


def test_fnuz_and_ocp_targets_differ():
    """0x38 is fp8 0.5 / bf8 0.25 in FNUZ (biases 8, 16) and fp8 1.0 / bf8 0.5 in OCP."""
    name = "smfmac_f32_16x16x64_fp8_bf8"
    s = jwmma.BUILTINS[name]
    a = np.full((64, s.a.n), 0x38383838, np.int32)
    b = np.full((64, s.b.n), 0x38383838, np.int32)
    c = np.zeros((64, s.c.n), np.float32)
    idx = np.full(64, 0x44444444, np.int32)  # positions (0, 1) in every group
    fnuz = np.asarray(jwmma.smfmac_f32_16x16x64_fp8_bf8(a, b, c, idx, model="exact"))
    ocp = np.asarray(jwmma.smfmac_f32_16x16x64_fp8_bf8(a, b, c, idx, model="exact", target="gfx950"))
    assert (fnuz == 32 * 0.125).all() and (ocp == 32 * 0.5).all()


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x32_f16", pytest.param("smfmac_i32_32x32x32_i8",
                                                                          marks=pytest.mark.slow)])
def test_every_index_set_with_garbage_elsewhere(name, rng):
    """For every accepted (cbsz, abid): the selected set decides, the other bits are ignored."""
    s = jwmma.BUILTINS[name]
    fn = getattr(jwmma, name)
    a, b, c = (rand_regs(rng, name, w) for w in "abc")
    pairs = [(cbsz, abid) for cbsz in range(4) for abid in range(s.n_sets)]
    if name == "smfmac_f32_16x16x32_f16":  # default run: sets 0 and 3, cbsz != 0 (set 0 again)
        pairs = [(0, 0), (0, 3), (3, 2), (1, 0)]
    for cbsz, abid in pairs:
        idx = rand_idx(rng)
        got = fn(a, b, c, idx, cbsz, abid, model="exact")
        assert_same(name, got, R.smfmac(name, a, b, c, idx, cbsz, abid))


def test_pruned_specials_never_leak():
    """Inf/NaN in B rows no position selects must not reach D (no densify-with-zeros)."""
    name = "smfmac_f32_16x16x32_f16"
    s = jwmma.BUILTINS[name]
    Bm = np.ones((s.k, s.n), np.float16)
    Bm[2::4] = np.inf
    Bm[3::4] = np.nan
    A = np.ones((s.m, s.kc), np.float16)
    pos = np.tile([0, 1], (s.m, s.kc // 2)).astype(np.int32)
    args = (jwmma.pack_a(name, A), jwmma.pack_b(name, Bm), np.zeros((64, s.c.n), np.float32),
            jwmma.pack_index(name, pos))
    assert (np.asarray(jwmma.smfmac_f32_16x16x32_f16(*args, model="exact")) == s.kc).all()


@pytest.mark.parametrize("name", _slow_rest([n for n in WMMA if not ROWS[n].integer], FAST_WM))
def test_float_wmma_exact_random(name, rng):
    a, b, c = (rand_regs(rng, name, w) for w in "abc")
    got = getattr(jwmma, name)(a, b, c, model="exact")
    assert_same(name, got, R.wmma(name, a, b, c))


@pytest.mark.parametrize("name", _slow_rest([n for n in WMMA if ROWS[n].integer], FAST_WM))
def test_integer_wmma_modes(name, rng):
    """All sign choices, wrap and both clamp stagings: the default saturates after each
    K-half, model='exact' once at the end. Accumulators near the limits make them differ."""
    a, b = rand_regs(rng, name, "a"), rand_regs(rng, name, "b")
    c = rng.choice(np.array([0, 2**31 - 1, -(2**31), -1, 2**31 - 128, -(2**31) + 128], np.int64),
                   (32, 8)).astype(np.int32)
    fn = getattr(jwmma, name)
    for sa in (False, True):
        for sb in (False, True):
            assert_same(name, fn(sa, a, sb, b, c, False), R.wmma_int(name, sa, a, sb, b, c, False))
            assert_same(name, fn(sa, a, sb, b, c, True), R.wmma_int(name, sa, a, sb, b, c, True))
            assert_same(name, fn(sa, a, sb, b, c, True, model="exact"),
                        R.wmma_int(name, sa, a, sb, b, c, True, staging="final"))


def test_dense_wmma_takes_no_index_and_no_index_modifiers():
    fn = jwmma.wmma_f32_16x16x16_f16_w32_gfx12
    s = fn.spec
    a, b, c = (np.zeros((32, op.n), op.dtype) for op in (s.a, s.b, s.c))
    with pytest.raises(TypeError):
        fn(a, b, c, np.zeros(32, np.int32))
    with pytest.raises(TypeError):
        fn(a, b, c, index_key=1)
    with pytest.raises(TypeError, match="a_sign"):
        jwmma.wmma_i32_16x16x16_iu8_w32_gfx12(0.5, np.zeros((32, 2), np.int32), True,
                                             np.zeros((32, 2), np.int32), np.zeros((32, 8), np.int32), False)
    with pytest.raises(ValueError, match="index register"):
        jwmma.isa.view.entries(s, "index")


# -------------------------------------------------------------------------- the defaults
def test_default_models_and_evidence():
    B = jwmma.BUILTINS
    for n in SMFMAC:
        want = "exact" if ROWS[n].integer else "cdna3"
        assert B[n].default_model == want
        if want == "cdna3":
            assert B[n].default_evidence.startswith("measured") and "assumed" in B[n].default_evidence
    for n in WMMA:
        r = ROWS[n]
        want = "staged_clamp" if r.integer else "gfx12_dot4"
        assert B[n].default_model == want
        kind = B[n].default_evidence.split(":")[0].split()[0]
        assert kind == ("second-hand" if r.integer else "assumed" if "8" in r.a_type else "measured")


def test_default_gfx12_dot4_on_wmma_is_the_dot_of_the_documented_k_order(rng):
    """The builtin under its default equals jwmma.dot with the same model over the K products
    in documented K order (4 per step): the dense step adds no reordering of its own."""
    name = "wmma_f32_16x16x16_f16_w32_gfx12"
    A = rng.standard_normal((16, 16)).astype(np.float16)
    Bm = rng.standard_normal((16, 16)).astype(np.float16)
    C = rng.standard_normal((16, 16)).astype(np.float32)
    d = jwmma.unpack_c(name, jwmma.wmma_f32_16x16x16_f16_w32_gfx12(jwmma.pack_a(name, A), jwmma.pack_b(name, Bm),
                                                                    jwmma.pack_c(name, C)))
    want = jwmma.dot(np.broadcast_to(A[:, None, :], (16, 16, 16)), np.broadcast_to(Bm.T[None], (16, 16, 16)), C,
                     model="gfx12_dot4")
    assert np.array_equal(np.asarray(d).view(np.uint32), np.asarray(want).view(np.uint32))


def test_fnuz_dtypes_are_what_gemm_and_pack_take():
    name = "smfmac_f32_16x16x64_fp8_fp8"
    x = np.zeros((16, 32), ml_dtypes.float8_e4m3fnuz)
    jwmma.pack_a(name, x)
    with pytest.raises(TypeError, match="float8_e4m3fnuz"):
        jwmma.pack_a(name, x.astype(ml_dtypes.float8_e4m3fn))
