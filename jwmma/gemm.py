"""Whole GEMMs emulated as the tiled kernel that issues one builtin per K step.

Every output tile is accumulated over the K steps in order, each step one builtin call whose
result is the next step's C. That order is what a hardware kernel does and it matters for
every model but `exact`. Two execution paths give the same bits:

* ``path="matrix"``: every step runs the instruction arithmetic on whole matrices at once
  (all tiles together: an output depends only on its row of A, its column of B and the step
  boundaries, so the tiles need not be cut out);
* ``path="registers"``: every step packs the A, B, C fragments of every tile into registers,
  calls the builtin on all tiles as a batch of waves and unpacks D, as a real kernel does.

Both walk the K steps with `lax.scan`; peak memory is O(M*N*Kc_step), never O(M*N*K).
"""
from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
from jax import lax

from . import builtins as _builtins
from . import core, fragments, models
from .models import fused_dots
from . import sharding as _sharding
from .isa import BuiltinSpec, lookup
from .rounding import x64_scope
from .sparsity import compress_2_4
from .validation import as_array, check_static_bool

_PATHS = ("matrix", "registers")


# ---------------------------------------------------------------------------- operand prep
def _element_codes(spec_type: str, x, what: str, builtin: str):
    """Logical element values -> int32 codes, with a conversion hint on a dtype mismatch."""
    return fragments._value_codes(spec_type, x, what, builtin)


def _prepare_a(spec: BuiltinSpec, a, prune: bool):
    """(values, positions) of A in compressed form, each (*batch, M, K/2)."""
    if isinstance(a, tuple):
        if len(a) != 2:
            raise ValueError(f"a given as a tuple must be (values, positions), got {len(a)} items")
        values, pos = as_array(a[0], "a values"), as_array(a[1], "a positions")
        if values.shape != pos.shape:
            raise ValueError(
                f"a values and positions must have the same shape (*batch, M, K/2), got "
                f"{tuple(values.shape)} and {tuple(pos.shape)}"
            )
        if not jnp.issubdtype(pos.dtype, jnp.integer):
            raise TypeError(f"a positions must be integers 0..3, got {pos.dtype}")
        fragments.check_range(pos, 0, 3, "a positions")
        if values.ndim < 2:
            raise ValueError(f"a values must be (*batch, M, K/2), got shape {tuple(values.shape)}")
        if values.shape[-1] % 2:
            raise ValueError(
                f"a values must hold two stored values per group of four (an even K/2), got shape {tuple(values.shape)}"
            )
        return values, pos.astype(jnp.int32), values.shape[-1] * 2
    a = as_array(a, "a")
    if a.ndim < 2:
        raise ValueError(f"a must be (*batch, M, K), got shape {tuple(a.shape)}")
    k = a.shape[-1]
    if k % 4:
        pad = 4 - k % 4
        a = jnp.pad(jnp.asarray(a), [(0, 0)] * (a.ndim - 1) + [(0, pad)])
    if prune:
        from .sparsity import prune_2_4

        a = prune_2_4(a)
    try:
        values, pos = compress_2_4(a)  # raises on a matrix that is not 2:4 sparse
    except ValueError as e:
        raise ValueError(str(e).replace("a24 is not", "a is not", 1) + ", or pass prune=True") from None
    return values, pos, k


def _pad_to(x, axis_sizes: dict, value=0):
    pads = [(0, 0)] * x.ndim
    for ax, size in axis_sizes.items():
        pads[ax] = (0, size - x.shape[ax])
    if all(p == (0, 0) for p in pads):
        return x
    return jnp.pad(x, pads, constant_values=value)


# --------------------------------------------------------------------------------- kernels
def _steps_a(a_codes, pos, kc):
    """(..., M, Kc_total) -> (steps, ..., M, kc) for scanning."""
    s = a_codes.shape[-1] // kc
    def f(x):
        x = x.reshape(*x.shape[:-1], s, kc)
        return jnp.moveaxis(x, -2, 0)
    return f(a_codes), f(pos)


def _steps_b(b_codes, k):
    s = b_codes.shape[-2] // k
    x = b_codes.reshape(*b_codes.shape[:-2], s, k, b_codes.shape[-1])
    return jnp.moveaxis(x, -3, 0)


def _matrix_tile(spec, mp, np_) -> tuple[int, int]:
    """Output tile of the matrix path (any tile gives the same bits; it only changes how
    memory is walked). GPU: the instruction's height and 128 columns where N allows (the
    fastest of 16 / 128 / N on an H200); CPU: the whole block, so that the fp8 group sums
    can be matrix products. JWMMA_TILE_N overrides the width (0: untiled)."""
    env = os.environ.get("JWMMA_TILE_N")
    if env is None and jax.default_backend() == "cpu":
        return mp, np_
    tn = int(env) if env is not None else 128
    if tn <= 0:
        return mp, np_
    return spec.m, (tn if np_ % tn == 0 else spec.n)


def _products_budget(by_dots: bool) -> int:
    """Elements of one step's product tensor a kernel may hold at once (memory, and cache
    locality on CPUs): row blocks are sized to stay under it."""
    env = os.environ.get("JWMMA_BLOCK_ELEMS")
    if env:
        return int(env)
    if jax.default_backend() == "gpu":
        return 2**27  # large blocks fill the device
    # CPU: the per-product path keeps each fusion's intermediates in cache with small blocks
    # (2**18: ~1.6x faster than 2**22 on a 2-core Xeon); matrix products want large ones
    # (2**24: 3.8x faster than 2**18)
    return 2**24 if by_dots else 2**18


def _row_block(spec, mp, np_, batch_size, by_dots=False) -> int:
    per_row = spec.kc * np_ * max(1, batch_size)
    rows = max(spec.m, (_products_budget(by_dots) // per_row) // spec.m * spec.m)
    while mp % rows:  # a divisor of Mp that is a multiple of the tile height
        rows -= spec.m
    return rows


def by_row_blocks(kernel, spec, model=None):
    """Run ``kernel(a, p, b, c)`` on blocks of rows one after the other (lax.map): an output
    row depends only on its own A row, so this bounds memory without changing any bit."""

    def run(a_codes, pos, b_codes, c):
        mp, np_ = c.shape[-2:]
        by_dots = model is not None and core.use_dots() and fused_dots.applies(
            model, core.context(spec), (mp, spec.kc), (spec.k, np_))
        rows = _row_block(spec, mp, np_, int(np.prod(c.shape[:-2], dtype=np.int64)), by_dots)
        if rows >= mp:
            return kernel(a_codes, pos, b_codes, c)
        nb = mp // rows

        def split(x):
            x = x.reshape(*x.shape[:-2], nb, rows, x.shape[-1])
            return jnp.moveaxis(x, -3, 0)

        out = lax.map(lambda t: kernel(t[0], t[1], b_codes, t[2]), (split(a_codes), split(pos), split(c)))
        out = jnp.moveaxis(out, 0, -3)
        return out.reshape(*out.shape[:-3], mp, np_)

    return run


@functools.partial(jax.jit, static_argnames=("spec", "model", "a_signed", "b_signed", "clamp"))
def _matrix_path(a_codes, pos, b_codes, c, *, spec, model, a_signed, b_signed, clamp):
    b_s = _steps_b(b_codes, spec.k)

    def rows(a_codes, pos, _b, c):
        tm, tn = _matrix_tile(spec, c.shape[-2], c.shape[-1])
        a_s, p_s = _steps_a(a_codes, pos, spec.kc)

        def body(acc, x):
            # tiles of tm x tn outputs as a batch: each tile's selected B rows stay local
            a, p, b = x
            a_t = _tiles(a, tm, spec.kc)  # (..., TM, 1, tm, kc)
            p_t = _tiles(p, tm, spec.kc)
            b_t = _tiles(b, spec.k, tn)  # (..., 1, TN, k, tn)
            d = core.step(spec, model, a_t, p_t, b_t, acc, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
            return d, None

        return _untile(lax.scan(body, _tiles(c, tm, tn), (a_s, p_s, b_s))[0])

    return by_row_blocks(rows, spec, model)(a_codes, pos, b_codes, c)


def _tiles(x, tr, tc):
    """(..., R, C) -> (..., R/tr, C/tc, tr, tc)."""
    *lead, r, c = x.shape
    x = x.reshape(*lead, r // tr, tr, c // tc, tc)
    return jnp.swapaxes(x, -3, -2)


def _untile(x):
    *lead, tr_n, tc_n, tr, tc = x.shape
    return jnp.swapaxes(x, -3, -2).reshape(*lead, tr_n * tr, tc_n * tc)


@functools.partial(jax.jit, static_argnames=("spec", "model", "a_signed", "b_signed", "clamp", "s"))
def _register_path(a_codes, pos, b_codes, c, *, spec, model, a_signed, b_signed, clamp, s):
    kernel = functools.partial(_register_rows, spec=spec, model=model, a_signed=a_signed,
                               b_signed=b_signed, clamp=clamp, s=s)
    return by_row_blocks(kernel, spec, model)(a_codes, pos, b_codes, c)


def _register_rows(a_codes, pos, b_codes, c, *, spec, model, a_signed, b_signed, clamp, s):
    a_s, p_s = _steps_a(a_codes, pos, spec.kc)
    b_s = _steps_b(b_codes, spec.k)
    c_regs = fragments.matrix_to_lanes(spec.c_layout, _tiles(c, spec.m, spec.n))  # (..., TM, TN, lanes, nc)

    def body(c_regs, x):
        a, p, b = x
        # fragments of every tile, as a kernel's loaders would build them
        a_t = _tiles(a, spec.m, spec.kc)[..., :, 0:1, :, :]  # (..., TM, 1, m, kc)
        p_t = _tiles(p, spec.m, spec.kc)[..., :, 0:1, :, :]
        b_t = _tiles(b, spec.k, spec.n)[..., 0:1, :, :, :]  # (..., 1, TN, k, n)
        a_regs = fragments.codes_to_regs(spec.a, fragments.matrix_to_lanes(spec.a_layout, a_t))
        b_regs = fragments.codes_to_regs(spec.b, fragments.matrix_to_lanes(spec.b_layout, b_t))
        idx = _index_regs(spec, p_t, s)
        c_dtype = np.dtype(np.int32) if spec.c_type in ("f32", "i32") else spec.c.dtype
        c_in = c_regs if spec.c_type in ("f32", "i32") else fragments.codes_to_regs(spec.c, c_regs, c_dtype)
        if spec.c_type == "f32":
            c_in = lax.bitcast_convert_type(c_in, jnp.float32)
        d = _builtins._run(
            a_regs, b_regs, c_in, idx, spec=spec, model=model, s=s, a_signed=a_signed,
            b_signed=b_signed, clamp=clamp, c_dtype=np.dtype(c_in.dtype).name,
        )
        if spec.c_type == "f32":
            d = lax.bitcast_convert_type(d, jnp.int32)
        elif spec.c_type != "i32":
            d = fragments.regs_to_codes(spec.c, d)
        return d, None

    c_regs = lax.scan(body, c_regs, (a_s, p_s, b_s))[0]
    c_t = fragments.lanes_to_matrix(spec.c_layout, (spec.m, spec.n), c_regs)
    return _untile(c_t)


def _index_regs(spec, pos_tiles, s):
    lane_pos = fragments.matrix_to_lanes(spec.a_layout, pos_tiles.astype(jnp.uint32))
    shifts = (s + 2 * jnp.arange(spec.a.elems, dtype=jnp.uint32)).astype(jnp.uint32)
    return lax.bitcast_convert_type(fragments._or_reduce(lane_pos << shifts), jnp.int32)


def emulate_padded(kernel, a_codes, pos, b_codes, c_codes, *, shape=None, plan=None):
    """Run a GEMM kernel on tile-padded operands (the seam where distribution plugs in).

    a_codes, pos: (*batch, Mp, Kp/2) int32; b_codes: (*batch, Kp, Np) int32; c_codes:
    (*batch, Mp, Np) int32 accumulator bits (or i32 values). ``kernel(a, p, b, c)`` returns
    D in the same form; every output depends only on its row of A and column of B.
    shape: the (M, N) to cut D to (None: keep it padded). plan: a `jwmma.sharding.Plan` to
    run the kernel on every shard of a device mesh (D comes back sharded), or None."""
    if plan is not None:
        return plan.emulate(kernel, a_codes, pos, b_codes, c_codes, shape)
    with x64_scope():
        d = kernel(a_codes, pos, b_codes, c_codes)
    return d if shape is None else d[..., : shape[0], : shape[1]]


# ------------------------------------------------------------------------------ public API
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
    mesh=None,
    mesh_axes=None,
    devices=None,
):
    """Emulate D = A x B + C as the tiled kernel issuing ``builtin`` once per K step.

    a: dense 2:4-sparse (*batch, M, K) array of the builtin's A element type, or a
       ``(values, positions)`` pair of (*batch, M, K/2) arrays (`jwmma.compress_2_4`);
       a dense ``a`` that is not 2:4 sparse raises unless ``prune=True``.
    b: (*batch, K, N) of the builtin's B element type. c: (*batch, M, N) of the accumulator
       type (float32, float16, bfloat16 or int32) or None for zeros.
    M, N, K need not be multiples of the tile: the operands are zero-padded (A's padding
    groups select positions (2, 3), as hipSPARSELt pads). Batch dims broadcast.
    a_neg/b_neg/clamp: signedness and saturation of the RDNA4 iu8/iu4 builtins (default:
    signed, no clamp); given for any other builtin they raise. cbsz/abid (gfx950) and
    index_key (RDNA4) pick the index set, which changes nothing numerically.
    Returns (*batch, M, N) in the accumulator's dtype.

    Several devices (`jwmma.sharding`, same bits): ``devices=N`` (int, 'all' or a list of
    devices) splits batch, M and N over the first N devices with an automatic layout;
    ``mesh=`` a `jax.sharding.Mesh` with ``mesh_axes`` giving each mesh axis's role ('m',
    'n', 'batch', 'batch<i>', None; default: axes named after roles, then batch, M, N in
    order), or a NamedSharding for D (its spec over (*batch, M, N) says what splits). Neither: inputs carrying a NamedSharding are followed; plain inputs use one
    device. D comes back sharded (never gathered onto one device).
    """
    spec = lookup(builtin)
    if path not in _PATHS:
        raise ValueError(f"path must be one of {_PATHS}, got {path!r}")
    prune = check_static_bool(prune, "prune")
    if not spec.signed_choice:
        given = [n for n, v in (("a_neg", a_neg), ("b_neg", b_neg), ("clamp", clamp)) if v is not None]
        if given:
            raise ValueError(
                f"{', '.join(given)} only apply to the RDNA4 iu8/iu4 builtins; {spec.name} takes none "
                f"(its integers are {'signed and its i32 result wraps' if spec.integer else 'floats'})"
            )
    a_signed = check_static_bool(True if a_neg is None else a_neg, "a_neg")
    b_signed = check_static_bool(True if b_neg is None else b_neg, "b_neg")
    clamp = check_static_bool(False if clamp is None else clamp, "clamp")
    s = _builtins._index_offset(spec, cbsz, abid, index_key)
    m_obj = models.resolve(model, core.context(spec, clamp), spec.default_model)
    plan = _sharding.plan_gemm(spec, a, b, c, mesh=mesh, mesh_axes=mesh_axes, devices=devices)
    if plan is not None:  # each device receives only its shard; preparation runs sharded
        a, b, c = plan.place(a, b, c)

    values, pos, k_dense = _prepare_a(spec, a, prune)
    a_codes = _element_codes(spec.a_type, values, "a", spec.name)
    b = as_array(b, "b")
    if b.ndim < 2:
        raise ValueError(f"b must be (*batch, K, N), got shape {tuple(b.shape)}")
    if b.shape[-2] != k_dense:
        raise ValueError(
            f"a and b disagree on K: a is (*batch, M, K) with K={k_dense}, b is (*batch, K, N) "
            f"with shape {tuple(b.shape)}"
        )
    b_codes = _element_codes(spec.b_type, b, "b", spec.name)
    m_dim, n_dim = values.shape[-2], b.shape[-1]
    acc_dtype = {"f32": np.dtype(np.float32), "i32": np.dtype(np.int32), "f16": np.dtype(np.float16),
                 "bf16": np.dtype(ml_dtypes.bfloat16)}[spec.c_type]
    if c is None:
        c_codes = jnp.zeros((m_dim, n_dim), jnp.int32) if plan is None else plan.zeros()
    else:
        c = as_array(c, "c")
        if np.dtype(c.dtype) != acc_dtype:
            raise TypeError(
                f"c must be {acc_dtype.name} for {spec.name} (its accumulator), got {c.dtype}; "
                f"convert it first, e.g. c.astype(np.{acc_dtype.name})"
                if acc_dtype.name != "bfloat16" else
                f"c must be bfloat16 for {spec.name}, got {c.dtype}; convert with c.astype(ml_dtypes.bfloat16)"
            )
        if c.ndim < 2 or tuple(c.shape[-2:]) != (m_dim, n_dim):
            raise ValueError(f"c must be (*batch, M, N) = (*batch, {m_dim}, {n_dim}), got {tuple(c.shape)}")
        c_codes = _element_codes("i32" if spec.c_type == "i32" else spec.c_type, c, "c", spec.name)
    try:
        batch = np.broadcast_shapes(a_codes.shape[:-2], b_codes.shape[:-2], c_codes.shape[:-2])
    except ValueError:
        raise ValueError(
            f"batch dims of a {tuple(a_codes.shape[:-2])}, b {tuple(b_codes.shape[:-2])} and c "
            f"{tuple(c_codes.shape[:-2])} do not broadcast"
        ) from None

    # zero-pad to whole tiles (A padding groups: positions (2, 3), values 0)
    mp = -(-m_dim // spec.m) * spec.m
    np_ = -(-n_dim // spec.n) * spec.n
    kp = -(-k_dense // spec.k) * spec.k
    kcp = kp // 2
    a_codes = _pad_to(a_codes, {-2: mp, -1: kcp})
    pad_pos = jnp.tile(jnp.asarray([2, 3], jnp.int32), kcp // 2)
    pos = jnp.where(jnp.arange(kcp) < pos.shape[-1], _pad_to(pos, {-2: mp, -1: kcp}), pad_pos)
    b_codes = _pad_to(b_codes, {-2: kp, -1: np_})
    c_codes = _pad_to(c_codes, {-2: mp, -1: np_})
    a_codes = jnp.broadcast_to(a_codes, batch + a_codes.shape[-2:])
    pos = jnp.broadcast_to(pos, batch + pos.shape[-2:])
    b_codes = jnp.broadcast_to(b_codes, batch + b_codes.shape[-2:])
    c_codes = jnp.broadcast_to(c_codes, batch + c_codes.shape[-2:])

    kernel = functools.partial(
        _matrix_path if path == "matrix" else _register_path, spec=spec, model=m_obj,
        a_signed=a_signed, b_signed=b_signed, clamp=clamp, **({} if path == "matrix" else {"s": s}),
    )
    d = emulate_padded(kernel, a_codes, pos, b_codes, c_codes, shape=(m_dim, n_dim), plan=plan)
    if spec.c_type == "i32":
        return d.astype(jnp.int32)
    if spec.c_type == "f32":
        return lax.bitcast_convert_type(d.astype(jnp.int32), jnp.float32)
    return lax.bitcast_convert_type(d.astype(jnp.uint16), acc_dtype)
