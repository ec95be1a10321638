"""The f64 MFMA (docs/spec/BUILTINS_DENSE.md 11): `mfma_f64_16x16x4f64` and `mfma_f64_4x4x4f64` on gfx90a,
gfx942 (the default) and gfx950:

* rows, targets, register counts and every layout entry (A, B, C, D; on CDNA3 every A/B/C_blgp*
  key with its `negated` flag) of the calculator dumps `cdna2_mfma_calculator.json`,
  `cdna3_mfma_calculator.json` (16x16x4) and `cdna3_mfma_more_calculator.json` (4x4x4);
* registers in and out against `tests/oracles/fma64.py` (a plain-Python chain of IEEE fused
  multiply-adds, k from C), the matrices placed by the dumps' own entries: runs without MMA-Sim;
* bits against MMA-Sim 2.1.1's CDNA2 and CDNA3 f64 simulators (``MMA_FMA``, ``std::fma`` on
  doubles), one block at a time, on random and adversarial data (subnormals, NaN/Inf, exact
  cancellation to signed zeros, overflow, wide exponents, ties); skipped without torch and mmasim;
* the modifiers (blgp negation on gfx942/gfx950, refused on gfx90a; cbsz/abid refused), the
  fragments (numpy float64 with jax_enable_x64 off) and `jwmma.gemm`.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jwmma
from jwmma.isa.table import lookup
from tests import calculator_dumps
from tests import mmasim_support as mmasim
from tests.oracles import fma64 as oracle
from tests.oracles.f64_data import float64_values as _f64

ROWS = ("mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64")
TARGETS = ("gfx90a", "gfx942", "gfx950")
ARCH = {"gfx90a": "CDNA2", "gfx942": "CDNA3", "gfx950": "CDNA3"}
#: MMA-Sim's names (its CDNA3 list spells the calculator's mnemonics)
SUFFIX = {("mfma_f64_16x16x4f64", "CDNA2"): "f64_16x16x4f64", ("mfma_f64_4x4x4f64", "CDNA2"): "f64_4x4x4f64",
          ("mfma_f64_16x16x4f64", "CDNA3"): "f64_16x16x4_f64", ("mfma_f64_4x4x4f64", "CDNA3"): "f64_4x4x4_4b_f64"}
U64 = np.uint64


def _instruction(name, target):
    dump = calculator_dumps.instructions(target)
    return next(v for v in dump.values() if v["builtin"] == name)


def _entries(spec, which):
    """jwmma's layout as the dump's tuples: (lane, element, row, col), with the block for 4x4x4."""
    layout = {"A": spec.a_layout, "B": spec.b_layout, "C": spec.c_layout, "D": spec.c_layout}[which]
    rows = spec.k if which == "B" else spec.m
    out = set()
    for lane in range(64):
        for e in range(layout.shape[1]):
            r, c = int(layout[lane, e, 0]), int(layout[lane, e, 1])
            out.add((lane, e, *divmod(r, rows), c) if spec.blocks > 1 else (lane, e, r, c))
    return out


# ------------------------------------------------------------------------------ rows, layouts, modifiers
def test_rows_are_the_calculators():
    """gfx90a, gfx942 (default), gfx950 (isGFX90APlus), the calculator's M, N, K, blocks and GPRs (a
    double is two uint32 register words), an f64 FMA chain by default; no longer 'not emulated'."""
    for name in ROWS:
        spec = jwmma.BUILTINS[name]
        assert spec.target == "gfx942" and set(spec.targets) == set(TARGETS)
        assert name not in jwmma.isa.table.OPTIONAL
        for t in ("gfx90a", "gfx942"):
            d = _instruction(name, t)["detail"]
            s = lookup(name, t)
            assert (s.m, s.n, s.k, s.blocks) == tuple(int(d[x]) for x in ("M", "N", "K", "blocks"))
            assert (s.a.n, s.b.n, s.c.n) == tuple(int(d[f"GPRs required for {x}"]) for x in "ABC")
            assert (s.a.dtype, s.c.elem_bits, s.default_model) == (np.uint32, 64, {"gfx90a": "cdna2"}.get(t, "cdna3"))
            assert (s.blgp == "negate") == (d["BLGP bits supported"] == "True")
            assert d["CBSZ and ABID bits supported"] == "False"
    with pytest.raises(ValueError, match="isGFX90APlus"):
        lookup("mfma_f64_16x16x4f64", "gfx908")


@pytest.mark.parametrize("target", ["gfx90a", "gfx942"])
def test_every_layout_entry_equals_the_calculator(target):
    """A, B, C, D; on CDNA3 every A/B/C_blgp{v}: the same entries, negated exactly when bit 0/1/2 of v
    is set (BLGP negates A, B, C there and moves nothing)."""
    seen = 0
    for name in ROWS:
        spec = lookup(name, target)
        ops = _instruction(name, target)["operands"]
        for key, o in ops.items():
            which = key[0]
            assert _entries(spec, which) == set(map(tuple, o["entries"])), (name, key)
            v = int(key.split("blgp")[1]) if "blgp" in key else 0
            assert o.get("negated", False) == bool(v >> "ABCD".index(which) & 1), (name, key)
            seen += 1
        assert len(ops) == (4 if target == "gfx90a" else 25)
    assert seen == (8 if target == "gfx90a" else 50)


def _zeros(spec):
    return [np.zeros((64, op.n), np.uint32) for op in (spec.a, spec.b, spec.c)]


@pytest.mark.parametrize("name", ROWS)
def test_modifiers_name_their_rule(name):
    """gfx90a: no BLGP on f64; every chip: no CBSZ/ABID (the calculator's probes reject them)."""
    spec = lookup(name, "gfx90a")
    fn = getattr(jwmma, name)
    with pytest.raises(ValueError, match="no BLGP on the f64 MFMA"):
        fn(*_zeros(spec), 0, 0, 1, target="gfx90a")
    for cbsz, abid in ((1, 0), (0, 1)):
        with pytest.raises(ValueError, match="have no CBSZ/ABID"):
            fn(*_zeros(spec), cbsz, abid, 0)
    with pytest.raises(ValueError, match="blgp must be in"):
        fn(*_zeros(spec), 0, 0, 8, target="gfx950")
    with pytest.raises(ValueError, match="not a model for the f64 MFMA"):
        fn(*_zeros(spec), model="exact")
    with pytest.raises(ValueError, match="MI100 \\(gfx908\\), which has no f64 MFMA"):
        fn(*_zeros(spec), model="cdna1")


# ------------------------------------------------------------------------------ data
def _case(rng, spec, kind):
    """A (blocks, M, K), B (blocks, K, N), C (blocks, M, N) float64. 'adversarial' adds exact
    cancellations (products k = 0 and 1 cancel: signed zeros); 'ties' puts the k = 0 product at
    1 or 3 half-ulps of every C (one binade), the other products zero."""
    nb, m, n, k = spec.blocks, spec.m, spec.n, spec.k
    if kind == "ties":
        e = int(rng.integers(-900, 900))
        c = np.ldexp(1 + rng.integers(0, 1 << 52, (nb, m, n)) * 2.0 ** -52, e)
        c *= rng.choice([-1.0, 1.0], c.shape)
        p = int(rng.integers(-40, 40))
        a = np.zeros((nb, m, k))
        a[..., 0] = 2.0 ** p
        b = np.zeros((nb, k, n))
        b[:, 0, :] = rng.choice([-3.0, -1.0, 1.0, 3.0], (nb, n)) * 2.0 ** (e - 53 - p)
        return a, b, c
    a, b, c = _f64(rng, (nb, m, k), kind), _f64(rng, (nb, k, n), kind), _f64(rng, (nb, m, n), kind)
    if kind == "adversarial":
        a[..., 1] = a[..., 0]
        b[:, 1, :] = -b[:, 0, :]
    return a, b, c


def _call(name, target, a, b, c, blgp=0):
    """D (blocks, M, N) float64 from a call on registers packed from the matrices."""
    spec = lookup(name, target)
    one = (lambda x: x[0]) if spec.blocks == 1 else (lambda x: x)
    pk = dict(target=target)
    regs = getattr(jwmma, name)(jwmma.pack_a(name, one(a), **pk), jwmma.pack_b(name, one(b), **pk),
                                jwmma.pack_c(name, one(c), **pk), 0, 0, blgp, **pk)
    d = np.asarray(jwmma.unpack_c(name, regs, **pk))
    return d.reshape(spec.blocks, spec.m, spec.n)


def _same(got, want, what):
    """Bits equal; NaN by NaN-ness."""
    mmasim.assert_same_bits(np.asarray(got, np.float64), np.asarray(want, np.float64), what)


# ------------------------------------------------------------------------------ the oracle (no MMA-Sim)
def _oracle_registers(v, a_w, b_w, c_w, blgp):
    """D registers (uint32 words) in plain Python from the dump's entries: a double of element e of
    lane L is words 2e (low) and 2e+1; blgp bits negate A, B, C; one IEEE FMA per k from C."""
    ops = v["operands"]
    word = lambda w, lane, e: int(w[lane][2 * e]) | int(w[lane][2 * e + 1]) << 32
    neg = lambda x, bit: x ^ (1 << 63) if blgp >> bit & 1 else x
    key = lambda e: (e[2], e[3], e[4]) if len(e) == 5 else (0, e[2], e[3])  # (block, row, col)
    a = {key(e): neg(word(a_w, e[0], e[1]), 0) for e in ops["A"]["entries"]}
    b = {key(e): neg(word(b_w, e[0], e[1]), 1) for e in ops["B"]["entries"]}
    kk = 1 + max(k for _, _, k in a)
    d = [[0] * len(c_w[0]) for _ in range(64)]
    for e in ops["C"]["entries"]:
        blk, i, j = key(e)
        out = oracle.chain([a[(blk, i, k)] for k in range(kk)], [b[(blk, k, j)] for k in range(kk)],
                           neg(word(c_w, e[0], e[1]), 2))
        d[e[0]][2 * e[1]], d[e[0]][2 * e[1] + 1] = out & 0xFFFFFFFF, out >> 32
    return np.array(d, np.uint32)


def _oracle_case(rng, name, target, kind, blgp):
    spec = lookup(name, target)
    a, b, c = _case(rng, spec, kind)
    one = (lambda x: x[0]) if spec.blocks == 1 else (lambda x: x)
    regs = [jwmma.pack_a(name, one(a), target=target), jwmma.pack_b(name, one(b), target=target),
            jwmma.pack_c(name, one(c), target=target)]
    got = np.asarray(getattr(jwmma, name)(*regs, 0, 0, blgp, target=target))
    want = _oracle_registers(_instruction(name, target), *(np.asarray(r).tolist() for r in regs), blgp)
    words = lambda x: x.view(U64)  # one double per pair of words, low word first
    _same(words(got).view(np.float64), words(want).view(np.float64), (name, target, kind, blgp))


def test_registers_equal_the_python_fma_chain(rng):
    _oracle_case(rng, "mfma_f64_16x16x4f64", "gfx942", "adversarial", 5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ROWS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["random", "adversarial", "ties"])
def test_registers_equal_the_python_fma_chain_grid(rng, name, target, kind):
    for blgp in ((0,) if target == "gfx90a" else (0, int(rng.integers(1, 8)))):
        _oracle_case(rng, name, target, kind, blgp)


# ------------------------------------------------------------------------------ MMA-Sim
def _mmasim_case(rng, name, target, kind, blgp=0):
    mfma = mmasim.mfma(ARCH[target], SUFFIX[(name, ARCH[target])])  # skips without torch and mmasim
    spec = lookup(name, target)
    a, b, c = _case(rng, spec, kind)
    got = _call(name, target, a, b, c, blgp)
    sign = lambda x, bit: -x if blgp >> bit & 1 else x  # MMA-Sim has no modifiers: negate its inputs
    want = mmasim.per_block(mfma, sign(a, 0), sign(b, 1), sign(c, 2))
    _same(got, want, (name, target, kind, blgp))


def test_bits_equal_mmasim(rng):
    """The oracle test's call (one compiled program for both); the grid covers CDNA2 and 4x4x4."""
    _mmasim_case(rng, "mfma_f64_16x16x4f64", "gfx942", "adversarial", 5)


@pytest.mark.slow
@pytest.mark.parametrize("name", ROWS)
@pytest.mark.parametrize("target", TARGETS)
@pytest.mark.parametrize("kind", ["random", "adversarial", "ties"])
def test_bits_equal_mmasim_grid(rng, name, target, kind):
    for blgp in ((0,) if target == "gfx90a" else (0, int(rng.integers(1, 8)))):
        _mmasim_case(rng, name, target, kind, blgp)


# ------------------------------------------------------------------------------ fragments
def test_fragments_keep_float64_bits_without_x64(rng):
    """With jax_enable_x64 off (the test default) pack takes numpy float64 and unpack gives numpy
    float64 bit for bit (JAX has no float64 arrays then); inside jit unpack refuses with the fix."""
    assert not jax.config.jax_enable_x64
    name = "mfma_f64_4x4x4f64"
    a = _f64(rng, (4, 4, 4), "adversarial")
    regs = jwmma.pack_a(name, a)
    assert regs.dtype == np.uint32 and regs.shape == (64, 2)
    out = jwmma.unpack_a(name, regs)
    assert isinstance(out, np.ndarray) and out.dtype == np.float64
    assert np.array_equal(out.view(U64), a.view(U64))
    with pytest.raises(TypeError, match="inside jit with jax_enable_x64 off"):
        jax.jit(lambda r: jwmma.unpack_c(name, r))(regs)
    with pytest.raises(TypeError, match="astype\\(np.float64\\) is exact"):
        jwmma.pack_a(name, np.zeros((4, 4, 4), np.float32))


# ------------------------------------------------------------------------------ jwmma.gemm
def _gemm_case(rng, name, target, path, m=20, n=18, k=10):
    """jwmma.gemm keeps float64 bits end to end: every output is one FMA chain over the whole K in
    order from C (each K step's D is the next step's C), K zero-padded to whole steps (+0 products);
    the reference is the plain-Python chain on the bits."""
    spec = lookup(name, target)
    a, b, c = _f64(rng, (m, k), "adversarial"), _f64(rng, (k, n), "adversarial"), _f64(rng, (m, n), "adversarial")
    a[:, 1], b[1, :] = a[:, 0], -b[0, :]  # an exact cancellation in every output
    d = jwmma.gemm(a, b, c, builtin=name, target=target, path=path)
    assert isinstance(d, np.ndarray) and d.dtype == np.float64  # jax_enable_x64 off: numpy float64
    _same(d, oracle.gemm(a, b, c, spec.k), (name, target, path))
    return d


def test_gemm_keeps_float64_bits(rng):
    _gemm_case(rng, "mfma_f64_16x16x4f64", "gfx942", "matrix")


@pytest.mark.slow
def test_gemm_with_x64_on_gives_a_float64_jax_array(rng):
    """With jax_enable_x64 on (here for this test only), D is a float64 JAX array with the bits D
    has as numpy float64 with it off; unpack_c likewise, inside jit too."""
    name = "mfma_f64_16x16x4f64"
    a, b = _f64(rng, (20, 10), "adversarial"), _f64(rng, (10, 18), "adversarial")
    off = jwmma.gemm(a, b, builtin=name)
    regs = jwmma.pack_c(name, off[:16, :16])
    with jax.enable_x64(True):
        on = jwmma.gemm(jax.numpy.asarray(a), jax.numpy.asarray(b), builtin=name)
        c = jax.jit(lambda r: jwmma.unpack_c(name, r))(regs)
        assert isinstance(on, jax.Array) and on.dtype == np.float64 and c.dtype == np.float64
        assert np.array_equal(np.asarray(on).view(U64), off.view(U64))
        assert np.array_equal(np.asarray(c).view(U64), off[:16, :16].view(U64))


@pytest.mark.slow
@pytest.mark.parametrize("name,target,path", [("mfma_f64_16x16x4f64", "gfx90a", "registers"),
                                              ("mfma_f64_16x16x4f64", "gfx950", "matrix"),
                                              ("mfma_f64_4x4x4f64", "gfx942", "matrix"),
                                              ("mfma_f64_4x4x4f64", "gfx90a", "matrix")])
def test_gemm_keeps_float64_bits_grid(rng, name, target, path):
    _gemm_case(rng, name, target, path, m=9, n=7, k=13)


@pytest.mark.slow
def test_gemm_in_nested_jit_keeps_a_transposed_float64_constant(rng):
    """A float64 constant transposed inside a jit that another jit traces (a closed-over array
    handed to an inner jit) reached the bit cast as an XLA constant, whose folding gave wrong bits
    (XLA:CPU, jaxlib 0.10; right with constant folding off); `storage_bits` keeps the cast out."""
    name = "mfma_f64_16x16x4f64"
    g, r = _f64(rng, (6, 6), "random"), _f64(rng, (6, 6), "random")
    with jax.enable_x64(True):
        gj, rj = jax.numpy.asarray(g), jax.numpy.asarray(r)
        inner = jax.jit(lambda a, b: jwmma.gemm(b.T, a, builtin=name))
        d = jax.jit(lambda a: inner(a, rj))(gj)
        _same(np.asarray(d), oracle.gemm(np.ascontiguousarray(r.T), g, None, 4), "nested jit")
