"""bf16 fused groups aligned by their f32 values (NUMERICS.md 1.3-1.4): on a CPU at the 'full'
compile effort, a bf16 x bf16 instruction whose operands allow it sums its products as exact
f32 values instead of integer shifts; operands near the limits take the general branch. Both
must give the scalar reference's bits (`oracles.ref_models.cdna3_dot`), so every class below
sits on one side of a limit:

* normal: exponents in [-20, 20] (the value branch);
* at the window: the least nonzero exponents of A and B sum to frac_bits - 127 = -103 (still the
  value branch: its scale 2**(F - E_T) is at most 2**127), and one below (-104: the general
  branch);
* subnormal: a row of subnormal A values against B of exponents 30-50, inside the window (the
  general branch: a CPU flushes subnormal factors);
* large: the largest exponents sum to 125 (the value branch: products below 2**127) and to 126
  (a product may reach 2**128: the specials branch).

A whole A row and B column take the class's exponents, and C[0, 0] is zero, so that D[0, 0] is
their products' sum alone. Each class is a call of its own (the host chooses the program per call,
`FusedGroups.normal_operands`), four waves each; under a user's jit nothing is known of the
registers, and the general program gives the same bits.
"""
from __future__ import annotations

import jax
import numpy as np
import pytest

import jwmma
import oracles.ref_models as R

FULL = jwmma.Options(compile_effort="full")
WAVES = 4

CLASSES = ["normal", "window", "below_window", "subnormal", "large", "overflow"]
MODELS = [("cdna3", R.CDNA3_2X),  # the c785138 variant (zero factors in the maximum) with -m slow
          pytest.param(jwmma.models.CDNA3(zero_exponent=-126, renormalize=False), R.CDNA3_C785138,
                       marks=pytest.mark.slow)]


def _codes(rng, cls: str, shape, side: str) -> np.ndarray:
    """bf16 codes of one operand for the class (module doc); ``side`` 'a' or 'b'."""
    f = R.BF16
    lo, hi = (30, 50) if (cls, side) == ("subnormal", "b") else (-20, 20)  # B large: A's subnormals count
    exps = rng.integers(lo, hi + 1, shape)
    mant = rng.integers(0, 1 << f.mbits, shape)
    neg = rng.integers(0, 2, shape)
    codes = np.vectorize(lambda n, e, m: R.make_code(f, int(n), int(e), int(m)))(neg, exps, mant).astype(np.int64)
    codes[rng.random(shape) < 0.1] = 0  # zeros: products that take no part in the maximum
    # a whole A row and B column at the class's exponent: output (0, 0) has every product there
    line = codes[0, :] if side == "a" else codes[:, 0]
    if cls in ("window", "below_window"):
        low = -52 if side == "a" else (-51 if cls == "window" else -52)  # sums -103 / -104
        line[:] = [R.make_code(f, int(rng.integers(2)), low, int(rng.integers(1 << f.mbits))) for _ in line]
    elif cls == "subnormal" and side == "a":  # exponent field 0 (B's exponents keep the window)
        line[:] = [(int(rng.integers(2)) << 15) | int(rng.integers(1, 1 << f.mbits)) for _ in line]
    elif cls in ("large", "overflow"):
        high = 62 if side == "a" else (63 if cls == "large" else 64)  # sums 125 / 126
        line[:] = [R.make_code(f, int(rng.integers(2)), high, (1 << f.mbits) - 1) for _ in line]
    return codes


def _wave(rng, spec, cls):
    m, kc, kd, n = spec.m, spec.kc, spec.k, spec.n
    A = _codes(rng, cls, (m, kc), "a")
    B = _codes(rng, cls, (kd, n), "b")
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pos = np.array([[pairs[int(rng.integers(6))][s] for q in range(kc // 2) for s in (0, 1)] for _ in range(m)])
    c_vals = rng.standard_normal((m, n)) * np.ldexp(1.0, rng.integers(-30, 30, (m, n)))
    C = np.asarray(c_vals, np.float32).view(np.uint32).astype(np.int64)
    C[0, 0] = 0  # D[0, 0] is the sum of the class's products alone
    return A, pos, B, C


@pytest.mark.parametrize("model,prm", MODELS, ids=["2.x", "c785138"])
@pytest.mark.parametrize("cls", CLASSES)
def test_bf16_classes_match_the_reference(cls, model, prm):
    name = "smfmac_f32_16x16x64_bf16"
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(R.seed_of(name, cls, str(prm)))
    waves = [_wave(rng, spec, cls) for _ in range(WAVES)]
    regs = [np.stack(x) for x in zip(*[(R.to_regs(spec.a, spec.a_layout, A), R.to_regs(spec.b, spec.b_layout, B),
                                        R.to_regs(spec.c, spec.c_layout, C), R.index_regs(spec, pos))
                                       for A, pos, B, C in waves])]
    d = np.asarray(getattr(jwmma, name)(*regs, model=model, options=FULL))
    dot = lambda a, b, c: R.cdna3_dot(a, b, c, R.BF16, R.BF16, prm)  # noqa: E731
    for w, (A, pos, B, C) in enumerate(waves):
        got = R.from_regs_c(spec, d[w])
        bad = R.mismatches(got, R.builtin_ref(spec, A, pos, B, C, dot), R.F32)
        assert not bad, f"{cls}, wave {w}: {len(bad)} outputs differ (position, got, want): {bad[:4]}"
    if cls == "normal":  # traced registers (a user's jit): nothing is known of them, the same bits
        jitted = jax.jit(lambda *r: getattr(jwmma, name)(*r, model=model, options=FULL))(*regs)
        assert np.array_equal(np.asarray(jitted).view(np.uint32), d.view(np.uint32))


@pytest.mark.parametrize("cls", ["normal", "below_window", "subnormal"])
def test_bf16_gemm_value_program_keeps_the_bits(cls):
    """`jwmma.gemm`'s matrix path takes the value program for concrete bf16 operands too
    (K steps of the builtin): its bits equal the general program's, which a user's jit gets
    (nothing is known of traced operands), on each side of the limits."""
    name = "mfma_f32_16x16x16bf16_1k"  # a dense row: the sparse rows' arithmetic is the call test's
    rng = np.random.default_rng(R.seed_of(name, cls))
    m, n, k = 37, 29, 80
    a = np.stack([_codes(rng, cls, (m, k), "a") for _ in range(2)]).astype(np.uint16).view(jwmma.BUILTINS[name].a_format.dtype)
    b = _codes(rng, cls, (k, n), "b").astype(np.uint16).view(jwmma.BUILTINS[name].b_format.dtype)
    c = (rng.standard_normal((2, m, n)) * np.ldexp(1.0, rng.integers(-30, 30, (2, m, n)))).astype(np.float32)
    c[:, 0, 0] = 0
    run = lambda a, b, c: jwmma.gemm(a, b, c, builtin=name, options=FULL)  # noqa: E731
    eager, traced = np.asarray(run(a, b, c)), np.asarray(jax.jit(run)(a, b, c))
    assert np.array_equal(eager.view(np.uint32), traced.view(np.uint32)), f"{cls}: the programs differ"
