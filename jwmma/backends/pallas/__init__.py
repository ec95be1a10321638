"""The Pallas backend: one fused kernel per model family for a whole GEMM (benchmarks/RESULTS.md
"Pallas backend, one H200").

A program owns a (tm x tn) output tile and keeps its accumulator in registers across K in
hardware order (`driver`); each model family gives the per-unit step (`fused` for
`FusedGroups`/`CDNA3`, `gfx12` for `Gfx12Dot4`, `exact`, `fma_chain` for every `FMAChain`,
`integer`), on sparse and dense (RDNA4 WMMA) builtins alike, bit for bit
with the model's XLA arithmetic (NUMERICS.md; `tests/test_pallas.py` compares them in Pallas
interpret mode, `benchmarks/crosscheck.py` on a GPU).

`matrix_path` has the contract of `jwmma.tiled.paths.matrix_path` (tile-padded codes in, D
codes out), which calls it when ``options.backend == 'pallas'``: `jwmma.gemm(...,
path='matrix')`, on one device or on every shard of a mesh. `kernel_for` says whether a
family has a kernel (and, for ``backend='auto'``, whether it was measured faster: `AUTO`).
Direct builtin calls over waves run on the kernels too (`call_kernel`, registered with the
engine, which does not import the backends) with ``backend='pallas'``, and with ``'auto'``
where `AUTO_CALLS` records a measured gain. Not hooked (XLA whatever the backend; same
bits): the GEMM register path. On CPUs the kernels run in Pallas interpret mode (tests only:
slow).

The kernels lower to Triton (`driver`; deprecated in JAX 0.11) or, with
``PallasOptions(lowering='mosaic')``, to Mosaic GPU (`mosaic`: the same steps and bits, every
family, the fused groups in their 2-D form; its bits and times on an H200 and an H100:
benchmarks/RESULTS.md). ``backend='auto'`` lowers the GEMM kernels that Mosaic GPU runs faster
(`AUTO_MOSAIC`: the 8-bit chain and `exact` kernels) with it on sm_90 and later.
"""
from __future__ import annotations

import contextlib
import functools
import importlib.util
import warnings

import jax

from ...engine.builtins import set_call_kernels
from ...engine.effort import effort_jit
from ...engine.options import PallasOptions
from ...engine.step import context
from ...models.exact import Exact
from ...models.fma_chain import FMAChain
from ...models.fused import FusedGroups
from ...models.gfx12 import Gfx12Dot4
from ...models.integer import IntegerDot
from ...models.scaled import BlockScaled

# the kernel modules import jax.experimental.pallas (~1-2 s): loaded on first use, so that
# `import jwmma` and the XLA backend do not pay for it

__all__ = ["matrix_path", "kernel_for", "call_kernel", "AUTO_CALLS", "tiling", "family", "make_kernel", "AUTO",
           "AUTO_MOSAIC", "lowering_for", "mosaic_runs_here", "TILES", "MOSAIC_TILE", "MOSAIC_TILES", "PallasOptions", "triton_available", "quiet_triton", "quiet_triton_deprecation",
           "TRITON_DEPRECATION"]

#: the deprecation JAX 0.11 prints at every Pallas Triton lowering; jwmma's kernels are Triton
#: kernels until they move to Mosaic GPU, so jwmma silences exactly this text
TRITON_DEPRECATION = "The Pallas Triton backend is deprecated"


def quiet_triton_deprecation() -> None:
    """Silence exactly JAX's deprecation of the Pallas Triton backend, which the GPU kernels
    use (moving them to Mosaic GPU is the fix): the warning concerns jwmma's code, not the
    user's, and JAX emits it when the user's program is lowered, after jwmma has returned. Put
    at the front of the warning filters each time a GPU kernel is built or lowered by jwmma, so
    that it also holds inside a ``warnings.catch_warnings()`` block the kernel is traced in;
    every other warning stays as the user's filters say."""
    warnings.filterwarnings("ignore", message=TRITON_DEPRECATION, category=DeprecationWarning)


@functools.lru_cache(maxsize=1)
def triton_available() -> bool:
    """Whether this JAX still has the Pallas Triton backend the kernels lower to (JAX 0.11
    deprecates it). Without it ``backend='auto'`` runs XLA (the same bits) and
    ``backend='pallas'`` raises; `tests/test_pallas.py` fails loudly the day it goes."""
    return importlib.util.find_spec("jax._src.pallas.triton") is not None


@contextlib.contextmanager
def quiet_triton():
    """A context for jwmma's own calls that lower its kernels: the Pallas Triton deprecation is
    silenced first (`quiet_triton_deprecation`; it stays silenced afterwards, for the
    lowerings of programs that hold the kernel under the caller's own jit)."""
    quiet_triton_deprecation()
    yield

#: backend='auto' on a GPU: whether the family's kernel beats the XLA path on an H200; the key
#: is (family, 8-bit operands). Pallas rates: benchmarks/RESULTS.md "Pallas backend" (M = N =
#: K = 8192); XLA-path rates: its "One H200" table (same GPU type)
AUTO = {
    ("fused", True): True,  # fp8 cdna3 5.4e11 MAC/s, 1.65x the XLA path
    ("fused", False): True,  # f16 cdna3 4.4e11, 1.4x
    ("gfx12", True): True,  # fp8 5.9e11, 3.5x
    ("gfx12", False): True,  # f16 4.8e11, 3.2x
    ("exact", True): True,  # 1.36e12, 30x
    ("exact", False): True,
    # 2.6e12, 52x: FMAChain() ('fma_chain_k'); rocjitsu's chain ('fma_chain': register order on
    # the CDNA4 fp8/bf8 rows, NaN words) runs the same kernel with a whole builtin step per unit:
    # 2.8e12 on an H200, bit-identical to the CPU on the crosscheck's adversarial data
    # (benchmarks/RESULTS.md), 6.0e10 on the XLA path
    ("fma_chain", True): True,
    ("fma_chain", False): True,
    ("integer", True): False,  # bit-exact, not timed at scale
    ("integer", False): False,
    # the block-scaled rows (every operand format has at most 8 bits): the fused 8-bit kernel's
    # group sums, where the XLA path ran 7.5x the fp8 MFMA's time (RESULTS.md)
    ("scaled", True): True,
}

#: backend='auto' on a GPU, direct builtin calls over waves (`call_kernel`): whether the family's
#: kernel beats the models' XLA arithmetic there, same key as `AUTO`; an unlisted key runs XLA.
#: Timed on an H200 over 65536 waves (`benchmarks/bench_calls.py --backend pallas` beside
#: ``--backend xla``, one process each; RESULTS.md "The whole grid on an H100"), MAC/s:
AUTO_CALLS: dict = {
    ("fused", True): True,  # fp8 cdna3 1.63e11, 1.17x
    ("fused", False): True,  # bf16 cdna3 1.61e11, 1.58x; f16 cdna3 1.46e11, 1.02x
    ("gfx12", False): True,  # f16 gfx12_dot4 1.29e11, 1.77x
    ("exact", True): True,  # fp8 exact 1.86e11, 4.9x
    # on one H100 (results/gpu_h100_round_61005eb_7c29751_2026-12-06.txt): sparse f16 / bf16
    # `exact` 1.62e11 / 1.38e11 (XLA 2.0e10 / 1.3e10, 8.1x / 10.6x); MXFP8 (`cdna4_mx`) 1.81e11 (XLA
    # 1.73e10, 10.5x; a group loop on XLA gave 8.6e10)
    ("exact", False): True,
    ("scaled", True): True,
}

#: default (tm, tn, num_warps) per (family, operand kind: '8bit' or the A type), the fastest
#: of the H200 sweeps (benchmarks/RESULTS.md "Pallas backend"); any tile gives the same bits.
#: A key with a third entry 'dense' is the dense builtins' tile where it differs. Unlisted
#: (fp8 gfx12; the other families): (32, 64) with 4 warps. The block-scaled and 16-bit `exact`
#: tiles were chosen by registers and spills of the kernels compiled offline
#: (benchmarks/kernel_regs.py), then timed on an H200 (MXFP8 1.1e12, 5.5e11 at 8 x 64) and an
#: H100 (sparse bf16 `exact` 820 ms, 1346 ms at 32 x 64); the 16-bit fused and gfx12 tiles by
#: an H100 sweep at 8192^3 (RESULTS.md "The H100 on 2026-12-05")
TILES = {
    ("fused", "8bit"): (8, 64, 2),  # 6.5e11 at 4096 x 4096 x 8192 (16 x 64 x 4: 4.1e11)
    # f16 fused groups: 4 x 64 x 2 ran sparse f16 376 -> 327 ms and the dense f16 MFMA 504 ->
    # 427 ms at 8192^3 against 8 x 128 x 4 (one H100, 2026-12-07; 79 registers against 156)
    ("fused", "f16"): (4, 64, 2),
    # block-scaled: half the fused 8-bit tile. Its groups of 32 make (8, 16, 64) tensors, and at
    # 8 x 64 with 2 warps ptxas spilled about 2.9 KB a thread (sm_90, Triton 3.9 offline:
    # benchmarks/kernel_regs.py); 8 x 32 holds it in 168 registers with no spill
    ("scaled", "8bit"): (8, 32, 2),
    # `exact` on 16-bit operands: at 32 x 64 the kernel spilled 2.5-3.8 KB a thread; 16 x 32
    # holds it with at most 16 bytes, fewer instructions a product (sparse bf16 2.66 -> 2.29
    # warp instructions) and half Triton's compile (the same measure). fp8 `exact` keeps
    # 32 x 64 (168 registers, no spill; timed)
    ("exact", "bf16"): (16, 32, 4),
    ("exact", "f16"): (16, 32, 4),
    # bf16 fused groups (the 2-D integer-alignment kernel): at 32 x 64 x 4 it held 255
    # registers with a spill; 8 x 32 x 2 holds 96-128 and ran 1.26x (sparse) and 1.41x (dense
    # MFMA) faster on an H100. Sparse bf16 at 4 x 64 x 2: 413 -> 369 ms at 8192^3 (one H100,
    # 2026-12-07); the dense bf16_1k MFMA 506 ms there against 512, so it keeps 8 x 32 x 2
    ("fused", "bf16"): (4, 64, 2),
    ("fused", "bf16", "dense"): (8, 32, 2),
    # direct builtin calls (16 x 16 outputs a wave; the tile is clipped to them) keep the 16-bit
    # fused tiles of their last timing (1.2-1.5e11 MAC/s over 65536 waves) until the GEMMs'
    # 4 x 64 x 2 is timed for calls
    ("fused", "f16", "call"): (8, 128, 4),
    ("fused", "bf16", "call"): (8, 32, 2),
    # gfx12 16-bit: 8 x 32 x 2 ran sparse f16 1.20x and bf16 1.25x faster than 16 x 64 x 4 and
    # 32 x 64 x 4; the dense f16 WMMA 3 % slower, so it keeps its tile
    ("gfx12", "f16"): (8, 32, 2),
    ("gfx12", "bf16"): (8, 32, 2),
    ("gfx12", "f16", "dense"): (16, 64, 4),  # the dense f16 WMMA: 801 ms (8 x 32 x 2: 829 ms)
    # the dense bf16 WMMA: not timed; its tile before (offline at 8 x 32 x 2: 1.6x the
    # instructions a product, as the dense f16 one)
    ("gfx12", "bf16", "dense"): (32, 64, 4),
}


#: default (tm, tn) of the Mosaic GPU kernels (`mosaic`): one warpgroup's register tile
MOSAIC_TILE = (64, 64)
#: families whose Mosaic GPU tile was measured better than `MOSAIC_TILE` (8192^3): sparse fp8
#: fused groups 335 ms at tn 16, 411 ms at 32, 2030 ms at 64 (one H200, benchmarks/RESULTS.md
#: "The H200 on 2026-12-05, last"; a warpgroup thread holds tm * tn / 128 elements of every live
#: tile: 8 at 64 x 16, 32 at 64 x 64); on one H100 (results/gpu_h100_chain_mosaic_2026-12-06.txt)
#: the fp8 chain 70.5 ms at tn 32, 82.4 ms at 16, and fp8 `exact` 115.0 ms at 16, 122.7 ms at 32
MOSAIC_TILES = {"fused": (64, 16), "fma_chain": (64, 32), "exact": (64, 16)}

#: backend='auto' on a GPU of compute capability 9.0 or later (`mosaic_runs_here`): the GEMM
#: kernels (key of `AUTO`) that Mosaic GPU runs faster than Triton, in one run on one H100
#: (8192^3, `MOSAIC_TILES`; results/gpu_h100_chain_mosaic_2026-12-06.txt), MAC/s and first call:
#: the fp8 chain 3.90e12, 1.7 s (Triton 1.67e12, 2.4 s); `fma_chain_k` 3.55e12, 2.2 s (Triton
#: 1.23e12, 1.3 s); fp8 `exact` 2.39e12, 1.4 s (Triton 1.46e12, 1.6 s). The others ran slower on
#: Mosaic GPU there (dense fp8 MFMA 9.4e11 against 1.55e12, MXFP8 6.9e11 against 1.12e12, the
#: 16-bit fused and gfx12 kernels 15-30 %) and stay on Triton; 16-bit chain and `exact` are
#: not timed. Direct builtin calls stay on Triton (not timed on Mosaic GPU).
AUTO_MOSAIC = {("fma_chain", True), ("exact", True)}


def _kind(spec) -> str:
    return "8bit" if spec.integer or spec.a_format.bits <= 8 else spec.a_type


def family(model) -> str | None:
    """The kernel family of ``model`` (None: no Pallas kernel; `Exact` with other fields than
    ``Exact()``, CDNA1 among them, has none: the kernel sums all K products at once with the
    IEEE zero rule)."""
    if isinstance(model, Exact) and model != Exact():
        return None
    for cls, name in ((FusedGroups, "fused"), (Gfx12Dot4, "gfx12"), (Exact, "exact"), (FMAChain, "fma_chain"),
                      (IntegerDot, "integer"), (BlockScaled, "scaled")):
        if isinstance(model, cls):
            return name
    return None


@functools.lru_cache(maxsize=1)
def mosaic_runs_here() -> bool:
    """Whether ``backend='auto'`` may lower kernels with Mosaic GPU: JAX's default device is a
    GPU of compute capability 9.0 or later (Mosaic GPU's warpgroup instructions) and this JAX's
    Mosaic GPU lowering takes the select fix (`mosaic_signedness`). Read once per process, from
    the devices, never from the environment."""
    try:
        device = jax.devices()[0]
        if device.platform != "gpu" or float(getattr(device, "compute_capability", 0) or 0) < 9.0:
            return False
        from . import mosaic_signedness

        mosaic_signedness.install()
    except (RuntimeError, ValueError, ImportError):
        return False
    return True


def lowering_for(spec, model, popts: PallasOptions, call: bool = False) -> str:
    """'triton' or 'mosaic': the GEMM kernel's lowering. The user's ``popts.lowering`` where
    given; for ``backend='auto'`` (``popts.auto``) Mosaic GPU where `AUTO_MOSAIC` lists the
    family and `mosaic_runs_here`, outside `shard_map` (a sharded GEMM's tiles); else Triton.
    ``call``: a direct builtin call (Triton unless the user asks: `AUTO_MOSAIC` timed GEMMs
    only)."""
    if popts.lowering is not None:
        return popts.lowering
    fam = family(model)
    if popts.auto and not call and fam is not None and _auto_key(fam, spec) in AUTO_MOSAIC and mosaic_runs_here() \
            and not _inside_shard_map():
        return "mosaic"
    return "triton"


def _inside_shard_map() -> bool:
    """Whether the trace is inside `shard_map` (the abstract mesh has manual axes): there
    ``auto`` keeps Triton. Mosaic GPU's kernels ran on one device only, and its interpreter
    fails inside shard_map ("Barrier remains allocated", JAX 0.10.2 and 0.11.2)."""
    get = getattr(jax.sharding, "get_abstract_mesh", None)
    try:
        return bool(get is not None and get().manual_axes)
    except (AttributeError, RuntimeError):  # pragma: no cover - a JAX without manual axes
        return False


def kernel_for(spec, model, options) -> bool:
    """Whether the GEMM of ``spec`` under ``model`` runs on the Pallas backend with these
    (resolved) options. ``backend='pallas'`` and no kernel: ValueError naming the model;
    ``backend='auto'`` (``options.pallas.auto``): only where `AUTO` says it is faster."""
    if options.backend != "pallas":
        return False
    mosaic = lowering_for(spec, model, options.pallas) == "mosaic"
    if not mosaic and not triton_available():
        if options.pallas.auto:
            return False
        raise ValueError("backend='pallas': this JAX has no Pallas Triton backend (removed after its deprecation "
                         "in JAX 0.11), which jwmma's kernels lower to by default; pass "
                         "PallasOptions(lowering='mosaic') (Mosaic GPU, sm_90 and later) or use backend='xla' or "
                         "'auto' (the same bits)")
    fam, why = _kernel_family(spec, model)
    if fam is None or why:
        if options.pallas.auto:
            return False
        what = (f"model {model.describe()} (families: FusedGroups/CDNA3, Gfx12Dot4, Exact, FMAChain, IntegerDot, "
                f"BlockScaled)" if _decodes(spec) or spec.scaled else f"{spec.name} ({spec.a_type} operands)")
        raise ValueError(f"backend='pallas' has no kernel for {what}{': ' + why if why else ''}; use backend='xla' "
                         f"or 'auto'")
    if options.pallas.auto:
        return AUTO.get(_auto_key(fam, spec), False)
    return True


def _kernel_family(spec, model) -> tuple:
    """(family, why not): the kernel family for ``model`` on ``spec`` (None: none reads these
    operands or models this arithmetic) and, for a block-scaled model outside the kernel's
    arithmetic, why not (`scaled.applies`; else None)."""
    fam = family(model) if _decodes(spec) or spec.scaled else None
    if fam == "scaled":  # BlockScaled: its default arithmetic only
        from . import scaled

        return fam, scaled.applies(spec, model, context(spec, False))
    return fam, None


def _auto_key(fam: str, spec) -> tuple:
    """The key of `AUTO` and `AUTO_CALLS`: (family, 8-bit operands)."""
    return fam, spec.integer or spec.a_format.bits <= 8


def _decodes(spec) -> bool:
    """Whether the unscaled kernels read this row's operands: 16-bit and narrower floats and
    integers (not the f32/xf32 MFMA, whose operands are 32-bit registers the unit reads
    otherwise, nor the f64 MFMA, nor the multi-block rows; the block-scaled rows, whose
    operands carry scales, have a kernel of their own)."""
    return not spec.scaled and spec.a_type not in ("f32", "xf32", "f64") and spec.blocks == 1


def tiling(spec, model, popts: PallasOptions, call: bool = False):
    """The concrete `driver.Tiling` of ``popts``, the family defaults filled in (the fastest
    measured on an H200, `TILES`; benchmarks/RESULTS.md "Pallas backend"): fused groups as 3-D
    tensors with the float64 combine, gfx12 with f32 rounding by conversion, every other
    kernel (32, 64) with 4 warps; the lowering of `lowering_for` (``call``: a direct builtin
    call's), Mosaic GPU with `MOSAIC_TILES`."""
    fam = family(model)
    lowering = lowering_for(spec, model, popts, call)
    if lowering == "mosaic" and (popts.vec3 or popts.gather or popts.float_combine):
        raise ValueError("PallasOptions(lowering='mosaic') runs the 2-D kernels with the integer combine: vec3, "
                         "gather and float_combine are Triton variants (3-D tensors, which Mosaic GPU has no register "
                         "layout for; float64 floor, which it does not lower)")
    vec3 = (fam == "fused" and lowering == "triton") if popts.vec3 is None else popts.vec3
    key = (fam, _kind(spec))
    tile = TILES.get(key, (32, 64, 4))
    if spec.dense:
        tile = TILES.get(key + ("dense",), tile)
    if call:  # a direct builtin call's kernel: the tile its calls were timed at, where the GEMM's moved
        tile = TILES.get(key + ("call",), tile)
    tm, tn, warps = tile if (fam != "fused" or vec3) else (32, 64, 4)
    if lowering == "mosaic":  # one warpgroup's (64-row) register tile
        tm, tn = MOSAIC_TILES.get(fam, MOSAIC_TILE)
    fc = (fam == "fused" and lowering == "triton") if popts.float_combine is None else popts.float_combine
    fr = (fam == "gfx12") if popts.float_round is None else popts.float_round
    from .driver import Tiling

    return Tiling(tm=popts.tm or tm, tn=popts.tn or tn, num_warps=popts.num_warps or warps,
                  num_stages=popts.num_stages, interpret=bool(popts.interpret), reload=popts.reload,
                  float_combine=fc, float_round=fr, vec3=vec3, gather=popts.gather, lowering=lowering,
                  chain_run=popts.chain_run, group_loop=popts.group_loop is not False)


def make_kernel(spec, model, *, a_signed=True, b_signed=True, clamp=False, tiling=None):
    """The `driver.Kernel` of ``model`` on ``spec`` for a `driver.Tiling` (None: the
    defaults); ValueError if the family has none."""
    from . import exact, fma_chain, fused, gfx12, integer, scaled
    from .driver import Tiling

    tiling = Tiling() if tiling is None else tiling
    ctx = context(spec, clamp)
    fam = family(model)
    if fam == "fused":
        kern = fused.make_step(spec, model, ctx, reload=tiling.reload, float_combine=tiling.float_combine,
                               vec3=tiling.vec3, wide_loops=tiling.wide_loops, gather=tiling.gather)
    elif fam == "gfx12":
        kern = gfx12.make_step(spec, model, ctx, float_round=tiling.float_round)
    elif fam == "exact":
        kern = exact.make_step(spec, model, ctx)
    elif fam == "fma_chain":
        kern = fma_chain.make_step(spec, model, ctx, run=tiling.chain_run, stand_in=tiling.lowering == "mosaic")
    elif fam == "integer":
        kern = integer.make_step(spec, model, ctx, a_signed=a_signed, b_signed=b_signed)
    elif fam == "scaled":
        kern = scaled.make_step(spec, model, ctx, float_combine=tiling.float_combine,
                                vec3=tiling.lowering == "triton",  # Mosaic GPU has no 3-D register layout
                                loop=tiling.group_loop)
    else:
        raise ValueError(f"no Pallas kernel for model {model.describe()}")
    # dense builtins: the driver reads dense A and B as the XLA step does (driver module doc)
    return kern._replace(dense=spec.dense)


@effort_jit(static_argnames=("spec", "model", "options", "a_signed", "b_signed", "clamp", "wide_loops", "call"))
def matrix_path(a_codes, pos, b_codes, c, *, spec, model, options, a_signed=True, b_signed=True, clamp=False,
                wide_loops=False, call=False):
    """D codes of the GEMM (the contract and bits of `jwmma.tiled.paths.matrix_path`).

    a_codes, pos: (*batch, Mp, Kp/2) int32 (dense builtins: a_codes (*batch, Mp, Kp), pos
    not read); b_codes: (*batch, Kp, Np); c: (*batch, Mp, Np) int32 accumulator bits (i32
    values for integer builtins). Traced inside the caller's `x64_scope`; ``wide_loops``: it
    is also lowered there (`driver.Tiling.wide_loops`); ``call``: a direct builtin call's
    (`lowering_for`). Returns (*batch, Mp, Np) int32. Called at the top level (not inside
    another program), it compiles at ``options.compile_effort`` as the XLA paths do: a
    kernel in interpret mode is an XLA:CPU program like theirs."""
    import dataclasses

    from .driver import run

    t = dataclasses.replace(tiling(spec, model, options.pallas, call), wide_loops=wide_loops)
    if t.lowering == "triton":  # small operands (a direct call's 16 x 16): tiles no larger than D
        t = dataclasses.replace(t, tm=min(t.tm, _pow2_at_least(a_codes.shape[-2])),
                                tn=min(t.tn, max(16, _pow2_at_least(b_codes.shape[-1]))))
    kern = make_kernel(spec, model, a_signed=a_signed, b_signed=b_signed, clamp=clamp, tiling=t)
    return run(kern, a_codes, pos, b_codes, c, tiling=t)


def _pow2_at_least(n: int) -> int:
    return 1 << max(int(n) - 1, 0).bit_length()


def call_kernel(spec, model, options):
    """The engine's provider of direct builtin calls (`jwmma.engine.builtins.set_call_kernels`):
    `_call_on_kernel` where the family has a kernel and ``backend='pallas'`` (``'auto'``: where
    `AUTO_CALLS` says it is faster), else None, never an error: a call without a kernel runs
    the model's XLA arithmetic (the same bits), as every call did before calls were hooked."""
    if options.backend != "pallas" or (options.pallas.lowering != "mosaic" and not triton_available()):
        return None
    fam, why = _kernel_family(spec, model)
    if fam is None or why or (options.pallas.auto and not AUTO_CALLS.get(_auto_key(fam, spec), False)):
        return None
    return _call_on_kernel


def _call_on_kernel(spec, model, a_codes, pos, b_codes, c, *, options, a_signed=True, b_signed=True, clamp=False):
    """`jwmma.engine.step.step`'s arguments and bits on the kernel: (W, M, Kc) A codes and
    positions, (W, Kd, N) B, (W, M, N) C of W independent instructions (a batch of one-step
    GEMMs, the waves as grid rows)."""
    return matrix_path(a_codes, pos, b_codes, c, spec=spec, model=model, options=options, a_signed=a_signed,
                       b_signed=b_signed, clamp=clamp, call=True)


set_call_kernels(call_kernel)
