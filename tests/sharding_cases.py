"""Sharded GEMM emulation on 8 forced CPU devices: the same bits as one device.

Not collected by the default run by name: `tests/test_sharding.py` runs this module in a
subprocess (XLA_FLAGS must be set before JAX starts). Run it directly with
``python -m pytest -q tests/sharding_cases.py`` (it sets the flag itself when imported first).
"""
from __future__ import annotations

import os
import re

_FLAG = "--xla_force_host_platform_device_count=8"
_flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
os.environ["XLA_FLAGS"] = (_flags + " " + _FLAG).strip()
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import argparse  # noqa: E402

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jwmma  # noqa: E402
from jwmma.cli import devices  # noqa: E402
from jwmma.tiled import plan as sharding  # noqa: E402
from tests.oracles.f64_data import float64_values  # noqa: E402

FP8 = "smfmac_f32_16x16x128_fp8_fp8"

pytestmark = pytest.mark.skipif(
    jax.device_count() < 8, reason="needs 8 devices (JAX started before XLA_FLAGS was set)"
)


def bits(x):
    x = np.asarray(x)
    return x.view({8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize])


def same_bits(d, ref):
    assert d.shape == ref.shape and d.dtype == ref.dtype
    np.testing.assert_array_equal(bits(d), bits(ref))


def shard_shapes(d):
    return sorted({tuple(s.data.shape) for s in d.addressable_shards})


def assert_not_whole(d, n_devices):
    """D is spread: every device holds a shard smaller than D, on n_devices devices."""
    shards = d.addressable_shards
    assert len({s.device for s in shards}) == n_devices
    assert all(s.data.size < d.size for s in shards), shard_shapes(d)


def mesh_of(shape, names):
    return Mesh(np.array(jax.devices()[: int(np.prod(shape))], dtype=object).reshape(shape), names)


def floats(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------- bit identity
def test_fp8_cdna3_batch_odd_shapes_auto_devices(rng):
    """fp8 cdna3 (default model), odd M, N and K, a batch of 2, devices=8: automatic layout."""
    a = floats(rng, (2, 40, 260), ml_dtypes.float8_e4m3fn)
    b = floats(rng, (260, 48), ml_dtypes.float8_e4m3fn)
    ref = jwmma.gemm(a, b, builtin=FP8, prune=True)
    d = jwmma.gemm(a, b, builtin=FP8, prune=True, devices=8)
    same_bits(d, ref)
    assert isinstance(d.sharding, NamedSharding) and d.sharding.mesh.size == 8
    assert dict(d.sharding.mesh.shape) == {"batch0": 2, "m": 4}
    assert shard_shapes(d) == [(1, 10, 48)]
    assert_not_whole(d, 8)
    assert not jax.config.jax_enable_x64 and d.dtype == np.float32  # the user's setting is kept


def test_f16_explicit_mesh_roles_and_uneven_m(rng):
    """f16 with the fma_chain model on a user mesh ('x', 'y') = 2 x 4, mesh_axes=('n', 'm'):
    M = 37 does not divide over 4 (computed padded, D replicated along 'y'), N = 50 over 2 does."""
    name = "smfmac_f32_16x16x64_f16"
    a = floats(rng, (37, 136), np.float16)
    b = floats(rng, (136, 50), np.float16)
    c = floats(rng, (37, 50), np.float32)
    ref = jwmma.gemm(a, b, c, builtin=name, model="fma_chain", prune=True)
    mesh = mesh_of((2, 4), ("x", "y"))
    d = jwmma.gemm(a, b, c, builtin=name, model="fma_chain", prune=True, mesh=mesh, mesh_axes=("n", "m"))
    same_bits(d, ref)
    assert d.sharding.spec == P(None, "x") and shard_shapes(d) == [(37, 25)]
    assert_not_whole(d, 8)


def test_integer_presharded_inputs_stay_sharded(rng):
    """RDNA4 iu8 -> i32 with clamp and unsigned A, inputs already sharded: followed, and D
    keeps their layout (rows over 'rows', columns over 'cols')."""
    name = "swmmac_i32_16x16x32_iu8_w32"
    a = rng.integers(0, 256, (64, 96)).astype(np.uint8).astype(np.int16)  # unsigned A values
    b = rng.integers(-128, 128, (96, 32)).astype(np.int8)
    c = rng.integers(-(2**31), 2**31, (64, 32), dtype=np.int64).astype(np.int32)
    kw = dict(builtin=name, prune=True, a_neg=False, clamp=True)
    ref = jwmma.gemm(a, b, c, **kw)
    mesh = mesh_of((4, 2), ("rows", "cols"))
    a_s = jax.device_put(a, NamedSharding(mesh, P("rows", None)))
    b_s = jax.device_put(b, NamedSharding(mesh, P(None, "cols")))
    c_s = jax.device_put(c, NamedSharding(mesh, P("rows", "cols")))
    d = jwmma.gemm(a_s, b_s, c_s, **kw)
    same_bits(d, ref)
    assert d.sharding.spec == P("rows", "cols") and list(d.sharding.mesh.axis_names) == ["rows", "cols"]
    assert shard_shapes(d) == [(16, 16)]
    assert_not_whole(d, 8)
    # only A sharded: its rows decide, B is replicated along 'rows' (no 'cols' role)
    d2 = jwmma.gemm(a_s, b, c, **kw)
    same_bits(d2, ref)
    assert d2.sharding.spec == P("rows", None)


def test_rdna4_f16_acc_registers_path_broadcast_batch(rng):
    """RDNA4 f16 -> f16 (gfx12_dot4), register path, batch (4, 2) broadcast from a (4, 1, ...)
    and b (2, ...), on a mesh whose axes are named after roles ('batch', 'batch1')."""
    name = "swmmac_f16_16x16x32_f16_w32"
    a = floats(rng, (4, 1, 24, 72), np.float16)
    b = floats(rng, (2, 72, 40), np.float16)
    c = floats(rng, (24, 40), np.float16)
    ref = jwmma.gemm(a, b, c, builtin=name, prune=True, path="registers")
    mesh = mesh_of((4, 2), ("batch", "batch1"))
    d = jwmma.gemm(a, b, c, builtin=name, prune=True, path="registers", mesh=mesh)
    same_bits(d, ref)
    assert d.dtype == np.float16 and d.sharding.spec == P("batch", "batch1", None, None)
    assert shard_shapes(d) == [(1, 1, 24, 40)]
    assert_not_whole(d, 8)


def test_inside_jit_and_compressed_operands(rng):
    """gemm traced inside the user's jit with (values, positions) operands, on 2 devices."""
    a = jwmma.prune_2_4(floats(rng, (64, 256), ml_dtypes.float8_e4m3fn))
    values, pos = jwmma.compress_2_4(a)
    b = floats(rng, (256, 32), ml_dtypes.float8_e5m2).astype(ml_dtypes.float8_e4m3fn)
    kw = dict(builtin=FP8, model="fma_chain")
    ref = jwmma.gemm((values, pos), b, **kw)
    f = jax.jit(lambda v, p, b: jwmma.gemm((v, p), b, devices=2, **kw))
    d = f(values, pos, b)
    same_bits(d, ref)
    assert d.sharding.mesh.size == 2 and shard_shapes(d) == [(32, 32)]
    assert not jax.config.jax_enable_x64


# the default run keeps one path per accumulator kind (f32 C on the matrix path, a 16-bit C on
# the register path); each case compiles four sharded programs
@pytest.mark.parametrize("builtin,model,dt,c_dt,paths", [
    (FP8, None, ml_dtypes.float8_e4m3fn, np.float32, ("matrix",)),
    ("swmmac_bf16_16x16x32_bf16_w32", None, ml_dtypes.bfloat16, ml_dtypes.bfloat16, ("registers",)),
    pytest.param(FP8, None, ml_dtypes.float8_e4m3fn, np.float32, ("registers",), marks=pytest.mark.slow),
    pytest.param("swmmac_bf16_16x16x32_bf16_w32", None, ml_dtypes.bfloat16, ml_dtypes.bfloat16, ("matrix",),
                 marks=pytest.mark.slow),
    pytest.param("smfmac_i32_16x16x64_i8", None, np.int8, np.int32, ("matrix", "registers"), marks=pytest.mark.slow),
    pytest.param(FP8, "fma_chain", ml_dtypes.float8_e4m3fn, np.float32, ("matrix", "registers"),
                 marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_f16_w32_gfx12", "exact", np.float16, np.float32, ("matrix", "registers"),
                 marks=pytest.mark.slow),
])
def test_gemm_inside_a_users_shard_map(rng, builtin, model, dt, c_dt, paths):
    """jwmma.gemm inside the user's shard_map with A sharded over rows, B and C replicated or
    C absent: each device's block has the one-device bits (the loop carries start from zeros
    or a C that does not vary; they are cast to vary like A)."""
    spec = jwmma.BUILTINS[builtin]
    dense = spec.dense
    a = floats(rng, (64, 2 * spec.k + 4), dt) if dt != np.int8 else rng.integers(-128, 128, (64, 2 * spec.k + 4)).astype(dt)
    a = a if dense else jwmma.prune_2_4(a)
    b = floats(rng, (2 * spec.k + 4, 24), dt) if dt != np.int8 else rng.integers(-128, 128, (2 * spec.k + 4, 24)).astype(dt)
    c = (floats(rng, (16, 24), c_dt) if c_dt != np.int32 else rng.integers(-999, 999, (16, 24)).astype(c_dt))
    mesh = mesh_of((4,), ("x",))
    shard_map = getattr(jax, "shard_map", None)
    if shard_map is None:  # JAX before 0.7
        from jax.experimental.shard_map import shard_map
    for path in paths:
        kw = dict(builtin=builtin, model=model, path=path)
        f = shard_map(lambda a, b: jwmma.gemm(a, b, **kw), mesh=mesh, in_specs=(P("x", None), P()),
                      out_specs=P("x", None))
        same_bits(jax.jit(f)(a, b), jwmma.gemm(a, b, **kw))
        # the same C block, replicated (it varies over nothing), added to every device's rows
        f = shard_map(lambda a, b, c: jwmma.gemm(a, b, c, **kw), mesh=mesh, in_specs=(P("x", None), P(), P()),
                      out_specs=P("x", None))
        same_bits(jax.jit(f)(a, b, c), jwmma.gemm(a, b, np.tile(c, (4, 1)), **kw))
    assert not jax.config.jax_enable_x64


@pytest.mark.slow  # ~50 s of compiling on 2 cores (four sharded programs)
def test_matmul_devices_mesh_and_sharded_tokens(rng):
    """jwmma.matmul over 4 devices (devices=, eager and under jit with grad) and with x sharded
    along its tokens: the one-device bits, and the one-device straight-through gradient."""
    x = rng.standard_normal((2, 32, 256)).astype(np.float32)
    w = rng.standard_normal((256, 48)).astype(np.float32)
    ref = jwmma.matmul(x, w)
    same_bits(jwmma.matmul(x, w, devices=4), ref)
    d = jax.jit(lambda x, w: jwmma.matmul(x, w, devices=4))(x, w)
    same_bits(d, ref)
    mesh = mesh_of((4,), ("t",))
    xs = jax.device_put(x, NamedSharding(mesh, P(None, "t", None)))
    same_bits(jwmma.matmul(xs, w), ref)
    grad = jax.grad(lambda x, w: jwmma.matmul(x, w).sum(), argnums=(0, 1))
    gs = jax.jit(lambda x, w: jax.grad(lambda x, w: jwmma.matmul(x, w, devices=4).sum(), argnums=(0, 1))(x, w))(x, w)
    for got, want in zip(gs, grad(x, w)):
        same_bits(got, want)
    assert not jax.config.jax_enable_x64


@pytest.mark.parametrize("builtin,model,dt", [
    ("swmmac_f32_16x16x32_f16_w32", None, np.float16),
    pytest.param(FP8, "cdna3", ml_dtypes.float8_e4m3fn, marks=pytest.mark.slow),
    pytest.param(FP8, "fma_chain_k", ml_dtypes.float8_e4m3fn, marks=pytest.mark.slow),
])
def test_pallas_backend_sharded_equals_one_device(rng, builtin, model, dt):
    """Issue #16 (CPU side): the sharded GEMM with the Pallas backend (interpret mode on these
    CPU devices) gives one device's XLA bits; M and N split, a batch, odd shapes."""
    spec = jwmma.BUILTINS[builtin]
    a = floats(rng, (2, 40, 2 * spec.k + 6), dt)
    b = floats(rng, (2 * spec.k + 6, 50), dt)
    kw = dict(builtin=builtin, model=model, prune=True)
    ref = jwmma.gemm(a, b, backend="xla", **kw)
    opts = jwmma.Options(backend="pallas", pallas=jwmma.PallasOptions(tm=16, tn=16, interpret=True))
    mesh = mesh_of((2, 2), ("m", "n"))
    d = jwmma.gemm(a, b, mesh=mesh, options=opts, **kw)
    same_bits(d, ref)
    assert d.sharding.mesh.size == 4
    assert_not_whole(d, 4)


@pytest.mark.slow
@pytest.mark.parametrize("model", ["exact", "cdna3"])
def test_more_models_and_32x32_tiles(rng, model):
    name = "smfmac_f32_32x32x64_fp8_fp8"
    a = floats(rng, (3, 70, 200), ml_dtypes.float8_e4m3fn)
    b = floats(rng, (200, 66), ml_dtypes.float8_e4m3fn)
    ref = jwmma.gemm(a, b, builtin=name, model=model, prune=True)
    for devices in (3, 8):
        d = jwmma.gemm(a, b, builtin=name, model=model, prune=True, devices=devices)
        same_bits(d, ref)


# ------------------------------------------------------------------------------ f64 MFMA
F64 = ("mfma_f64_16x16x4f64", "mfma_f64_4x4x4f64")


def f64_operands(rng, batch, m, n, k):
    """Adversarial float64 A (*batch, M, K), B (K, N), C (*batch, M, N) (subnormals, NaN/Inf,
    overflow; K = 0 and 1 cancel exactly in every output)."""
    a, b = float64_values(rng, (*batch, m, k), "adversarial"), float64_values(rng, (k, n), "adversarial")
    a[..., 1], b[1, :] = a[..., 0], -b[0, :]
    return a, b, float64_values(rng, (*batch, m, n), "adversarial")


def same_f64(d, ref, x64: bool):
    """D is what the f64 rows give (numpy float64 with jax_enable_x64 off, a float64 JAX array
    with it on) with the one-device bits (uint64)."""
    assert isinstance(d, jax.Array) if x64 else isinstance(d, np.ndarray)
    same_bits(d, ref)


def test_f64_devices_keep_one_device_bits(rng):
    """The f64 MFMA spread over devices=2 (M split; M, N, K odd: every shard padded) with a C:
    the one-device bits, a numpy float64 D with jax_enable_x64 off (the user's setting kept)."""
    a, b, c = f64_operands(rng, (), 10, 7, 5)
    kw = dict(builtin="mfma_f64_4x4x4f64", target="gfx90a")
    ref = jwmma.gemm(a, b, c, **kw)
    assert sharding.plan_gemm(jwmma.BUILTINS[kw["builtin"]], a, b, c, devices=2).splits == {"m": 2, "n": 1}
    same_f64(jwmma.gemm(a, b, c, devices=2, **kw), ref, x64=False)
    assert not jax.config.jax_enable_x64


@pytest.mark.slow
@pytest.mark.parametrize("name,target,path", [(F64[0], "gfx942", "matrix"), (F64[0], "gfx90a", "registers"),
                                              (F64[1], "gfx950", "registers"), (F64[1], "gfx942", "matrix")])
@pytest.mark.parametrize("x64", [False, True])
def test_f64_devices_and_meshes_grid(rng, name, target, path, x64):
    """devices=2 (C given and None), meshes over M x N and batch x M (odd shapes, every shard
    padded), x64 off and on: the one-device bits; with x64 on D stays sharded."""
    a, b, c = f64_operands(rng, (2,), 22, 18, 9)
    kw = dict(builtin=name, target=target, path=path)
    runs = [(dict(devices=2), c), (dict(devices=2), None), (dict(mesh=mesh_of((2, 2), ("m", "n"))), c),
            (dict(mesh=mesh_of((2, 4), ("x", "y")), mesh_axes=("batch", "m")), c)]
    with jax.enable_x64(x64):
        ref, ref0 = jwmma.gemm(a, b, c, **kw), jwmma.gemm(a, b, **kw)
        for spread, cc in runs:
            d = jwmma.gemm(a, b, cc, **spread, **kw)
            same_f64(d, ref if cc is not None else ref0, x64)
            if x64:
                assert isinstance(d.sharding, NamedSharding) and len(d.sharding.device_set) > 1
    assert not jax.config.jax_enable_x64


@pytest.mark.slow
def test_f64_sharded_inputs_jit_and_empty(rng):
    """With x64 on: float64 inputs carrying a NamedSharding are followed, gemm with devices=2
    inside the user's jit, and a GEMM of K = 0 over devices (D = C bit for bit)."""
    a, b, c = f64_operands(rng, (4,), 12, 10, 7)
    kw = dict(builtin=F64[0])
    with jax.enable_x64(True):
        ref = jwmma.gemm(a, b, c, **kw)
        mesh = mesh_of((2, 2), ("x", "y"))
        a_s = jax.device_put(a, NamedSharding(mesh, P("x", "y", None)))
        c_s = jax.device_put(c, NamedSharding(mesh, P("x", "y", None)))
        d = jwmma.gemm(a_s, b, c_s, **kw)
        same_f64(d, ref, True)
        assert d.sharding.mesh.size == 4 and shard_shapes(d) == [(2, 6, 10)]
        same_f64(jax.jit(lambda a, b, c: jwmma.gemm(a, b, c, devices=2, **kw))(a, b, c), ref, True)
        same_f64(jwmma.gemm(a[..., :0], b[:0], c, devices=2, **kw), c, True)
    same_f64(jwmma.gemm(a[..., :0], b[:0], c, devices=2, **kw), c, False)


@pytest.mark.slow
def test_f64_unit_devices_and_mesh(rng):
    """An f64 Unit with devices= or mesh=: dot_general, its gradients through an f64 backward
    unit and matmul give the one-device unit's bits (x64 on, as an f64 unit needs)."""
    x, w = float64_values(rng, (2, 10, 6), "random"), float64_values(rng, (6, 12), "random")
    dn = (((2,), (0,)), ((), ()))

    def run(**spread):
        unit = jwmma.Unit(F64[0], backward=jwmma.Unit(F64[0], **spread), **spread)
        y = jwmma.dot_general(x, w, dn, unit=unit)
        grads = jax.jit(jax.grad(lambda x, w: jwmma.dot_general(x, w, dn, unit=unit).sum(), argnums=(0, 1)))(x, w)
        return (y, *grads, jwmma.matmul(x, w, builtin=F64[0], **spread))

    with jax.enable_x64(True):
        x, w = jax.numpy.asarray(x), jax.numpy.asarray(w)
        ref = run()
        for spread in (dict(devices=2), dict(mesh=mesh_of((2,), ("m",)))):
            for got, want in zip(run(**spread), ref):
                same_f64(got, np.asarray(want), True)


# ------------------------------------------------------------------------------- layout
def test_auto_layout_choices():
    assert sharding.auto_layout(8, (), 16384, 16384, (16, 16)) == (8, 1)
    assert sharding.auto_layout(2, (), 16384, 16384, (16, 16)) == (2, 1)
    assert sharding.auto_layout(8, (4,), 64, 64, (16, 16)) == (4, 2, 1)  # batch first
    assert sharding.auto_layout(8, (), 64, 64, (16, 16)) == (4, 2)  # whole tiles beat 8 x 8 rows
    assert sharding.auto_layout(8, (), 37, 41, (16, 16)) == (1, 1)  # nothing divides: one device
    spec = jwmma.BUILTINS[FP8]
    a, b = np.zeros((37, 128), ml_dtypes.float8_e4m3fn), np.zeros((128, 41), ml_dtypes.float8_e4m3fn)
    assert sharding.plan_gemm(spec, a, b, devices=8) is None
    assert sharding.plan_gemm(spec, a, b) is None  # plain inputs: no distribution
    assert sharding.plan_gemm(spec, a, b, devices=1) is None
    plan = sharding.plan_gemm(spec, np.zeros((2, 40, 128), a.dtype), b[:, :40], devices="all")
    assert plan.splits == {"batch0": 2, "m": 4, "n": 1} and plan.padded() == (64, 48)


def test_default_mesh_roles():
    spec = jwmma.BUILTINS[FP8]
    a, b = np.zeros((4, 64, 128), ml_dtypes.float8_e4m3fn), np.zeros((128, 64), ml_dtypes.float8_e4m3fn)
    plan = sharding.plan_gemm(spec, a, b, mesh=mesh_of((2, 4), ("x", "y")))
    assert (plan.batch, plan.m, plan.n) == ((("x",),), ("y",), ())  # batch first, then M
    plan = sharding.plan_gemm(spec, a, b, mesh=mesh_of((8,), ("x",)))  # 4 % 8: batch skipped
    assert (plan.batch, plan.m, plan.n) == (((),), ("x",), ())
    plan = sharding.plan_gemm(spec, a, b, mesh=mesh_of((2, 4), ("n", "m")))  # named axes
    assert (plan.m, plan.n) == (("m",), ("n",))
    plan = sharding.plan_gemm(spec, a, b, mesh=mesh_of((2, 2, 2), ("x", "y", "z")), mesh_axes={"x": "m", "z": "m", "y": "batch"})
    assert (plan.batch, plan.m, plan.n) == ((("y",),), ("x", "z"), ())
    mesh = mesh_of((2, 4), ("x", "y"))  # D's sharding given directly
    plan = sharding.plan_gemm(spec, a, b, mesh=NamedSharding(mesh, P(None, "y", "x")))
    assert (plan.batch, plan.m, plan.n) == (((),), ("y",), ("x",))
    assert plan.out_sharding == NamedSharding(mesh, P(None, "y", "x"))


# -------------------------------------------------------------------------------- errors
def test_errors_are_clear():
    spec = jwmma.BUILTINS[FP8]
    f8 = ml_dtypes.float8_e4m3fn
    a, b = np.zeros((3, 64, 128), f8), np.zeros((128, 64), f8)
    with pytest.raises(ValueError, match=r"batch dim 0 of size 3 \(batch shape \(3,\)\) does not divide .* size 2"):
        jwmma.gemm(a, b, builtin=FP8, mesh=mesh_of((2,), ("batch",)))
    with pytest.raises(ValueError, match="K cannot be split"):
        jwmma.gemm(a[0], b, builtin=FP8, mesh=mesh_of((2,), ("x",)), mesh_axes=("k",))
    with pytest.raises(ValueError, match="either mesh= or devices="):
        jwmma.gemm(a[0], b, builtin=FP8, mesh=mesh_of((2,), ("m",)), devices=2)
    with pytest.raises(ValueError, match=r"devices=16 but only 8 cpu device"):
        jwmma.gemm(a[0], b, builtin=FP8, devices=16)
    with pytest.raises(ValueError, match=r"one role per mesh axis \('x', 'y'\)"):
        jwmma.gemm(a[0], b, builtin=FP8, mesh=mesh_of((2, 4), ("x", "y")), mesh_axes=("m",))
    with pytest.raises(ValueError, match=r"names batch dim 1, but the batch shape is \(3,\)"):
        sharding.plan_gemm(spec, a, b, mesh=mesh_of((2,), ("x",)), mesh_axes=("batch1",))
    with pytest.raises(ValueError, match=r"output D .* = \(37, 50\) cannot be sharded .* M=37 over 2 .* N=50 over 4"):
        sharding.plan_gemm(spec, np.zeros((37, 128), f8), np.zeros((128, 50), f8), mesh=mesh_of((2, 4), ("m", "n")))
    with pytest.raises(ValueError, match=r"the sharding given for D has 4 entries"):
        sharding.plan_gemm(spec, a, b, mesh=NamedSharding(mesh_of((2,), ("x",)), P(None, None, None, "x")))
    with pytest.raises(ValueError, match=r"cannot place mesh axis 'z'"):
        sharding.plan_gemm(spec, a[0], b, mesh=mesh_of((2, 2, 2), ("x", "y", "z")))
    mesh = mesh_of((2, 4), ("x", "y"))
    a_s = jax.device_put(a[0], NamedSharding(mesh, P("x", None)))
    c_s = jax.device_put(np.zeros((64, 64), np.float32), NamedSharding(mesh, P("y", None)))
    with pytest.raises(ValueError, match=r"inputs disagree on how to split M: a splits it over \('x',\), c over \('y',\)"):
        jwmma.gemm(a_s, b, c_s, builtin=FP8)
    other = Mesh(np.array(jax.devices()[4:6], dtype=object), ("x",))
    b_s = jax.device_put(b, NamedSharding(other, P(None, "x")))
    with pytest.raises(ValueError, match="sharded over different meshes"):
        jwmma.gemm(a_s, b_s, builtin=FP8)


# ------------------------------------------------------------------------------ CLI helpers
def test_cli_helpers():
    p = devices.add_device_args(argparse.ArgumentParser())
    assert devices.mesh_from_args(p.parse_args([])) == {"devices": 8}  # default: all
    assert devices.mesh_from_args(p.parse_args(["--devices", "1"])) == {}
    assert devices.mesh_from_args(p.parse_args(["--devices", "2"])) == {"devices": 2}
    kw = devices.mesh_from_args(p.parse_args(["--mesh", "batch=2,m=2"]))
    assert dict(kw["mesh"].shape) == {"batch0": 2, "m": 2}
    for argv, msg in ((["--devices", "9"], "only 8"), (["--devices", "x"], "a number or 'all'"),
                      (["--mesh", "m=4,k=2"], "roles are"), (["--mesh", "m=16"], "needs 16 devices")):
        with pytest.raises(ValueError, match=msg):
            devices.mesh_from_args(p.parse_args(argv))
