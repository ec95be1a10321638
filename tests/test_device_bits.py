"""Same bits on every device (docs/ARCHITECTURE.md, "Same bits on every device").

A reported GPU-vs-CPU drift (bf16 `cdna3` and `gfx12_dot4` outputs, `prune_2_4` ties) was not
arithmetic: the two machines built different operands. Their float64 -> bfloat16 casts
disagreed (ml_dtypes 0.6.0 rounds through float32, twice; 0.7.0 once), at 6 of ~180,000
elements, and those elements moved the prune ties and the outputs. These tests pin:

* `jwmma.numerics.cast` rounds float64 once into every narrow format (checked against the
  oracles' exact rounding of Fractions), so operands built with it are the same bits on every
  machine, and the report's operands hold elements of exactly the double-rounding kind;
* `prune_2_4` keeps what a plain-Python oracle keeps, eagerly, under `jit` and `vmap`, for
  magnitude ties, -0, NaN, Inf and subnormals in every dtype;
* the report's GEMM outputs, on operands built once-rounded, equal the model oracles;
* on a GPU (marker ``gpu``; skipped without one) the same operands give the CPU's bits.
"""
from __future__ import annotations

from fractions import Fraction

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.numerics import cast

from oracles import formats as of
from oracles.ref_gfx12 import dot_bits as gfx12_dot_bits
from oracles.ref_models import cdna3_dot

BF = ml_dtypes.bfloat16
NARROW = [of.BF16, of.F16, of.FP8, of.BF8, of.FP8_FNUZ, of.BF8_FNUZ]


def _bits(x):
    x = np.asarray(x)
    return x.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize]).astype(np.int64)


def _draw(seed, shapes):
    """The report's operands: x = N(0,1) * 2**U{-12..11} in float64, per operand in order."""
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(s) * 2.0 ** rng.integers(-12, 12, s) for s in shapes]


# ------------------------------------------------------------------ one rounding from float64
def _near_ties(f: of.Fmt, rng, n=400):
    """float64 values at, just above and just below the midpoints of random adjacent codes,
    plus the subnormal, largest and overflow region."""
    top = (1 << (f.bits - 1)) - 1
    codes = rng.integers(0, top, n)
    lo = np.array([of.to_float(int(c), f) for c in codes])
    hi = np.array([of.to_float(int(c) + 1, f) for c in codes])
    ok = np.isfinite(lo) & np.isfinite(hi)
    mid = (lo[ok] + hi[ok]) / 2  # exact in float64
    eps = np.abs(mid) * 2.0 ** -40 + 2.0 ** -1000
    vals = np.concatenate([mid, mid + eps, mid - eps, lo[ok] * 1.5])
    sign = rng.choice([-1.0, 1.0], vals.size)
    return vals * sign


def _rne(f: of.Fmt, v: float) -> int:
    """The oracle's exact rounding; a negative zero result is +0 in FNUZ (which has no -0)."""
    code = of.encode_fraction(f, Fraction(float(v)), neg_zero=bool(np.signbit(v)))
    return 0 if f.nan == "fnuz" and code == 0x80 and abs(v) < 1 else code  # 0x80 from overflow is NaN


@pytest.mark.parametrize("f", NARROW, ids=lambda f: f.name)
def test_cast_rounds_float64_once(f, rng):
    x = _near_ties(f, rng)
    got = _bits(cast(x, f.dtype))
    want = [_rne(f, v) for v in x]
    bad = [(float(v).hex(), hex(g), hex(w)) for v, g, w in zip(x, got, want) if not of.same_bits(int(g), w, f)]
    assert not bad, f"{len(bad)} of {x.size} values rounded wrongly, e.g. {bad[:4]}"


def test_cast_keeps_nan_and_saturation_kind():
    x = np.array([np.nan, np.inf, -np.inf, 1e300, -1e-300, 0.0, -0.0])
    for f in NARROW:
        got = cast(x, f.dtype).astype(np.float64)
        assert np.isnan(got[0])
        with np.errstate(over="ignore"):  # exact in float32 (or beyond its range): one rounding
            ref = x.astype(np.float32).astype(f.dtype).astype(np.float64)
        assert np.array_equal(np.isnan(got), np.isnan(ref)) and np.array_equal(got[~np.isnan(got)], ref[~np.isnan(ref)])


def test_report_operands_hold_double_rounding_elements():
    """The report's draws contain float64 values that round differently once and twice: the
    class of the drift. `cast` gives the correctly rounded code at every one of them."""
    found = 0
    for seed, shapes in ((1001, [(2, 96, 640), (2, 640, 80)]), (1011, [(64, 256), (256, 48)])):
        for x in _draw(seed, shapes + [(1,)])[:-1]:
            twice = _bits(x.astype(np.float32).astype(BF))  # the float32 detour
            once = _bits(cast(x, BF))
            idx = np.argwhere(twice != once)
            found += len(idx)
            for i in map(tuple, idx):
                assert once[i] == _rne(of.BF16, float(x[i]))
    assert found >= 6  # the report's 6 (three in its A, three in its B's)


# ------------------------------------------------------------------ prune_2_4 on every device
def _prune_oracle(codes, f):
    """Keep the two largest magnitudes per group of four, ties to the lower position; NaN ranks
    as an infinite magnitude; -0 is a zero; the rest become +0."""
    out = np.zeros_like(codes)
    for gi in range(codes.shape[0]):
        keys = []
        for p in range(4):
            c = int(codes[gi, p])
            if f is None:
                keys.append((abs(c), -p))
            elif of.is_nan(c, f):
                keys.append((Fraction(10) ** 400, -p))
            else:
                v = of.to_float(c, f)
                keys.append((Fraction(abs(v)) if np.isfinite(v) else Fraction(10) ** 400, -p))
        keep = sorted(range(4), key=lambda p: keys[p], reverse=True)[:2]
        for p in keep:
            out[gi, p] = codes[gi, p]
    return out


def _adversarial_groups(f, rng, n=300):
    """Groups of four codes built for ties: equal magnitudes of either sign, +0/-0, NaN, Inf,
    subnormals, repeated values, and random codes."""
    if f is None:
        vals = np.array([0, 1, -1, 2, -2, 127, -128, 5, -5])
        return rng.choice(vals, (n, 4))
    pool = [0, 1 << (f.bits - 1), 1, 2, 3, (1 << f.mbits) - 1, 1 << f.mbits]  # +0, -0, subnormals, min normal
    pool += [of.qnan(f)] + ([of.inf_bits(f, False), of.inf_bits(f, True)] if f.has_inf else [])
    pool += [int(c) for c in rng.integers(0, 1 << f.bits, 6)]
    base = rng.choice(pool, (n, 4))
    sign = 1 << (f.bits - 1)
    flips = rng.integers(0, 2, (n, 4)) * sign  # the same magnitude with the other sign: a tie
    if f.nan == "fnuz":
        flips[(base | flips) == sign] = 0  # 0x80 is the NaN of FNUZ, not -0
    return (base ^ flips) & ((1 << f.bits) - 1)


PRUNE_DTYPES = [(of.F32, np.float32), (of.F16, np.float16), (of.BF16, BF), (of.FP8, ml_dtypes.float8_e4m3fn),
                (of.BF8, ml_dtypes.float8_e5m2), (of.FP8_FNUZ, ml_dtypes.float8_e4m3fnuz),
                (None, np.int8), (None, np.int32)]


@pytest.mark.parametrize("f,dtype", PRUNE_DTYPES, ids=lambda v: getattr(v, "name", None) or np.dtype(v).name)
def test_prune_2_4_ties_eager_jit_vmap(f, dtype, rng):
    codes = _adversarial_groups(f, rng)
    want = _prune_oracle(codes, f)
    if f is None:
        x = codes.astype(dtype)
    else:
        x = codes.astype(f.uint).view(dtype)
    x = x.reshape(-1, 8)  # two groups per row
    for label, got in (("eager", jwmma.prune_2_4(x)), ("jit", jax.jit(jwmma.prune_2_4)(x)),
                       ("vmap", jax.vmap(jwmma.prune_2_4)(x))):
        got = np.asarray(got)
        got = got.astype(np.int64) if f is None else _bits(got)
        got = got.reshape(-1, 4)
        bad = np.nonzero((got != want).any(-1))[0]
        assert not bad.size, f"{label}: groups {codes[bad[:3]].tolist()} kept {got[bad[:3]].tolist()}, " \
                             f"want {want[bad[:3]].tolist()}"


def test_prune_2_4_report_operand_matches_oracle():
    a = cast(_draw(1001, [(2, 96, 640)])[0], BF)
    got = _bits(jwmma.prune_2_4(a)).reshape(-1, 4)
    mag = np.abs(a.astype(np.float64)).reshape(-1, 4)  # finite draws: magnitudes order exactly
    order = np.argsort(-mag, axis=-1, kind="stable")
    keep = np.zeros(mag.shape, bool)
    np.put_along_axis(keep, order[:, :2], True, axis=-1)
    want = np.where(keep, _bits(a).reshape(-1, 4), 0)
    assert np.array_equal(got, want)


# ------------------------------------------------------------------ the report's GEMM outputs
def _report_2a():
    a, b, c = _draw(1001, [(2, 96, 640), (2, 640, 80), (2, 96, 80)])
    return cast(a, BF), cast(b, BF), c.astype(np.float32)


def _report_2b():
    a, b, c = _draw(1011, [(64, 256), (256, 48), (64, 48)])
    return cast(a, BF), cast(b, BF), c.astype(np.float32)


def test_report_cdna3_bf16_outputs_match_oracle():
    a, b, c = _report_2a()
    d = _bits(jwmma.gemm(a, b, c, builtin="smfmac_f32_16x16x64_bf16", model="cdna3", prune=True))
    vals, pos = (np.asarray(x) for x in jwmma.compress_2_4(jwmma.prune_2_4(a)))
    q = np.arange(vals.shape[-1]) // 2
    # the named output and a spread of rows 71 and 90 (whose pruning the report saw move)
    for bt, i, j in [(1, 37, 59), (1, 71, 0), (1, 71, 41), (1, 90, 7), (1, 90, 79), (0, 17, 3)]:
        av = _bits(vals[bt, i]).tolist()
        bv = _bits(b[bt, 4 * q + pos[bt, i], j]).tolist()
        want = cdna3_dot(av, bv, int(_bits(c[bt, i, j])), of.BF16, of.BF16)
        assert d[bt, i, j] == want & 0xFFFFFFFF, (bt, i, j)


def test_report_gfx12_bf16_outputs_match_oracle():
    a, b, c = _report_2b()
    d = _bits(jwmma.gemm(a, b, c, builtin="wmma_f32_16x16x16_bf16_w32_gfx12", backend="xla"))
    for i, j in [(15, 19), (24, 19), (37, 19), (56, 19), (0, 0), (63, 47)]:
        want = gfx12_dot_bits(_bits(a[i]).tolist(), _bits(b[:, j]).tolist(), int(_bits(c[i, j])),
                              of.BF16, of.BF16, of.F32)
        assert d[i, j] == want & 0xFFFFFFFF, (i, j)


# ------------------------------------------------------------------ the GPU half
def _gpus():
    try:
        return jax.devices("gpu")
    except RuntimeError:
        return []


@pytest.mark.gpu
@pytest.mark.skipif(not _gpus(), reason="needs a GPU (runs the same operands on the GPU and the CPU)")
@pytest.mark.parametrize("backend", ["xla", "auto"])
def test_gpu_gives_cpu_bits_on_report_operands(backend):
    cpu, gpu = jax.devices("cpu")[0], _gpus()[0]

    def run(dev):
        with jax.default_device(dev):
            a, b, c = (jax.device_put(x, dev) for x in _report_2a())
            p = jwmma.prune_2_4(a)
            d1 = jwmma.gemm(a, b, c, builtin="smfmac_f32_16x16x64_bf16", model="cdna3", prune=True, backend=backend)
            a2, b2, c2 = (jax.device_put(x, dev) for x in _report_2b())
            d2 = jwmma.gemm(a2, b2, c2, builtin="wmma_f32_16x16x16_bf16_w32_gfx12", backend=backend)
            return [_bits(x) for x in (p, d1, d2)]

    for name, x, y in zip(("prune_2_4", "cdna3 bf16", "gfx12_dot4 bf16"), run(cpu), run(gpu)):
        assert np.array_equal(x, y), f"{name}: {int((x != y).sum())} elements differ"
