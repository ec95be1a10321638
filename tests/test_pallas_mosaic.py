"""The Pallas kernels lowered by Mosaic GPU (`PallasOptions(lowering='mosaic')`,
`jwmma.backends.pallas.mosaic`) give the XLA path's bits, in Pallas interpret mode on this CPU,
and their Python lowering for CUDA succeeds without a GPU (`jax.export` for 'cuda': Mosaic
GPU's layout rules, reductions, branch and loop-carry layouts are checked there; its compiler
and the speed need a GPU).

Reference: `jwmma.tiled.paths.matrix_path` on XLA, fed the same tile-padded codes
(`pallas_support.cases`: NaN/Inf, subnormal results, cancellation, extreme C).
Two N tiles per case; the 8-bit fused-group and chain cases run two K blocks (the
accumulator carried across the pipeline), the padded `jwmma.gemm` three. Default: the
integer kernel's bits, the fused groups' lowering and the option checks; ``-m slow``: every
family's bits (the block-scaled one through `jwmma.gemm`) and lowering.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import jwmma
from jwmma import models
from jwmma.backends import pallas
from jwmma.engine.options import Options, PallasOptions, resolve
from jwmma.engine.step import context
from jwmma.isa.table import lookup
from jwmma.numerics.rounding import x64_scope
from jwmma.tiled import paths

from pallas_support import abstract_gpu, cases, run

XLA = resolve(Options(backend="xla", platform="cpu"))
MOSAIC = resolve(Options(backend="pallas", platform="cpu", pallas=PallasOptions(interpret=True, lowering="mosaic")))

FAMILIES = [  # (builtin, model, clamp, edges only): every family the Mosaic driver runs
    ("swmmac_i32_16x16x32_iu8_w32", None, True, True),  # default: the hand-made edges (overflowing C) only
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", None, False, False, marks=pytest.mark.slow),  # fused groups, 2-D
    pytest.param("smfmac_f32_16x16x64_bf16", None, False, False, marks=pytest.mark.slow),  # integer alignment
    pytest.param("smfmac_f32_16x16x64_f16", None, False, False, marks=pytest.mark.slow),
    pytest.param("swmmac_f32_16x16x32_f16_w32", None, False, False, marks=pytest.mark.slow),  # gfx12
    pytest.param("swmmac_f16_16x16x32_f16_w32", None, False, False, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", "exact", False, False, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k", False, False, marks=pytest.mark.slow),
    pytest.param("smfmac_f32_16x16x128_fp8_fp8", "fma_chain", False, False, marks=pytest.mark.slow),  # NaN words
    pytest.param("swmmac_bf16_16x16x32_bf16_w32", "fma_chain", False, False, marks=pytest.mark.slow),
    pytest.param("wmma_f32_16x16x16_f16_w32_gfx12", None, False, False, marks=pytest.mark.slow),  # dense
    pytest.param("wmma_f32_16x16x16_fp8_fp8_w32_gfx12", "cdna3", False, False, marks=pytest.mark.slow),
]


def _model(builtin, model, clamp=False):
    spec = lookup(builtin)
    return spec, models.resolve(model, context(spec, clamp), spec.default_model)


@pytest.mark.parametrize("builtin,model,clamp,edges_only", FAMILIES)
def test_bits_in_interpret_mode(builtin, model, clamp, edges_only):
    spec, m_obj = _model(builtin, model, clamp)
    assert pallas.kernel_for(spec, m_obj, MOSAIC)
    drawn = cases(spec, clamp)  # two random draws, then the hand-made edges
    for a, p, b, c in (drawn[-1:] if edges_only else drawn):
        ref = run(paths.matrix_path, XLA, spec, m_obj, clamp, a, p, b, c)
        got = run(pallas.matrix_path, MOSAIC, spec, m_obj, clamp, a, p, b, c)
        bad = np.argwhere(ref.astype(np.uint32) != got.astype(np.uint32))
        assert bad.size == 0, (f"{builtin} {m_obj.describe()}: {len(bad)} of {ref.size} outputs differ, first at "
                               f"{tuple(bad[0])}")


@pytest.mark.slow
@pytest.mark.parametrize("builtin,fa,fb", [("mfma_scale_f32_16x16x128_f8f6f4", 0, 0),
                                           ("mfma_scale_f32_32x32x64_f8f6f4", 2, 3),
                                           ("mfma_scale_f32_16x16x128_f8f6f4", 4, 1)])
def test_block_scaled_gemm(builtin, fa, fb):
    """The block-scaled kernel's 2-D form (MXFP8; FP6 x BF6 on the 32x32 row; FP4 x BF8)
    through `jwmma.gemm`, odd shapes, random scales with 0xFF (NaN) among them, special C."""
    rng = np.random.default_rng(11)
    m, k, n = 37, 300, 45
    bits = {0: 8, 1: 8, 2: 6, 3: 6, 4: 4}
    def codes(fmt, shape):  # finite codes (OCP fp8 E4M3: 0x7F is NaN; E5M2: 0x7C.. Inf and NaN)
        x = rng.integers(0, 1 << bits[fmt], shape).astype(np.uint8)
        if fmt == 0:
            x[(x & 0x7F) == 0x7F] = 0x7E
        if fmt == 1:
            x[(x & 0x7C) == 0x7C] &= 0xFB
        return x

    a, b = codes(fa, (m, k)), codes(fb, (k, n))
    if fb == 1:
        b[4, 6] = 0x7C  # +Inf: column 6 Inf (or NaN where its products cancel it)
    sa = rng.integers(110, 145, (m, -(-k // 32))).astype(np.uint8)
    sb = rng.integers(110, 145, (-(-k // 32), n)).astype(np.uint8)
    sa[0, 1], sb[2, 3] = 255, 255
    c = (rng.standard_normal((m, n)) * 8).astype(np.float32)
    c.view(np.uint32)[1, :4] = [0x7F800000, 0xFF800000, 0x7FC00000, 0x80000000]
    kw = dict(builtin=builtin, scale_a=sa, scale_b=sb, fmt_a=fa, fmt_b=fb)
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    got = np.asarray(jwmma.gemm(a, b, c, options=Options(backend="pallas", pallas=PallasOptions(lowering="mosaic")),
                                **kw))
    same = (ref.view(np.uint32) == got.view(np.uint32)) | (np.isnan(ref) & np.isnan(got))
    assert same.all() and np.isnan(ref).any() and np.isinf(ref).any() and np.isfinite(ref).mean() > 0.5


@pytest.mark.slow
def test_gemm_pads_rows_columns_and_batch():
    """Through `jwmma.gemm`: M and N not multiples of the (64, 64) tile, a batch dim, K of
    three K blocks."""
    rng = np.random.default_rng(7)
    a = jwmma.numerics.cast(rng.standard_normal((2, 70, 384)), jnp.float16)
    b = jwmma.numerics.cast(rng.standard_normal((2, 384, 40)), jnp.float16)
    c = rng.standard_normal((2, 70, 40)).astype(np.float32)
    kw = dict(builtin="smfmac_f32_16x16x64_f16", prune=True)
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    got = np.asarray(jwmma.gemm(a, b, c, options=Options(backend="pallas", pallas=PallasOptions(lowering="mosaic")),
                                **kw))
    assert (ref.view(np.uint32) == got.view(np.uint32)).all()


def _lower_for_cuda(builtin, model):
    spec, m_obj = _model(builtin, model)
    opts = resolve(Options(backend="pallas", platform="gpu", pallas=PallasOptions(lowering="mosaic")))
    args = (jnp.zeros((64, 2 * spec.kc), jnp.int32), jnp.zeros((64, 2 * spec.kc), jnp.int32),
            jnp.zeros((2 * spec.k, 128), jnp.int32), jnp.zeros((64, 128), jnp.int32))
    fn = jax.jit(lambda *x: pallas.matrix_path(*x, spec=spec, model=m_obj, options=opts))
    with x64_scope(), abstract_gpu():
        return jax.export.export(fn, platforms=("cuda",))(*args).mlir_module()


@pytest.mark.parametrize("builtin,model", [
    ("smfmac_f32_16x16x128_fp8_fp8", None),
    *[pytest.param(b, m, marks=pytest.mark.slow) for b, m in [
        ("smfmac_f32_16x16x64_bf16", None), ("swmmac_f32_16x16x32_f16_w32", None),
        ("swmmac_f16_16x16x32_f16_w32", None), ("smfmac_f32_16x16x128_fp8_fp8", "exact"),
        ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k"), ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain"),
        ("swmmac_bf16_16x16x32_bf16_w32", "fma_chain"), ("swmmac_i32_16x16x32_iu8_w32", None),
        ("wmma_f32_16x16x16_f16_w32_gfx12", None), ("mfma_scale_f32_16x16x128_f8f6f4", None)]],
])
def test_mosaic_gpu_lowering_without_gpu(builtin, model):
    """Pallas lowers the kernel to a Mosaic GPU custom call (its layout inference, the
    reductions, the layouts of branches and loop carries all pass)."""
    pytest.importorskip("jax._src.pallas.mosaic_gpu.lowering")
    text = _lower_for_cuda(builtin, model)
    assert "mosaic_gpu" in text and "triton" not in text


class _SignednessAudit:
    """Mosaic GPU's lane lowering picks signed or unsigned instructions (compares, max/min,
    widening, int -> float) from a signedness it tracks per register array; its interpreter
    computes on dtypes, so a wrong signedness shows only on a GPU. This wraps every lowering
    rule and records each integer array a rule is given whose tracked signedness differs from
    its dtype's: (consuming primitive, dtype) -> count. (Consumers, not producers: the
    driver wraps the select rule while it traces, around this audit's wrapper.)"""

    def __enter__(self):
        from jax._src.pallas.mosaic_gpu import lowering
        from jax.experimental.mosaic.gpu import fragmented_array

        self.tables, self.saved, self.bad = lowering.mosaic_lowering_rules, {}, {}
        array = fragmented_array.FragmentedArray

        def check(prim, values, avals):
            for v, aval in zip(values, avals):
                dtype = getattr(aval, "dtype", None)
                if isinstance(v, array) and dtype is not None and jnp.issubdtype(dtype, jnp.integer):
                    if v.is_signed != bool(jnp.issubdtype(dtype, jnp.signedinteger)):
                        key = (prim.name, str(dtype))
                        self.bad[key] = self.bad.get(key, 0) + 1

        def wrap(prim, rule):
            def audited(ctx, *args, **params):
                check(prim, args, ctx.avals_in)
                return rule(ctx, *args, **params)
            return audited

        for key, table in self.tables.items():
            self.saved[key] = dict(table)
            for prim, rule in list(table.items()):
                table[prim] = wrap(prim, rule)
        return self

    def __exit__(self, *exc):
        for key, table in self.saved.items():
            self.tables[key].clear()
            self.tables[key].update(table)


@pytest.mark.parametrize("builtin,model", [
    ("smfmac_f32_16x16x128_fp8_fp8", None),
    *[pytest.param(b, m, marks=pytest.mark.slow) for b, m in [
        ("smfmac_f32_16x16x64_bf16", None), ("swmmac_f32_16x16x32_f16_w32", None),
        ("swmmac_f16_16x16x32_f16_w32", None), ("smfmac_f32_16x16x128_fp8_fp8", "exact"),
        ("smfmac_f32_16x16x64_bf16", "exact"), ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain_k"),
        ("smfmac_f32_16x16x128_fp8_fp8", "fma_chain"), ("swmmac_bf16_16x16x32_bf16_w32", "fma_chain"),
        ("swmmac_i32_16x16x32_iu8_w32", None), ("wmma_f32_16x16x16_f16_w32_gfx12", None),
        ("mfma_scale_f32_16x16x128_f8f6f4", None)]],
])
def test_mosaic_gpu_integers_keep_their_signedness(builtin, model):
    """Lowered for CUDA, every integer register array of the kernel is signed as its dtype
    says. Before the select fix, ``jnp.where(pred, 0, x)`` made signed exponents unsigned, and
    an H200 gave other bits than XLA for the fused, gfx12, exact and block-scaled kernels."""
    pytest.importorskip("jax._src.pallas.mosaic_gpu.lowering")
    with _SignednessAudit() as audit:
        _lower_for_cuda(builtin, model)
    assert audit.bad == {}


def test_the_select_fix_leaves_other_kernels_alone():
    """A kernel not named by jwmma keeps JAX's own rule: a select whose true case is a
    constant still gives an unsigned array there (the defect the fix corrects for ours; if
    this fails, JAX has fixed it and the fix can go)."""
    pytest.importorskip("jax._src.pallas.mosaic_gpu.lowering")
    from jax.experimental.pallas import mosaic_gpu as plgpu

    from jwmma.backends.pallas import mosaic_signedness

    mosaic_signedness.install()

    def body(x_ref, o_ref):
        x = x_ref[...]
        o_ref[...] = jnp.maximum(jnp.where(x > 0, 0, x), -5)

    fn = plgpu.kernel(body, out_type=jax.ShapeDtypeStruct((128,), jnp.int32), kernel_name="users_kernel",
                      compiler_params=plgpu.CompilerParams(lowering_semantics=plgpu.LoweringSemantics.Lane))
    with _SignednessAudit() as audit, abstract_gpu():
        jax.export.export(jax.jit(fn), platforms=("cuda",))(jnp.zeros((128,), jnp.int32))
    assert audit.bad.get(("max", "int32"))


def test_the_select_fix_refuses_a_jax_it_does_not_know(monkeypatch):
    """Where JAX's Mosaic GPU lowering is not laid out as the fix expects, lowering='mosaic'
    raises with the way out instead of lowering to wrong bits."""
    lowering = pytest.importorskip("jax._src.pallas.mosaic_gpu.lowering")
    from jwmma.backends.pallas import mosaic_signedness

    monkeypatch.setattr(lowering, "mosaic_lowering_rules", {})
    with pytest.raises(RuntimeError, match="lowering='triton' or backend='xla'"):
        mosaic_signedness.install()


def test_options_the_mosaic_driver_refuses():
    fp8, fused = _model("smfmac_f32_16x16x128_fp8_fp8", None)
    for kw in (dict(vec3=True), dict(gather=True), dict(float_combine=True)):
        with pytest.raises(ValueError, match="runs the 2-D kernels"):
            pallas.tiling(fp8, fused, PallasOptions(lowering="mosaic", **kw))
    t = pallas.tiling(fp8, fused, PallasOptions(lowering="mosaic"))
    assert (t.tm, t.tn, t.lowering, t.vec3, t.float_combine) == (64, 16, "mosaic", False, False)  # measured best
    _, exact = _model("smfmac_f32_16x16x128_fp8_fp8", "exact")
    assert (pallas.tiling(fp8, exact, PallasOptions(lowering="mosaic")).tn,
            pallas.tiling(fp8, fused, PallasOptions(lowering="mosaic", tn=32)).tn) == (16, 32)
    with pytest.raises(ValueError, match="lowering must be None, 'triton' or 'mosaic'"):
        PallasOptions(lowering="cuda")
    mx, scaled = _model("mfma_scale_f32_16x16x128_f8f6f4", None)
    assert pallas.kernel_for(mx, scaled, MOSAIC)  # the block-scaled kernel in its 2-D form
    _, rocjitsu = _model("mfma_scale_f32_16x16x128_f8f6f4", "mx_rocjitsu")
    with pytest.raises(ValueError, match="no kernel for .*BlockScaled"):  # as on Triton
        pallas.kernel_for(mx, rocjitsu, MOSAIC)
    auto = MOSAIC.replace(pallas=MOSAIC.pallas.replace(auto=True))
    assert not pallas.kernel_for(mx, rocjitsu, auto)  # backend='auto' runs XLA there
    from jwmma.backends.pallas import mosaic

    spec, integer = _model("swmmac_i32_16x16x32_iu8_w32", None)
    kern = pallas.make_kernel(spec, integer)
    zeros = jnp.zeros((64, 64), jnp.int32)
    with pytest.raises(ValueError, match="tm a multiple of 64"):
        mosaic.run(kern, zeros, zeros, jnp.zeros((128, 64), jnp.int32), zeros,
                   tiling=pallas.tiling(spec, integer, PallasOptions(lowering="mosaic", tm=32, interpret=True)))
    with pytest.raises(ValueError, match="under the 16 bytes a Mosaic GPU copy moves; use tn >= 16"):  # fp8 B rows
        tiling = pallas.tiling(fp8, fused, PallasOptions(lowering="mosaic", tn=8, interpret=True))
        mosaic.run(pallas.make_kernel(fp8, fused, tiling=tiling), jnp.zeros((64, 64), jnp.int32),
                   jnp.zeros((64, 64), jnp.int32), jnp.zeros((128, 8), jnp.int32), jnp.zeros((64, 8), jnp.int32),
                   tiling=tiling)


def test_auto_lowers_the_measured_families_with_mosaic(monkeypatch):
    """``backend='auto'`` lowers the 8-bit chain and `exact` GEMM kernels with Mosaic GPU where
    it runs (`AUTO_MOSAIC`, with their measured tiles), and nothing else: other families,
    16-bit operands, direct builtin calls and a lowering the user names stay as they were. This
    CPU runs no Mosaic GPU; where a GPU does, the auto-chosen kernel gives XLA's bits."""
    assert not pallas.mosaic_runs_here()
    fp8, chain = _model("smfmac_f32_16x16x128_fp8_fp8", "fma_chain")
    _, exact = _model("smfmac_f32_16x16x128_fp8_fp8", "exact")
    _, fused = _model("smfmac_f32_16x16x128_fp8_fp8", None)
    f16, f16_chain = _model("swmmac_f32_16x16x32_f16_w32", "fma_chain")
    auto = PallasOptions(auto=True)
    assert pallas.tiling(fp8, chain, auto).lowering == "triton"
    monkeypatch.setattr(pallas, "mosaic_runs_here", lambda: True)  # an sm_90 GPU
    got = {name: pallas.tiling(spec, m, auto) for name, spec, m in
           (("chain", fp8, chain), ("exact", fp8, exact), ("fused", fp8, fused), ("f16 chain", f16, f16_chain))}
    assert {k: (t.lowering, t.tm, t.tn) for k, t in got.items() if t.lowering == "mosaic"} == {
        "chain": ("mosaic", 64, 32), "exact": ("mosaic", 64, 16)}
    assert pallas.tiling(fp8, chain, auto, call=True).lowering == "triton"
    assert pallas.tiling(fp8, chain, PallasOptions(auto=True, lowering="triton")).lowering == "triton"
    assert pallas.tiling(fp8, chain, PallasOptions()).lowering == "triton"  # backend='pallas': as named
    seen = []

    def in_shard_map(x):  # a sharded GEMM's tiles: Triton (Mosaic GPU not run there)
        seen.append(pallas.tiling(fp8, chain, auto).lowering)
        return x

    mesh = jax.sharding.Mesh(np.array(jax.devices()[:1]), ("x",))
    jax.jit(jax.shard_map(in_shard_map, mesh=mesh, in_specs=jax.sharding.PartitionSpec("x"),
                          out_specs=jax.sharding.PartitionSpec("x")))(jnp.zeros(4))
    assert seen == ["triton"]
    monkeypatch.setattr(pallas, "triton_available", lambda: False)  # a JAX after Triton's removal
    on_gpu = resolve(Options(backend="pallas", platform="gpu", pallas=auto))
    assert pallas.kernel_for(fp8, chain, on_gpu) and not pallas.kernel_for(fp8, fused, on_gpu)

    rng = np.random.default_rng(5)  # the auto-chosen kernel (interpreted here) through jwmma.gemm
    a = jwmma.numerics.cast(rng.standard_normal((16, 128)), jnp.float8_e4m3fn)
    b = jwmma.numerics.cast(rng.standard_normal((128, 24)), jnp.float8_e4m3fn)
    c = rng.standard_normal((16, 24)).astype(np.float32)
    c.view(np.uint32)[0, :3] = [0x00000001, 0x80000003, 0x7FC00000]  # subnormal C, NaN
    c.view(np.uint32)[1, :2] = [0x00000005, 0x80400000]
    a[0] = 0  # row 0 all zero products: its subnormal C comes back from the stand-in
    kw = dict(builtin=fp8.name, model="fma_chain", prune=True)
    ref = np.asarray(jwmma.gemm(a, b, c, backend="xla", **kw))
    interp = Options(backend="pallas", platform="cpu", pallas=PallasOptions(auto=True, interpret=True))
    got = np.asarray(jwmma.gemm(a, b, c, options=interp, **kw))
    same = (ref.view(np.uint32) == got.view(np.uint32)) | (np.isnan(ref) & np.isnan(got))
    assert same.all() and (got.view(np.uint32)[0, :2] == [0x00000001, 0x80000003]).all()
