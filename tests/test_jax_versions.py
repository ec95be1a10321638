"""What once depended on the JAX version (docs/ARCHITECTURE.md, "Same bits on every device"):
float operands copied, padded or selected as floats (JAX 0.11's XLA:CPU flushed bf16 subnormals
in an eager `jnp.pad`; JAX 0.10 quiets NaN payloads in float copies), and 64-bit requests outside
`x64_scope` (JAX 0.11 warns "Explicitly requested dtype int64 ... will be truncated" and gives
int32). The stored-digest half is `tests/test_stored_digests.py`.

These run on whatever JAX is installed; on JAX 0.11 and a CPU with avx512_bf16 they catch the
flush itself (tests/README.md says how to run the suite under JAX 0.11).
"""
from __future__ import annotations

import warnings

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma

BF16 = ml_dtypes.bfloat16


def _subnormal_bf16(rng, shape):
    """bf16 values, a third of them subnormal (codes 0x0001..0x007F, both signs), the rest normal."""
    codes = rng.integers(0x3F00, 0x4100, shape).astype(np.uint16)
    sub = rng.random(shape) < 0.35
    codes[sub] = rng.integers(1, 0x80, int(sub.sum())).astype(np.uint16) | (rng.integers(0, 2, int(sub.sum())) << 15).astype(np.uint16)
    return codes.view(BF16)


def _bits(x):
    x = np.asarray(x)
    return x.view({4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize])


@pytest.mark.parametrize("builtin", ["smfmac_f32_16x16x64_bf16", "swmmac_f32_16x16x32_bf16_w32"])
def test_odd_k_bf16_subnormals_survive_padding_and_pruning(rng, builtin):
    """K not a multiple of 4: gemm pads A (and prunes it) on bits. The same GEMM with the
    padding done by this test in numpy, on the codes, gives the same bits; so does the
    pruning: kept subnormals are kept as they are."""
    k = 197
    a = _subnormal_bf16(rng, (21, k))
    b = _subnormal_bf16(rng, (k, 19))
    c = np.zeros((21, 19), np.float32)
    d = jwmma.gemm(a, b, c, builtin=builtin, model="exact", prune=True)
    a4 = np.concatenate([_bits(a), np.zeros((21, 3), np.uint16)], axis=1).view(BF16)
    b4 = np.concatenate([_bits(b), np.zeros((3, 19), np.uint16)], axis=0).view(BF16)
    pruned = np.asarray(jwmma.prune_2_4(a4))
    kept = _bits(pruned) != 0
    np.testing.assert_array_equal(_bits(pruned)[kept], _bits(a4)[kept])  # kept values bit for bit
    assert (np.abs(_bits(pruned)[kept]).astype(np.int64) & 0x7F80 == 0).any()  # some of them subnormal
    ref = jwmma.gemm(pruned, b4, c, builtin=builtin, model="exact")
    np.testing.assert_array_equal(_bits(d), _bits(ref))


def test_bf16_registers_move_as_bits(rng):
    """A builtin over many waves pads and slices its registers into wave blocks: bf16 C with
    subnormals, and bf16 B registers, come through unchanged (a zero A gives D = C exactly
    under exact; a NaN C stays NaN)."""
    name = "swmmac_bf16_16x16x32_bf16_w32"
    waves = 37
    c_codes = _bits(_subnormal_bf16(rng, (waves, 32, 8))).copy()
    c_codes[:, :, 0] = 0x7FC1  # a quiet NaN with a payload
    a = np.zeros((waves, 32, 8), np.int16)
    b = _bits(_subnormal_bf16(rng, (waves, 32, 16))).view(np.int16)
    idx = np.full((waves, 32), np.uint32(0xEEEEEEEE)).view(np.int32)  # every pair at positions (2, 3)
    opts = jwmma.Options(block_elems=2**12)  # several wave blocks, the last one padded
    d = jwmma.swmmac_bf16_16x16x32_bf16_w32(a, b, c_codes.view(np.int16), idx, model="exact", options=opts)
    got = np.asarray(d).view(np.uint16)
    keep = c_codes != 0x7FC1
    np.testing.assert_array_equal(got[keep], c_codes[keep])  # subnormal C comes back as it went in
    nan = ((got[~keep] & 0x7F80) == 0x7F80) & ((got[~keep] & 0x7F) != 0)
    assert nan.all()  # NaN stays NaN


def test_prune_and_compress_keep_bits(rng):
    """prune_2_4 / compress_2_4 / decompress_2_4 on bf16 subnormals, e5m2 NaN payloads and the
    fnuz NaN: the kept values' bits, eager and under jit."""
    x = _subnormal_bf16(rng, (8, 64))
    for f in (jwmma.prune_2_4, jax.jit(jwmma.prune_2_4)):
        p = _bits(f(x))
        kept = p != 0
        np.testing.assert_array_equal(p[kept], _bits(x)[kept])
    e5 = rng.integers(0, 256, (8, 64)).astype(np.uint8)
    e5[:, ::4] = 0x7D  # an E5M2 NaN with a payload, the largest magnitude of its group
    v, pos = jwmma.compress_2_4(jwmma.prune_2_4(e5.view(ml_dtypes.float8_e5m2)))
    assert (_bits(v)[:, ::2] == 0x7D).all()
    back = _bits(jwmma.decompress_2_4(v, pos))
    assert (back[:, ::4] == 0x7D).all()
    fnuz = np.array([[0x80, 0x01, 0x02, 0x7F]], np.uint8).view(ml_dtypes.float8_e4m3fnuz)  # NaN ranks first
    assert list(_bits(jwmma.prune_2_4(fnuz))[0]) == [0x80, 0, 0, 0x7F]


def test_no_64_bit_request_outside_the_scope(rng):
    """The entry points never ask for int64/float64 outside `x64_scope` (JAX 0.11 warns and
    truncates to 32 bits; JAX 0.10 truncates silently): the warning is an error here."""
    x = rng.standard_normal((4, 128)).astype(np.float32)
    w = rng.standard_normal((128, 16)).astype(np.float32)
    a = rng.standard_normal((16, 128)).astype(ml_dtypes.float8_e4m3fn)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Explicitly requested dtype")
        jwmma.matmul(x, w)
        jwmma.gemm(jwmma.prune_2_4(a), a.T.copy())
        jwmma.gemm(a, a.T.copy(), builtin="mfma_f32_16x16x32_fp8_fp8", target="gfx950")
        jwmma.prune_2_4(x, rule="largest")
        jwmma.dot(np.ones(16, np.float16), np.ones(16, np.float16), np.float32(0), model="exact")
        assert not jax.config.jax_enable_x64


@pytest.mark.slow
def test_no_64_bit_request_under_grad_and_vmap(rng):
    """The same under transformations (each compiles a new program: slow)."""
    x = rng.standard_normal((4, 128)).astype(np.float32)
    w = rng.standard_normal((128, 16)).astype(np.float32)
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="Explicitly requested dtype")
        jax.grad(lambda x, w: jwmma.matmul(x, w).sum(), argnums=(0, 1))(x, w)
        jax.jit(jax.vmap(lambda r: jwmma.matmul(r, w)))(x[:, None])
        assert not jax.config.jax_enable_x64
