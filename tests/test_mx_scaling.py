"""``scaling="mx"`` (OCP MX v1.0 block scales, `jwmma.quant.scaling`) against the plain-Python
oracle (`tests/oracles/mx.py`), and a model's matmul through the block-scaled builtins: the
scales and element codes the unit hands the instruction, and the result's bits against
`jwmma.gemm` on the oracle's operands."""
from __future__ import annotations

import functools
from fractions import Fraction

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
import oracles.mx as MX
from jwmma.numerics.formats import FLOAT_FORMATS
from jwmma.numerics.rounding import x64_scope
from jwmma.quant import scaling as sc

NAMES = ("fp8", "bf8", "fp6", "bf6", "fp4")
SCALED = "mfma_scale_f32_16x16x128_f8f6f4"


def _data(rng, rows, k):
    """float32 rows whose 32-element blocks span the float32 range (2**-140 .. 2**120), with
    zeros, an all-zero block and subnormals."""
    x = rng.standard_normal((rows, k)) * 2.0 ** rng.integers(-140, 121, (rows, 1 + (k - 1) // 32)).repeat(32, 1)[:, :k]
    x = x.astype(np.float32)
    x[0, :32] = 0.0
    x[1, ::7] = 0.0
    x[2, :8] = np.float32(1e-42)  # subnormal float32
    return x


@functools.partial(jax.jit, static_argnames="fmt")
def _quantise_mx(x, fmt):
    """`quantise` as the library runs it, inside a jit (one program per shape and format; run
    eagerly, each shape compiled its every operation: about 3 s)."""
    return sc.quantise(sc.exact_f64(x), fmt, "mx", axis=-1)


@pytest.mark.parametrize("fmt", NAMES)
@pytest.mark.parametrize("k", [96, 100])
def test_mx_quantise_equals_the_oracle(rng, fmt, k):
    x = _data(rng, 6, k)
    with x64_scope():
        q = _quantise_mx(jax.numpy.asarray(x), FLOAT_FORMATS[fmt])
    codes = np.asarray(q.values)
    codes = codes.view(np.uint8) if codes.dtype.itemsize == 1 else codes
    scales = np.asarray(q.scales)
    assert scales.shape == (6, -(-k // 32)) and scales.dtype == np.uint8
    for i in range(6):
        for kb in range(-(-k // 32)):
            block = [Fraction(float(v)) for v in x[i, 32 * kb: 32 * kb + 32]]
            s, want = MX.mx_block_scale(block, fmt)
            assert int(scales[i, kb]) == s, (i, kb)
            got = [int(c) & ((1 << MX.fmt_of(fmt).bits) - 1) for c in codes[i, 32 * kb: 32 * kb + 32]]
            assert got == want, (i, kb)


def test_mx_non_finite_block_is_a_nan_scale(rng):
    x = rng.standard_normal((2, 64)).astype(np.float32)
    x[0, 3], x[1, 40] = np.nan, np.inf
    with x64_scope():
        q = _quantise_mx(jax.numpy.asarray(x), FLOAT_FORMATS["fp4"])
    assert np.asarray(q.scales).tolist()[0][0] == 255 and np.asarray(q.scales).tolist()[1][1] == 255
    assert np.asarray(q.scales)[0, 1] != 255 and not np.asarray(q.values)[0, :32].any()


@pytest.mark.parametrize("formats", [("fp4", "fp8"), ("fp6", "bf6")])
def test_matmul_mx_equals_gemm_on_the_oracle_operands(rng, formats):
    """y = matmul(x, w, scaling='mx'): w^T per output channel and x^T per token quantised by
    the oracle's MX rule (blocks of 32 along K), the scales handed to the instruction, f32 out:
    the bits of jwmma.gemm on those codes and scales, transposed."""
    k, n, t = 160, 24, 10
    x = _data(rng, t, k)
    w = _data(rng, n, k).T.copy()  # (K, N): each output channel's blocks span the range
    y = np.asarray(jwmma.matmul(x, w, builtin=SCALED, scaling="mx", formats=formats))
    fa, fb = formats
    a_codes, sa = MX.mx_quantize_rows([[Fraction(float(v)) for v in row] for row in w.T], fa)
    b_codes, sbT = MX.mx_quantize_rows([[Fraction(float(v)) for v in row] for row in x], fb)
    code = {name: c for c, name in jwmma.isa.table.SCALE_FORMATS.items()}
    d = jwmma.gemm(np.asarray(a_codes, np.uint8), np.asarray(b_codes, np.uint8).T.copy(), builtin=SCALED,
                   scale_a=np.asarray(sa, np.uint8), scale_b=np.asarray(sbT, np.uint8).T.copy(),
                   fmt_a=code[fa], fmt_b=code[fb])
    np.testing.assert_array_equal(y.view(np.uint32), np.asarray(d).T.view(np.uint32))
    gx, gw = jax.grad(lambda x, w: jwmma.matmul(x, w, builtin=SCALED, scaling="mx", formats=formats).sum(),
                      argnums=(0, 1))(x, w)
    assert gx.shape == x.shape and gw.shape == w.shape and np.isfinite(np.asarray(gx)).all()


def test_mx_unit_bad_input():
    with pytest.raises(ValueError, match="MX block scales are applied by the block-scaled builtins"):
        jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", scaling="mx")
    with pytest.raises(ValueError, match=r"Unit\(formats=...\): 'fp5' is not one of"):
        jwmma.Unit(SCALED, scaling="mx", formats=("fp5", "fp8"))
    with pytest.raises(ValueError, match="formats=...\\) applies to the block-scaled builtins"):
        jwmma.Unit("smfmac_f32_16x16x128_fp8_fp8", formats=("fp8", "fp8"))
    u = jwmma.Unit(SCALED, scaling="mx", formats=("fp4", 1))
    assert u.formats == (4, 1) and u.spec.a_type == "fp4" and u.spec.b_type == "bf8"
    assert u == jwmma.Unit(SCALED, scaling="mx", formats=(4, "bf8")) and hash(u)
    assert ml_dtypes.float4_e2m1fn  # the format dtype the MX formats name


def test_study_runs_the_mx_formats_and_does_not_prune_dense_builtins():
    """`jwmma study` on the block-scaled builtin: formats fp4 and mxfp8 ('auto' scaling is 'mx'),
    every point against the exact product of the effective (scaled) operands; a dense builtin's
    A is not pruned."""
    from jwmma.study import data, run

    st = run(ks=(128,), models=("cdna4_mx",), formats=("fp4", "mxfp8"), seeds=1, m=16, n=16, progress=False,
             figures=False)
    rows = {r["format"]: r for r in st.points}
    assert set(rows) == {"fp4", "mxfp8"} and all(r["scaling"] == "mx" for r in rows.values())
    assert all(0 <= r["mean_rel"] < 1e-6 and r["nonfinite"] == 0 for r in rows.values())
    a, b = data.make_operands("normal", 64, 16, 16, 0, "mfma_f32_16x16x32_fp8_fp8")
    groups = (np.asarray(a).astype(np.float64) != 0).reshape(16, 16, 4).sum(-1)
    assert (groups > 2).any()  # not 2:4
    a24, _ = data.make_operands("normal", 64, 16, 16, 0, "smfmac_f32_16x16x64_fp8_fp8")
    assert ((np.asarray(a24).astype(np.float64) != 0).reshape(16, 16, 4).sum(-1) <= 2).all()
    with pytest.raises(ValueError, match="scaling 'mx' needs a block-scaled builtin"):
        run(ks=(128,), models=("cdna3",), formats=("fp8",), scaling="mx", seeds=1, m=16, n=16, progress=False)
