"""The instruction table: one declarative row per builtin (BUILTINS.md sections 2 and 4).

A row says what a builtin is (shapes, element types, register vectors, index sets, default
arithmetic model) and carries its layout arrays, built once with numpy by `jwmma.layouts`.
It says nothing about arithmetic: that lives in `jwmma.models`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType

import ml_dtypes
import numpy as np

from . import layouts
from .formats import BF8, BF16, F16, F32, FP8, FloatFormat

_ELEM_BITS = {"f16": 16, "bf16": 16, "fp8": 8, "bf8": 8, "iu8": 8, "i8": 8, "iu4": 4}
_FLOAT = {"f16": F16, "bf16": BF16, "fp8": FP8, "bf8": BF8, "f32": F32}


@dataclass(frozen=True, eq=False)
class Operand:
    """A register operand: ``n`` HIP vector elements per lane of ``dtype`` holding
    ``elems`` matrix elements of ``elem_bits`` bits each."""

    n: int
    elems: int
    elem_bits: int
    dtype: np.dtype
    also: tuple = ()  # other accepted register dtypes (same bits, reinterpreted as documented)

    @property
    def packed(self) -> bool:
        """True when several elements share one 32-bit int word (8- and 4-bit data)."""
        return self.elem_bits < 16


@dataclass(frozen=True, eq=False)
class BuiltinSpec:
    name: str
    arch: str  # "gfx12" (RDNA4, wave32) or "gfx950" (CDNA4, wave64)
    m: int
    n: int
    k: int  # DENSE K of the name
    a_type: str
    b_type: str
    c_type: str
    a: Operand
    b: Operand
    c: Operand
    index_sets: tuple  # bit offset s of each index set
    default_model: str
    default_evidence: str
    a_layout: np.ndarray = field(repr=False)
    b_layout: np.ndarray = field(repr=False)
    c_layout: np.ndarray = field(repr=False)

    # ---------------------------------------------------------------- derived facts
    @property
    def wave(self) -> int:
        return 32 if self.arch == "gfx12" else 64

    @property
    def lanes(self) -> int:
        return self.wave

    @property
    def kc(self) -> int:
        """Compressed K: stored A values per row."""
        return self.k // 2

    @property
    def integer(self) -> bool:
        return self.c_type == "i32"

    @property
    def signed_choice(self) -> bool:
        """RDNA4 iu8/iu4 builtins take a_neg/b_neg/clamp; everything else does not."""
        return self.a_type in ("iu8", "iu4")

    @property
    def a_format(self) -> FloatFormat | None:
        return _FLOAT.get(self.a_type)

    @property
    def b_format(self) -> FloatFormat | None:
        return _FLOAT.get(self.b_type)

    @property
    def c_format(self) -> FloatFormat | None:
        return _FLOAT.get(self.c_type)

    @property
    def hip_name(self) -> str:
        return "__builtin_amdgcn_" + self.name

    def index_bit(self, lane: int, e: int, index_set: int = 0) -> int:
        """Bit offset s + 2e of the 2-bit position field of A element ``e`` in idx[lane]."""
        if not 0 <= lane < self.lanes:
            raise ValueError(f"lane must be in [0, {self.lanes}), got {lane}")
        if not 0 <= e < self.a.elems:
            raise ValueError(f"A element e must be in [0, {self.a.elems}), got {e}")
        return self.index_offset(index_set) + 2 * e

    def index_offset(self, index_set: int) -> int:
        if not isinstance(index_set, (int, np.integer)) or not 0 <= index_set < len(self.index_sets):
            raise ValueError(
                f"index_set for {self.name} must be one of {list(range(len(self.index_sets)))}, "
                f"got {index_set!r}"
            )
        return self.index_sets[int(index_set)]

    def signature(self) -> str:
        """The HIP prototype, as in the seed pages."""
        t = {
            (16, np.dtype(np.float16)): "half",
            (16, np.dtype(np.int16)): "short",
            (16, np.dtype(ml_dtypes.bfloat16)): "bf16",
        }

        def vec(op: Operand, acc=False):
            if acc:
                base = {"f32": "float", "i32": "int", "f16": "half", "bf16": "short"}[self.c_type]
            elif op.packed:
                base = "int"
            else:
                base = t[(op.elem_bits, op.dtype)]
            return base if op.n == 1 else f"v{op.n}{base}"

        args = [f"{vec(self.a)} A", f"{vec(self.b)} B", f"{vec(self.c, True)} C"]
        if self.arch == "gfx12":
            if self.signed_choice:
                args = ["bool a_neg", args[0], "bool b_neg", args[1], args[2], "int index", "bool clamp"]
            else:
                args.append("int index")
        else:
            args += ["int idx", "int cbsz", "int abid"]
        return f"{vec(self.c, True)} {self.hip_name}({', '.join(args)})"


# ------------------------------------------------------------------------- table builders
_I32 = np.dtype(np.int32)
_F16 = np.dtype(np.float16)
_I16 = np.dtype(np.int16)
_BF = np.dtype(ml_dtypes.bfloat16)
_ACC = {"f32": np.dtype(np.float32), "i32": _I32, "f16": _F16}


def _operand(t: str, elems: int, arch: str) -> Operand:
    bits = _ELEM_BITS[t]
    if bits < 16:
        return Operand(max(1, elems * bits // 32), elems, bits, _I32, (np.dtype(np.uint32),))
    if t == "f16":
        return Operand(elems, elems, 16, _F16)
    if arch == "gfx12":  # RDNA4 bf16 is `short` storage
        return Operand(elems, elems, 16, _I16, (_BF, np.dtype(np.uint16)))
    return Operand(elems, elems, 16, _BF, (_I16, np.dtype(np.uint16)))


def _acc(c_type: str, elems: int) -> Operand:
    if c_type == "bf16":  # RDNA4 v8 short
        return Operand(elems, elems, 16, _I16, (_BF, np.dtype(np.uint16)))
    return Operand(elems, elems, 32 if c_type in ("f32", "i32") else 16, _ACC[c_type])


_EVIDENCE = {
    "gfx12_dot4/f32": "measured on gfx1201 dense f16/bf16 WMMA (rocjitsu); transfer to SWMMAC "
    "and its 4-product step grouping assumed",
    "gfx12_dot4/16": "measured on gfx1201 dense packed WMMA (narrowing after every step); "
    "transfer to SWMMAC assumed",
    "gfx12_dot4/8": "assumed: no RDNA4 fp8 matrix captures; single-grid DOT4 step by analogy",
    "staged_clamp": "second-hand: GoC's two-stage saturation from gfx1201 captures (unverified); "
    "without clamp the i32 result wraps",
    "cdna3": "assumed: MMA-Sim's bit-accurate CDNA3 (gfx942) algorithm with OCP fp8 decoding; "
    "no gfx950 characterisation is published",
    "exact/i8": "assumed: exact dot, i32 result wraps (the builtin has no clamp operand)",
}


def _rdna4(name, a_t, b_t, c_t, k, n_a, n_b):
    bits = _ELEM_BITS[a_t]
    if c_t == "i32":
        model, ev = "staged_clamp", _EVIDENCE["staged_clamp"]
    elif c_t in ("f16", "bf16"):
        model, ev = "gfx12_dot4", _EVIDENCE["gfx12_dot4/16"]
    elif bits == 8:
        model, ev = "gfx12_dot4", _EVIDENCE["gfx12_dot4/8"]
    else:
        model, ev = "gfx12_dot4", _EVIDENCE["gfx12_dot4/f32"]
    sets = (0,) if (a_t == "iu4" and k == 64) else (0, 16)
    return BuiltinSpec(
        name=name, arch="gfx12", m=16, n=16, k=k, a_type=a_t, b_type=b_t, c_type=c_t,
        a=_operand(a_t, n_a, "gfx12"), b=_operand(b_t, n_b, "gfx12"), c=_acc(c_t, 8),
        index_sets=sets, default_model=model, default_evidence=ev,
        a_layout=layouts.rdna4_a(n_a, bits), b_layout=layouts.rdna4_b(n_b, bits),
        c_layout=layouts.rdna4_c(),
    )


def _cdna4(name, a_t, b_t, m, k):
    bits = _ELEM_BITS[a_t]
    groups = 64 // m
    n_a = k // 2 // groups
    n_b = k // groups
    if a_t == "i8":
        model, ev, c_t = "exact", _EVIDENCE["exact/i8"], "i32"
    else:
        model, ev, c_t = "cdna3", _EVIDENCE["cdna3"], "f32"
    sets = (0, 16) if bits == 16 else (0,)
    return BuiltinSpec(
        name=name, arch="gfx950", m=m, n=m, k=k, a_type=a_t, b_type=b_t, c_type=c_t,
        a=_operand(a_t, n_a, "gfx950"), b=_operand(b_t, n_b, "gfx950"), c=_acc(c_t, m * m // 64),
        index_sets=sets, default_model=model, default_evidence=ev,
        a_layout=layouts.cdna4_a(m, n_a), b_layout=layouts.cdna4_b(m, n_b, k),
        c_layout=layouts.cdna4_c(m),
    )


def _build():
    rows = [
        _rdna4("swmmac_f32_16x16x32_f16_w32", "f16", "f16", "f32", 32, 8, 16),
        _rdna4("swmmac_f32_16x16x32_bf16_w32", "bf16", "bf16", "f32", 32, 8, 16),
        _rdna4("swmmac_f16_16x16x32_f16_w32", "f16", "f16", "f16", 32, 8, 16),
        _rdna4("swmmac_bf16_16x16x32_bf16_w32", "bf16", "bf16", "bf16", 32, 8, 16),
        _rdna4("swmmac_i32_16x16x32_iu8_w32", "iu8", "iu8", "i32", 32, 8, 16),
        _rdna4("swmmac_i32_16x16x32_iu4_w32", "iu4", "iu4", "i32", 32, 8, 16),
        _rdna4("swmmac_i32_16x16x64_iu4_w32", "iu4", "iu4", "i32", 64, 16, 32),
    ]
    for a_t in ("fp8", "bf8"):
        for b_t in ("fp8", "bf8"):
            rows.append(_rdna4(f"swmmac_f32_16x16x32_{a_t}_{b_t}_w32", a_t, b_t, "f32", 32, 8, 16))
    for t in ("f16", "bf16"):
        rows.append(_cdna4(f"smfmac_f32_16x16x64_{t}", t, t, 16, 64))
        rows.append(_cdna4(f"smfmac_f32_32x32x32_{t}", t, t, 32, 32))
    rows.append(_cdna4("smfmac_i32_16x16x128_i8", "i8", "i8", 16, 128))
    rows.append(_cdna4("smfmac_i32_32x32x64_i8", "i8", "i8", 32, 64))
    for m, k in ((16, 128), (32, 64)):
        for a_t in ("fp8", "bf8"):
            for b_t in ("fp8", "bf8"):
                rows.append(_cdna4(f"smfmac_f32_{m}x{m}x{k}_{a_t}_{b_t}", a_t, b_t, m, k))
    for r in rows:  # every layout must cover its matrix exactly once
        layouts.inverse(r.a_layout, (r.m, r.kc))
        layouts.inverse(r.b_layout, (r.k, r.n))
        layouts.inverse(r.c_layout, (r.m, r.n))
        for arr in (r.a_layout, r.b_layout, r.c_layout):
            arr.setflags(write=False)
    return MappingProxyType({r.name: r for r in rows})


#: name (without ``__builtin_amdgcn_``) -> BuiltinSpec, all 25 builtins
BUILTINS = _build()


def lookup(name: str) -> BuiltinSpec:
    """The table row of a builtin, by name with or without the ``__builtin_amdgcn_`` prefix."""
    if not isinstance(name, str):
        raise TypeError(f"builtin name must be a str, got {type(name).__name__}")
    key = name.removeprefix("__builtin_amdgcn_")
    try:
        return BUILTINS[key]
    except KeyError:
        import difflib

        close = difflib.get_close_matches(key, list(BUILTINS), n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise ValueError(
            f"unknown builtin {name!r}{hint} (`jwmma list` shows all {len(BUILTINS)})"
        ) from None
