"""What every arithmetic model is given and returns: the model protocol (NUMERICS.md section 0).

A model turns one instruction's products into the accumulator. Two levels, both declared here:

* `Model.accumulate(a, b, c, ctx, options)`: the arithmetic itself, per output. It sees the K
  compressed A values and the K *selected* B values (in compressed-K order, the pruned B rows
  never appear) and the accumulator C, and returns D. Shapes broadcast: ``a`` is (..., K, 1)
  or (..., K, N), ``b`` is (..., K, N), ``c`` and the result are (..., N). Float operands
  arrive decoded (`jwmma.numerics.formats.Fields`), the accumulator as int32 bit patterns of
  ``ctx.c``; integer operands arrive as sign/zero-extended int32 values.
* `Model.instruction(ctx, a, pos, b, c, select, options)`: one whole instruction on matrices: A
  (..., M, Kc) with its positions, B (..., Kd, N) and C (..., M, N). The default selects the
  B rows each stored A element multiplies (with the engine's ``select``) and calls
  `accumulate`. A model with a faster way to the same bits (skipping special-value work when
  no operand is NaN/Inf, matrix products for whole groups, a fused kernel) overrides `instruction`:
  the engine never names a model class.

`Model.working_set` tells the GEMM drivers how many products one kernel should hold at once.
``options`` is the resolved, hashable `jwmma.Options` of the call (read as attributes: this
layer does not import the engine). Models run inside `x64_scope()`.
"""
from __future__ import annotations

import dataclasses
import difflib
from dataclasses import dataclass
from typing import ClassVar

import jax

from ..numerics.formats import F64, FloatFormat
from .fields import Bool, Instance, Int, Text, TupleOf, check_fields

__all__ = ["Context", "Model", "as_column"]

#: products per kernel on the per-product path when the options do not say (see `working_set`)
_BLOCK_ELEMS = {"gpu": 2**27}
_BLOCK_ELEMS_DEFAULT = 2**18


@dataclass(frozen=True)
class Context:
    """Static facts about one use of a model: operand and accumulator formats.

    Fields: ``a``, ``b``: `FloatFormat` of the operands (None for integer operands); ``c``:
    the accumulator's (None for i32); ``clamp``: integer builtins saturate the i32 result;
    ``arch``: the builtin's architecture ('gfx12', 'gfx950'; '' for a free-standing dot);
    ``chain_order``: the order in which the builtin's reference simulator (rocjitsu) chains
    its compressed products, step -> compressed position, where its table row declares one
    (None: compressed-K order; read by `FMAChain(order='register')`); ``scale_block``: K
    elements per E8M0 scale of a block-scaled builtin (0: not scaled; only models that
    implement `Model.scaled_instruction` apply); ``normal_values``: the caller checked the
    operands on the host with `Model.normal_operands`, which the model's instruction may rely
    on (False: nothing is known about them).
    """

    a: FloatFormat | None
    b: FloatFormat | None
    c: FloatFormat | None
    clamp: bool = False
    arch: str = ""
    chain_order: tuple | None = None
    scale_block: int = 0
    normal_values: bool = False

    FIELDS: ClassVar[dict] = {
        "a": Instance(cls=FloatFormat, optional=True), "b": Instance(cls=FloatFormat, optional=True),
        "c": Instance(cls=FloatFormat, optional=True), "clamp": Bool(), "arch": Text(),
        "chain_order": TupleOf(item=Int(lo=0), optional=True), "scale_block": Int(lo=0),
        "normal_values": Bool(),
    }

    def __post_init__(self):
        check_fields(self)

    @property
    def integer(self) -> bool:
        return self.c is None


def as_column(x):
    """(..., K) operands (arrays or decoded Fields) -> (..., K, 1): one column of products."""
    return jax.tree_util.tree_map(lambda t: t[..., None], x)


class _Checked(type):
    """Models name a keyword they do not have, with their fields and the closest one, before
    the dataclass's own ``__init__`` says only "unexpected keyword argument"."""

    def __call__(cls, *args, **kwargs):
        fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else None
        unknown = [k for k in kwargs if fields is not None and k not in fields]
        if unknown:
            close = difflib.get_close_matches(unknown[0], fields, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise TypeError(f"{cls.__name__} has no field {unknown[0]!r}{hint}; its fields: {', '.join(fields)}")
        return super().__call__(*args, **kwargs)


class Model(metaclass=_Checked):
    """Base class. Subclasses are frozen dataclasses (hashable: they are static arguments)
    that declare a rule per field, with the field (`jwmma.models.fields.declare`) or in
    ``FIELDS`` (`jwmma.models.fields`): construction checks
    them (an unknown keyword is named with the class's fields), and a subclass with
    cross-field rules adds them in its own ``__post_init__`` after ``super().__post_init__()``."""

    name: ClassVar[str] = "model"
    integer: ClassVar[bool] = False  # True for models of integer builtins
    scaled: ClassVar[bool] = False  # True for models of the block-scaled builtins (`scaled_instruction`)
    float64: ClassVar[bool] = False  # True for models that run the f64 MFMA (an f64 FMA chain)
    #: how much one product costs unoptimised, relative to most models: 'auto' compile effort
    #: weighs a call's products by it (`jwmma.engine.effort.settle`); never bits
    compile_weight: ClassVar[int] = 1
    FIELDS: ClassVar[dict] = {}

    def __post_init__(self):
        check_fields(self)

    def check(self, ctx: Context) -> str | None:
        """None when the model applies to ``ctx``, otherwise the reason it does not.

        Args:
            ctx: the formats of one use.
        Returns:
            None, or a sentence for the ValueError the caller raises.
        """
        if ctx.integer != self.integer:
            kind = "integer" if ctx.integer else "floating-point"
            return f"{self.describe()} is not a model for {kind} builtins"
        if bool(ctx.scale_block) != self.scaled:
            if ctx.scale_block:
                return (f"{self.describe()} is not a model for the block-scaled builtins (their E8M0 scales need "
                        f"a model that applies them: cdna4_mx, mx_rocjitsu or BlockScaled(...))")
            return f"{self.describe()} models the block-scaled builtins (mfma_scale_*) only"
        if ctx.c == F64 and not self.float64:
            return (f"{self.describe()} is not a model for the f64 MFMA (their arithmetic is an f64 FMA chain: models "
                    f"cdna3, cdna2, cdna1, fma_chain_k, fma_chain or FMAChain(...))")
        return None

    def accumulate(self, a, b, c, ctx: Context, options=None):
        """D from the products of ``a`` and ``b`` and the accumulator ``c`` (module doc).

        Args:
            a: decoded A values (..., K, 1 or N); b: decoded selected B values (..., K, N);
            c: (..., N) int32 accumulator bits (floats) or values (i32); ctx: the formats;
            options: resolved execution options (None: defaults), for implementation choices
                that never change a bit.
        Returns:
            (..., N) int32: result bit patterns (floats) or values (integers).
        """
        raise NotImplementedError

    def instruction(self, ctx: Context, a, pos, b, c, select, options):
        """One instruction on whole matrices (module doc).

        Args:
            ctx: the formats; a: decoded compressed A (..., M, Kc); pos: (..., M, Kc) int32
            positions 0..3; b: decoded dense B (..., Kd, N); c: (..., M, N) accumulator bits
            or values; select: ``select(b, pos)`` -> the B values every stored A element
            multiplies, (..., M, Kc, N) or broadcastable to it (a dense builtin's rows are the
            same for every row of A: (..., 1, Kc, N)); options: resolved execution options.
        Returns:
            (..., M, N) int32 D.
        """
        return self.accumulate(as_column(a), select(b, pos), c, ctx, options=options)

    def gemm_sum(self, ctx: Context) -> bool:
        """Whether a GEMM of many instructions (each step's D the next one's C) equals C plus all
        its products in any order and grouping, so that the GEMM drivers may form it as one
        matrix product: True only for exact, associative arithmetic (integers that wrap)."""
        return False

    def normal_operands(self, ctx: Context, options, a_codes, b_codes) -> bool:
        """Check, before tracing, of concrete operands: whether the instruction may take them as
        ``Context(normal_values=True)`` (a faster program with the same bits for such
        operands; `FusedGroups` on bf16). False here: no model relies on it by default.

        Args:
            ctx: the `Context`; options: resolved `jwmma.Options`; a_codes, b_codes: concrete
                arrays (numpy or JAX, not traced) holding one A or B element each (16-bit
                registers), any shapes.
        Returns:
            A Python bool.
        """
        return False

    def scaled_instruction(self, ctx: Context, a, sa, b, sb, c, options):
        """One block-scaled instruction on whole matrices (models with ``scaled = True``).

        Args:
            ctx: the formats (``ctx.scale_block`` K elements share a scale); a: decoded A
            (..., M, K); sa: (..., M, K) int32 E8M0 scale codes of A's elements (constant
            over each block of ``ctx.scale_block`` consecutive k); b: decoded B (..., K, N);
            sb: (..., K, N) the scales of B's elements; c: (..., M, N) f32 bits; options:
            resolved execution options.
        Returns:
            (..., M, N) int32 D bits.
        """
        raise NotImplementedError(f"{type(self).__name__} does not model block-scaled builtins")

    def working_set(self, ctx: Context, options, a_shape, b_shape) -> int:
        """Elements of one step's product tensor (rows x Kc x N x batch) a kernel may hold at
        once: the GEMM drivers cut the rows into blocks under it (memory, and cache locality
        on CPUs). Any value gives the same bits.

        Args:
            ctx: the formats; options: resolved execution options (``block_elems`` wins when
                set); a_shape: (M, Kc) of one step's A; b_shape: (Kd, N) of its B; leading
                dims (direct builtin calls: (2, M, Kc)) say the step is one of a batch of
                independent instructions.
        Returns:
            The budget: 2**27 on GPUs (large blocks fill the device); 2**18 elsewhere (the
            per-product fusions keep their intermediates in cache: about 1.6x faster than
            2**22 on a 2-core Xeon).
        """
        if options.block_elems is not None:
            return options.block_elems
        return _BLOCK_ELEMS.get(options.platform, _BLOCK_ELEMS_DEFAULT)

    def describe(self) -> str:
        """A readable name for messages."""
        return repr(self)
