"""FNUZ (gfx942) and OCP (gfx950/gfx12) byte formats of the oracle vs ml_dtypes, and the exactness
of every fp8/bf8 product in f32 (NUMERICS.md 3, BUILTINS_MORE.md 1.1)."""
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

from oracles import sib_formats as F

BYTE_FORMATS = [(F.E4M3FNUZ, ml_dtypes.float8_e4m3fnuz), (F.E5M2FNUZ, ml_dtypes.float8_e5m2fnuz),
                (F.E4M3FN, ml_dtypes.float8_e4m3fn), (F.E5M2, ml_dtypes.float8_e5m2)]


@pytest.mark.parametrize("fmt,dt", BYTE_FORMATS, ids=[f.name for f, _ in BYTE_FORMATS])
def test_all_256_codes_match_ml_dtypes(fmt, dt):
    ref = np.arange(256, dtype=np.uint8).view(dt).astype(np.float64)
    for code in range(256):
        kind, sign, v = F.decode(fmt, code)
        x = ref[code]
        if np.isnan(x):
            assert kind == "nan", hex(code)
        elif np.isinf(x):
            assert kind == "inf" and sign == (x < 0), hex(code)
        else:
            assert kind == "num" and Fraction(float(x)) == v, hex(code)
            assert sign == int(np.signbit(x)), hex(code)  # -0 exactly where ml_dtypes has it


@pytest.mark.parametrize("fmt,dt,bias,maxval", [(F.E4M3FNUZ, ml_dtypes.float8_e4m3fnuz, 8, 240),
                                                 (F.E5M2FNUZ, ml_dtypes.float8_e5m2fnuz, 16, 57344)])
def test_fnuz_special_rules(fmt, dt, bias, maxval):
    kinds = [F.decode(fmt, c)[0] for c in range(256)]
    assert [c for c in range(256) if kinds[c] == "nan"] == [0x80]  # NaN = 0x80 only
    assert "inf" not in kinds  # no Inf
    assert all(not (F.decode(fmt, c)[2] == 0 and F.decode(fmt, c)[1]) for c in range(256) if kinds[c] == "num")  # no -0
    assert fmt.bias == bias
    vals = [F.decode(fmt, c)[2] for c in range(256) if kinds[c] == "num"]
    assert max(vals) == maxval == float(ml_dtypes.finfo(dt).max)
    assert min(v for v in vals if v > 0) == Fraction(1, 2 ** (bias - 1 + fmt.mbits))  # smallest subnormal
    assert F.decode(fmt, 1 << fmt.mbits)[2] == Fraction(1, 2 ** (bias - 1))  # smallest normal 2**(1-bias)
    # the same byte means different values in FNUZ and OCP (the target must pick the decoding)
    ocp = F.E4M3FN if fmt.ebits == 4 else F.E5M2
    assert F.decode(fmt, 0x38)[2] * 2 == F.decode(ocp, 0x38)[2]
    assert F.decode(ocp, 0x80) == ("num", 1, 0) and F.decode(fmt, 0x80)[0] == "nan"


def test_element_format_by_target():
    assert F.element_format("fp8", "gfx942") is F.E4M3FNUZ and F.element_format("bf8", "gfx942") is F.E5M2FNUZ
    assert F.element_format("fp8", "gfx950") is F.E4M3FN and F.element_format("bf8", "gfx950") is F.E5M2
    assert F.element_format("fp8", "gfx12") is F.E4M3FN
    with pytest.raises(ValueError, match="target"):
        F.element_format("fp8", "gfx940")


@pytest.mark.parametrize("fa,fb", [(a, b) for a in (F.E4M3FNUZ, F.E5M2FNUZ) for b in (F.E4M3FNUZ, F.E5M2FNUZ)]
                         + [(F.E4M3FN, F.E5M2), (F.E5M2, F.E5M2)], ids=lambda f: f.name)
def test_every_product_is_exact_in_f32(fa, fb):
    """All 256 x 256 products of finite codes are f32 values exactly (significands <= 4 x 4 bits,
    exponents inside the f32 range, subnormal x subnormal included). The oracle's exact values
    are floats exactly; their f64 products are exact (<= 8 significant bits), so f32 exactness
    is f32(p) == p."""
    def finite(f):
        return np.array([float(v) for k, _, v in (F.decode(f, c) for c in range(256)) if k == "num"])
    p = np.multiply.outer(finite(fa), finite(fb)).ravel()
    assert p.size >= 240 * 240
    assert np.array_equal(p.astype(np.float32).astype(np.float64), p)
    assert np.min(np.abs(p[p != 0])) >= 2.0 ** -34 and np.max(np.abs(p)) <= 57344.0 ** 2


def test_round_rne_against_numpy():
    """round_rne (the `exact` model's single rounding) agrees with numpy's f64 -> f32/f16 casts,
    subnormals and overflow included, on values exact in f64."""
    rng = np.random.default_rng(1)
    x = np.concatenate([rng.standard_normal(3000) * np.exp2(rng.integers(-160, 140, 3000)),
                        np.exp2(rng.integers(-150, -120, 200)) * rng.uniform(-2, 2, 200),
                        rng.uniform(-7e4, 7e4, 400), rng.uniform(-1e-7, 1e-7, 400)])
    for v in x:
        f = Fraction(float(v))
        zs = int(v < 0)
        with np.errstate(over="ignore"):
            want32 = int(np.float64(v).astype(np.float32).view(np.uint32))
            want16 = int(np.float64(v).astype(np.float16).view(np.uint16))
        assert F.round_rne(F.F32, f, zs) == want32, v
        assert F.round_rne(F.F16, f, zs) == want16, v
    # bf16: ml_dtypes' cast from float64 is RNE too
    for v in x[:800]:
        with np.errstate(over="ignore"):
            want = int(np.array(v).astype(ml_dtypes.bfloat16).view(np.uint16))
        assert F.round_rne(F.BF16, Fraction(float(v)), int(v < 0)) == want, v
