"""The 113 builtins as jit-compiled JAX functions over batched waves (API.md section 1).

Each builtin: registers -> element codes -> matrices (static permutations through the table's
layouts) -> `step.step` with the chosen model -> D matrix -> registers. Leading dims are
independent waves and broadcast against each other. Every function is made by `make` from its
table row through one calling-convention adapter (`jwmma.isa.conventions`): the row says
which HIP arguments it takes, in which order, and how they map onto the engine's roles. The
dense builtins (RDNA4 WMMA) have no index argument; the CDNA3 SMFMAC take ``target=``, which
picks the row as decoded on that chip (`jwmma.isa.table.lookup`).
"""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from .. import models
from ..isa import layouts
from ..isa.conventions import python_signature, roles
from ..isa.table import BUILTINS, BuiltinSpec, lookup
from ..keywords import check_keywords, plain_signature
from ..numerics.rounding import x64_scope
from . import fragments
from .index import check_blgp, check_broadcast, index_offset, report_violations
from .effort import effort_jit, settle, shapes_key
from .options import resolve as resolve_options
from .step import context, normal_values_of, step
from .validation import (as_array, batch_shape, broadcast_batch, check_bool_kw, check_static_bool, check_static_int,
                         fail_if, is_concrete)

__all__ = ["call", "call_kernel", "set_call_kernels", "make", "run_call", "run_registers", "run_waves", "wave_block",
           "FUNCTIONS", *BUILTINS]


# ------------------------------------------------------------------------------ the kernel
#: the backends' kernels for direct calls (`set_call_kernels`): a one-element list so that the
#: registration needs no global statement; [None]: every call runs the model's XLA arithmetic
_CALL_KERNELS = [None]


def set_call_kernels(provider) -> None:
    """Let a backend compute the instruction of direct builtin calls over waves.

    ``provider(spec, model, options)`` returns None (the model's XLA arithmetic, `step`) or a
    function with `step`'s arguments, contract and bits on (W, M, Kc) / (W, Kd, N) / (W, M, N)
    batches of independent instructions. `jwmma.backends.pallas` registers its kernels when
    imported: the backends sit above the engine (docs/ARCHITECTURE.md), so the engine asks
    and never imports them."""
    _CALL_KERNELS[0] = provider


def call_kernel(spec: BuiltinSpec, model, options):
    """The registered backend's function for direct calls of ``spec`` under ``model`` with
    these resolved options, or None (`set_call_kernels`; never for a multi-block MFMA)."""
    provider = _CALL_KERNELS[0]
    if provider is None or spec.blocks > 1:
        return None
    return provider(spec, model, options)


def _registers(spec: BuiltinSpec, model, a, b, c, idx, scale_a=None, scale_b=None, *, s: int, options,
               a_signed=True, b_signed=True, clamp=False, blgp: int = 0, opsel: tuple = (0, 0),
               broadcast: tuple = (0, 0), half: int = 0, kernels: bool = False, normal_values: bool = False):
    """One builtin call on validated, broadcast registers (jitted as `run_registers`).

    Args:
        spec: the builtin; model: a resolved `Model`; a, b, c: registers (*batch, lanes, n);
        idx: (*batch, lanes) int32; scale_a, scale_b: (*batch, lanes) scale registers of a
        block-scaled builtin (else None); s: the index set's bit offset; options: resolved
        `jwmma.Options`; a_signed, b_signed, clamp: the integer modifiers; blgp: the CDNA3
        f32 MFMA's B lane pattern (f64: the negation bits of A, B, C); opsel: the scale bytes (scale_a's, scale_b's); broadcast:
        a multi-block MFMA's (cbsz, abid), the A block each block computes with; kernels:
        the instruction on a backend's kernel where one is registered for these options
        (`call_kernel`; direct calls only, not the GEMM register path's steps);
        normal_values: the host checked the operands with `Model.normal_operands`
        (`Context.normal_values`).
    Returns:
        D registers of c's shape and dtype.
    """
    if blgp and spec.blgp != "negate":  # B is read from other lanes (BUILTINS_DENSE.md 3.1)
        b = b[..., layouts.BLGP_LANES[blgp], :]
    if broadcast != (0, 0):  # A of one block read by 2**cbsz blocks (BUILTINS_DENSE.md 10)
        a = a[..., layouts.cbsz_lanes(spec.m, *broadcast), :]
    a_lane, b_lane = fragments.regs_to_codes(spec.a, a), fragments.regs_to_codes(spec.b, b)
    c_lane = fragments.regs_to_codes(spec.c, c)
    kernel = call_kernel(spec, model, options) if kernels else None
    gather = kernel is not None  # the matrices enter and leave a kernel (`registers.permute`)
    if blgp and spec.blgp == "negate":  # f64 on gfx942/gfx950: bits 0, 1, 2 flip the signs of A, B, C
        a_lane, b_lane, c_lane = (x ^ (jnp.int64(-2**63) if blgp >> i & 1 else jnp.int64(0))
                                  for i, x in enumerate((a_lane, b_lane, c_lane)))
    a_mat = fragments.lanes_to_matrix(spec.a_layout, spec.a_shape, a_lane, gather)
    b_mat = fragments.lanes_to_matrix(spec.b_layout, spec.b_shape, b_lane, gather)
    if spec.scaled:  # every element carries its block's E8M0 scale: element | scale << 8
        sa, sb = fragments.scale_matrices(spec, scale_a, scale_b, opsel)
        a_mat, b_mat = a_mat | (sa << 8), b_mat | (sb << 8)
    pos = fragments.positions(spec, idx, s)
    c_mat = fragments.lanes_to_matrix(spec.c_layout, spec.c_shape, fragments.c_slots(spec, c_lane, half), gather)
    if spec.blocks > 1:  # the blocks are independent products: a batch dimension of one step
        split = lambda x, r: x.reshape(*x.shape[:-2], spec.blocks, r, x.shape[-1])
        a_mat, b_mat, c_mat = split(a_mat, spec.m), split(b_mat, spec.k), split(c_mat, spec.m)
        pos = jnp.zeros((*a_mat.shape[:-2], spec.m, spec.kc), jnp.int32)
    # the host's finding reaches the XLA step only (the kernels have no value program)
    run = functools.partial(step, normal_values=normal_values) if kernel is None else kernel
    d = run(spec, model, a_mat, pos, b_mat, c_mat, options=options, a_signed=a_signed, b_signed=b_signed, clamp=clamp)
    d = d.reshape(*d.shape[:-3], *spec.c_shape) if spec.blocks > 1 else d
    d = d.astype(jnp.int64 if spec.c.elem_bits == 64 else jnp.int32)  # f64: int64 bit patterns
    d_lanes = fragments.matrix_to_lanes(spec.c_layout, d, gather)
    # an opsel row writes one half of each VGPR; the other is C's (_tied) or, unspecified on hardware, zero
    other = fragments.c_slots(spec, c_lane, 1 - half) if spec.tied else None
    return fragments.codes_to_regs(spec.c, fragments.c_words(spec, d_lanes, half, other), c.dtype)


#: the jitted kernel of every builtin call (also issued per K step by the GEMM register path)
run_registers = jax.jit(_registers, static_argnames=("spec", "model", "s", "options", "a_signed", "b_signed",
                                                     "clamp", "blgp", "opsel", "broadcast", "half", "kernels",
                                                     "normal_values"))


def wave_block(spec: BuiltinSpec, model, ctx, options, waves: int) -> int:
    """Waves per block of a direct builtin call: one block's products (waves x M x Kc x N)
    stay under the model's working set (`jwmma.models.Model.working_set` for one wave), so
    that intermediates stay in cache and peak memory does not grow with the batch."""
    budget = model.working_set(ctx, options, (2, spec.m, spec.kc), (2, spec.k, spec.n))  # one of many waves
    per_wave = spec.blocks * spec.m * spec.kc * spec.n
    return int(max(1, min(waves, budget // per_wave)))


def _waves(spec: BuiltinSpec, model, a, b, c, idx, scale_a, scale_b, *, s: int, options, a_signed=True,
           b_signed=True, clamp=False, blgp: int = 0, opsel: tuple = (0, 0), broadcast: tuple = (0, 0),
           half: int = 0, normal_values: bool = False):
    """`_registers` on (W, lanes, n) registers, W waves cut into blocks (`wave_block`) run one
    after the other (lax.map): every wave is independent, so no bit changes, and memory is
    the operands, D and one block's working set at any W. On a backend's kernel
    (`call_kernel`) all W at once: a kernel holds no product tensor."""
    w = a.shape[0]
    kernel = call_kernel(spec, model, options) is not None
    run = functools.partial(_registers, spec, model, s=s, options=options, a_signed=a_signed, b_signed=b_signed,
                            clamp=clamp, blgp=blgp, opsel=opsel, broadcast=broadcast, half=half, kernels=kernel,
                            normal_values=normal_values)
    bw = w if kernel else wave_block(spec, model, context(spec, clamp), options, w)
    if bw >= w:
        return run(a, b, c, idx, scale_a, scale_b)
    nb = -(-w // bw)
    pad = nb * bw - w

    def blocks(x):
        x = jnp.pad(x, [(0, pad)] + [(0, 0)] * (x.ndim - 1)) if pad else x
        return x.reshape(nb, bw, *x.shape[1:])

    out = lax.map(lambda t: run(*t), tuple(blocks(x) for x in (a, b, c, idx, scale_a, scale_b)))
    return out.reshape(nb * bw, *out.shape[2:])[:w]


#: a direct builtin call: the kernel over blocks of waves
run_waves = jax.jit(_waves, static_argnames=("spec", "model", "s", "options", "a_signed", "b_signed", "clamp",
                                             "blgp", "opsel", "broadcast", "half", "normal_values"))


def call(spec: BuiltinSpec, a, b, c, idx, *, s=0, a_signed=True, b_signed=True, clamp=False, model=None,
         check=False, options=None, backend=None, blgp=0, scales=(None, None), opsel=(0, 0), broadcast=(0, 0),
         half=None):
    """Validate the operands of ``spec`` and run it: what every builtin function does.

    Args:
        spec: the builtin; a, b, c: registers; idx: the index registers (None for a dense
        builtin); s: the index set's bit offset; a_signed, b_signed, clamp: static integer modifiers; model: a model name,
        text or object (None: the row's default); check: report undefined index pairs (RDNA3
        WMMA: copies of A/B that differ from lanes 0-15);
        options, backend: execution options (`jwmma.Options`); blgp: the CDNA3 f32 MFMA's B
        lane pattern (checked); scales: a block-scaled builtin's (scale_a, scale_b) registers
        (*batch, lanes) int32, None for no scaling (every byte 127, factor 1); opsel: their
        bytes (checked); broadcast: a multi-block MFMA's (cbsz, abid) (`check_broadcast`);
        half: an opsel row's opsel (checked; None: 0), the C/D half it reads and writes.
    Returns:
        D registers, c's shape (after broadcasting) and dtype.
    """
    check = check_bool_kw(check, "check")
    broadcast = check_broadcast(spec, *broadcast)
    half = 0 if half is None else fragments.check_opsel(spec, half)
    a = fragments.check_regs(spec, spec.a, a, "a")
    b = fragments.check_regs(spec, spec.b, b, "b")
    c = fragments.check_regs(spec, spec.c, c, "c")
    what = spec.convention.index_name
    if what is None:  # dense: no index register; the engine reads none (numpy: no eager JAX operation)
        idx = np.zeros((spec.lanes,), np.int32)
    else:
        idx = fragments.check_index(spec, as_array(idx, what), what)
    blgp = check_blgp(spec, blgp)
    if spec.scaled:
        opsel = tuple(check_static_int(v, f"opsel_{w}", 0, 3) for v, w in zip(opsel, "ab"))
        scales = [fragments.check_scale_register(spec, x, f"scale_{w}") for x, w in zip(scales, "ab")]
    else:  # the other builtins have none: fixed zero words keep one kernel signature
        scales = [np.zeros((spec.lanes,), np.int32)] * 2
    m = models.resolve(model, context(spec, clamp), spec.default_model)
    opts = resolve_options(options, backend)
    batch = batch_shape((a, 2), (b, 2), (c, 2), (idx, 1), (scales[0], 1), (scales[1], 1))
    if check:
        report_violations(spec, jnp.broadcast_to(jnp.asarray(idx), batch + idx.shape[-1:]), s)
        if spec.copies > 1:
            for what, regs in (("a", a), ("b", b)):
                _report_copies(spec, what, regs)
    if 0 in batch:  # no waves: nothing to compute
        return jnp.zeros(batch + c.shape[-2:], c.dtype)
    statics = dict(s=s, a_signed=a_signed, b_signed=b_signed, clamp=clamp, blgp=blgp, opsel=opsel,
                   broadcast=broadcast, half=half)
    products = int(np.prod(batch, dtype=np.int64)) * spec.blocks * spec.m * spec.kc * spec.n
    key = (spec, m, opts, *statics.values(), shapes_key(a, b, c, idx, *scales))
    settled = settle(opts, products, m, key)
    statics["normal_values"] = normal_values_of(spec, m, settled, a, b, clamp)
    with x64_scope():
        return _folding_vmap(spec, m, opts, settled, products, key, statics, (a, b, c, idx, *scales))


#: core ranks of `run_call`'s arrays (a, b, c, idx, scale_a, scale_b): the dims before them are waves
_CORE_RANKS = (2, 2, 2, 1, 1, 1)


def _folding_vmap(spec: BuiltinSpec, m, opts, settled, products: int, key, statics: dict, arrays):
    """`run_call` on ``arrays`` with the ``settled`` options (``opts`` with its compile effort
    settled for ``products``, `settle`). ``jax.vmap`` of a call folds its mapped axis into the
    call's waves (a `jax.custom_batching.custom_vmap` rule) instead of batching the call's
    program: the waves are independent instructions, the same bits either way. Batched as JAX
    batches programs, each `lax.cond` of the models (the special-value shortcut, the exact
    sums' choice) becomes a select that computes both of its branches, and the effort was
    settled for one mapped slice: a sparse bf16 `exact` call vmapped over 64 x 64 waves took
    2.1 s ('auto') / 5.0 s ('full') against 0.19 s for the same 4096 waves in one call.

    Only traced registers go through the rule: evaluated eagerly, a `custom_vmap` function runs
    its program as an inner jit, which would lose the settled compile options (`effort_jit`)."""
    if all(is_concrete(x) for x in arrays):
        return run_call(spec, m, *arrays, options=settled, **statics)

    @jax.custom_batching.custom_vmap
    def run(*xs):
        return run_call(spec, m, *xs, options=settled, **statics)

    @run.def_vmap
    def _fold(axis_size, in_batched, *xs):
        # the mapped axis leads every batched array; pad each with unit wave dims to the widest
        # slice's wave rank so that it stays the leading wave dim after broadcasting
        rank = max(x.ndim - r - int(bt) for x, r, bt in zip(xs, _CORE_RANKS, in_batched))
        xs = [x.reshape(x.shape[:1] + (1,) * (rank - (x.ndim - 1 - r)) + x.shape[1:]) if bt else x
              for x, r, bt in zip(xs, _CORE_RANKS, in_batched)]
        if axis_size == 0:  # no waves: nothing to compute (as `call` answers an empty batch)
            batch = np.broadcast_shapes(*(x.shape[:x.ndim - r] for x, r in zip(xs, _CORE_RANKS)))
            return jnp.zeros(batch + xs[2].shape[-2:], xs[2].dtype), True
        key_v, products_v = key + (("vmap", axis_size),), products * axis_size
        return _folding_vmap(spec, m, opts, settle(opts, products_v, m, key_v), products_v, key_v, statics, xs), True

    return run(*arrays)


def _report_copies(spec: BuiltinSpec, what: str, regs) -> None:
    """check=True on a replicated builtin (RDNA3 WMMA): raise ValueError where a copy of A or B
    beyond lanes 0-15 differs in its bits from the copy the emulator reads (BUILTINS_MORE.md
    5.2); at run time (a host callback) for traced registers."""
    words = fragments.register_words(jnp.asarray(regs))
    first = words[..., :16, :]
    bad = jnp.stack([words[..., 16 * g:16 * g + 16, :] != first for g in range(1, spec.copies)], -3)

    def describe(count, at):
        g, lane, e = (int(v) for v in at[-3:])
        return (f"{spec.name}: check=True: {what} lane {16 * (g + 1) + lane} element {e} differs from lane {lane} "
                f"({count} element(s) of other copies differ); every 16-lane group must hold the same {what.upper()}: "
                f"the emulator reads lanes 0-15, hardware documents the copies as equal")

    fail_if(bad, describe)


def _call(spec: BuiltinSpec, model, a, b, c, idx, scale_a, scale_b, *, s: int, options, a_signed=True,
          b_signed=True, clamp=False, blgp: int = 0, opsel: tuple = (0, 0), broadcast: tuple = (0, 0),
          half: int = 0, normal_values: bool = False):
    """A whole builtin call on validated registers as one program (jitted as `run_call`):
    broadcast the waves, flatten them, `_waves`, and D back in C's shape and dtype. Nothing
    runs outside it: every eager JAX operation on a new shape would compile a program of its
    own (about 10-50 ms each on a CPU, more than the call itself for a few waves)."""
    c_dtype = c.dtype
    # registers move as integer words (broadcast, padded into wave blocks, sliced): XLA may copy
    # floats through float32 and change their bits (docs/ARCHITECTURE.md, "Same bits on every device")
    a, b, c = (fragments.register_words(x) for x in (a, b, c))
    (a, b, c, idx, sa, sb), batch = broadcast_batch((a, 2), (b, 2), (c, 2), (idx, 1), (scale_a, 1), (scale_b, 1))
    w = int(np.prod(batch, dtype=np.int64))
    flat = [x.reshape((w,) + x.shape[len(batch):]) for x in (a, b, c, idx, sa, sb)]
    d = _waves(spec, model, *flat, s=s, options=options, a_signed=a_signed, b_signed=b_signed, clamp=clamp,
               blgp=blgp, opsel=opsel, broadcast=broadcast, half=half, normal_values=normal_values)
    d = d.reshape(batch + d.shape[1:])
    return d if d.dtype == c_dtype else lax.bitcast_convert_type(d, c_dtype)


#: a direct builtin call, validation aside: one program per builtin, model, options and shapes
run_call = effort_jit(_call, static_argnames=("spec", "model", "s", "options", "a_signed", "b_signed", "clamp",
                                             "blgp", "opsel", "broadcast", "half", "normal_values"))


# ------------------------------------------------------------------------ the functions
def _hip_call(spec: BuiltinSpec, arguments: dict):
    """A bound call of a builtin function (HIP argument names) -> `call`."""
    conv = spec.convention
    r = roles(conv, arguments)
    if "target" in r:
        spec = lookup(spec.name, r["target"])
    if spec.scaled:  # the formats pick the row as decoded for them (registers, layouts)
        spec = lookup(spec.name, spec.target, (r["fmt_a"], r["fmt_b"]))
    a_signed = check_static_bool(r.get("a_signed", True), conv.name_of("a_signed", "a_neg"))
    b_signed = check_static_bool(r.get("b_signed", True), conv.name_of("b_signed", "b_neg"))
    clamp = check_static_bool(r.get("clamp", False), "clamp")
    cbsz_abid = (r.get("cbsz", 0), r.get("abid", 0))
    if spec.blocks > 1:  # cbsz/abid pick A blocks (BUILTINS_DENSE.md 10), not an index set
        broadcast, s = cbsz_abid, index_offset(spec, 0, 0, r.get("index_key", 0))
    else:
        broadcast, s = (0, 0), index_offset(spec, *cbsz_abid, r.get("index_key", 0))
    return call(spec, r["a"], r["b"], r["c"], r.get("index"), s=s, a_signed=a_signed, b_signed=b_signed, clamp=clamp,
                model=r["model"], check=r["check"], options=r["options"], backend=r["backend"],
                blgp=r.get("blgp", 0), scales=(r.get("scale_a"), r.get("scale_b")),
                opsel=(r.get("opsel_a", 0), r.get("opsel_b", 0)), broadcast=broadcast, half=r.get("opsel"))


def _doc(spec: BuiltinSpec) -> str:
    what = "D = A x B + C (dense)." if spec.dense else "D = A_sparse x B + C."
    parts = [f"{spec.family}: {what}", spec.convention.summary, f"Index: {spec.index_note()}."]
    a_text = f"A holds all {spec.k}" if spec.dense else f"A holds {spec.kc} compressed"
    idx_text = "" if spec.dense else f"; index (*batch, {spec.lanes}) int32"
    return (
        " ".join(p for p in parts if p)
        + f"\n\n{spec.signature()}\n\n{spec.arch}, wave{spec.wave}, {spec.m}x{spec.n}x{spec.k} "
        f"(dense K; {a_text} values per row). Registers: A {spec.a.n}, "
        f"B {spec.b.n}, C {spec.c.n} elements per lane{idx_text}.\n"
        f"Default model: {spec.default_model} ({spec.default_evidence}).\n\n"
        "Args: the HIP arguments in HIP order (registers (*batch, lanes, n), the index register "
        "(*batch, lanes) int32, compile-time modifiers as Python bools/ints); model: a preset "
        "name, a model text such as 'CDNA3(group=16)' or a jwmma.models object (default: the "
        "row's); check: raise ValueError for index pairs the hardware leaves undefined (RDNA3 WMMA: for "
        "copies of A or B that differ from the one in lanes 0-15, which the emulator reads); "
        "options / backend: execution choices (jwmma.Options), never bits.\n"
        "Returns: D registers with C's shape (batch dims broadcast) and dtype."
    )


def make(name: str):
    """The jit-compiled function of the builtin ``name`` (its signature follows the row's
    calling convention; ``fn.spec`` is the row)."""
    spec = lookup(name)
    sig = python_signature(spec.convention)

    def builtin(*args, **kwargs):
        check_keywords(spec.name, sig, kwargs)  # before bind, which reports missing arguments first
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:  # bind's text names neither the function nor what it takes
            raise TypeError(f"{spec.name}(): {e}; its parameters: {spec.name}{plain_signature(sig)}") from None
        bound.apply_defaults()
        return _hip_call(spec, bound.arguments)

    builtin.__name__ = builtin.__qualname__ = spec.name
    builtin.__module__ = "jwmma"
    builtin.__signature__ = sig
    builtin.__doc__ = _doc(spec)
    builtin.spec = spec
    return builtin


swmmac_f32_16x16x32_f16_w32 = make("swmmac_f32_16x16x32_f16_w32")
swmmac_f32_16x16x32_bf16_w32 = make("swmmac_f32_16x16x32_bf16_w32")
swmmac_f16_16x16x32_f16_w32 = make("swmmac_f16_16x16x32_f16_w32")
swmmac_bf16_16x16x32_bf16_w32 = make("swmmac_bf16_16x16x32_bf16_w32")
swmmac_i32_16x16x32_iu8_w32 = make("swmmac_i32_16x16x32_iu8_w32")
swmmac_i32_16x16x32_iu4_w32 = make("swmmac_i32_16x16x32_iu4_w32")
swmmac_i32_16x16x64_iu4_w32 = make("swmmac_i32_16x16x64_iu4_w32")
swmmac_f32_16x16x32_fp8_fp8_w32 = make("swmmac_f32_16x16x32_fp8_fp8_w32")
swmmac_f32_16x16x32_fp8_bf8_w32 = make("swmmac_f32_16x16x32_fp8_bf8_w32")
swmmac_f32_16x16x32_bf8_fp8_w32 = make("swmmac_f32_16x16x32_bf8_fp8_w32")
swmmac_f32_16x16x32_bf8_bf8_w32 = make("swmmac_f32_16x16x32_bf8_bf8_w32")
smfmac_f32_16x16x64_f16 = make("smfmac_f32_16x16x64_f16")
smfmac_f32_32x32x32_f16 = make("smfmac_f32_32x32x32_f16")
smfmac_f32_16x16x64_bf16 = make("smfmac_f32_16x16x64_bf16")
smfmac_f32_32x32x32_bf16 = make("smfmac_f32_32x32x32_bf16")
smfmac_i32_16x16x128_i8 = make("smfmac_i32_16x16x128_i8")
smfmac_i32_32x32x64_i8 = make("smfmac_i32_32x32x64_i8")
smfmac_f32_16x16x128_fp8_fp8 = make("smfmac_f32_16x16x128_fp8_fp8")
smfmac_f32_16x16x128_fp8_bf8 = make("smfmac_f32_16x16x128_fp8_bf8")
smfmac_f32_16x16x128_bf8_fp8 = make("smfmac_f32_16x16x128_bf8_fp8")
smfmac_f32_16x16x128_bf8_bf8 = make("smfmac_f32_16x16x128_bf8_bf8")
smfmac_f32_32x32x64_fp8_fp8 = make("smfmac_f32_32x32x64_fp8_fp8")
smfmac_f32_32x32x64_fp8_bf8 = make("smfmac_f32_32x32x64_fp8_bf8")
smfmac_f32_32x32x64_bf8_fp8 = make("smfmac_f32_32x32x64_bf8_fp8")
smfmac_f32_32x32x64_bf8_bf8 = make("smfmac_f32_32x32x64_bf8_bf8")
# CDNA3 SMFMAC (gfx942; gfx950 with target='gfx950')
smfmac_f32_16x16x32_f16 = make("smfmac_f32_16x16x32_f16")
smfmac_f32_32x32x16_f16 = make("smfmac_f32_32x32x16_f16")
smfmac_f32_16x16x32_bf16 = make("smfmac_f32_16x16x32_bf16")
smfmac_f32_32x32x16_bf16 = make("smfmac_f32_32x32x16_bf16")
smfmac_i32_16x16x64_i8 = make("smfmac_i32_16x16x64_i8")
smfmac_i32_32x32x32_i8 = make("smfmac_i32_32x32x32_i8")
smfmac_f32_16x16x64_fp8_fp8 = make("smfmac_f32_16x16x64_fp8_fp8")
smfmac_f32_16x16x64_fp8_bf8 = make("smfmac_f32_16x16x64_fp8_bf8")
smfmac_f32_16x16x64_bf8_fp8 = make("smfmac_f32_16x16x64_bf8_fp8")
smfmac_f32_16x16x64_bf8_bf8 = make("smfmac_f32_16x16x64_bf8_bf8")
smfmac_f32_32x32x32_fp8_fp8 = make("smfmac_f32_32x32x32_fp8_fp8")
smfmac_f32_32x32x32_fp8_bf8 = make("smfmac_f32_32x32x32_fp8_bf8")
smfmac_f32_32x32x32_bf8_fp8 = make("smfmac_f32_32x32x32_bf8_fp8")
smfmac_f32_32x32x32_bf8_bf8 = make("smfmac_f32_32x32x32_bf8_bf8")
# RDNA4 dense WMMA (gfx12, wave32)
wmma_f32_16x16x16_f16_w32_gfx12 = make("wmma_f32_16x16x16_f16_w32_gfx12")
wmma_f32_16x16x16_bf16_w32_gfx12 = make("wmma_f32_16x16x16_bf16_w32_gfx12")
wmma_f16_16x16x16_f16_w32_gfx12 = make("wmma_f16_16x16x16_f16_w32_gfx12")
wmma_bf16_16x16x16_bf16_w32_gfx12 = make("wmma_bf16_16x16x16_bf16_w32_gfx12")
wmma_i32_16x16x16_iu8_w32_gfx12 = make("wmma_i32_16x16x16_iu8_w32_gfx12")
wmma_i32_16x16x16_iu4_w32_gfx12 = make("wmma_i32_16x16x16_iu4_w32_gfx12")
wmma_i32_16x16x32_iu4_w32_gfx12 = make("wmma_i32_16x16x32_iu4_w32_gfx12")
wmma_f32_16x16x16_fp8_fp8_w32_gfx12 = make("wmma_f32_16x16x16_fp8_fp8_w32_gfx12")
wmma_f32_16x16x16_fp8_bf8_w32_gfx12 = make("wmma_f32_16x16x16_fp8_bf8_w32_gfx12")
wmma_f32_16x16x16_bf8_fp8_w32_gfx12 = make("wmma_f32_16x16x16_bf8_fp8_w32_gfx12")
wmma_f32_16x16x16_bf8_bf8_w32_gfx12 = make("wmma_f32_16x16x16_bf8_bf8_w32_gfx12")
# RDNA3 dense WMMA (gfx11, wave32 and wave64)
wmma_f32_16x16x16_f16_w32 = make("wmma_f32_16x16x16_f16_w32")
wmma_f32_16x16x16_bf16_w32 = make("wmma_f32_16x16x16_bf16_w32")
wmma_f32_16x16x16_f16_w64 = make("wmma_f32_16x16x16_f16_w64")
wmma_f32_16x16x16_bf16_w64 = make("wmma_f32_16x16x16_bf16_w64")
wmma_f16_16x16x16_f16_w32 = make("wmma_f16_16x16x16_f16_w32")
wmma_f16_16x16x16_f16_tied_w32 = make("wmma_f16_16x16x16_f16_tied_w32")
wmma_bf16_16x16x16_bf16_w32 = make("wmma_bf16_16x16x16_bf16_w32")
wmma_bf16_16x16x16_bf16_tied_w32 = make("wmma_bf16_16x16x16_bf16_tied_w32")
wmma_f16_16x16x16_f16_w64 = make("wmma_f16_16x16x16_f16_w64")
wmma_f16_16x16x16_f16_tied_w64 = make("wmma_f16_16x16x16_f16_tied_w64")
wmma_bf16_16x16x16_bf16_w64 = make("wmma_bf16_16x16x16_bf16_w64")
wmma_bf16_16x16x16_bf16_tied_w64 = make("wmma_bf16_16x16x16_bf16_tied_w64")
wmma_i32_16x16x16_iu8_w32 = make("wmma_i32_16x16x16_iu8_w32")
wmma_i32_16x16x16_iu4_w32 = make("wmma_i32_16x16x16_iu4_w32")
wmma_i32_16x16x16_iu8_w64 = make("wmma_i32_16x16x16_iu8_w64")
wmma_i32_16x16x16_iu4_w64 = make("wmma_i32_16x16x16_iu4_w64")
# CDNA3 dense MFMA (gfx942; gfx950 with target='gfx950', except xf32)
mfma_f32_32x32x2f32 = make("mfma_f32_32x32x2f32")
mfma_f32_16x16x4f32 = make("mfma_f32_16x16x4f32")
mfma_f32_32x32x4_xf32 = make("mfma_f32_32x32x4_xf32")
mfma_f32_16x16x8_xf32 = make("mfma_f32_16x16x8_xf32")
mfma_f32_32x32x8f16 = make("mfma_f32_32x32x8f16")
mfma_f32_16x16x16f16 = make("mfma_f32_16x16x16f16")
mfma_f32_32x32x8bf16_1k = make("mfma_f32_32x32x8bf16_1k")
mfma_f32_16x16x16bf16_1k = make("mfma_f32_16x16x16bf16_1k")
# the gfx908/gfx90a-only single-block forms (gfx908 by default; target='gfx90a')
mfma_f32_32x32x4bf16 = make("mfma_f32_32x32x4bf16")
mfma_f32_16x16x8bf16 = make("mfma_f32_16x16x8bf16")
mfma_i32_32x32x8i8 = make("mfma_i32_32x32x8i8")
mfma_i32_16x16x16i8 = make("mfma_i32_16x16x16i8")
mfma_i32_32x32x16_i8 = make("mfma_i32_32x32x16_i8")
mfma_i32_16x16x32_i8 = make("mfma_i32_16x16x32_i8")
mfma_f32_32x32x16_fp8_fp8 = make("mfma_f32_32x32x16_fp8_fp8")
mfma_f32_32x32x16_fp8_bf8 = make("mfma_f32_32x32x16_fp8_bf8")
mfma_f32_32x32x16_bf8_fp8 = make("mfma_f32_32x32x16_bf8_fp8")
mfma_f32_32x32x16_bf8_bf8 = make("mfma_f32_32x32x16_bf8_bf8")
mfma_f32_16x16x32_fp8_fp8 = make("mfma_f32_16x16x32_fp8_fp8")
mfma_f32_16x16x32_fp8_bf8 = make("mfma_f32_16x16x32_fp8_bf8")
mfma_f32_16x16x32_bf8_fp8 = make("mfma_f32_16x16x32_bf8_fp8")
mfma_f32_16x16x32_bf8_bf8 = make("mfma_f32_16x16x32_bf8_bf8")
# CDNA multi-block MFMA (gfx942; gfx908, gfx90a, gfx950 with target=)
mfma_f32_32x32x1f32 = make("mfma_f32_32x32x1f32")
mfma_f32_16x16x1f32 = make("mfma_f32_16x16x1f32")
mfma_f32_4x4x1f32 = make("mfma_f32_4x4x1f32")
mfma_i32_32x32x4i8 = make("mfma_i32_32x32x4i8")
mfma_i32_16x16x4i8 = make("mfma_i32_16x16x4i8")
mfma_i32_4x4x4i8 = make("mfma_i32_4x4x4i8")
mfma_f32_32x32x4f16 = make("mfma_f32_32x32x4f16")
mfma_f32_16x16x4f16 = make("mfma_f32_16x16x4f16")
mfma_f32_4x4x4f16 = make("mfma_f32_4x4x4f16")
mfma_f32_32x32x4bf16_1k = make("mfma_f32_32x32x4bf16_1k")
mfma_f32_16x16x4bf16_1k = make("mfma_f32_16x16x4bf16_1k")
mfma_f32_4x4x4bf16_1k = make("mfma_f32_4x4x4bf16_1k")
mfma_f32_32x32x2bf16 = make("mfma_f32_32x32x2bf16")
mfma_f32_16x16x2bf16 = make("mfma_f32_16x16x2bf16")
mfma_f32_4x4x2bf16 = make("mfma_f32_4x4x2bf16")
# CDNA f64 MFMA (gfx942; gfx90a, gfx950 with target=)
mfma_f64_16x16x4f64 = make("mfma_f64_16x16x4f64")
mfma_f64_4x4x4f64 = make("mfma_f64_4x4x4f64")
# CDNA4 (gfx950) dense MFMA and the block-scaled f8f6f4
mfma_f32_16x16x32_f16 = make("mfma_f32_16x16x32_f16")
mfma_f32_32x32x16_f16 = make("mfma_f32_32x32x16_f16")
mfma_f32_16x16x32_bf16 = make("mfma_f32_16x16x32_bf16")
mfma_f32_32x32x16_bf16 = make("mfma_f32_32x32x16_bf16")
mfma_i32_16x16x64_i8 = make("mfma_i32_16x16x64_i8")
mfma_i32_32x32x32_i8 = make("mfma_i32_32x32x32_i8")
mfma_scale_f32_16x16x128_f8f6f4 = make("mfma_scale_f32_16x16x128_f8f6f4")
mfma_scale_f32_32x32x64_f8f6f4 = make("mfma_scale_f32_32x32x64_f8f6f4")

#: name -> builtin function, in table order (a test checks it against `BUILTINS`)
FUNCTIONS = {name: globals()[name] for name in BUILTINS}
