"""Direct builtin calls on the Pallas kernels (`jwmma.backends.pallas.call_kernel`, registered
with the engine): ``backend='pallas'`` runs the instruction of every wave on the family's
kernel (interpret mode on a CPU), and must give ``backend='xla'``'s bits, NaN payloads
included, on waves of ordinary values, of random bit patterns (NaN, Inf, subnormals) and of
values near the formats' limits. ``'auto'`` takes the kernel only where a gain was measured
(`AUTO_CALLS`), and a model without a kernel still runs (XLA, the same bits)."""
from __future__ import annotations

import numpy as np
import pytest

import jwmma
from jwmma.backends import pallas

PALLAS = jwmma.Options(backend="pallas", pallas=jwmma.PallasOptions(interpret=True))
XLA = jwmma.Options(backend="xla")

#: (builtin, model): one per kernel family and operand kind, sparse and dense
CASES = [
    ("smfmac_f32_16x16x128_fp8_fp8", None),  # fused groups, 3-D 8-bit kernel
    ("smfmac_f32_16x16x64_bf16", None),  # fused groups, 2-D integer kernel
    ("swmmac_f32_16x16x32_f16_w32", None),  # gfx12_dot4
    ("swmmac_f16_16x16x32_f16_w32", None),  # gfx12, f16 accumulator
    ("smfmac_f32_16x16x64_f16", "exact"),
    ("swmmac_f32_16x16x32_fp8_fp8_w32", "fma_chain"),
    ("smfmac_i32_16x16x64_i8", None),  # integer
    ("wmma_f32_16x16x16_f16_w32_gfx12", None),  # dense WMMA
    ("mfma_f32_32x32x16_bf16", None),  # dense MFMA, 32 x 32
    ("mfma_scale_f32_16x16x128_f8f6f4", None),  # block-scaled (fp8 x fp8)
]


def _words(rng, shape, dtype, kind):
    """Register words: 'bits' every pattern of the register type; 'normal' values of the
    element type near 1 (a float register), small integers otherwise; 'edge' large and tiny
    magnitudes (products near overflow, sums with subnormal parts)."""
    dt = np.dtype(dtype)
    if dt.kind in "iu" or kind == "bits":
        info = np.iinfo(dt) if dt.kind in "iu" else np.iinfo(np.dtype(f"u{dt.itemsize}"))
        words = rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(info.dtype)
        return words if dt.kind in "iu" else words.view(dt)
    scale = 1.0 if kind == "normal" else np.ldexp(1.0, rng.choice([-30, -14, -7, 7, 14], shape))
    return (rng.standard_normal(shape) * scale).astype(dt)


def _registers(spec, kind, seed):
    rng = np.random.default_rng(seed)
    waves = 2
    a, b, c = (_words(rng, (waves, spec.lanes, op.n), op.dtype, kind) for op in (spec.a, spec.b, spec.c))
    idx = (rng.integers(0, 2**31 - 1, (waves, spec.lanes)).astype(np.int32) & 0x0E0E0E0E) | 0x04040404
    return a, b, c, idx  # idx: a valid 2:4 pair in every nibble


def _call(name, model, regs, options):
    fn = getattr(jwmma, name)
    spec = jwmma.BUILTINS[name]
    a, b, c, idx = regs
    kw = dict(model=model, options=options)
    if spec.scaled:  # E8M0 scales around 2**0 and fp8 x fp8 formats
        scales = (np.arange(spec.lanes, dtype=np.int32) * 7 % 24 + 115).astype(np.int32)
        return fn(a, b, c, 0, 0, 0, scales, 0, scales, **kw)
    if spec.dense:
        return fn(a, b, c, **kw)
    return fn(a, b, c, idx, **kw)


def _same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    bits = x.view(np.dtype(f"u{x.dtype.itemsize}")), y.view(np.dtype(f"u{y.dtype.itemsize}"))
    return x.shape == y.shape and np.array_equal(*bits)


@pytest.mark.parametrize("name,model", CASES)
def test_call_on_kernel_bits(name, model):
    spec = jwmma.BUILTINS[name]
    m = jwmma.models.resolve(model, jwmma.engine.step.context(spec, False), spec.default_model)
    assert pallas.call_kernel(spec, m, jwmma.engine.options.resolve(PALLAS)) is not None, "the case must hit a kernel"
    for seed, kind in enumerate(("normal", "bits", "edge")):
        regs = _registers(spec, kind, seed)
        want, got = _call(name, model, regs, XLA), _call(name, model, regs, PALLAS)
        assert _same(got, want), (name, model, kind)


def test_auto_and_models_without_kernels_stay_on_xla():
    spec = jwmma.BUILTINS["smfmac_f32_16x16x128_fp8_fp8"]
    ctx = jwmma.engine.step.context(spec, False)
    resolve = jwmma.engine.options.resolve
    cdna3 = jwmma.models.resolve(None, ctx, spec.default_model)
    on_gpu = resolve(jwmma.Options(platform="gpu"))  # backend 'auto'
    if pallas.triton_available():  # 'auto' takes the kernel where AUTO_CALLS records a gain
        assert pallas.AUTO_CALLS[("fused", True)] and pallas.call_kernel(spec, cdna3, on_gpu) is not None
    chain_spec = jwmma.BUILTINS["swmmac_f32_16x16x32_fp8_fp8_w32"]
    chain = jwmma.models.resolve("fma_chain", jwmma.engine.step.context(chain_spec, False), chain_spec.default_model)
    assert ("fma_chain", True) not in pallas.AUTO_CALLS and pallas.call_kernel(chain_spec, chain, on_gpu) is None
    assert pallas.call_kernel(spec, cdna3, resolve(jwmma.Options(backend="xla"))) is None
    grouped = "Exact(group=4)"  # exact groups: no kernel (it sums all K products at once), so XLA, no error
    assert pallas.call_kernel(spec, jwmma.models.resolve(grouped, ctx, spec.default_model), resolve(PALLAS)) is None
    regs = _registers(spec, "bits", 7)
    assert _same(_call(spec.name, grouped, regs, PALLAS), _call(spec.name, grouped, regs, XLA))
