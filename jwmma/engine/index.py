"""The index register: which set a call reads, and which position pairs the hardware leaves
undefined (BUILTINS.md sections 2.2, 4.2 and 5; BUILTINS_MORE.md 1.3), from the table's
`IndexRule`. Dense builtins have no index register: they take no index modifiers.
"""
from __future__ import annotations

import jax.numpy as jnp
import numpy as np
from jax import lax

from ..isa.table import BuiltinSpec, lookup
from ..keywords import strict_keywords
from .index_registers import check_index
from .validation import as_array, check_static_int, fail_if

__all__ = ["index_offset", "check_blgp", "check_broadcast", "index_violations", "violations", "report_violations"]

_RULE_TEXT = {"increasing": "index0 < index1 (CDNA ISA restriction)", "distinct": "two different positions (2:4 rule)"}


def index_offset(spec: BuiltinSpec, cbsz=0, abid=0, index_key=0) -> int:
    """Bit offset of the index set a call reads.

    Args:
        spec: the builtin; cbsz, abid: the CDNA modifiers (compile-time ints); index_key:
            the RDNA4 keyword. The other family's arguments are ignored.
    Returns:
        The offset s; TypeError/ValueError for a modifier of the wrong type or range.
    """
    rule = spec.index
    if rule.selector == "cbsz_abid":
        cbsz = check_static_int(cbsz, "cbsz", 0, rule.cbsz_max)
        abid_max = spec.n_sets - 1 if rule.abid_max is None else rule.abid_max
        abid = check_static_int(abid, "abid", 0, abid_max)
        return spec.index_sets[abid % spec.n_sets] if cbsz % 4 == 0 else 0
    if rule.selector == "none":
        for what, v in (("cbsz", cbsz), ("abid", abid), ("index_key", index_key)):
            if spec.scaled or v == 0 or (what == "index_key" and "index_key" not in _keywords(spec)):
                check_static_int(v, what, 0, 0)
                continue
            check_static_int(v, what, -2**31, 2**31)  # the type first
            why = ("single-block MFMA: CBSZ/ABID broadcast A blocks of the multi-block forms "
                   "(docs/spec/BUILTINS_DENSE.md 3)" if what != "index_key" else "a dense builtin has no index")
            why = _F64_CBSZ if spec.c_type == "f64" and what != "index_key" else why
            raise ValueError(f"{what} must be 0 for {spec.name} ({why}), got {v}")
        return 0
    index_key = check_static_int(index_key, "index_key", 0, spec.n_sets - 1)
    return spec.index_sets[index_key]


def check_broadcast(spec: BuiltinSpec, cbsz=0, abid=0) -> tuple:
    """A multi-block MFMA's (cbsz, abid) as static ints (BUILTINS_DENSE.md 10): cbsz in
    0..log2(blocks), abid in 0..2**cbsz - 1; block b computes with the A of block
    (b // 2**cbsz) * 2**cbsz + abid; the f64 4x4x4 form takes only (0, 0). Other builtins
    pass (0, 0)."""
    if spec.blocks == 1:
        return (0, 0)
    top = spec.blocks.bit_length() - 1
    cbsz = check_static_int(cbsz, "cbsz", -2**31, 2**31)
    abid = check_static_int(abid, "abid", -2**31, 2**31)
    if spec.c_type == "f64":
        for what, v in (("cbsz", cbsz), ("abid", abid)):
            if v:
                raise ValueError(f"{what} must be 0 for {spec.name} ({_F64_CBSZ}), got {v}")
        return (0, 0)
    rule = (f"cbsz 0..{top} (log2 of its {spec.blocks} blocks), abid 0..2**cbsz - 1: block b computes with the A "
            f"of block (b // 2**cbsz) * 2**cbsz + abid")
    if not 0 <= cbsz <= top:
        raise ValueError(f"cbsz must be in [0, {top}] for {spec.name} ({rule}), got {cbsz}")
    if not 0 <= abid < 1 << cbsz:
        raise ValueError(f"abid must be in [0, {(1 << cbsz) - 1}] for {spec.name} with cbsz={cbsz} ({rule}), "
                         f"got {abid}")
    return (cbsz, abid)


#: why the f64 MFMA take no cbsz/abid
_F64_CBSZ = ("the f64 MFMA have no CBSZ/ABID: the calculator's 'CBSZ and ABID bits supported: False' on CDNA2 and "
             "CDNA3, docs/spec/BUILTINS_DENSE.md 11")


def _keywords(spec: BuiltinSpec):
    return [p.name for p in (*spec.convention.params, *spec.convention.keywords)]


def check_blgp(spec: BuiltinSpec, blgp) -> int:
    """The blgp of a dense MFMA call as a static int: 0..7 where the row swizzles B's lanes
    (the f32 forms; every single-block form on gfx908/gfx90a) or negates A, B, C (f64 on
    gfx942/gfx950), 0 elsewhere (BUILTINS_DENSE.md 3, 9, 11); builtins without the argument
    pass 0."""
    if spec.blgp in ("swizzle", "negate"):
        return check_static_int(blgp, "blgp", 0, 7)
    if blgp != 0 or isinstance(blgp, bool) or not isinstance(blgp, (int, np.integer)):
        check_static_int(blgp, "blgp", -2**31, 2**31)  # the type first
        if spec.c_type == "f64":
            raise ValueError(f"blgp must be 0 for {spec.name} on {spec.target} (CDNA2 has no BLGP on the f64 MFMA: "
                             f"the calculator's 'BLGP bits supported: False'; on gfx942/gfx950 (target=) its bits 0, "
                             f"1, 2 negate A, B, C, docs/spec/BUILTINS_DENSE.md 11), got {blgp}")
        older = [t for t in spec.targets if t in ("gfx908", "gfx90a")]
        also = f"; on {'/'.join(older)} (target=) it permutes B's lanes" if older else ""
        raise ValueError(f"blgp must be 0 for {spec.name} on {spec.target or spec.arch} (B lane patterns exist there "
                         f"on the f32 MFMA only; the calculator rejects them here, docs/spec/BUILTINS_DENSE.md 3"
                         f"{also}), got {blgp}")
    return 0


def violations(spec: BuiltinSpec, idx, s: int):
    """Boolean (*batch, lanes, pairs): True where a lane's stored pair has positions the
    hardware leaves undefined (`IndexRule.undefined`). Works inside jit."""
    words = lax.bitcast_convert_type(idx.astype(jnp.int32), jnp.uint32)
    e = jnp.arange(spec.a.elems, dtype=jnp.uint32)
    fields = ((words[..., None] >> (s + 2 * e).astype(jnp.uint32)) & 3).astype(jnp.int32)
    p0, p1 = fields[..., 0::2], fields[..., 1::2]
    if spec.index.undefined == "none":
        return jnp.zeros(p0.shape, bool)
    return (p0 >= p1) if spec.index.undefined == "increasing" else (p0 == p1)


@strict_keywords
def index_violations(name: str, idx, cbsz: int = 0, abid: int = 0, index_key: int = 0):
    """Where a builtin call's index register holds undefined position pairs.

    Args:
        name: the builtin; idx: (*batch, lanes) int32 index registers; cbsz, abid (CDNA) or
            index_key (RDNA4): the index set, as the call gives it.
    Returns:
        Boolean (*batch, lanes, pairs): True where a lane's stored pair (2t, 2t+1) has
        index0 >= index1 (CDNA leaves such pairs undefined; ISA: index0 < index1) or, on
        RDNA4, two equal positions (they break the 2:4 rule of the seed page). Works inside
        jit.
    """
    spec = lookup(name)
    s = index_offset(spec, cbsz, abid, index_key)
    idx = check_index(spec, as_array(idx, "idx"), "idx")
    return violations(spec, jnp.asarray(idx), s)


def _describe(spec, count: int, first: tuple, word, s: int) -> str:
    """`fail_if`'s summary (pairs that fail, the first (*batch, lane, pair), that lane's
    index word) -> the message."""
    *batch, lane, t = first
    word = int(word) & 0xFFFFFFFF
    p0 = (word >> (s + 4 * t)) & 3
    p1 = (word >> (s + 4 * t + 2)) & 3
    return (
        f"{spec.name}: {count} index pair(s) the hardware leaves undefined; first at "
        f"wave {tuple(batch)} lane {lane} pair {t} (elements {2 * t},{2 * t + 1}, bits "
        f"{s + 4 * t + 3}:{s + 4 * t}): positions ({p0}, {p1}), expected {_RULE_TEXT[spec.index.undefined]}"
    )


def report_violations(spec: BuiltinSpec, idx, s: int) -> None:
    """Raise ValueError for undefined index pairs: now if ``idx`` is concrete, else when the
    jitted computation runs (through a host callback)."""
    if idx.size == 0:
        return
    fail_if(violations(spec, jnp.asarray(idx), s), lambda count, first, word: _describe(spec, count, first, word, s),
            idx)
