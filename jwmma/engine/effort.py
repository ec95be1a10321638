"""How hard XLA optimises a program: compile effort, an execution choice that never changes a bit.

A first call waits on XLA compiling the program, and on a CPU most of that is LLVM optimising
the fused loops. For a call of little work the optimised program saves less run time than
its optimisation costs. `Options.compile_effort` says what to do:

* ``'full'``: XLA's defaults (the programs whose run time `benchmarks/RESULTS.md` records);
* ``'fast'``: on CPUs, XLA's backend (LLVM) at -O0 (`FAST_OPTIONS`): measured on a 2-core CPU
  (JAX 0.10.2 and 0.11.2, 64 waves), builtin programs compile 1.4-2.4x faster (fp8 cdna3
  0.76 -> 0.46 s, bf16 cdna3 2.7 -> 1.1 s, `exact` 2.5 -> 1.3 s) and run 2-24x slower
  (block-scaled MX: 0.03 -> 0.67 s); elsewhere the same as 'full'. Where XLA takes it (JAX
  0.10; JAX 0.11 refuses it, and calls compile without it), also XLA:CPU's loop emitters
  instead of its MLIR fusion emitters (``xla_cpu_use_fusion_emitters=False``), whose pass
  pipeline per fused kernel was most of a compile: 'fast' programs compile 2-2.8x faster
  again and run 1.0-1.5x slower (`benchmarks/bench_compile_options.py`, set
  ``O0_loop_emitters``), same bits. Only with the looped programs 'fast' builds: the
  unrolled program of a large block-scaled GEMM (a user's jit of a 256 x 512 x 256 MX
  `jwmma.matmul`, compiled with these options) took 17 s to compile and ran 48x slower.
* ``'auto'`` (the default): 'fast' for a call of at most `FAST_PRODUCTS` (weighted) products,
  'full' above (`settle`): a call that small runs in less than the compile time it saves.
  A program called more than `TIER_UP_CALLS` times is then compiled at 'full' (a small call
  in a loop runs unoptimised three times, optimised from the fourth on).
  'fast' also shapes the program: instructions loop over their groups instead of unrolling
  them (`jwmma.models.grouping.loops`).

Same bits at every effort: the programs hold integer arithmetic and float operations that are
exact (docs/ARCHITECTURE.md, "Same bits on every device"), which no optimisation level may
change, and the tests run most programs at 'fast' (small shapes) against references and a few
at 'full'. The effort is part of each program's key (`Options` is a static argument), and a
function made by `effort_jit` keeps one `jax.jit` per compiler setting.
"""
from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict

import jax
import numpy as np

from ..keywords import strict_keywords

__all__ = ["enable_compilation_cache", "EFFORTS", "FAST_PRODUCTS", "FAST_OPTIONS", "TIER_UP_CALLS", "settle", "count_call",
           "shapes_key", "compiler_options", "eager_vmap_size",
           "effort_jit", "jit_at_effort"]

EFFORTS = ("auto", "fast", "full")
#: weighted products of a call up to which 'auto' compiles fast: unoptimised, a product costs
#: 30-80 ns on a CPU (fp8 cdna3, f16 gfx12_dot4, exact; 2.5-12 ns optimised), so at most ~0.3 s
#: more run time for 0.3-1.6 s of compiling saved; a model whose products cost more says so
#: (`jwmma.models.base.Model.compile_weight`; every model weighs 1 now)
FAST_PRODUCTS = 2**22
#: XLA compile options of 'fast', per platform (`compiler_options` keeps those the installed XLA accepts)
FAST_OPTIONS = {"cpu": (("xla_backend_optimization_level", 0), ("xla_cpu_use_fusion_emitters", False))}


#: calls of one program that 'auto' runs compiled fast; the next call compiles it at 'full', so
#: that a small call repeated in a loop runs at full speed from then on (tiering)
TIER_UP_CALLS = 3
_MAX_KEYS = 4096
_calls: OrderedDict = OrderedDict()  # program key -> calls so far (the most recent _MAX_KEYS)
_lock = threading.Lock()


def settle(options, products: int, model=None, key=None):
    """``options`` with an 'auto' compile effort decided for a call of ``products`` emulated
    multiply-adds under ``model`` (anything else is returned as it is).

    Args:
        options: resolved `jwmma.Options`; products: the call's products (an int); model:
            the resolved model, whose ``compile_weight`` scales them (None: weight 1); key: a
            hashable description of the program (static arguments, shapes and dtypes), or
            None: its calls are counted, and after `TIER_UP_CALLS` fast ones it is 'full'.
    Returns:
        An `Options` whose ``compile_effort`` is 'fast' or 'full' (or as given).
    """
    if options.compile_effort != "auto":
        return options
    weight = getattr(model, "compile_weight", 1)
    fast = products * weight <= FAST_PRODUCTS
    if fast and key is not None:
        fast = count_call(key) <= TIER_UP_CALLS
    return _with_effort(options, "fast" if fast else "full")


def count_call(key) -> int:
    """This call's number among the calls of ``key`` (1 for the first), counted over the most
    recent `_MAX_KEYS` keys: what tiering decides on (`settle`, and the host codec's
    `jwmma.engine.host_codec.on_host`)."""
    with _lock:
        n = _calls.pop(key, 0) + 1
        _calls[key] = n
        while len(_calls) > _MAX_KEYS:
            _calls.popitem(last=False)
    return n


@functools.lru_cache(maxsize=1024)
def _with_effort(options, effort: str):
    """``options`` with ``compile_effort=effort`` (cached: `replace` validates a new copy, and
    every eager call settles its options)."""
    return options.replace(compile_effort=effort)


def shapes_key(*arrays) -> tuple:
    """The shapes and dtypes of arrays (None kept), for the ``key`` of `settle`."""
    return tuple(None if x is None else (tuple(x.shape), np.dtype(x.dtype)) for x in arrays)


def eager_vmap_size(*trees) -> int | None:
    """How many slices the eager `jax.vmap`s (no enclosing jit, grad or other transformation)
    whose tracers are among the leaves of ``trees`` map: the product of their axis sizes (1
    where no leaf is traced); None where a leaf is traced by anything else, or where JAX's
    batch tracers do not look as they do in JAX 0.10-0.11 (``val``, ``batch_dim``, their
    trace): callers then leave the program to the outer transformation, as before.

    Why: under an eager vmap a jitted program is compiled on its own, batched, and JAX takes
    compiler options there (not under jit or grad); its products are a slice's times this
    size, which `settle` needs to know (`jwmma.quant.contraction._forward`)."""
    sizes: dict = {}
    for x in jax.tree_util.tree_leaves(trees):
        while isinstance(x, jax.core.Tracer):
            if type(x).__name__ != "BatchTracer" or not hasattr(x, "val") or not hasattr(x, "_trace"):
                return None
            dim = getattr(x, "batch_dim", None)
            if isinstance(dim, int):
                sizes[id(x._trace)] = int(np.shape(x.val)[dim])
            x = x.val
    return int(np.prod(list(sizes.values()), dtype=np.int64))


#: names of the options XLA refused (it says INVALID_ARGUMENT, "No such compile option":
#: an XLA that does not know them): calls compile without them from then on
_refused: set = set()


def compiler_options(platform: str | None, effort: str) -> tuple:
    """The XLA compile options of ``effort`` on ``platform``, as a tuple of (name, value)
    pairs (empty for 'full' and for platforms without any), less those the installed XLA has
    refused. They are not tried on a program of their own beforehand (that cost every
    process one more compile, 0.02 CPU s of a first call): `_call_at` drops an option XLA
    refuses and compiles again with the others (XLA's defaults where none is left)."""
    if effort != "fast":
        return ()
    return tuple(p for p in FAST_OPTIONS.get(platform or "", ()) if p[0] not in _refused)


def _is_refusal(error: Exception) -> bool:
    """Whether XLA refused a compile option (an XLA it does not know)."""
    return "No such compile option" in str(error)


def _refuse(settings: tuple, error: Exception) -> tuple:
    """Record the options of ``settings`` that ``error`` (a refusal) names, all of them where
    it names none; returns the settings left."""
    named = {name for name, _ in settings if repr(name) in str(error) or f'"{name}"' in str(error)}
    _refused.update(named or {name for name, _ in settings})
    return tuple(p for p in settings if p[0] not in _refused)


class _EffortJit:
    """A function jitted once per compiler setting; calls pick by their ``options``."""

    def __init__(self, fn, static_argnames):
        self._fn, self._static = fn, tuple(static_argnames)
        self.full = jax.jit(fn, static_argnames=self._static)  # XLA's defaults (also for tracing/lowering)
        self._jits = {(): self.full}
        functools.update_wrapper(self, fn)

    def _jit(self, settings: tuple):
        if settings not in self._jits:
            self._jits[settings] = jax.jit(self._fn, static_argnames=self._static, compiler_options=dict(settings))
        return self._jits[settings]

    def __call__(self, *args, **kwargs):
        return self._call(args, kwargs, traced=False)

    def under_eager_vmap(self, *args, **kwargs):
        """As a call, for operands traced by eager `jax.vmap`s only (`eager_vmap_size`), whose
        ``options`` the caller settled for the batched program's products: compiled with the
        options' settings (a plain call leaves traced operands to the outer program, at XLA's
        defaults)."""
        return self._call(args, kwargs, traced=True)

    def _call(self, args, kwargs, traced: bool):
        options = kwargs.get("options")
        settings = () if options is None else compiler_options(options.platform, options.compile_effort)
        if not settings:
            return self.full(*args, **kwargs)
        return _call_at(settings, self._jit, self.full, args, kwargs, traced=traced)

    def trace(self, *args, **kwargs):
        return self.full.trace(*args, **kwargs)

    def lower(self, *args, **kwargs):
        return self.full.lower(*args, **kwargs)


def _call_at(settings: tuple, make, full, args, kwargs, traced: bool = False):
    """``make(settings)(*args, **kwargs)`` (``make`` gives the jit with compiler options
    ``settings``), or ``full`` (XLA's defaults) inside a user's jit/vmap/grad, where the outer
    program decides (``traced``: the caller settled the options for an eager vmap's batched
    program, `_EffortJit.under_eager_vmap`); an option XLA refuses is dropped and the call
    compiled with the others (`_refuse`; with ``full`` where none is left)."""
    if not traced and any(isinstance(x, jax.core.Tracer) for x in jax.tree_util.tree_leaves((args, kwargs))):
        return full(*args, **kwargs)
    while settings:
        try:
            return make(settings)(*args, **kwargs)
        except ValueError as e:  # JAX takes compiler options only at the top level (not inside another jit)
            if "compiler_options" not in str(e):
                raise
            break
        except Exception as e:  # noqa: BLE001 - an XLA that does not know an option: the others
            if not _is_refusal(e):
                raise
            settings = _refuse(settings, e)
    return full(*args, **kwargs)


def jit_at_effort(fn, options, **jit_kwargs):
    """``jax.jit(fn, **jit_kwargs)`` compiled at ``options.compile_effort`` (a settled `Options`;
    None: XLA's defaults), for a program built per call with no static ``options`` argument to
    pick by (a sharded GEMM's, `jwmma.tiled.sharding`); as `effort_jit` inside another program
    and where XLA refuses the options. Returns the callable."""
    settings = () if options is None else compiler_options(options.platform, options.compile_effort)
    full = jax.jit(fn, **jit_kwargs)
    if not settings:
        return full
    jits = {}

    def make(settings):
        if settings not in jits:
            jits[settings] = jax.jit(fn, compiler_options=dict(settings), **jit_kwargs)
        return jits[settings]

    @functools.wraps(fn)
    def call(*args, **kwargs):
        return _call_at(compiler_options(options.platform, options.compile_effort), make, full, args, kwargs)

    return call


def effort_jit(fn=None, *, static_argnames=()):
    """`jax.jit` for functions with a static ``options`` keyword (a resolved `jwmma.Options`):
    the program compiles with the settings of ``options.compile_effort`` (`compiler_options`).
    Usable as ``effort_jit(fn, static_argnames=...)`` or as a decorator with keywords."""
    if fn is None:
        return functools.partial(effort_jit, static_argnames=static_argnames)
    return _EffortJit(fn, static_argnames)


@strict_keywords
def enable_compilation_cache(path) -> str:
    """Keep every program jwmma (and the rest of this process) compiles in JAX's persistent
    compilation cache in the folder ``path``, so that a later process loads it instead of
    compiling it again: opt-in, for library users (the ``jwmma`` command does this by itself,
    in ``$XDG_CACHE_HOME/jwmma``). It sets JAX's ``jax_compilation_cache_dir`` and caches
    programs however small or quick to compile (JAX's defaults skip those, and jwmma's first
    calls are many such programs); a loaded program is the compiled program, so no result
    changes. Deleting the folder is always safe.

    Args:
        path: a folder (str or os.PathLike), made if missing.
    Returns:
        The folder, as a str.
    """
    if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
        raise TypeError(f"path must be a folder name (str or os.PathLike), got {path!r}; e.g. "
                        f"jwmma.enable_compilation_cache('~/.cache/jwmma')")
    folder = os.path.expanduser(os.fspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise ValueError(f"path {folder!r} cannot hold the compilation cache: {e}") from None
    jax.config.update("jax_compilation_cache_dir", folder)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder

