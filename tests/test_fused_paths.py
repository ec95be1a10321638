"""The fused-group model's two implementations of truncating alignment give the same bits:
integer shifts of the significand product, and (for f32-exact products: fp8, bf8, f16) a
multiply of the f32 product by 2**(F - E_T) with a conversion toward zero."""
import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.models.fused import FusedGroups

FORMATS = [np.float16, ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e5m2]


def _operands(dtype, rng, n=1500, k=48):
    # every bit pattern of the narrow formats is likely to appear; wide exponent spreads
    bits = 16 if np.dtype(dtype).itemsize == 2 else 8
    raw = rng.integers(0, 1 << bits, (2, n, k)).astype(np.uint16 if bits == 16 else np.uint8)
    a, b = raw[0].view(dtype), raw[1].view(dtype)
    # keep NaN/Inf rare so that most rows take the fast path
    fin = np.isfinite(a.astype(np.float32)) & np.isfinite(b.astype(np.float32))
    keep = rng.random((n, k)) < 0.999
    a = np.where(fin | ~keep, a, np.zeros((), dtype)).astype(dtype)
    b = np.where(fin | ~keep, b, np.zeros((), dtype)).astype(dtype)
    c = (rng.standard_normal(n) * 10.0 ** rng.integers(-45, 38, n)).astype(np.float32)
    return a, b, c


@pytest.mark.parametrize("dtype", FORMATS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("model", [
    "cdna3",
    pytest.param(FusedGroups(group=4, frac_bits=12), marks=pytest.mark.slow),
    pytest.param(FusedGroups(zero_exponent=-126, renormalize=False), marks=pytest.mark.slow),
], ids=["cdna3", "g4f12", "c785138"])
def test_float_and_integer_alignment_agree(dtype, model):
    rng = np.random.default_rng(7)
    a, b, c = _operands(dtype, rng)
    fast = np.asarray(jwmma.dot(a, b, c, model=model)).view(np.uint32)
    slow = np.asarray(jwmma.dot(a, b, c, model=model, options=jwmma.Options(float_alignment=False))).view(np.uint32)
    nan = np.isnan(fast.view(np.float32)) & np.isnan(slow.view(np.float32))
    assert ((fast == slow) | nan).all()


# ----------------------------------------------------------------------------------------
# fp8 group sums as matrix products (jwmma.models.fused_dots) == the per-product path
def _gemm_bits(dots: bool, *args, **kw):
    return np.asarray(jwmma.gemm(*args, options=jwmma.Options(group_dots=dots), **kw)).view(np.uint32)


# Default run: each builtin once, each distribution and path at least once; the rest -m slow
# (the whole grid took a quarter of the default suite's time on the CI machine).
_GROUP_SUM_DEFAULT = {("smfmac_f32_16x16x128_fp8_fp8", "normal", "matrix"),
                      ("smfmac_f32_16x16x128_fp8_fp8", "lognormal", "registers"),
                      ("smfmac_f32_32x32x64_bf8_fp8", "lognormal", "matrix"),
                      ("swmmac_f32_16x16x32_fp8_bf8_w32", "normal", "registers")}


@pytest.mark.parametrize("builtin,dist,path", [
    pytest.param(b, d, p, marks=() if (b, d, p) in _GROUP_SUM_DEFAULT else pytest.mark.slow)
    for b in ("smfmac_f32_16x16x128_fp8_fp8", "smfmac_f32_32x32x64_bf8_fp8", "swmmac_f32_16x16x32_fp8_bf8_w32")
    for d in ("normal", "lognormal")  # lognormal: groups fall back per product
    for p in ("matrix", "registers")])
def test_matrix_product_group_sums_agree(builtin, dist, path):
    from jwmma import study

    a, b = study.make_operands(dist, 640, 40, 37, 5, builtin=builtin)
    rng = np.random.default_rng(3)
    c = (rng.standard_normal((40, 37)) * 10.0 ** rng.integers(-42, 30, (40, 37))).astype(np.float32)
    c[0, :3] = [0.0, -0.0, np.ldexp(-1.0, -149)]
    kw = dict(builtin=builtin, model="cdna3", path=path)
    fast = _gemm_bits(True, a, b, c, **kw)
    slow = _gemm_bits(False, a, b, c, **kw)
    assert np.array_equal(fast, slow)


def test_matrix_product_group_sums_are_used_and_fall_back():
    """The certificate accepts benign fp8 data and refuses groups whose products span more
    binades than the window keeps (then the per-product path decides)."""
    from jwmma.engine import step
    from jwmma.models import fused_dots
    from jwmma.numerics import formats
    from jwmma.numerics.rounding import x64_scope

    spec = jwmma.BUILTINS["smfmac_f32_16x16x128_fp8_fp8"]
    ctx = step.context(spec)
    rng = np.random.default_rng(0)
    pos = np.tile([0, 2], (16, 32)).astype(np.int32)  # every block keeps positions 0 and 2
    a = rng.standard_normal((16, 64)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((128, 16)).astype(ml_dtypes.float8_e4m3fn)
    model = jwmma.models.CDNA3()

    @jax.jit  # one program (eagerly, each operation compiled one of its own: 85 of them)
    def all_pass(a_codes, b_codes):
        af, bf = formats.decode(formats.FP8, a_codes), formats.decode(formats.FP8, b_codes)
        return fused_dots.group_sums(model, ctx, af, pos, bf)[2].all()

    with x64_scope():
        def ok(a, b):
            return bool(all_pass(*(np.asarray(x).view(np.uint8).astype(np.int32) for x in (a, b))))
        assert fused_dots.applies(model, ctx, (16, 64), (128, 16))
        assert ok(a, b)
        # row 3: compressed 0 (dense k 0) and 2 (dense k 4) are in the same half; with B row 0
        # at 448 their products are 2**17 and about 2**-9 apart: more than the 18-bit window
        a2 = a.copy()
        a2[3, 0], a2[3, 2] = 448.0, 2.0**-9
        b2 = b.copy()
        b2[0, :], b2[4, :] = 448.0, 1.0
        assert not ok(a2, b2)


@pytest.mark.parametrize("builtin,model", [
    ("smfmac_f32_16x16x128_fp8_fp8", "cdna3"),
    ("smfmac_f32_16x16x64_f16", "cdna3"),
    ("smfmac_f32_16x16x64_bf16", "cdna3_c785138"),
    ("swmmac_f32_16x16x32_f16_w32", "gfx12_dot4"),
    ("swmmac_bf16_16x16x32_bf16_w32", "gfx12_dot4"),
])
def test_loop_and_unrolled_instructions_agree(builtin, model):
    """The CPU's instruction (one loop over groups or steps) and the unrolled one other
    platforms compile (``Options(platform=...)`` picks it, here on the CPU): the same bits on
    random register words (NaN, Inf, subnormals, every exponent), with and without C specials."""
    spec = jwmma.BUILTINS[builtin]
    rng = np.random.default_rng(11)
    waves = 24

    def regs(op):
        words = rng.integers(0, 1 << 32, (waves, spec.lanes, op.n), dtype=np.uint64).astype(np.uint32)
        return words.view(np.int32) if op.elem_bits < 16 else (words & 0xFFFF).astype(np.uint16).view(op.dtype)

    a, b, c = regs(spec.a), regs(spec.b), regs(spec.c)
    if spec.c_type == "f32":
        c = rng.integers(0, 1 << 32, (waves, spec.lanes, spec.c.n), dtype=np.uint64).astype(np.uint32).view(np.float32)
    idx = rng.integers(0, 1 << 32, (waves, spec.lanes), dtype=np.uint64).astype(np.uint32).view(np.int32)
    fn = getattr(jwmma, builtin)
    args = (a, b, c, idx, 0, 1) if spec.arch == "gfx942" or spec.arch == "gfx950" else (a, b, c, idx)
    cpu = np.asarray(fn(*args, model=model)).view(np.uint16 if spec.c.elem_bits == 16 else np.uint32)
    other = np.asarray(fn(*args, model=model, options=jwmma.Options(platform="gpu", backend="xla")))
    other = other.view(cpu.dtype)
    assert np.array_equal(cpu, other)
