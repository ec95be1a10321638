"""Execution options: how a computation runs, never what it computes (API.md section 8).

One frozen, hashable, validated value. Every public entry point (the builtins, `jwmma.gemm`,
`jwmma.dot`, `jwmma.kernel.run`/`check`, `jwmma.study.run`) takes ``options=`` (an `Options`
or None) and the ``backend=`` shortcut, resolves them once into concrete values for the
platform that will run the computation (`resolve`), and passes the result down as a static
argument of the jitted functions, the way JAX canonicalises ``precision``: two calls with
different options never share a compiled program, and nothing reads the environment while
tracing. Every choice gives the same bits.
"""
from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass

import jax

from .effort import EFFORTS

__all__ = ["Options", "PallasOptions", "resolve", "BACKENDS"]

#: kernel backends: 'auto' picks the fastest that applies (XLA on CPUs; on GPUs the Pallas
#: kernel of the model family where one exists and was measured faster, else XLA)
BACKENDS = ("auto", "xla", "pallas")


def _pow2_or_none(name, v):
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1 or v & (v - 1)):
        raise ValueError(f"PallasOptions.{name} must be None or a power of two, got {v!r}")


@dataclass(frozen=True)
class PallasOptions:
    """Parameters of the Pallas backend (`jwmma.backends.pallas`); same bits for
    every choice. None: the model family's default (`jwmma.backends.pallas.TILES`, `tiling`).

    tm, tn: output tile of one program (powers of two: Triton needs power-of-two tensors); a
        Triton kernel on operands smaller than the tile (a builtin call's 16 x 16) takes a
        tile no larger than D.
    num_warps, num_stages: Triton launch parameters.
    interpret: run the kernels in Pallas interpret mode (None: on CPUs, where nothing else
        runs them; the mode the CPU tests use).
    vec3: fused-group kernels on 3-D (tm, blocks, tn) tensors with axis reductions.
    reload, float_combine, float_round, gather: kernel variants (second operand loads for the
        second pass of a fused group; combine with C in float64; gfx12 f32 results by an int ->
        f32 conversion; the sparse 3-D fused kernel loads each product's B row by its 2:4
        position, one gather load, instead of four candidate rows and a select chain: 446
        against 380 ms on an H100, benchmarks/RESULTS.md).
    chain_run: the `fma_chain` kernel's products per iteration of a loop over the chain (a
        power of two such that the chain's order is one pattern of that many products
        repeated: any for an order of consecutive columns, 2 to 32 for rocjitsu's fp8 order;
        None: 16 where the order allows, else the unit unrolled; the unit's length: unrolled).
        Compiled offline for sm_90, segments of 16 take fewer instructions than the unrolled
        64-product fp8 unit, which spilled, and a seventh of its compile (the first call's
        largest part); on an H200 2.99e12 MAC/s and a 7.4 s first call (unrolled: 2.84e12,
        26.1 s, another run).
    group_loop: the block-scaled kernel's groups of one instruction (four of 32 products on the
        16x16x128 MFMA) as a loop (None or True: the default) or unrolled (False). Same
        instructions a product within 1 %, a quarter of the program: Triton compiles the MXFP8
        kernel in a quarter of the time (benchmarks/kernel_regs.py).
    auto: set by ``backend='auto'``: use a kernel only where it was measured faster than XLA
        and fall back to XLA where no kernel exists (``backend='pallas'`` raises there).
    lowering: what lowers the kernels on a GPU: 'triton' (deprecated in JAX 0.11), 'mosaic'
        or None: Triton, but for ``backend='auto'`` Mosaic GPU on sm_90 and later where it was
        measured faster (the 8-bit chain and `exact` GEMMs:
        `jwmma.backends.pallas.AUTO_MOSAIC`). 'mosaic': Mosaic GPU (every kernel family,
        fused-group sums in their 2-D form, tm a multiple of 64; num_warps, num_stages and the 3-D
        variants do not apply; with the select fix of `jwmma.backends.pallas.mosaic_signedness`
        it gave XLA's bits on an H200 for five builtins under six models: benchmarks/RESULTS.md).
    """

    tm: int | None = None
    tn: int | None = None
    num_warps: int | None = None
    num_stages: int = 1
    interpret: bool | None = None
    vec3: bool | None = None
    reload: bool = False
    gather: bool = False
    float_combine: bool | None = None
    float_round: bool | None = None
    chain_run: int | None = None
    group_loop: bool | None = None
    auto: bool = False
    lowering: str | None = None

    def __post_init__(self):
        for name in ("tm", "tn", "num_warps", "chain_run"):
            _pow2_or_none(name, getattr(self, name))
        if isinstance(self.num_stages, bool) or not isinstance(self.num_stages, int) or self.num_stages < 1:
            raise ValueError(f"PallasOptions.num_stages must be an int >= 1, got {self.num_stages!r}")
        for name in ("interpret", "vec3", "float_combine", "float_round", "group_loop"):
            v = getattr(self, name)
            if not (v is None or isinstance(v, bool)):
                raise TypeError(f"PallasOptions.{name} must be None, True or False, got {v!r}")
        for name in ("reload", "auto", "gather"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"PallasOptions.{name} must be True or False, got {getattr(self, name)!r}")
        if self.lowering not in (None, "triton", "mosaic"):
            raise ValueError(f"PallasOptions.lowering must be None, 'triton' or 'mosaic', got {self.lowering!r}")

    def replace(self, **changes) -> PallasOptions:
        return dataclasses.replace(self, **changes)


@dataclass(frozen=True)
class Options:
    """Execution choices. Fields (None: the platform's default, decided by `resolve`):

    backend: 'xla' (the kernels are XLA programs), 'pallas' (the GEMM matrix path runs the model
        family's fused Pallas kernel, `jwmma.backends.pallas`; a ValueError where the family has
        none; direct builtin calls run each wave's instruction on the kernel where one exists,
        else XLA) or 'auto' ('xla' on CPUs; 'pallas' on GPUs where a kernel exists and was
        measured faster, else 'xla').
    pallas: a `PallasOptions` (tile, warps, interpret mode, variants) for the Pallas backend.
    group_dots: form sums as matrix products where a model proves them exact (fp8/bf8
        fused groups under a window test; `exact` on fp8 x fp8, always exact in float64)
        (None: on CPUs, where the per-product path is memory-bound; off on GPUs, where its
        per-group intermediates cost more memory traffic than they save).
    tile_n: output tile width of the GEMM matrix path (0: untiled; None: untiled on CPUs so
        that group sums can be matrix products, 128 columns elsewhere, the fastest of 16 /
        128 / N on an H200).
    block_elems: products one kernel holds at once, which sizes the GEMM row blocks (None:
        the model's choice for the platform, `jwmma.models.Model.working_set`).
    float_alignment: align f32-exact products (fp8, f16) in the fused-group models with a
        float multiply and a truncating conversion instead of integer shifts.
    platform: the JAX platform the computation is compiled for ('cpu', 'gpu', 'tpu'; None:
        `jax.default_backend()`).
    compile_effort: how hard XLA optimises the program (`jwmma.engine.effort`): 'full' (XLA's
        defaults), 'fast' (on CPUs: compiles 2-4x faster, runs 10-20x slower) or 'auto' (fast
        for a call of at most 2**22 products, weighted by the model, where the run costs less than the compiling).
    shape_buckets: eager GEMMs on the XLA path on one device run in the program of their
        shape's bucket (M, N of 512 * 4**j, K of 4096 * 4**j; `jwmma.tiled.buckets`), so that a sweep over
        shapes compiles one or two programs instead of one per shape; only the GEMM's own blocks
        and K steps run, but a small call pays for its bucket's padding (and a unit's for
        quantising it): opt-in, for sweeps over shapes. False (default): one program per shape.
    """

    backend: str = "auto"
    group_dots: bool | None = None
    tile_n: int | None = None
    block_elems: int | None = None
    float_alignment: bool = True
    platform: str | None = None
    pallas: PallasOptions = PallasOptions()
    compile_effort: str = "auto"
    shape_buckets: bool = False

    def __post_init__(self):
        if not isinstance(self.pallas, PallasOptions):
            raise TypeError(f"pallas must be a jwmma.PallasOptions, got {type(self.pallas).__name__}")
        if self.backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {self.backend!r}")
        if not (self.group_dots is None or isinstance(self.group_dots, bool)):
            raise TypeError(f"group_dots must be None, True or False, got {self.group_dots!r}")
        for name, lo in (("tile_n", 0), ("block_elems", 1)):
            v = getattr(self, name)
            if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < lo):
                raise ValueError(f"{name} must be None or an int >= {lo}, got {v!r}")
        for name in ("float_alignment", "shape_buckets"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.compile_effort not in EFFORTS:
            raise ValueError(f"compile_effort must be one of {', '.join(map(repr, EFFORTS))}, got "
                             f"{self.compile_effort!r}")
        if self.platform is not None and not isinstance(self.platform, str):
            raise TypeError(f"platform must be None or a JAX platform name such as 'cpu', got {self.platform!r}")

    @property
    def resolved(self) -> bool:
        """True when no field is left to the platform (what `resolve` returns)."""
        return self.backend != "auto" and self.platform is not None and self.group_dots is not None \
            and self.tile_n is not None and self.pallas.interpret is not None

    def replace(self, **changes) -> Options:
        """A copy with ``changes`` (validated)."""
        return dataclasses.replace(self, **changes)


def resolve(options: Options | None = None, backend: str | None = None) -> Options:
    """Concrete options for the platform that will run the call.

    Args:
        options: an `Options`, or None for the defaults.
        backend: the ``backend=`` keyword of the entry point, a shortcut for
            ``options.backend`` (None: keep it; giving both differently raises).
    Returns:
        An `Options` with backend, platform, group_dots and tile_n decided (block_elems stays
        None when the model is to choose).
    """
    if options is None:
        options = _defaults()
    elif not isinstance(options, Options):
        raise TypeError(f"options must be a jwmma.Options or None, got {type(options).__name__}")
    if backend is not None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
        if options.backend not in ("auto", backend):
            raise ValueError(f"backend={backend!r} contradicts options.backend={options.backend!r}; give one")
        options = _with_backend(options, backend)
    if options.resolved:
        return options
    return _resolve_for(options, options.platform or jax.default_backend())


@functools.lru_cache(maxsize=1)
def _defaults() -> Options:
    return Options()


@functools.lru_cache(maxsize=1024)
def _with_backend(options: Options, backend: str) -> Options:
    return options.replace(backend=backend)


@functools.lru_cache(maxsize=1024)
def _resolve_for(options: Options, platform: str) -> Options:
    """`resolve` of validated, unresolved options on ``platform`` (a pure function of both;
    cached: every eager call resolves its options, and each `replace` validates a copy)."""
    backend, pallas = options.backend, options.pallas
    if backend == "auto":
        backend = "pallas" if platform == "gpu" else "xla"
        pallas = pallas.replace(auto=True)
    if pallas.interpret is None:
        pallas = pallas.replace(interpret=platform == "cpu")
    return options.replace(
        backend=backend,
        pallas=pallas,
        platform=platform,
        group_dots=(platform == "cpu") if options.group_dots is None else options.group_dots,
        tile_n=(0 if platform == "cpu" else 128) if options.tile_n is None else options.tile_n,
    )
