"""Whole GEMMs emulated as the tiled kernel that issues one builtin per K step (API.md section 5).

`gemm` validates and converts the operands once (`operands`), pads them to whole tiles, and
runs one of the two execution paths (`paths`: whole matrices, or per-step register fragments
through the builtin) on one device or on every shard of a device mesh (`sharding`, `plan`).
Every path and layout gives the same bits.
"""
from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np

from .. import models
from ..engine import fragments
from ..engine.index import index_offset
from ..engine.effort import settle, shapes_key
from ..engine.options import resolve as resolve_options
from ..engine.step import context, normal_values_of
from ..engine.validation import as_array, check_static_bool
from ..isa.table import lookup
from ..numerics.rounding import x64_scope
from ..backends import pallas
from ..keywords import strict_keywords
from ..version import __version__
from . import buckets, operands, paths, plan, processes, sharding
from .plan import auto_layout, auto_mesh, plan_gemm
from .sharding import Plan

__all__ = ["gemm", "gemm_extent", "emulate_padded", "float64_out", "emulated_products", "PATHS", "Plan", "plan_gemm",
           "auto_layout", "auto_mesh", "operands", "paths", "plan", "processes", "sharding", "buckets"]

PATHS = ("matrix", "registers")


def emulate_padded(kernel, a_codes, pos, b_codes, c_codes, *, shape=None, plan=None):
    """Run a GEMM kernel on tile-padded operands (the seam where distribution plugs in).

    Args:
        kernel: ``kernel(a, p, b, c)`` -> D in the same form; every output depends only on
            its row of A and column of B.
        a_codes, pos: (*batch, Mp, Kp/2) int32; b_codes: (*batch, Kp, Np) int32; c_codes:
            (*batch, Mp, Np) int32 accumulator bits (or i32 values); A, B, C int64 for f64
            (`operands.code_dtype`), whose kernel runs inside `x64_scope` either way.
        shape: the (M, N) to cut D to (None: keep it padded).
        plan: a `Plan` to run the kernel on every shard of a device mesh, or None.
    Returns:
        D codes; sharded when a plan is given.
    """
    if plan is not None:
        return plan.emulate(kernel, a_codes, pos, b_codes, c_codes, shape)
    with x64_scope():
        d = kernel(a_codes, pos, b_codes, c_codes)
    return d if shape is None else d[..., : shape[0], : shape[1]]


def emulated_products(spec, batch, m, n, k) -> int:
    """The emulated multiply-adds of a GEMM, which decide an 'auto' compile effort
    (`jwmma.engine.effort.settle`; also for `jwmma.matmul`'s forward program).

    Args:
        spec: the builtin; batch: the batch dims (a tuple of ints); m, n, k: the GEMM's M, N
            and dense K.
    Returns:
        An int: compressed products (K / 2, rounded up) for a sparse builtin, M * N * K for a
        dense one, times the batch.
    """
    return int(np.prod(batch, dtype=np.int64)) * m * n * (k if spec.dense else -(-k // 2))


def _empty(spec, shape, c):
    """D of a GEMM that issues no instruction (M, N or a batch dim 0; K = 0): C bit for bit."""
    with x64_scope():  # f64 codes are int64
        d = jnp.zeros(shape, jnp.int32) if c is None else jnp.broadcast_to(fragments.to_codes(spec.c_type, c), shape)
        d = fragments.codes_to_values(spec.c_type, d)
    return float64_out(spec, d)


def float64_out(spec, d, x64: bool | None = None):
    """D of an f64 row as the user gets it (`jwmma.gemm`, `jwmma.kernel`): with jax_enable_x64
    off JAX has no float64 arrays (one made inside `x64_scope` turns float32 at its next
    operation), so D comes back as a numpy float64 array, bit for bit; with it on, as the
    float64 JAX array. Other rows: ``d``. ``x64``: the user's jax_enable_x64 (None: read now,
    which must then be outside `x64_scope`)."""
    x64 = jax.config.jax_enable_x64 if x64 is None else x64
    if spec.c_type != "f64" or x64:
        return d
    return np.asarray(d)


def _check_float64(spec, dist) -> None:
    """An f64 GEMM over a mesh spanning processes needs jax_enable_x64 on: its D is then a global
    float64 array; with x64 off D would be a numpy array (`float64_out`), the whole of it on every
    process, which jwmma never gathers across hosts."""
    if spec.c_type == "f64" and dist is not None and dist.spans_processes and not jax.config.jax_enable_x64:
        raise ValueError(f"jwmma.gemm with {spec.name} over a mesh spanning processes needs jax_enable_x64 on (D is "
                         f"then a global float64 array; with it off D is a numpy array, which would gather the whole "
                         f"D onto every process): jax.config.update('jax_enable_x64', True), or devices='local'")


def _call_description(spec, model, path, prune, modifiers, s, opts, a, b, c, dist) -> dict:
    """Everything a GEMM over a mesh spanning processes must agree on across them: the static
    arguments and options (they key the compiled program), the operands (shape, dtype,
    sharding; a digest of host data), the plan and the versions."""
    return dict(
        builtin=spec.name, model=repr(model), path=path, prune=prune, modifiers=list(modifiers), index_offset=s,
        options=repr(opts), a=processes.describe_array(a), b=processes.describe_array(b),
        c=processes.describe_array(c), plan=dist.static_description(),
        versions=dict(jwmma=__version__, jax=jax.__version__, numpy=np.__version__),
    )


@strict_keywords
def gemm(
    a,
    b,
    c=None,
    *,
    builtin: str = "smfmac_f32_16x16x128_fp8_fp8",
    model=None,
    path: str = "matrix",
    prune: bool = False,
    a_neg: bool | None = None,
    b_neg: bool | None = None,
    clamp: bool | None = None,
    cbsz: int = 0,
    abid: int = 0,
    index_key: int = 0,
    target: str | None = None,
    mesh=None,
    mesh_axes=None,
    devices=None,
    options=None,
    backend: str | None = None,
    check: bool = False,
    scale_a=None,
    scale_b=None,
    fmt_a: int | None = None,
    fmt_b: int | None = None,
):
    """Emulate D = A x B + C as the tiled kernel issuing ``builtin`` once per K step.

    Every output tile is accumulated over the K steps in order, each step's D the next step's
    C: bit-identical to calling the builtin step by step.

    Args:
        a: dense 2:4-sparse (*batch, M, K) array of the builtin's A element type, or a
            ``(values, positions)`` pair of (*batch, M, K/2) arrays (`jwmma.compress_2_4`);
            a dense ``a`` that is not 2:4 sparse raises unless ``prune=True``. For a dense
            builtin (RDNA4 WMMA) any (*batch, M, K) A: no 2:4 rule, no positions.
        b: (*batch, K, N) of the builtin's B element type.
        c: (*batch, M, N) of the accumulator type (float32, float16, bfloat16, int32, or
            float64 for the f64 MFMA) or None for zeros. M, N, K need not be multiples of the tile: the operands are
            zero-padded (A's padding groups select positions (2, 3), as hipSPARSELt pads).
            Batch dims broadcast.
        builtin: the builtin the kernel issues; model: a preset name, model text or object
            (None: the builtin's default).
        path: 'matrix' (instruction arithmetic on whole matrices) or 'registers' (per-step
            fragments through the builtin); same bits.
        a_neg, b_neg, clamp: signedness and saturation of the RDNA4 iu8/iu4 builtins; given
            for any other builtin they raise. A dtype that says its signedness decides
            (uint8/uint4 and other unsigned dtypes: unsigned; int8/int4: signed; a contradicting
            a_neg/b_neg raises); wider signed dtypes follow a_neg/b_neg (default signed) and
            their values must lie in that signedness's range.
        cbsz, abid (CDNA), index_key (RDNA4): the index set (changes nothing numerically).
        target: the chip of a builtin that runs on several (CDNA3 SMFMAC: 'gfx942', the
            default, FNUZ fp8/bf8; 'gfx950', OCP): A and B then hold values of that chip's
            formats (ml_dtypes.float8_e4m3fnuz / float8_e5m2fnuz on gfx942).
        devices: N (int, 'all' or a list of devices): split batch, M and N over the first N
            devices with an automatic layout (`jwmma.tiled.plan`; same bits).
        mesh: a `jax.sharding.Mesh`, with ``mesh_axes`` giving each mesh axis's role ('m',
            'n', 'batch', 'batch<i>', None; default: axes named after roles, then batch, M,
            N in order), or a NamedSharding for D (its spec over (*batch, M, N) says what
            splits). Neither: inputs carrying a NamedSharding are followed; plain inputs use
            one device.
        options, backend: execution options (`jwmma.Options`): tile sizes, row blocks,
            matrix-product group sums; never bits.
        check: also check traced positions and integer values when the computation runs
            (concrete ones are always checked; `jwmma.checked` turns a failure into a
            ValueError inside jit); with check=False a traced position keeps its low 2 bits.
        scale_a, scale_b: the block-scaled builtins' (mfma_scale_*) E8M0 scales, A's
            (*batch, M, ceil(K/32)) per row and 32-K block, B's (*batch, ceil(K/32), N), uint8
            codes or ml_dtypes.float8_e8m0fnu (None: no scaling, every factor 1); the kernel
            loads each step's into the scale registers (byte 0). fmt_a, fmt_b: their format
            codes (0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3, 3 bf6 E3M2, 4 fp4 E2M1), by default
            read from A's and B's dtypes; given, A or B may also be uint8 codes. Other
            builtins take none of the four.

    What ``model="exact"`` means for a GEMM: each builtin call (K step) is exact and rounds
    once into the accumulator format, so a GEMM of S steps rounds S times and the order of
    the K steps matters for every model, exact included. The result is the correctly rounded
    product only when K fits in one step. M, N or a batch dim of 0 give an empty D; K = 0
    issues no instruction and returns C (zeros for None) bit for bit.
    Returns:
        (*batch, M, N) in the accumulator's dtype; sharded (never gathered) when spread over
        devices. The f64 MFMA (float64 A, B, C: numpy arrays, or JAX arrays with
        jax_enable_x64 on) compute under an internal 64-bit scope, never switching x64 on for the
        user; D is a float64 JAX array when jax_enable_x64 is on (sharded when spread) and a
        numpy float64 array (host, the same bits) when it is off, where JAX has no float64
        arrays. Spread over devices or a mesh they give the one-device bits; a mesh spanning
        processes needs jax_enable_x64 on.

    Several processes (`jax.distributed`; README "Several machines"): ``devices='all'`` and
    meshes may span every process's devices; inputs are then global arrays
    (`jax.make_array_from_callback` / `jax.make_array_from_process_local_data`) or host data
    that every process holds alike; D is a global array (read it through
    ``d.addressable_shards`` or `jax.experimental.multihost_utils.process_allgather`). Every
    process must make the same call: shapes, options, plan and host-data digests are compared
    first (`jwmma.tiled.processes.agree`), and a mismatch raises ValueError on every process.
    ``devices='local'`` uses this process's devices only (independent work per process).
    """
    return _gemm(a, b, c, None, builtin=builtin, model=model, path=path, prune=prune, a_neg=a_neg, b_neg=b_neg, clamp=clamp, cbsz=cbsz, abid=abid, index_key=index_key, target=target, mesh=mesh, mesh_axes=mesh_axes, devices=devices, options=options, backend=backend, check=check, scale_a=scale_a, scale_b=scale_b, fmt_a=fmt_a, fmt_b=fmt_b)


def gemm_extent(a, b, c, extent, **keywords):
    """`gemm` of operands zero-padded to a bucket (`jwmma.tiled.buckets`) from a GEMM of
    ``extent``: int32 (3,) (m, n, k), which may be traced; one program per bucket. The caller
    (`buckets`) pads A, B and C on their bits to tile-multiple M, N and K, picks the XLA path on
    one device and cuts D back to the extent. Keywords: `gemm`'s.

    Returns:
        (*batch, M, N) of the bucket; the outputs past the extent are zero.
    """
    call = inspect.signature(gemm).bind(a, b, c, **keywords)  # `gemm`'s defaults, written there only
    call.apply_defaults()
    return _gemm(extent=extent, **call.arguments)


def _gemm(a, b, c, extent, *, builtin, model, path, prune, a_neg, b_neg, clamp, cbsz, abid, index_key, target, mesh,
          mesh_axes, devices, options, backend, check, scale_a, scale_b, fmt_a, fmt_b):
    spec = operands.scaled_spec(lookup(builtin, target), a, b, scale_a, scale_b, fmt_a, fmt_b)
    if (cbsz, abid) != (0, 0):  # a multi-block row's output tiles are its blocks: no A broadcast
        spec.require_single_block("jwmma.gemm with cbsz/abid")
    if spec.scaled:  # elements and their block scales as one word each (`operands.scaled_words`)
        a, b = operands.scaled_words(spec, a, b, scale_a, scale_b, check)
    if path not in PATHS:
        raise ValueError(f"path must be one of {PATHS}, got {path!r}")
    prune = check_static_bool(prune, "prune")
    a_signed, b_signed, clamp = operands.check_modifiers(spec, a_neg, b_neg, clamp)
    if spec.signed_choice:
        a_vals = a[0] if isinstance(a, tuple) and len(a) == 2 else a
        a_signed = operands.signedness(spec, "a", as_array(a_vals, "a"), a_neg)
        b_signed = operands.signedness(spec, "b", as_array(b, "b"), b_neg)
    s = index_offset(spec, cbsz, abid, index_key)  # multi-block rows: every output tile is one block
    m_obj = models.resolve(model, context(spec, clamp), spec.default_model)
    opts = resolve_options(options, backend)
    dist = plan_gemm(spec, a, b, c, mesh=mesh, mesh_axes=mesh_axes, devices=devices)
    _check_float64(spec, dist)
    if dist is not None and dist.spans_processes:  # before any collective on data
        processes.agree(_call_description(spec, m_obj, path, prune, (a_signed, b_signed, clamp), s, opts, a, b, c,
                                          dist), f"jwmma.gemm({spec.name})")
    signed = (a_signed, b_signed) if spec.integer else (None, None)
    xla_here = dist is None and not (path == "matrix" and pallas.kernel_for(spec, m_obj, opts))
    if extent is not None and not xla_here:  # `buckets` decides before it pads
        raise ValueError(f"a bucketed GEMM runs on the XLA path on one device ({spec.name})")  # jwmma's own misuse
    if xla_here:
        # an eager GEMM of a few shapes: its bucket's program (`buckets`); checked as padded
        bucket = buckets.pad_inputs(spec, opts, a, b, c) if extent is None else None
        if bucket is not None:
            a, b, c, extent = bucket
        ins = operands.inputs(spec, a, b, c, prune=prune, check=check, signed=signed)
        if ins.m == 0 or ins.n == 0 or ins.k == 0 or 0 in ins.batch:  # no instruction issued: D = C
            return _empty(spec, ins.batch + (ins.m, ins.n), ins.c)
        form = ins.form if extent is None else dataclasses.replace(ins.form, k4=ins.k)  # one program per bucket
        real = (ins.m, ins.n, ins.k) if bucket is None else tuple(int(x) for x in bucket[3])
        opts = settle(opts, emulated_products(spec, ins.batch, *real), m_obj,
                      (spec, m_obj, opts, path, s, a_signed, b_signed, clamp, form, (ins.m, ins.n, ins.k, ins.batch),
                       shapes_key(ins.a, ins.pos, ins.b, ins.c)))
        # concrete operands a model can take faster (bf16: `Model.normal_operands`, host numpy)
        normal = path == "matrix" and normal_values_of(spec, m_obj, opts, ins.a, ins.b, clamp)
        with x64_scope():  # operands (floats as bits) converted block by block inside the bounded loop
            d = paths.gemm_path(ins.a, ins.pos, ins.b, ins.c, spec=spec, model=m_obj, options=opts,
                                a_signed=a_signed, b_signed=b_signed, clamp=clamp, path=path, s=s,
                                form=form, dims=(ins.m, ins.n, ins.k, ins.batch), extent=extent,
                                normal_values=normal)
        if bucket is not None:  # cut on the host: no program per shape
            d = jax.device_put(np.ascontiguousarray(np.asarray(d)[..., : real[0], : real[1]]))
        return float64_out(spec, d)
    # the f64 rows' operands are float64 and their codes int64 from placement to D: all of it inside
    # x64_scope (outside it JAX would place float64 data as float32 and cut int64 codes to 32 bits)
    with x64_scope() if spec.c_type == "f64" else contextlib.nullcontext():
        if dist is not None:  # each device receives only its shard; preparation runs sharded
            a, b, c = dist.place(a, b, c)
        d = _padded_codes_path(spec, m_obj, opts, dist, a, b, c, path=path, prune=prune, check=check,
                               a_signed=a_signed, b_signed=b_signed, clamp=clamp, s=s)
    return float64_out(spec, d)


def _traced(*xs) -> bool:
    """Whether any operand (or a pair's part) is traced: inside a user's jit, vmap or grad."""
    return any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves(xs))


def _padded_codes_path(spec, m_obj, opts, dist, a, b, c, *, path, prune, check, a_signed, b_signed, clamp, s):
    """D of a GEMM that runs on whole padded codes: spread over ``dist``'s mesh
    (`emulate_padded`), or the Pallas kernel on one device (eagerly `paths.kernel_gemm`, one
    program; traced, inside the user's program). Operands placed already; called inside
    `x64_scope` for the f64 rows (their codes are int64)."""
    signed = (a_signed, b_signed) if spec.integer else (None, None)
    ins = operands.inputs(spec, a, b, c, prune=prune, check=check, signed=signed)
    dims = (ins.m, ins.n, ins.k, ins.batch)
    if ins.m == 0 or ins.n == 0 or ins.k == 0 or 0 in ins.batch:  # no instruction issued: D = C
        return _empty(spec, ins.batch + (ins.m, ins.n), ins.c)
    opts = settle(opts, emulated_products(spec, ins.batch, ins.m, ins.n, ins.k), m_obj,
                  (spec, m_obj, opts, path, s, a_signed, b_signed, clamp, dist is None, ins.form, dims,
                   shapes_key(ins.a, ins.pos, ins.b, ins.c)))
    if dist is None and not _traced(a, b, c):  # eager on one device: a kernel's GEMM (no f64 row has one)
        with pallas.quiet_triton(), x64_scope():  # the kernel lowers here, with int64 loops (``wide_loops``)
            return paths.kernel_gemm(ins.a, ins.pos, ins.b, ins.c, spec=spec, model=m_obj, options=opts,
                                     a_signed=a_signed, b_signed=b_signed, clamp=clamp, form=ins.form, dims=dims)
    ops = operands.Codes(*operands.convert(ins.form, ins.a, ins.pos, ins.b, ins.c), *dims, spec.dense)
    if ops.c is None and dist is not None:  # created sharded, never whole on one device
        ops = dataclasses.replace(ops, c=dist.zeros(operands.code_dtype(spec)))
    kernel = functools.partial(
        paths.matrix_path if path == "matrix" else paths.register_path, spec=spec, model=m_obj, options=opts,
        a_signed=a_signed, b_signed=b_signed, clamp=clamp, **({} if path == "matrix" else {"s": s}),
    )
    with pallas.quiet_triton():  # the kernels lower here (JAX 0.11 deprecates their backend)
        d = emulate_padded(kernel, *operands.pad_to_tiles(spec, ops), shape=(ops.m, ops.n), plan=dist)
    return fragments.codes_to_values(spec.c_type, d.astype(operands.code_dtype(spec)))
