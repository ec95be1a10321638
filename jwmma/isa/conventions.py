"""HIP calling conventions of the builtins (BUILTINS.md sections 2.1 and 4.1, BUILTINS_MORE.md 1.1
and 2.1, API.md section 1).

A convention is the builtin's argument list in HIP order, each argument with its *role* (the
operand or modifier it is: 'a', 'b', 'c', 'index', 'a_signed', 'b_signed', 'clamp', 'cbsz',
'abid', 'blgp', 'fmt_a', 'fmt_b', 'opsel_a', 'scale_a', 'opsel_b',
'scale_b', 'opsel'), plus the Python-only keywords (RDNA4's ``index_key``; the CDNA3 SMFMAC's ``target``,
which picks the fp8/bf8 decoding of the chip the code runs on). From it follow the HIP
prototype text (`signature`), the Python signature of the builtin functions
(`python_signature`), the adapter from bound arguments to roles (`roles`) and back to HIP
order (`hip_args`). The builtins, kernels and the command line call builtins through these
functions only, so a new convention (e.g. the dense WMMA ``(A, B, C)``) is one entry of
`CONVENTIONS`.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from types import MappingProxyType

__all__ = ["Param", "Convention", "CONVENTIONS", "signature", "python_signature", "roles", "hip_args",
           "ENGINE_KEYWORDS"]

_REQUIRED = inspect.Parameter.empty


@dataclass(frozen=True)
class Param:
    """One argument: its HIP ``name``, its ``role`` and a ``default`` (HIP has none; the
    Python functions give compile-time modifiers such as cbsz/abid one)."""

    name: str
    role: str
    default: object = _REQUIRED


@dataclass(frozen=True)
class Convention:
    """A calling convention: ``params`` in HIP order, ``keywords`` (Python-only, keyword-only
    arguments) and ``summary``, a sentence for the builtins' docstrings."""

    name: str
    params: tuple
    keywords: tuple = ()
    summary: str = ""

    @property
    def index_name(self) -> str | None:
        """The HIP name of the index argument ('index', 'idx'), None without one."""
        return next((p.name for p in self.params if p.role == "index"), None)

    @property
    def sign_choice(self) -> bool:
        """Whether the builtin takes a_neg/b_neg/clamp (integer RDNA4 builtins)."""
        return any(p.role == "a_signed" for p in self.params)

    @property
    def has_index(self) -> bool:
        """False for the dense builtins (no index register)."""
        return self.index_name is not None

    def name_of(self, role: str, default: str | None = None) -> str | None:
        """The HIP name of the argument with ``role`` ('a_neg' or 'a_sign' for 'a_signed'),
        ``default`` when the convention has none."""
        return next((p.name for p in (*self.params, *self.keywords) if p.role == role), default)


_INDEX_KEY = Param("index_key", "index_key", 0)
#: the MFMA builtins' HIP arguments (the multi-block, f64 and single-block forms alike)
_MFMA_ARGS = (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("cbsz", "cbsz", 0), Param("abid", "abid", 0),
              Param("blgp", "blgp", 0))


def _target(default: str) -> tuple:
    """The ``target=`` keyword of builtins that run on several chips, with its default."""
    return (Param("target", "target", default),)

CONVENTIONS = MappingProxyType({c.name: c for c in (
    Convention("swmmac", (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("index", "index")),
               (_INDEX_KEY,)),
    Convention("swmmac_iu", (Param("a_neg", "a_signed"), Param("a", "a"), Param("b_neg", "b_signed"),
                             Param("b", "b"), Param("c", "c"), Param("index", "index"), Param("clamp", "clamp")),
               (_INDEX_KEY,),
               "a_neg/b_neg true = signed operand; clamp saturates the i32 result (default model: after "
               "each of two stages), otherwise it wraps."),
    Convention("smfmac", (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("idx", "index"),
                          Param("cbsz", "cbsz", 0), Param("abid", "abid", 0))),
    Convention("smfmac_cdna3", (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("idx", "index"),
                                Param("cbsz", "cbsz", 0), Param("abid", "abid", 0)),
               _target("gfx942"),
               "target='gfx942' (MI300, default: FNUZ fp8/bf8) or 'gfx950' (OCP fp8/bf8) picks the chip "
               "the code runs on; cbsz must be 0..3 and abid 0..sets-1."),
    Convention("wmma", (Param("a", "a"), Param("b", "b"), Param("c", "c"))),
    # dense CDNA MFMA (BUILTINS_DENSE.md 1, 3, 9): single-block forms take cbsz = abid = 0; blgp
    # swizzles B's lanes on the two f32 forms (and on gfx908/gfx90a on all) and must be 0 elsewhere
    Convention("mfma_cdna3", _MFMA_ARGS, _target("gfx942"),
               "target='gfx942' (MI300, default: FNUZ fp8/bf8) or 'gfx950' (OCP fp8/bf8) picks the chip "
               "the code runs on, and for the f32, f16 and bf16_1k forms also 'gfx90a' (MI200) and, but for "
               "bf16_1k, 'gfx908' (MI100), each with its own default arithmetic; cbsz and abid must be 0 "
               "(single-block); blgp 0..7 permutes B's lanes on the f32 forms, and on every form on "
               "gfx908/gfx90a, and must be 0 otherwise."),
    # the gfx908/gfx90a-only single-block forms (non-1k bf16, the old i8; BUILTINS_DENSE.md 9)
    Convention("mfma_cdna12", _MFMA_ARGS, _target("gfx908"),
               "target='gfx908' (MI100, default) or 'gfx90a' (MI200) picks the chip the code runs on, each with "
               "its own default arithmetic (LLVM selects these forms on no other chip); cbsz and abid must be 0 "
               "(single-block); blgp 0..7 permutes B's lanes."),
    # the multi-block forms (BUILTINS_DENSE.md 10): cbsz/abid broadcast one A block to 2**cbsz blocks
    Convention("mfma_blocks", _MFMA_ARGS, _target("gfx942"),
               "target='gfx942' (MI300, default), 'gfx950', 'gfx90a' (MI200) or, but for bf16_1k, 'gfx908' "
               "(MI100) picks the chip the code runs on, each with its own default arithmetic; the blocks "
               "are independent products; cbsz 0..log2(blocks) and abid 0..2**cbsz-1 make block b read A "
               "of block 2**cbsz*(b // 2**cbsz) + abid; blgp 0..7 permutes B's lanes."),
    Convention("mfma_blocks_cdna12", _MFMA_ARGS, _target("gfx908"),
               "target='gfx908' (MI100, default) or 'gfx90a' (MI200) picks the chip the code runs on, each with "
               "its own default arithmetic (LLVM selects these forms on no other chip); the blocks are "
               "independent products; cbsz 0..log2(blocks) and abid 0..2**cbsz-1 make block b read A of "
               "block 2**cbsz*(b // 2**cbsz) + abid; blgp 0..7 permutes B's lanes."),
    # the f64 MFMA (BUILTINS_DENSE.md 11): registers are `double`s as two uint32 words each
    Convention("mfma_f64", _MFMA_ARGS, _target("gfx942"),
               "target='gfx942' (MI300, default), 'gfx950' or 'gfx90a' (MI200) picks the chip the code runs on; "
               "registers hold each double as two uint32 words, low word first; cbsz and abid must be 0 (the "
               "f64 MFMA have no CBSZ/ABID); blgp bits 0, 1, 2 negate A, B, C on gfx942/gfx950 (the instruction's "
               "neg:[a,b,c]) and must be 0 on gfx90a (no BLGP on CDNA2 f64)."),
    Convention("mfma", _MFMA_ARGS, (),
               "cbsz, abid and blgp must be 0 (no source gives them a meaning on these forms)."),
    # gfx950 block-scaled MFMA (BUILTINS_DENSE.md 5): cbsz/blgp carry A's and B's formats
    Convention("mfma_scale", (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("fmt_a", "fmt_a", 0),
                              Param("fmt_b", "fmt_b", 0), Param("opsel_a", "opsel_a", 0),
                              Param("scale_a", "scale_a", None), Param("opsel_b", "opsel_b", 0),
                              Param("scale_b", "scale_b", None)), (),
               "fmt_a/fmt_b: 0 FP8 E4M3, 1 BF8 E5M2, 2 FP6 E2M3, 3 BF6 E3M2, 4 FP4 E2M1 (A and B registers "
               "hold 32 elements of that format, packed little-endian); scale_a/scale_b: one int32 per "
               "lane whose byte opsel_a/opsel_b (0..3) is an E8M0 block scale (2**(s-127), 0xFF NaN); "
               "None: no scaling (factor 1: what LLVM compiles a literal scale of 0 to)."),
    # RDNA3 (gfx11) f16/bf16-output WMMA and their _tied forms: LLVM's `bool opsel` picks the C/D half
    Convention("wmma_opsel", (Param("a", "a"), Param("b", "b"), Param("c", "c"), Param("opsel", "opsel", False)), (),
               "opsel (a compile-time bool, LLVM's; default False) picks the 16-bit half of each C/D VGPR: False "
               "bits 15:0 (register elements 0, 2, 4, ...), True bits 31:16 (elements 1, 3, 5, ...); C is read from "
               "that half and D written there. The other half of D: C's in the _tied builtins; unspecified in the "
               "others (hardware leaves the destination VGPR's bits), where jwmma writes zeros."),
    Convention("wmma_iu", (Param("a_sign", "a_signed"), Param("a", "a"), Param("b_sign", "b_signed"),
                           Param("b", "b"), Param("c", "c"), Param("clamp", "clamp")), (),
               "a_sign/b_sign true = signed operand; clamp saturates the i32 result (default model: after "
               "each K-half, as gfx1201 does), otherwise it wraps."),
    # RDNA3 (gfx11) integer WMMA: LLVM's prototype is RDNA4's; clamp saturates once at the end
    Convention("wmma_iu_gfx11", (Param("a_sign", "a_signed"), Param("a", "a"), Param("b_sign", "b_signed"),
                                 Param("b", "b"), Param("c", "c"), Param("clamp", "clamp")), (),
               "a_sign/b_sign true = signed operand (the instruction's NEG[0]/NEG[1]); clamp saturates the "
               "i32 result once, after the whole K sum, otherwise it wraps."),
)})

#: keyword-only arguments every builtin function takes besides its convention's
ENGINE_KEYWORDS = (("model", None), ("check", False), ("options", None), ("backend", None))

#: what a role is called in the HIP prototype when it is not a register operand
_C_TYPES = {"target": "str", "index": "int", "a_signed": "bool", "b_signed": "bool", "clamp": "bool", "cbsz": "int",
            "abid": "int", "blgp": "int", "fmt_a": "int", "fmt_b": "int", "opsel_a": "int", "opsel_b": "int",
            "scale_a": "int", "scale_b": "int", "opsel": "bool"}


def signature(spec) -> str:
    """The HIP prototype of a builtin, as the seed pages print it.

    Args:
        spec: a `jwmma.isa.records.BuiltinSpec`.
    Returns:
        e.g. ``'v8float __builtin_amdgcn_swmmac_f32_16x16x32_f16_w32(v8half A, v16half B,
        v8float C, int index)'``.
    """
    def vec(op):
        n = op.n // op.storage.words
        return op.storage.hip if n == 1 else f"v{n}{op.storage.hip}"

    ops = {"a": spec.a, "b": spec.b, "c": spec.c}
    args = []
    for p in spec.convention.params:
        if p.role in ops:
            args.append(f"{vec(ops[p.role])} {p.role.upper()}")
        else:
            args.append(f"{_C_TYPES[p.role]} {p.name}")
    return f"{vec(spec.c)} {spec.hip_name}({', '.join(args)})"


def python_signature(conv: Convention) -> inspect.Signature:
    """The Python signature of the builtin functions of ``conv``: the HIP arguments in HIP
    order, then the keyword-only ``model``, ``check``, ``options``, ``backend`` and the
    convention's keywords.

    Args:
        conv: a `Convention`.
    Returns:
        An `inspect.Signature` (the functions' ``__signature__``, used to bind calls).
    """
    kind = inspect.Parameter.POSITIONAL_OR_KEYWORD
    params = [inspect.Parameter(p.name, kind, default=p.default) for p in conv.params]
    kw = inspect.Parameter.KEYWORD_ONLY
    params += [inspect.Parameter(name, kw, default=d) for name, d in ENGINE_KEYWORDS[:1]]
    params += [inspect.Parameter(p.name, kw, default=p.default) for p in conv.keywords]
    params += [inspect.Parameter(name, kw, default=d) for name, d in ENGINE_KEYWORDS[1:]]
    return inspect.Signature(params)


def roles(conv: Convention, arguments: dict) -> dict:
    """Bound arguments of a builtin call (HIP names) -> {role: value} for the engine.

    Args:
        conv: the builtin's `Convention`.
        arguments: ``inspect.BoundArguments.arguments`` after ``apply_defaults``.
    Returns:
        The HIP arguments under their roles, the convention's keywords under theirs, and the
        engine keywords (model, check, options, backend) as they are.
    """
    out = {p.role: arguments[p.name] for p in (*conv.params, *conv.keywords)}
    out.update((name, arguments[name]) for name, _ in ENGINE_KEYWORDS)
    return out


def hip_args(conv: Convention, a, b, c, index=None, *, a_signed=True, b_signed=True, clamp=False, cbsz=0,
             abid=0, blgp=0, fmt_a=0, fmt_b=0, opsel_a=0, scale_a=None, opsel_b=0, scale_b=None,
             opsel=False) -> tuple:
    """The positional HIP arguments of a call, in the convention's order.

    Args:
        conv: the builtin's `Convention`.
        a, b, c, index: the register operands and the index register (left out by the
            dense builtins, which have none).
        a_signed, b_signed, clamp, cbsz, abid, blgp, fmt_a, fmt_b, opsel_a, scale_a,
            opsel_b, scale_b, opsel: modifiers and scale registers; those the convention lacks
            are left out (their defaults are what those builtins do).
    Returns:
        A tuple to call the builtin function with: ``fn(*hip_args(...), model=...)``.
    """
    value = dict(a=a, b=b, c=c, index=index, a_signed=a_signed, b_signed=b_signed, clamp=clamp, cbsz=cbsz,
                 abid=abid, blgp=blgp, fmt_a=fmt_a, fmt_b=fmt_b, opsel_a=opsel_a, scale_a=scale_a, opsel_b=opsel_b,
                 scale_b=scale_b, opsel=opsel)
    return tuple(value[p.role] for p in conv.params)
