"""`Unit`: one emulated matrix unit as one hashable value (API.md section 11).

A `Unit` says everything `jwmma.dot_general`, `jwmma.einsum` and `jwmma.matmul` need besides
the operands: the builtin (and its chip), the arithmetic model, the quantisation recipe, which
operand is the instruction's A, whether A is pruned to 2:4, how the backward pass runs, whether
operands the unit cannot take may run natively, and the execution choices of `jwmma.gemm`
(backend, options, devices). It is a frozen dataclass: it keys the compiled programs (a static
argument everywhere), so a fixed unit never recompiles anything per call, and
``functools.partial(jwmma.dot_general, unit=unit)`` is a ``dot_general`` for Flax layers.

Every field is checked when the unit is built (a TypeError or ValueError naming the field, what
it takes and what it got), so a wrong unit fails where it is written, not inside a model's
forward pass.

The f64 MFMA (``mfma_f64_16x16x4f64``, ``mfma_f64_4x4x4f64``) make an f64 unit: its operands
enter as float64 values (no narrower format, so ``scaling="none"``), its GEMM is `jwmma.gemm`'s
float64 one and its result float64 (BUILTINS_DENSE.md 11). JAX has float64 arrays only with
``jax_enable_x64`` on, so such a unit is used with x64 on (`jwmma.dot_general` raises
TypeError otherwise); it is built whatever the flag says, since a unit is a value that may be
written before the flag is set.
"""
from __future__ import annotations

import dataclasses
import inspect

from .. import models
from ..engine.options import Options
from ..engine.step import context
from ..engine.validation import check_static_bool
from ..isa.table import SCALE_FORMATS, lookup
from ..keywords import check_keywords
from . import scaling as sc

__all__ = ["Unit", "OPERANDS", "FALLBACKS", "DEFAULT_BUILTIN", "is_f64", "default_scaling"]

#: the values of ``Unit.a``: which operand of ``dot_general(lhs, rhs, ...)`` is the builtin's A
OPERANDS = ("rhs", "lhs")
#: the values of ``Unit.fallback``: None (never run natively) or "native" (see `Unit`)
FALLBACKS = (None, "native")
#: the builtin of ``Unit()``: CDNA4's fp8 SMFMAC
DEFAULT_BUILTIN = "smfmac_f32_16x16x128_fp8_fp8"


def is_f64(spec) -> bool:
    """Whether ``spec`` (a `jwmma.BuiltinSpec`) is an f64 MFMA row (float64 A, B, C)."""
    return spec.c_type == "f64"


def default_scaling(spec) -> str:
    """``Unit(scaling=None)``'s scaling for ``spec``: 'row', or 'none' for the f64 MFMA (their
    float64 operands have no narrower format to be scaled into)."""
    return "none" if is_f64(spec) else "row"


def _hashable_devices(devices):
    if devices is None or isinstance(devices, (int, str)):
        return devices
    return tuple(devices)


def _hashable_axes(axes):
    if isinstance(axes, dict):
        return ("dict", tuple(axes.items()))
    return tuple(axes) if isinstance(axes, list) else axes


def _fields_signature(cls) -> inspect.Signature:
    """The dataclass's ``__init__`` signature without ``self`` (a metaclass ``__call__`` hides it
    from ``inspect.signature(cls)``)."""
    sig = inspect.signature(cls.__init__)
    return sig.replace(parameters=list(sig.parameters.values())[1:])


class _NamedFields(type):
    """``Unit(scalng="row")`` names the unknown field, the one probably meant and every field
    (`jwmma.keywords.check_keywords`) instead of the dataclass's bare "unexpected keyword"."""

    def __call__(cls, *args, **kwargs):
        check_keywords(cls.__name__, _fields_signature(cls), kwargs)
        return super().__call__(*args, **kwargs)


@dataclasses.dataclass(frozen=True)
class Unit(metaclass=_NamedFields):
    """An emulated matrix unit: a builtin, its model, a quantisation recipe and execution choices.

    Args:
        builtin: a floating-point builtin of `jwmma.BUILTINS` (its A and B formats are the
            operands' formats, its C format the accumulator's); sparse (SMFMAC/SWMMAC) or dense
            (WMMA, MFMA). The f64 MFMA ``mfma_f64_16x16x4f64`` / ``mfma_f64_4x4x4f64`` need
            ``jax_enable_x64`` on when the unit is used (module doc); they run with the XLA
            backend, as their `jwmma.gemm` does (on one device, or spread by ``devices`` /
            ``mesh`` with the same bits).
        model: a preset name, model text or `jwmma.models.Model` (None: the builtin's default).
        scaling: 'row' (A per row of the GEMM = per output channel of a weight, B per column =
            per token), 'tensor' (one factor per operand), 'none' (a plain cast) or 'mx' (OCP
            MX: E8M0 scales per 32 elements along K, which the block-scaled builtins
            ``mfma_scale_*`` apply themselves); `jwmma.quant.scaling` has the recipe. None
            (default): 'row', or 'none' for the f64 MFMA, which take no other (their operands
            enter as float64 values, exactly).
        formats: a block-scaled builtin's (A, B) element formats, names ('fp8', 'bf8', 'fp6',
            'bf6', 'fp4') or codes 0..4 (None: fp8 x fp8); other builtins take None.
        prune: A is pruned to 2:4 along its contracting dimension (`jwmma.prune_2_4`) before
            it is quantised. None (default): True for sparse builtins, False for dense ones.
            ``prune=False`` with a sparse builtin takes A as 2:4 already (checked when A is
            concrete); ``prune=True`` with a dense builtin prunes all the same.
        target: the builtin's chip where it has several (gfx942 FNUZ fp8 / gfx950 OCP).
        a: 'rhs' (default: the right-hand operand, a Dense layer's kernel, is the instruction's
            A) or 'lhs'.
        backward: None (gradients are float32 products, precision HIGHEST, of the effective
            operands: the straight-through estimator) or a `Unit` through which the two backward
            GEMMs run (with that unit's own ``a``/``prune``/``scaling``).
        fallback: None (default: an operand the unit cannot take, such as an integer array,
            raises) or 'native' (such contractions run as ``jax.lax.dot_general``, and each kind
            is logged once on the ``jwmma`` logger). Nothing falls back silently.
        backend, options: `jwmma.gemm`'s execution choices (never the bits).
        devices, mesh, mesh_axes: the sharded gemm's keywords (the GEMM's M = A's rows, N = B's
            columns).
    Returns:
        A frozen, hashable value; equal fields give equal units (the same compiled programs).
        ``unit.replace(scaling="none")`` gives a changed copy, checked again.
    """

    builtin: str = DEFAULT_BUILTIN
    _: dataclasses.KW_ONLY
    model: object = None
    scaling: str | None = None
    formats: tuple | None = None
    prune: bool | None = None
    target: str | None = None
    a: str = "rhs"
    backward: "Unit | None" = None
    fallback: str | None = None
    backend: str | None = None
    options: Options | None = None
    devices: object = None
    mesh: object = None
    mesh_axes: object = None

    def __post_init__(self):
        if not isinstance(self.builtin, str):
            raise TypeError(f"Unit(builtin=...) must be a builtin name (str), got {type(self.builtin).__name__}; "
                            f"e.g. {DEFAULT_BUILTIN!r} (jwmma.BUILTINS lists them)")
        object.__setattr__(self, "formats", _format_codes(self.builtin, self.target, self.formats))
        spec = self.spec
        if spec.integer:
            raise ValueError(f"Unit(builtin={self.builtin!r}): a unit runs floating-point builtins; this one has "
                             f"integer inputs ({spec.a_type} x {spec.b_type} -> {spec.c_type}): pick a "
                             f"f16/bf16/fp8/bf8 builtin, e.g. {DEFAULT_BUILTIN!r}")
        if self.scaling is None:
            object.__setattr__(self, "scaling", default_scaling(spec))
        if self.scaling not in sc.SCALINGS:
            raise ValueError(f"scaling must be one of {sc.SCALINGS} or None (the builtin's default), got "
                             f"{self.scaling!r} (a Unit field)")
        if is_f64(spec):
            self._check_f64(spec)
        if self.scaling == "mx" and not spec.scaled:
            raise ValueError(f"Unit(scaling='mx'): MX block scales are applied by the block-scaled builtins "
                             f"(mfma_scale_f32_16x16x128_f8f6f4, mfma_scale_f32_32x32x64_f8f6f4); {spec.name} has "
                             f"no scale operand: pick one of those, or scaling 'row'/'tensor'/'none'")
        prune = (not spec.dense) if self.prune is None else check_static_bool(self.prune, "Unit(prune=...)")
        object.__setattr__(self, "prune", prune)
        if self.a not in OPERANDS:
            raise ValueError(f"Unit(a=...) names the operand that is the instruction's A: one of {OPERANDS}, "
                             f"got {self.a!r}")
        if self.backward is not None and not isinstance(self.backward, Unit):
            raise TypeError(f"Unit(backward=...) must be None (float32 gradients) or a jwmma.Unit, got "
                            f"{type(self.backward).__name__}")
        if self.fallback not in FALLBACKS:
            raise ValueError(f"Unit(fallback=...) must be one of {FALLBACKS} (None: never run natively; 'native': "
                             f"run contractions the unit cannot take as jax.lax.dot_general, logged), "
                             f"got {self.fallback!r}")
        if self.options is not None and not isinstance(self.options, Options):
            raise TypeError(f"Unit(options=...) must be a jwmma.Options or None, got {type(self.options).__name__}")
        # unknown or inapplicable models raise here, where the unit is written
        models.resolve(self.model, context(spec, False), spec.default_model)
        object.__setattr__(self, "devices", _hashable_devices(self.devices))
        object.__setattr__(self, "mesh_axes", _hashable_axes(self.mesh_axes))
        try:
            hash(self)
        except TypeError as e:
            raise TypeError(f"a Unit's fields must be hashable values (a unit keys compiled programs): {e}") from None

    def _check_f64(self, spec) -> None:
        """What an f64 unit refuses when it is built: scaling other than 'none', and the Pallas
        backend, which has no f64 kernel (`jwmma.gemm` with these rows runs on XLA, on one device
        or spread over devices=/mesh=)."""
        if self.scaling != "none":
            raise ValueError(f"Unit(builtin={self.builtin!r}, scaling={self.scaling!r}): the f64 MFMA multiplies "
                             f"float64 operands as they are; there is no narrower format to quantise them into, so "
                             f"no factor to choose. Pass scaling='none' (or leave scaling unset: None picks 'none' "
                             f"for the f64 rows)")
        backend = self.backend if self.backend is not None else getattr(self.options, "backend", None)
        if backend == "pallas":
            raise ValueError(f"Unit(builtin={self.builtin!r}, backend='pallas'): the Pallas kernels move 32-bit codes "
                             f"and have no f64 MFMA kernel; pass backend='xla' or 'auto' (or None)")

    @property
    def spec(self):
        """The builtin's `jwmma.BuiltinSpec` (for the unit's target and formats)."""
        return lookup(self.builtin, self.target, self.formats)

    def replace(self, **changes) -> "Unit":
        """A copy with ``changes`` (checked like a new unit). A ``prune`` that was the old
        builtin's default follows the new builtin's default when ``builtin``/``target`` change,
        and so does a ``scaling`` that was the old builtin's default ('row'; 'none' for f64)."""
        check_keywords("Unit.replace", _fields_signature(type(self)), changes)
        if "builtin" in changes or "target" in changes:
            if "prune" not in changes and self.prune == (not self.spec.dense):
                changes["prune"] = None
            if "scaling" not in changes and self.scaling == default_scaling(self.spec):
                changes["scaling"] = None
        return dataclasses.replace(self, **changes)

    def gemm_keywords(self) -> dict:
        """The keywords of the `jwmma.gemm` call that runs this unit's GEMMs."""
        axes = dict(self.mesh_axes[1]) if isinstance(self.mesh_axes, tuple) and self.mesh_axes[:1] == ("dict",) \
            else self.mesh_axes
        kw = dict(builtin=self.builtin, target=self.target, model=self.model, options=self.options,
                  backend=self.backend, devices=self.devices, mesh=self.mesh, mesh_axes=axes)
        if self.formats is not None:  # the operands may be codes (FP6/FP4): the formats are named
            kw.update(fmt_a=self.formats[0], fmt_b=self.formats[1])
        return kw


def _format_codes(builtin: str, target, formats):
    """A unit's ``formats`` as (A code, B code) for a block-scaled builtin (None: (0, 0)), None
    for the other builtins; ValueError for names or codes that are none of `SCALE_FORMATS`."""
    spec = lookup(builtin, target)
    if not spec.scaled:
        if formats is not None:
            raise ValueError(f"Unit(formats=...) applies to the block-scaled builtins (mfma_scale_*); {spec.name}'s "
                             f"formats are fixed ({spec.a_type} x {spec.b_type})")
        return None
    if formats is None:
        return spec.fmt_codes
    names = {t: c for c, t in SCALE_FORMATS.items()}
    if not isinstance(formats, (tuple, list)) or len(formats) != 2:
        raise ValueError(f"Unit(formats=...) must be a pair (A format, B format) of {list(names)} or codes 0..4, "
                         f"got {formats!r}")
    out = []
    for f in formats:
        code = names.get(f, f) if isinstance(f, str) else f
        if isinstance(code, bool) or not isinstance(code, int) or code not in SCALE_FORMATS:
            raise ValueError(f"Unit(formats=...): {f!r} is not one of {list(names)} (or codes 0..4)")
        out.append(code)
    return tuple(out)
