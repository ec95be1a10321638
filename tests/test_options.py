"""Execution options (`jwmma.Options`): validated, hashable, resolved at the entry points and
part of every compiled program's key.

The regression for issue #9's cache bug: execution choices used to be read from environment
variables while tracing, so a second call with other settings and the same shapes reused the
first compiled program. Here two calls with different options and the same shapes, with no
`jax.clear_caches()` in between, must each trace the program they asked for: the traced
programs are inspected (matrix products present or not, tile shapes, alignment conversions),
not just the results (which are equal by design).
"""
from __future__ import annotations

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.engine.options import resolve

FP8 = "smfmac_f32_16x16x128_fp8_fp8"


def _eqns(jaxpr):
    """Every equation of a jaxpr, sub-jaxprs (jit, scan, cond, map) included."""
    for eqn in jaxpr.eqns:
        yield eqn
        for v in eqn.params.values():
            for sub in (v if isinstance(v, (list, tuple)) else [v]):
                inner = getattr(sub, "jaxpr", sub)
                if hasattr(inner, "eqns"):
                    yield from _eqns(inner)


def _has(closed, prim: str) -> bool:
    return any(e.primitive.name == prim for e in _eqns(closed.jaxpr))


def _fp8_problem(m=32, n=64, k=256, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.float8_e4m3fn)
    return jwmma.compress_2_4(jwmma.prune_2_4(a)), b


def _gemm_jaxpr(a, b, **kw):
    return jax.make_jaxpr(lambda v, p, b: jwmma.gemm((v, p), b, builtin=FP8, model="cdna3", **kw))(*a, b)


# --------------------------------------------------------------------------- the cache bug
def test_gemm_options_reach_the_compiled_program():
    """The documented reproducer: group sums as matrix products on, then off, then on again,
    same shapes, no cache clearing: each call's program is the one asked for, and the bits
    agree."""
    a, b = _fp8_problem()
    on, off = jwmma.Options(group_dots=True), jwmma.Options(group_dots=False)
    d_on = np.asarray(jwmma.gemm(a, b, builtin=FP8, model="cdna3", options=on))
    d_off = np.asarray(jwmma.gemm(a, b, builtin=FP8, model="cdna3", options=off))  # same shapes
    assert np.array_equal(d_on.view(np.uint32), d_off.view(np.uint32))
    assert _has(_gemm_jaxpr(a, b, options=on), "dot_general")
    assert not _has(_gemm_jaxpr(a, b, options=off), "dot_general")
    assert _has(_gemm_jaxpr(a, b, options=on), "dot_general")


def test_builtin_options_reach_the_compiled_program():
    (values, pos), b = _fp8_problem(16, 16, 128)
    regs = (jwmma.pack_a(FP8, values), jwmma.pack_b(FP8, b), jwmma.pack_c(FP8, np.zeros((16, 16), np.float32)),
            jwmma.pack_index(FP8, pos))
    fn = jwmma.smfmac_f32_16x16x128_fp8_fp8
    results = []
    for dots in (True, False, True):
        opts = jwmma.Options(group_dots=dots)
        results.append(np.asarray(fn(*regs, options=opts)).view(np.uint32))
        assert _has(jax.make_jaxpr(lambda *r: fn(*r, options=opts))(*regs), "dot_general") == dots
    assert all(np.array_equal(results[0], r) for r in results)


def test_tile_width_reaches_the_compiled_program():
    a, b = _fp8_problem()
    shapes = {}
    for tn in (0, 16):
        closed = _gemm_jaxpr(a, b, options=jwmma.Options(tile_n=tn))
        shapes[tn] = {tuple(v.aval.shape) for e in _eqns(closed.jaxpr) for v in e.outvars}
    assert (1, 1, 32, 64) in shapes[0] and (2, 4, 16, 16) not in shapes[0]  # untiled: one block
    assert (2, 4, 16, 16) in shapes[16]  # 2 x 4 tiles of 16 x 16 outputs


def test_dot_alignment_option_reaches_the_compiled_program():
    """float_alignment (formerly a class flag) picks the float multiply + truncating
    conversion or the integer shifts, per call."""
    rng = np.random.default_rng(1)
    a = rng.standard_normal((8, 32)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((8, 32)).astype(ml_dtypes.float8_e4m3fn)
    c = np.zeros(8, np.float32)

    def f32_to_int(opts):
        closed = jax.make_jaxpr(lambda a, b, c: jwmma.dot(a, b, c, model="cdna3", options=opts))(a, b, c)
        return any(e.primitive.name == "convert_element_type" and e.invars[0].aval.dtype == np.float32
                   and e.params["new_dtype"] == np.int32 for e in _eqns(closed.jaxpr))

    fast = np.asarray(jwmma.dot(a, b, c, model="cdna3", options=jwmma.Options(float_alignment=True)))
    slow = np.asarray(jwmma.dot(a, b, c, model="cdna3", options=jwmma.Options(float_alignment=False)))
    assert np.array_equal(fast.view(np.uint32), slow.view(np.uint32))
    assert f32_to_int(jwmma.Options(float_alignment=True))
    assert not f32_to_int(jwmma.Options(float_alignment=False))


# --------------------------------------------------------------------------- the value
def test_options_are_hashable_values_and_validated():
    assert jwmma.Options() == jwmma.Options() and hash(jwmma.Options()) == hash(jwmma.Options())
    assert jwmma.Options(tile_n=16) != jwmma.Options(tile_n=128)
    with pytest.raises(ValueError, match="backend"):
        jwmma.Options(backend="cuda")
    with pytest.raises(TypeError, match="group_dots"):
        jwmma.Options(group_dots=1)
    with pytest.raises(ValueError, match="tile_n"):
        jwmma.Options(tile_n=-1)
    with pytest.raises(ValueError, match="block_elems"):
        jwmma.Options(block_elems=0)
    with pytest.raises(TypeError, match="float_alignment"):
        jwmma.Options(float_alignment=None)
    with pytest.raises(TypeError, match="options"):
        resolve({"tile_n": 0})


def test_resolve_is_concrete_and_follows_the_platform():
    cpu = resolve(jwmma.Options(platform="cpu"))
    assert (cpu.backend, cpu.group_dots, cpu.tile_n, cpu.block_elems) == ("xla", True, 0, None)
    gpu = resolve(jwmma.Options(platform="gpu"))
    assert (gpu.group_dots, gpu.tile_n) == (False, 128)
    assert resolve(jwmma.Options(platform="gpu", group_dots=True, tile_n=16)).group_dots is True
    assert resolve(None).platform == jax.default_backend()
    assert resolve(cpu) is cpu  # already resolved: unchanged
    assert resolve(None, backend="xla").backend == "xla"
    with pytest.raises(ValueError, match="contradicts"):
        resolve(jwmma.Options(backend="xla"), backend="auto")


def test_resolution_is_remembered_but_errors_are_not():
    """Eager calls resolve options and models once per distinct argument (cached): the same
    arguments give equal results, and a bad argument raises on every call, not only the first."""
    a = resolve(jwmma.Options(platform="gpu", compile_effort="fast"))
    b = resolve(jwmma.Options(platform="gpu", compile_effort="fast"))
    assert a == b and a.compile_effort == "fast" and a.backend == "pallas"
    assert resolve(jwmma.Options(platform="cpu")).backend == "xla"  # another platform, another answer
    for _ in range(2):
        with pytest.raises(ValueError, match="contradicts"):
            resolve(jwmma.Options(backend="xla"), backend="pallas")
    regs = [np.zeros((32, 8), np.float16), np.zeros((32, 8), np.float16), np.zeros((32, 8), np.float32)]
    fn = jwmma.wmma_f32_16x16x16_f16_w32_gfx12
    for _ in range(2):
        with pytest.raises(ValueError, match="unknown model 'cdna9'"):
            fn(*regs, model="cdna9")
        with pytest.raises(ValueError, match="group"):
            fn(*regs, model="Gfx12Dot4(group=3)")


def test_entry_points_take_backend_and_refuse_unknown_ones():
    (values, pos), b = _fp8_problem(16, 16, 128)
    want = np.asarray(jwmma.gemm((values, pos), b, builtin=FP8))
    got = np.asarray(jwmma.gemm((values, pos), b, builtin=FP8, backend="xla"))
    assert np.array_equal(want.view(np.uint32), got.view(np.uint32))
    with pytest.raises(ValueError, match="backend"):
        jwmma.gemm((values, pos), b, builtin=FP8, backend="triton")
    with pytest.raises(TypeError, match="options"):
        jwmma.dot(np.zeros(4, np.float16), np.zeros(4, np.float16), np.float32(0), options="fast")


def test_row_blocks_follow_the_model_working_set():
    """block_elems bounds the products a kernel holds: any value, same bits."""
    a, b = _fp8_problem(64, 32, 256)
    ref = np.asarray(jwmma.gemm(a, b, builtin=FP8, model="exact"))
    small = np.asarray(jwmma.gemm(a, b, builtin=FP8, model="exact", options=jwmma.Options(block_elems=1)))
    assert np.array_equal(ref.view(np.uint32), small.view(np.uint32))
    closed = _gemm_jaxpr(a, b, options=jwmma.Options(block_elems=1))
    assert any(e.primitive.name == "scan" and e.params["length"] == 4 for e in _eqns(closed.jaxpr))  # 4 blocks of 16 rows
