"""The records of the instruction table (BUILTINS.md sections 1, 2.2, 4.2, 5): what one row
holds (`BuiltinSpec`), its register operands (`Operand`), and what the builtins of one family
share (`Family`, with its `IndexRule`). The rows themselves, the four families and `lookup`
are `jwmma.isa.table`; a row is built there from its keyword record.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from .conventions import Convention, signature
from .types import Storage, element_type

__all__ = ["Operand", "IndexRule", "Family", "BuiltinSpec"]


@dataclass(frozen=True, eq=False)
class Operand:
    """A register operand: ``n`` HIP vector elements per lane, stored as ``storage``, holding
    ``elems`` matrix elements of ``elem_bits`` bits each (8- and 4-bit elements packed
    little-endian into 32-bit words, BUILTINS.md section 1)."""

    n: int
    elems: int
    elem_bits: int
    storage: Storage

    @property
    def dtype(self) -> np.dtype:
        """The register dtype."""
        return self.storage.dtype

    @property
    def also(self) -> tuple:
        """Other accepted register dtypes (same bits, reinterpreted)."""
        return self.storage.also

    @property
    def packed(self) -> bool:
        """True when several elements share one 32-bit int word (8- and 4-bit data)."""
        return self.elem_bits < 16


@dataclass(frozen=True)
class IndexRule:
    """How a family's builtins read the index register (BUILTINS.md 2.2, 4.2, 5).

    ``selector``: how a call picks one of the ``sets`` index sets (each ``32 // sets`` bits,
    from bit 0 up): 'index_key' (RDNA4: the Python keyword ``index_key``; the builtin itself
    reads set 0), 'cbsz_abid' (CDNA: set ``abid % sets`` when ``cbsz % 4 == 0``, else set
    0, with cbsz in [0, cbsz_max] and abid in [0, abid_max]; ``abid_max=None``: abid must
    name a set, 0..sets-1, as the calculator requires for CDNA3, BUILTINS_MORE.md 1.3) or
    'none' (dense builtins: no index register). ``undefined``: which position pairs (p0, p1)
    of a stored pair the hardware leaves undefined: 'increasing' (CDNA: the ISA requires
    p0 < p1), 'distinct' (RDNA4: p0 == p1 breaks the 2:4 rule) or 'none'.
    """

    selector: str
    undefined: str
    cbsz_max: int = 7
    abid_max: int | None = 15


@dataclass(frozen=True)
class Family:
    """What the builtins of one family share: ``title`` (docstrings), ``arch``, ``wave``,
    the `IndexRule`, the storage of bf16 registers, and the layout formulas
    ``a_layout(m, n_a, bits, k)``, ``b_layout(m, n_b, bits, k)``, ``c_layout(m)``,
    ``dense``: True for builtins without sparsity (A is the whole M x K matrix, no index),
    ``scaled``: True for block-scaled builtins (E8M0 scales per 32 K, formats chosen per call),
    ``modifiers``: how a dense MFMA reads cbsz/abid/blgp ('mfma': all must be 0 except blgp on
    a row that declares a swizzle; '' for families without them),
    ``replicated``: True where every lane group of 16 lanes holds the whole A and B (RDNA3
    WMMA: each lane a whole row of A and column of B; the emulator reads lanes 0-15),
    ``blocks``: True for the multi-block MFMA (wave/M independent M x N x K products per call,
    the blocks stacked along the matrix rows, BUILTINS_DENSE.md 10)."""

    title: str
    arch: str
    wave: int
    index: IndexRule
    a_layout: Callable
    b_layout: Callable
    c_layout: Callable
    bf16_storage: Storage | None = None
    dense: bool = False
    scaled: bool = False
    modifiers: str = ""
    replicated: bool = False
    blocks: bool = False

    def layout(self, operand: str, *args) -> np.ndarray:
        """The read-only layout of ``operand`` ('a', 'b' or 'c') by this family's formula at
        ``args``, computed once: the rows of one shape (targets, scale formats of one width)
        share it, which keeps building the table at import cheap."""
        return _layout(self, operand, args)


@functools.lru_cache(maxsize=None)
def _layout(family: Family, operand: str, args: tuple) -> np.ndarray:
    arr = getattr(family, f"{operand}_layout")(*args)
    arr.setflags(write=False)
    return arr


@dataclass(frozen=True, eq=False)
class BuiltinSpec:
    """One builtin (API.md section 2), a row of `jwmma.isa.table` (built there from its keyword
    record); the fields are:

    name (without ``__builtin_amdgcn_``), family (its title), arch ('gfx12' RDNA4, 'gfx1100'
    RDNA3 (a row looked up for gfx1151 says 'gfx1151'), 'gfx950' CDNA4, 'gfx942' CDNA3; a CDNA3 row
    looked up for gfx950, gfx90a (CDNA2) or gfx908 (CDNA1) says that chip), wave (32 or 64),
    m, n, k (k is the DENSE K of the name), a_type / b_type / c_type (`jwmma.isa.types`
    names, as decoded on ``target``), a / b / c (`Operand`), convention (`Convention`),
    index (`IndexRule`), n_sets (index sets), default_model (a preset name),
    default_evidence (what the model rests on), a_layout / b_layout / c_layout: int arrays
    (lanes, n, 2) mapping [lane, element] to (row, column) of compressed A (M x K/2; dense
    builtins: M x K), B (K x N) and C/D; dense (no sparsity, no index); target (the chip
    whose decoding this row describes) and targets (every chip the builtin runs on);
    blgp: 'swizzle' where blgp 0..7 permutes B's lanes (f32 MFMA; every single-block MFMA on
    gfx908/gfx90a), 'negate' where its bits 0, 1, 2 negate A, B, C (f64 MFMA on gfx942/gfx950),
    '' where it must be
    0 (or the builtin has none); scaled: block-scaled (E8M0 scales per 32 K); fmt_codes: the
    (A, B) format codes of a scaled row (its variants: `jwmma.isa.table.lookup`'s formats=);
    blocks: independent M x N x K products per call (multi-block MFMA: wave/M; else 1), the
    layouts then cover matrices with the blocks stacked along the rows (`a_shape`, `b_shape`,
    `c_shape`); opsel: the 16-bit C/D values fill one half of each 32-bit VGPR, the half the
    call's ``opsel`` picks (RDNA3 f16/bf16 outputs: register element 2t + opsel holds layout slot
    t; ``c`` is the whole register vector, ``c_layout`` the slots); tied: D's other halves are C's
    (the ``_tied`` builtins; without it they are unspecified and jwmma writes zeros there).
    """

    name: str
    family: str
    arch: str
    wave: int
    m: int
    n: int
    k: int
    a_type: str
    b_type: str
    c_type: str
    a: Operand
    b: Operand
    c: Operand
    convention: Convention
    index: IndexRule
    n_sets: int
    default_model: str
    default_evidence: str
    a_layout: np.ndarray = field(repr=False)
    b_layout: np.ndarray = field(repr=False)
    c_layout: np.ndarray = field(repr=False)
    dense: bool = False
    target: str = ""
    targets: tuple = ()
    chain_order: tuple | None = field(default=None, repr=False)
    blgp: str = ""
    scaled: bool = False
    fmt_codes: tuple = ()
    blocks: int = 1
    opsel: bool = False
    tied: bool = False

    # ---------------------------------------------------------------- derived facts
    @property
    def a_shape(self) -> tuple:
        """Shape of the A matrix the layout covers: (blocks * M, Kc), block b in rows bM..bM+M-1."""
        return (self.blocks * self.m, self.kc)

    @property
    def b_shape(self) -> tuple:
        """Shape of the B matrix the layout covers: (blocks * K, N), block b in rows bK..bK+K-1."""
        return (self.blocks * self.k, self.n)

    @property
    def c_shape(self) -> tuple:
        """Shape of the C/D matrix the layout covers: (blocks * M, N), block b in rows bM..bM+M-1."""
        return (self.blocks * self.m, self.n)

    @property
    def lanes(self) -> int:
        return self.wave

    @property
    def kc(self) -> int:
        """Compressed K: stored A values per row (dense builtins: K)."""
        return self.k if self.dense else self.k // 2

    @property
    def copies(self) -> int:
        """How many copies of A (and of B) the registers hold: wave/16 for RDNA3 WMMA, whose
        every 16-lane group holds the whole matrix (the first copy, lanes 0-15, is read), else 1."""
        return max(1, self.lanes * self.a.elems // (self.blocks * self.m * self.kc))

    @property
    def integer(self) -> bool:
        """True for builtins with an i32 accumulator."""
        return self.c_type == "i32"

    @property
    def signed_choice(self) -> bool:
        """True for builtins taking a_neg/b_neg/clamp (RDNA4 iu8/iu4)."""
        return self.convention.sign_choice

    @property
    def a_format(self):
        """The `FloatFormat` of A (None for integers); likewise `b_format`, `c_format`."""
        return element_type(self.a_type).format

    @property
    def b_format(self):
        return element_type(self.b_type).format

    @property
    def c_format(self):
        return element_type(self.c_type).format

    @property
    def hip_name(self) -> str:
        return "__builtin_amdgcn_" + self.name

    @property
    def index_sets(self) -> tuple:
        """Bit offset s of each index set."""
        width = 32 // self.n_sets
        return tuple(range(0, 32, width))

    def index_bit(self, lane: int, e: int, index_set: int = 0) -> int:
        """Bit offset s + 2e of the 2-bit position field of A element ``e`` in idx[lane].

        Args:
            lane: 0 <= lane < lanes.
            e: A vector element, 0 <= e < a.elems.
            index_set: which index set (see `index_sets`).
        Returns:
            The bit offset of the field's low bit.
        """
        if not 0 <= lane < self.lanes:
            raise ValueError(f"lane must be in [0, {self.lanes}), got {lane}")
        if not 0 <= e < self.a.elems:
            raise ValueError(f"A element e must be in [0, {self.a.elems}), got {e}")
        return self.index_offset(index_set) + 2 * e

    def index_offset(self, index_set: int) -> int:
        """Bit offset s of index set ``index_set``; raises ValueError for a set the builtin
        does not have."""
        if not isinstance(index_set, (int, np.integer)) or not 0 <= index_set < self.n_sets:
            raise ValueError(
                f"index_set for {self.name} must be one of {list(range(self.n_sets))}, got {index_set!r}"
            )
        return self.index_sets[int(index_set)]

    @property
    def scale_block(self) -> int:
        """K elements per E8M0 scale of a block-scaled builtin (0: not scaled)."""
        return 32 if self.scaled else 0

    def index_note(self) -> str:
        """How the builtin picks its index set, in words (BUILTINS.md 2.2, 4.2)."""
        if self.dense:
            return "none (dense: no index register)"
        if self.n_sets == 1:
            ignored = "cbsz/abid are ignored" if self.index.selector == "cbsz_abid" else "there is no index_key"
            return f"one 32-bit index set (bits 31:0); {ignored}"
        width = 32 // self.n_sets
        sets = ", ".join(f"set {i} = bits {s + width - 1}:{s}" for i, s in enumerate(self.index_sets))
        words = {2: "two", 4: "four"}[self.n_sets]
        if self.index.selector == "cbsz_abid" and self.index.abid_max is None:
            how = (f"the builtin uses set abid when cbsz == 0, else set 0 (cbsz 0..{self.index.cbsz_max}, "
                   f"abid 0..{self.n_sets - 1}; anything else is refused)")
        elif self.index.selector == "cbsz_abid":
            abid = "abid[0]" if self.n_sets == 2 else "abid[1:0]"
            how = f"the builtin uses set {abid} when cbsz[1:0] == 0, else set 0"
        else:
            how = "the builtin reads set 0 unless called with index_key=1"
        return f"{words} {width}-bit index sets ({sets}); {how}"

    def c_elements(self, opsel: int = 0) -> np.ndarray:
        """The register element of C/D that holds each slot of ``c_layout``: 2t + opsel on an
        opsel row (the 16-bit half opsel of VGPR t), t itself on the others.

        Args:
            opsel: the half (0: bits 15:0, 1: bits 31:16); rows without opsel take 0 only.
        Returns:
            (slots,) int array.
        """
        slots = np.arange(self.c_layout.shape[1])
        return 2 * slots + opsel if self.opsel else slots

    def require_single_block(self, what: str) -> None:
        """Raise ValueError where ``what`` (today: `jwmma.gemm` with cbsz/abid, whose output tiles
        would share an A strip) gets a multi-block row, whose call holds several independent tiles
        (BUILTINS_DENSE.md 10)."""
        if self.blocks > 1:
            raise ValueError(f"{what} does not drive the multi-block {self.name} ({self.blocks} independent "
                             f"{self.m}x{self.n}x{self.k} blocks per call) yet; call the builtin on registers "
                             f"(pack_a takes (blocks, M, K)), jwmma.gemm without cbsz/abid (each output tile one "
                             f"block), a jwmma.kernel policy (its own mma may pass cbsz/abid) or a single-block MFMA")

    def signature(self) -> str:
        """The HIP prototype, as in the seed pages."""
        return signature(self)
