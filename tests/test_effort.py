"""Compile effort (`jwmma.Options.compile_effort`, `jwmma.engine.effort`) never changes a bit:
the same calls at 'fast' and 'full' on adversarial registers (every bit pattern of the
operand formats, NaN/Inf, subnormals, C across the f32 range), and 'auto' picks by the call's
work. 'fast' also loops over an instruction's groups where 'full' unrolls them
(`jwmma.models.grouping.loops`: bf16 cdna3, fma_chain, the block-scaled groups): each model
with such a choice is here once."""
import types

import ml_dtypes
import numpy as np

import pytest

import jax
import jax.numpy as jnp
import jwmma
from jwmma.engine import effort

FAST, FULL = jwmma.Options(compile_effort="fast"), jwmma.Options(compile_effort="full")


def _random_registers(name, waves, rng):
    """Registers of random bits (every code of the formats appears), C of wide magnitudes."""
    spec = jwmma.BUILTINS[name]

    def words(op):
        shape = (waves, spec.lanes, op.n)
        nbytes = np.dtype(op.dtype).itemsize
        raw = rng.integers(0, 256, shape + (nbytes,), dtype=np.uint8)
        return raw.view(op.dtype).reshape(shape)

    a, b = words(spec.a), words(spec.b)
    if spec.integer:
        c = words(spec.c)
    else:
        mags = rng.standard_normal((waves, spec.lanes, spec.c.n)) * 10.0 ** rng.integers(-40, 38, (waves, spec.lanes, spec.c.n))
        c = jwmma.numerics.cast(mags, np.dtype(spec.c.dtype)) if spec.c.dtype != np.int32 else words(spec.c)
    return a, b, np.asarray(c)


def _bits(x):
    x = np.asarray(x)
    return x.view(np.uint32 if x.dtype.itemsize == 4 else np.uint16)


def _same(x, y):
    bx, by = _bits(x), _bits(y)
    if np.asarray(x).dtype.kind == "f" or np.asarray(x).dtype in (ml_dtypes.bfloat16,):
        nan = np.isnan(np.asarray(x, np.float32)) & np.isnan(np.asarray(y, np.float32))
        return bool(((bx == by) | nan).all())
    return bool((bx == by).all())


@pytest.mark.parametrize("name,model", [
    ("smfmac_f32_16x16x64_bf16", None),  # the fused-group loop against the unrolled groups, -O0
    ("swmmac_f32_16x16x32_bf16_w32", "fma_chain"),  # over_groups' scan against the unrolled chain
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", None, marks=pytest.mark.slow),
    pytest.param("swmmac_f32_16x16x32_f16_w32", "exact", marks=pytest.mark.slow),
    pytest.param("mfma_scale_f32_16x16x128_f8f6f4", None, marks=pytest.mark.slow),
    pytest.param("swmmac_f32_16x16x32_f16_w32", "nvidia_hopper", marks=pytest.mark.slow),
    pytest.param("mfma_scale_f32_16x16x128_f8f6f4", "mx_rocjitsu", marks=pytest.mark.slow),
    pytest.param("swmmac_f16_16x16x32_f16_w32", None, marks=pytest.mark.slow),
    pytest.param("mfma_f32_16x16x4f32", None, marks=pytest.mark.slow),
    pytest.param("wmma_i32_16x16x16_iu8_w32_gfx12", None, marks=pytest.mark.slow),
    # CDNA1 (gfx908): exact sums in groups of 2 carrying the accumulator, one copy under 'fast'
    pytest.param("mfma_f32_16x16x8bf16", None, marks=pytest.mark.slow),
    pytest.param("swmmac_f32_16x16x32_f16_w32", "cdna1", marks=pytest.mark.slow),
])
def test_builtin_bits_do_not_depend_on_the_effort(name, model, rng):
    spec = jwmma.BUILTINS[name]
    fn = getattr(jwmma, name)
    a, b, c = _random_registers(name, 8, rng)
    kw = {"model": model}
    args = (a, b, c)
    if spec.convention.index_name is not None:  # positions (0, 1) and (2, 3) in random mixes
        idx = (rng.integers(0, 2**31 - 1, (8, spec.lanes)).astype(np.int32) & 0x0E0E0E0E) | 0x04040404
        args = args + (idx,)
    if "clamp" in fn.__signature__.parameters:
        args = (False, a, False, b, c, False)
    fast = fn(*args, options=FAST, **kw)
    full = fn(*args, options=FULL, **kw)
    assert _same(fast, full)


def test_gemm_bits_do_not_depend_on_the_effort(rng):
    name = "smfmac_f32_16x16x128_fp8_fp8"
    raw = rng.integers(0, 256, (2, 40, 300), dtype=np.uint8)
    a = jwmma.prune_2_4(raw[0].view(ml_dtypes.float8_e4m3fn), rule="largest")
    b = raw[1].T.copy().view(ml_dtypes.float8_e4m3fn)
    c = (rng.standard_normal((40, 40)) * 1e30).astype(np.float32)
    fast = jwmma.gemm(a, b, c, builtin=name, options=FAST)
    full = jwmma.gemm(a, b, c, builtin=name, options=FULL)
    assert _same(fast, full)


def _matmul_operands(rng):
    """Values over 60 binades, subnormal f32 inputs among them."""
    x = (rng.standard_normal((6, 200)) * 10.0 ** rng.integers(-44, 30, (6, 200))).astype(np.float32)
    w = (rng.standard_normal((200, 24)) * 10.0 ** rng.integers(-44, 30, (200, 24))).astype(np.float32)
    return x, w


def test_a_small_eager_matmul_compiles_its_forward_program_fast(rng):
    """`jwmma.matmul`'s forward program (quantisation and GEMM in one) compiles at the effort
    of its products, as `jwmma.gemm` does: an eager small call with the platform's fast options."""
    from jwmma.quant import contraction

    settings = effort.compiler_options(jax.default_backend(), "fast")
    y = jwmma.matmul(*_matmul_operands(rng))
    assert y.shape == (6, 24)
    if settings:
        assert settings in contraction._forward_program._jits


def test_matmul_tiering_keys_the_forward_program_by_its_compiler_settings(rng, monkeypatch):
    """Where the 'fast' effort brings no compiler options (a GPU), every eager call of matmul's
    forward program, before and after tiering up, uses the one plain program (no static
    options), so tiering does not compile the same program twice; where it brings some, the
    first calls carry them and later ones do not. (The program is stubbed: no compile.)"""
    from jwmma.quant import contraction

    seen = []

    def stub(unit, lhs_c, rhs_c, effective, extent=None, *, options=None):
        seen.append(None if options is None else options.compile_effort)
        return jnp.zeros(lhs_c.shape[:-1] + rhs_c.shape[-1:], jnp.float32), None

    monkeypatch.setattr(contraction, "_forward_program", stub)
    monkeypatch.setattr(effort, "TIER_UP_CALLS", 2)
    w = rng.standard_normal((72, 16)).astype(np.float32)
    platform = jax.default_backend()
    for rows, fast_options, want in ((3, (), [None] * 4),
                                     (5, (("xla_backend_optimization_level", 0),), ["fast", "fast", None, None])):
        monkeypatch.setitem(effort.FAST_OPTIONS, platform, fast_options)
        seen.clear()
        x = rng.standard_normal((rows, 72)).astype(np.float32)  # a shape of its own: its own call count
        for _ in range(4):
            jwmma.matmul(x, w)
        assert seen == want, (fast_options, seen)


@pytest.mark.slow  # a 'full' compile of the forward program
def test_matmul_tiering_compiles_one_program_where_fast_has_no_options(rng, monkeypatch):
    """The same on the real program: one compiled program over a tier-up where 'fast' has no options."""
    from jwmma.quant import contraction

    monkeypatch.setattr(effort, "TIER_UP_CALLS", 2)
    monkeypatch.setitem(effort.FAST_OPTIONS, jax.default_backend(), ())
    x = rng.standard_normal((3, 72)).astype(np.float32)  # a shape no other test uses
    w = rng.standard_normal((72, 16)).astype(np.float32)
    before = contraction._forward_program.full._cache_size()
    outs = [np.asarray(jwmma.matmul(x, w)).view(np.uint32) for _ in range(effort.TIER_UP_CALLS + 2)]
    assert contraction._forward_program.full._cache_size() == before + 1
    assert all((o == outs[0]).all() for o in outs)


@pytest.mark.slow  # a 'full' compile of the forward program
def test_matmul_forward_bits_do_not_depend_on_the_effort(rng):
    x, w = _matmul_operands(rng)
    assert _same(jwmma.matmul(x, w, options=FAST), jwmma.matmul(x, w, options=FULL))


def test_auto_settles_by_the_work_of_the_call():
    opts = jwmma.engine.options.resolve(None)
    assert opts.compile_effort == "auto"
    assert effort.settle(opts, effort.FAST_PRODUCTS).compile_effort == "fast"
    assert effort.settle(opts, effort.FAST_PRODUCTS + 1).compile_effort == "full"
    assert effort.settle(FULL, 1).compile_effort == "full"  # a chosen effort stays
    heavy = types.SimpleNamespace(compile_weight=4)  # a model whose products cost 4x unoptimised
    assert effort.settle(opts, effort.FAST_PRODUCTS // 4, heavy).compile_effort == "fast"
    assert effort.settle(opts, effort.FAST_PRODUCTS // 4 + 1, heavy).compile_effort == "full"
    with pytest.raises(ValueError, match="compile_effort must be one of 'auto', 'fast', 'full', got 'quick'"):
        jwmma.Options(compile_effort="quick")


def test_a_program_called_again_and_again_is_compiled_at_full(monkeypatch):
    """Tiering: 'auto' runs a small call's program fast for TIER_UP_CALLS calls, then full
    (with the library's constant: conftest.py turns tiering off for the other tests)."""
    monkeypatch.setattr(effort, "TIER_UP_CALLS", 3)
    opts = jwmma.engine.options.resolve(None)
    key = ("a program", object())
    got = [effort.settle(opts, 1000, None, key).compile_effort for _ in range(effort.TIER_UP_CALLS + 2)]
    assert got == ["fast"] * effort.TIER_UP_CALLS + ["full", "full"]
    assert effort.settle(opts, 1000).compile_effort == "fast"  # no key: not counted


def test_fast_compiles_with_the_platforms_options():
    platform = jax.default_backend()
    got = effort.compiler_options(platform, "fast")
    # less the options this XLA refused (a call made in this process may have tried them)
    assert set(got) == {p for p in effort.FAST_OPTIONS.get(platform, ()) if p[0] not in effort._refused}
    assert effort.compiler_options(platform, "full") == ()
    if platform == "cpu":  # LLVM at -O0 is known to every JAX this project supports
        assert ("xla_backend_optimization_level", 0) in got


def test_heavy_groups_loop_on_a_cpu_at_every_effort():
    """The models whose groups XLA:CPU runs faster as a loop (CDNA2, RDNA3) loop there
    at 'full' too; on a GPU 'full' keeps them unrolled; 'fast' loops everywhere."""
    from jwmma.engine.options import Options, resolve
    from jwmma.models.grouping import UNROLL, unroll_for

    for platform, effort_name, want_heavy, want_other in (("cpu", "full", 1, UNROLL), ("gpu", "full", UNROLL, UNROLL),
                                                          ("cpu", "fast", 1, 1), ("gpu", "fast", 1, 1)):
        opts = resolve(Options(platform=platform, compile_effort=effort_name))
        assert unroll_for(opts, cpu_loops=True) == want_heavy, (platform, effort_name)
        assert unroll_for(opts) == want_other, (platform, effort_name)


def test_an_option_xla_does_not_know_falls_back_to_its_defaults(rng, monkeypatch):
    """No trial compile decides the options beforehand: a call whose 'fast' options XLA
    refuses compiles with XLA's defaults (same bits), and later calls skip the options."""
    platform = jax.default_backend()
    monkeypatch.setitem(effort.FAST_OPTIONS, platform, (("xla_no_such_option_in_any_xla", 1),))
    monkeypatch.setattr(effort, "_refused", set())
    name = "mfma_i32_16x16x32_i8"
    a, b, c = _random_registers(name, 2, rng)
    got = jwmma.mfma_i32_16x16x32_i8(a, b, c, options=FAST)
    assert effort.compiler_options(platform, "fast") == ()
    assert _same(got, jwmma.mfma_i32_16x16x32_i8(a, b, c, options=FULL))


def test_an_option_xla_does_not_know_is_dropped_alone(rng, monkeypatch):
    """A refused option is dropped and the call compiled with the others ('fast' options
    that JAX 0.10's XLA takes and JAX 0.11's refuses keep LLVM at -O0 there); same bits."""
    platform = jax.default_backend()
    known = effort.FAST_OPTIONS.get(platform, ())[:1] or (("xla_backend_optimization_level", 0),)
    monkeypatch.setitem(effort.FAST_OPTIONS, platform, (*known, ("xla_no_such_option_in_any_xla", 1)))
    monkeypatch.setattr(effort, "_refused", set())
    name = "mfma_i32_16x16x32_i8"
    a, b, c = _random_registers(name, 2, rng)
    got = jwmma.mfma_i32_16x16x32_i8(a, b, c, options=FAST)
    assert effort._refused == {"xla_no_such_option_in_any_xla"}
    assert effort.compiler_options(platform, "fast") == known
    assert _same(got, jwmma.mfma_i32_16x16x32_i8(a, b, c, options=FULL))


def test_a_fast_call_inside_a_users_jit_runs_in_the_outer_program(rng):
    """JAX takes compiler options only at the top level: inside a user's jit the call is
    part of the user's program, compiled as the user compiles it."""
    name = "swmmac_f32_16x16x32_f16_w32"
    a, b, c = _random_registers(name, 2, rng)
    idx = np.full((2, 32), 0x44444444, np.int32)
    direct = jwmma.swmmac_f32_16x16x32_f16_w32(a, b, c, idx, options=FAST)
    jitted = jax.jit(lambda *r: jwmma.swmmac_f32_16x16x32_f16_w32(*r, options=FAST))(a, b, c, idx)
    assert _same(direct, jitted)


def test_a_program_built_per_call_compiles_at_the_options_effort(monkeypatch):
    """`effort.jit_at_effort` (a sharded GEMM's program, `jwmma.tiled.sharding`) compiles with
    the settled effort's options: options XLA refuses show that they were passed (the call then
    compiles with XLA's defaults, the same result); inside a user's jit the outer program decides."""
    from jwmma.engine.options import resolve

    platform = jax.default_backend()
    monkeypatch.setitem(effort.FAST_OPTIONS, platform, (("xla_no_such_option_in_any_xla", 1),))
    monkeypatch.setattr(effort, "_refused", set())
    x = jnp.arange(4, dtype=jnp.int32)
    f = effort.jit_at_effort(lambda v: v * 2 + 1, resolve(FAST))
    assert np.array_equal(np.asarray(jax.jit(f)(x)), [1, 3, 5, 7])
    assert effort.compiler_options(platform, "fast") != ()  # traced: not tried
    assert np.array_equal(np.asarray(f(x)), [1, 3, 5, 7])
    assert effort.compiler_options(platform, "fast") == ()  # tried at the top level, refused


def test_eager_vmap_size_counts_the_slices_of_eager_vmaps_only():
    """The product of the axis sizes of the eager vmaps whose tracers a call sees; None under
    jit or grad (also a vmap inside a jit), where the outer program decides."""
    seen = []

    def probe(*xs):
        seen.append(effort.eager_vmap_size(xs))
        return sum(jnp.sum(x) for x in xs)

    x = jnp.ones((3, 4, 5))
    assert effort.eager_vmap_size((np.ones(3), x)) == 1
    jax.vmap(probe)(x)
    jax.vmap(jax.vmap(probe))(x)
    jax.vmap(probe, in_axes=(1, None))(x, jnp.ones(5))
    jax.jit(probe)(x)
    jax.jit(jax.vmap(probe))(x)
    jax.grad(lambda v: probe(v))(jnp.ones(3))
    jax.vmap(jax.grad(lambda v: probe(v)))(x)
    assert seen == [3, 12, 4, None, None, None, None]


def test_an_eager_vmap_of_matmul_settles_its_batched_program_for_every_slice(rng, monkeypatch):
    """Under an eager `jax.vmap` (no jit) matmul's forward program is compiled on its own,
    batched: its effort is settled for every slice's products (4 rows: 4 times one row's)
    and it is called to compile at that effort (it took XLA's defaults before; the bits
    under vmap: test_matmul.py). The program is stubbed: nothing compiles."""
    from jwmma.quant import contraction

    products, calls = [], []

    class Stub:
        def __call__(self, unit, lhs_c, rhs_c, effective, extent=None, *, options=None):
            calls.append(("plain", options))
            return jnp.zeros(lhs_c.shape[:-1] + rhs_c.shape[-1:], jnp.float32), None

        def under_eager_vmap(self, unit, lhs_c, rhs_c, effective, extent=None, *, options=None):
            calls.append(("vmap", options))
            return jnp.zeros(lhs_c.shape[:-1] + rhs_c.shape[-1:], jnp.float32), None

    real_settle = contraction.settle
    monkeypatch.setattr(contraction, "settle", lambda o, p, *a: products.append(p) or real_settle(o, p, *a))
    monkeypatch.setattr(contraction, "_forward_program", Stub())
    x = rng.standard_normal((4, 72)).astype(np.float32)
    w = rng.standard_normal((72, 16)).astype(np.float32)
    jwmma.matmul(x[0], w)
    jax.vmap(lambda r: jwmma.matmul(r, w))(x)
    assert len(products) == 2 and products[1] == 4 * products[0]
    fast = bool(effort.compiler_options(jax.default_backend(), "fast"))
    assert [kind for kind, _ in calls] == ["plain", "vmap"]
    assert [o.compile_effort if o else None for _, o in calls] == (["fast", "fast"] if fast else [None, None])
    jax.jit(jax.vmap(lambda r: jwmma.matmul(r, w)))(x)  # inside a jit: the outer program decides
    assert calls[-1] == ("plain", None)


def test_an_effort_jit_under_an_eager_vmap_compiles_with_the_settings():
    """`under_eager_vmap`: the batched program compiles with the options' compiler settings
    (a plain call of traced operands takes XLA's defaults: the outer program's)."""
    f = effort.effort_jit(lambda v, *, options: v * 2 + 1, static_argnames=("options",))
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    fast = jwmma.engine.options.resolve(FAST)  # the platform settled, as a builtin's options are
    y = jax.vmap(lambda r: f.under_eager_vmap(r, options=fast))(x)
    assert np.array_equal(np.asarray(y), x * 2 + 1)
    settings = effort.compiler_options(jax.default_backend(), "fast")
    assert (settings in f._jits) == bool(settings)
