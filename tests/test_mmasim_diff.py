"""Differential test: jwmma's "cdna3" model vs MMA-Sim 2.x (PyPI ``mmasim``) itself.

``MMA_TR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=8)`` is the CDNA3 f16/bf16 algorithm and
``MMA_GTR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=16)`` the fp8/bf8 one (NUMERICS.md 6);
``.dpa(a, b, c)`` runs (..., K) vectors in consecutive groups. OCP fp8 data goes in as
torch.float8_e4m3fn / float8_e5m2 (what gfx950 decodes). For the sparse builtins MMA-Sim gets
the compressed A values and the selected B values in compressed-K order (NUMERICS 1.4).

Compared: f32 bits, NaN by NaN-ness. Known, intended differences, excluded and counted:

(a) fp8 path, non-finite C far below the products: ``gtr_fdpa`` decodes an Inf/NaN C with
    ``frexp`` (exponent -1) and then applies the C-drop rule ``e_c < e_max - F - 1``, so an
    Inf/NaN C disappears whenever the group's largest product exponent exceeds 24 (bf8
    products). jwmma decides specials first (NUMERICS 1.3 step 0), so it returns Inf/NaN.
(b) K = 16n + 1 in the fp8 path: MMA-Sim raises on the empty odd half of a one-product
    group; jwmma treats the empty half as adding nothing. Such K are not fed to MMA-Sim
    (test_models_cdna3.py covers them against the reference).

Nothing else differs: every other row must match bit for bit. The module is skipped when
torch or mmasim is missing; the project never needs torch at run time.
"""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
fdpa = pytest.importorskip("mmasim.arithmetic.fdpa")

import jwmma  # noqa: E402
import oracles.ref_models as R  # noqa: E402

TORCH_DTYPES = {"f16": torch.float16, "bf16": torch.bfloat16, "fp8": torch.float8_e4m3fn, "bf8": torch.float8_e5m2}
PAIRS = [(R.F16, R.F16), (R.BF16, R.BF16), (R.FP8, R.FP8), (R.BF8, R.BF8), (R.FP8, R.BF8), (R.BF8, R.FP8)]
PAIR_IDS = [f"{a.name}x{b.name}" for a, b in PAIRS]


def to_torch(codes, f: R.Fmt):
    c = np.ascontiguousarray(np.asarray(codes))
    if f.bits == 16:
        return torch.from_numpy(c.astype(np.uint16).view(np.int16)).view(TORCH_DTYPES[f.name])
    if f.bits == 8:
        return torch.from_numpy(c.astype(np.uint8)).view(TORCH_DTYPES[f.name])
    return torch.from_numpy((c.astype(np.int64) & 0xFFFFFFFF).astype(np.uint32).view(np.int32)).view(torch.float32)


def mmasim_dot(A, B, C, fa: R.Fmt, fb: R.Fmt):
    if max(fa.bits, fb.bits) == 8:
        op = fdpa.MMA_GTR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=16)
    else:
        op = fdpa.MMA_TR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=8)
    d = op.dpa(to_torch(A, fa), to_torch(B, fb), to_torch(C, R.F32))
    return d.contiguous().view(torch.int32).numpy().astype(np.int64) & 0xFFFFFFFF


def _mmasim_exp(v: R.Val, f: R.Fmt):
    """MMA-Sim's frexp_and_normalize exponent: -1 for Inf/NaN, min_exp for zero/subnormal."""
    return -1 if v.kind != "num" else v.exp


def quirk_a(a, b, c_bits, fa: R.Fmt, fb: R.Fmt) -> bool:
    """True when some fp8-path group of this row receives an Inf/NaN C while its largest
    MMA-Sim product exponent (zero products excluded) exceeds 24: MMA-Sim drops that C."""
    if max(fa.bits, fb.bits) != 8:
        return False
    acc = int(c_bits)
    for lo in range(0, len(a), 16):
        ga, gb = a[lo:lo + 16], b[lo:lo + 16]
        if R.decode(acc, R.F32).kind != "num":
            es = []
            for x, y in zip(ga, gb):
                va, vb = R.decode(int(x), fa), R.decode(int(y), fb)
                if va.zero and vb.kind == "num" or vb.zero and va.kind == "num":
                    continue  # a zero product: e = -999
                es.append(_mmasim_exp(va, fa) + _mmasim_exp(vb, fb))
            if es and max(es) > 24:
                return True
        acc = R.cdna3_group(ga, gb, acc, fa, fb, R.CDNA3_2X, True, True)
    return False


def compare(got, want, A, B, C, fa, fb):
    bad, excluded = [], 0
    for r in range(len(C)):
        if R.same_bits(int(got[r]), int(want[r]), R.F32):
            continue
        if quirk_a(list(A[r]), list(B[r]), int(C[r]), fa, fb):
            excluded += 1
            # jwmma must still follow the specials-first rule of the reference
            ref = R.cdna3_dot([int(x) for x in A[r]], [int(x) for x in B[r]], int(C[r]), fa, fb, R.CDNA3_2X)
            assert R.same_bits(int(got[r]), ref, R.F32)
            continue
        bad.append((r, hex(int(got[r])), hex(int(want[r])), hex(int(C[r]))))
    return bad, excluded


@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_dot_vs_mmasim(fa, fb):
    """About 3000 groups per path (1000 rows of 3 groups: 8, 8, 5 resp. 16, 16, 5), every
    scenario of the generator (NaN/Inf included)."""
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, "mmasim"))
    k = 21 if fa.bits == 16 else 37
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 1000, k)
    got = R.codes_of(np.asarray(jwmma.dot(R.from_codes(A, fa), R.from_codes(B, fb), R.from_codes(C, R.F32),
                                          model="cdna3"))).reshape(-1)
    want = mmasim_dot(A, B, C, fa, fb)
    bad, excluded = compare(got, want, A, B, C, fa, fb)
    assert not bad, f"{len(bad)} rows differ from MMA-Sim (row, jwmma, mmasim, C): {bad[:8]}"
    if fa.bits == 16:
        assert excluded == 0


@pytest.mark.slow
@pytest.mark.parametrize("k", [2, 8, 16, 32, 48, 64])
@pytest.mark.parametrize("fa,fb", PAIRS, ids=PAIR_IDS)
def test_dot_vs_mmasim_many_k(fa, fb, k):
    rng = np.random.default_rng(R.seed_of(fa.name, fb.name, k, "mmasim"))
    A, B, C, labels = R.gen_float_rows(rng, fa, fb, 3000, k)
    got = R.codes_of(np.asarray(jwmma.dot(R.from_codes(A, fa), R.from_codes(B, fb), R.from_codes(C, R.F32),
                                          model="cdna3"))).reshape(-1)
    bad, _ = compare(got, mmasim_dot(A, B, C, fa, fb), A, B, C, fa, fb)
    assert not bad, bad[:8]


def test_quirk_a_is_what_differs():
    """The excluded difference, shown on one group: bf8 2**15 * 2**15 (e = 30 > 24), a zero
    second product (K = 1 would crash MMA-Sim, quirk (b)) and C = -Inf. MMA-Sim drops C and
    returns 2**30; jwmma (specials first) returns -Inf. The 16-bit path keeps the Inf in both."""
    c = np.array([-np.inf], np.float32)
    for dtype, op in ((R.BF8.dtype, fdpa.MMA_GTR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=16)),
                      (np.float16, fdpa.MMA_TR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=8))):
        a = np.array([[2.0**15, 0.0]], dtype)
        f = R.BF8 if dtype is R.BF8.dtype else R.F16
        ours = float(np.asarray(jwmma.dot(a, a, c, model="cdna3")).reshape(-1)[0])
        ms = float(op.dpa(to_torch(R.codes_of(a), f), to_torch(R.codes_of(a), f), torch.tensor([-np.inf]))[0])
        assert ours == -np.inf
        assert ms == (2.0**30 if f is R.BF8 else -np.inf)
        assert quirk_a(list(R.codes_of(a)[0]), list(R.codes_of(a)[0]), 0xFF800000, f, f) == (f is R.BF8)


# ------------------------------------------------------------------ through sparse builtins
SPARSE = [("smfmac_f32_16x16x128_fp8_fp8", 3), ("smfmac_f32_16x16x64_f16", 3),
          pytest.param("smfmac_f32_32x32x64_bf8_fp8", 2, marks=pytest.mark.slow),
          pytest.param("smfmac_f32_32x32x32_bf16", 2, marks=pytest.mark.slow),
          pytest.param("swmmac_f32_16x16x32_bf8_bf8_w32", 4, marks=pytest.mark.slow)]


@pytest.mark.parametrize("name,waves", SPARSE)
def test_sparse_builtin_vs_mmasim(name, waves):
    """MMA-Sim gets the compressed A row and the selected B column in compressed-K order;
    jwmma gets the registers (NaN/Inf in pruned B rows must not matter). Odd waves have
    finite operands only (jwmma's branch without product specials)."""
    spec = jwmma.BUILTINS[name]
    fa, fb, fc = R.spec_formats(spec)
    fn = getattr(jwmma, name)
    total_bad, total_excl = [], 0
    for w in range(waves):
        rng = np.random.default_rng(R.seed_of(name, w, "mmasim"))
        A, pos, B, C = R.gen_builtin_float(rng, fa, fb, fc, spec.m, spec.n, spec.k, finite_operands=w % 2 == 1)
        got = R.run_builtin(fn, spec, A, pos, B, C, model="cdna3")
        bsel = R.selected_b(B, pos)  # (M, Kc, N)
        av = np.broadcast_to(A[:, None, :], (spec.m, spec.n, spec.kc))
        bv = np.transpose(bsel, (0, 2, 1))  # (M, N, Kc)
        want = mmasim_dot(av, bv, C, fa, fb)
        bad, excl = compare(got.reshape(-1), want.reshape(-1), av.reshape(-1, spec.kc), bv.reshape(-1, spec.kc),
                            C.reshape(-1), fa, fb)
        total_bad += [(w, *x) for x in bad]
        total_excl += excl
    assert not total_bad, f"{len(total_bad)} outputs differ from MMA-Sim (wave, flat index, jwmma, mmasim, C): {total_bad[:8]}"


# ------------------------------------------------------- gfx942 SMFMAC, FNUZ (issue #13)
TORCH_DTYPES.update(fp8_fnuz=torch.float8_e4m3fnuz, bf8_fnuz=torch.float8_e5m2fnuz)
GFX942 = [("smfmac_f32_16x16x64_fp8_bf8", 3), ("smfmac_f32_16x16x32_f16", 2), ("smfmac_f32_32x32x16_bf16", 2),
          pytest.param("smfmac_f32_32x32x32_bf8_fp8", 2, marks=pytest.mark.slow),
          pytest.param("smfmac_f32_16x16x64_fp8_fp8", 2, marks=pytest.mark.slow),
          pytest.param("smfmac_f32_16x16x64_bf8_bf8", 2, marks=pytest.mark.slow)]


@pytest.mark.parametrize("name,waves", GFX942)
def test_gfx942_smfmac_vs_mmasim_fnuz(name, waves):
    """The CDNA3 SMFMAC on gfx942 (their default target) under `cdna3`, MMA-Sim fed FNUZ data
    (torch.float8_e4m3fnuz / float8_e5m2fnuz: MMA-Sim's native CDNA3 setting). Same inputs,
    same comparison and exclusions as `test_sparse_builtin_vs_mmasim`."""
    spec = jwmma.BUILTINS[name]
    assert spec.arch == "gfx942" and spec.default_model == "cdna3"
    fa, fb, fc = R.spec_formats(spec)
    fn = getattr(jwmma, name)
    total_bad = []
    for w in range(waves):
        rng = np.random.default_rng(R.seed_of(name, w, "mmasim942"))
        A, pos, B, C = R.gen_builtin_float(rng, fa, fb, fc, spec.m, spec.n, spec.k, finite_operands=w % 2 == 1)
        got = R.run_builtin(fn, spec, A, pos, B, C, model=None)
        bsel = R.selected_b(B, pos)
        av = np.broadcast_to(A[:, None, :], (spec.m, spec.n, spec.kc))
        bv = np.transpose(bsel, (0, 2, 1))
        want = mmasim_dot(av, bv, C, fa, fb)
        bad, _ = compare(got.reshape(-1), want.reshape(-1), av.reshape(-1, spec.kc), bv.reshape(-1, spec.kc),
                         C.reshape(-1), fa, fb)
        total_bad += [(w, *x) for x in bad]
    assert not total_bad, f"{len(total_bad)} outputs differ from MMA-Sim (wave, flat index, jwmma, mmasim, C): {total_bad[:8]}"
