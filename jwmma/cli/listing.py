"""``jwmma list``: every builtin of the table with shapes, types, registers, default model."""
from __future__ import annotations

import json
import re

from ..isa import table as _table
from ..isa.table import BUILTINS, OPTIONAL, SCALE_FORMATS, BuiltinSpec, lookup
from .common import CliError, all_targets

__all__ = ["evidence_kind", "row", "cmd_list", "add"]

# ================================================================================== list
_EVIDENCE_KIND = (("measured", "measured"), ("assumed", "assumed"), ("second-hand", "second-hand"))


def evidence_kind(spec: BuiltinSpec) -> str:
    """'measured' / 'measured*' / 'assumed' / 'second-hand', from the default model's evidence."""
    ev = spec.default_evidence.lower()
    for prefix, kind in _EVIDENCE_KIND:
        if ev.startswith(prefix):
            # measured on a related instruction, transfer to the sparse one assumed
            return kind + "*" if kind == "measured" and "assumed" in ev else kind
    return "assumed"


def _vector_types(spec: BuiltinSpec) -> dict:
    """HIP vector type of A, B, C as the prototype spells them (v8half, v2int, int...)."""
    sig = spec.signature()
    return {k: re.search(rf"(\w+) {k.upper()}\b", sig).group(1) for k in ("a", "b", "c")}


def _vgprs(op) -> int:
    return max(1, -(-op.elems * op.elem_bits // 32))


def row(spec: BuiltinSpec) -> dict:
    """The JSON row of ``jwmma list --json`` for one builtin."""
    vec = _vector_types(spec)
    ops = {}
    for k in ("a", "b", "c"):
        op = getattr(spec, k)
        ops[k] = {
            "type": getattr(spec, f"{k}_type"), "hip_vector": vec[k], "n": op.n,
            "elements": op.elems, "elem_bits": op.elem_bits, "vgprs": _vgprs(op),
        }
    return {
        "name": spec.name, "hip_name": spec.hip_name, "signature": spec.signature(),
        "arch": spec.arch, "wave": spec.wave, "m": spec.m, "n": spec.n, "k_dense": spec.k,
        "k_compressed": spec.kc, "operands": ops,
        "index_sets": [] if spec.dense else [{"set": i, "bits": [s + 32 // spec.n_sets - 1, s]}
                                             for i, s in enumerate(spec.index_sets)],
        "dense": spec.dense, "target": spec.target, "targets": list(spec.targets),
        "default_model": spec.default_model, "evidence": evidence_kind(spec),
        "evidence_note": spec.default_evidence,
        "blgp": spec.blgp or None,
        "scaled": spec.scaled,
        # a block-scaled row's A and B formats by code (cbsz/blgp = fmt_a/fmt_b), VGPRs per format
        "formats": ({str(c): {"type": t, "vgprs": _vgprs(lookup(spec.name, spec.target, (c, c)).a)}
                     for c, t in SCALE_FORMATS.items()} if spec.scaled else None),
    }


def cmd_list(args) -> int:
    """``jwmma list``: the table as text (legend included) or JSON."""
    # --arch: the rows of a family's chip; gfx908/gfx90a, which rows of the CDNA3 family run on (the
    # gfx908/gfx90a-only rows by default), are chips of no family: there --arch acts as --target
    family_arch = {f.title: f.arch for f in vars(_table).values() if isinstance(f, _table.Family)}
    specs = [s for s in BUILTINS.values() if args.arch is None or args.arch == s.arch == family_arch[s.family]]
    target = getattr(args, "target", None)
    if not specs and target in (None, args.arch):  # a chip only rows' other targets name (gfx908, gfx90a)
        specs, target = list(BUILTINS.values()), args.arch
    if target is not None:  # the builtins that run on it, as decoded there
        known = all_targets()
        if target not in known:
            raise CliError(f"--target must be one of {', '.join(known)} (the chips of the table's rows), "
                           f"got {target!r}")
        specs = [lookup(s.name, target) for s in specs if target in s.targets]
    if not specs:
        raise CliError(f"no builtin has --arch {args.arch} and runs on --target {target}")
    if args.json:
        print(json.dumps([row(s) for s in specs], indent=2))
        return 0
    notes: dict[str, int] = {}
    table = []
    for s in specs:
        r = row(s)
        o = r["operands"]
        note = notes.setdefault(s.default_evidence, len(notes) + 1)
        if s.scaled:
            types = f"f8f6f4*f8f6f4->{s.c_type}"
            vecs = " ".join([f"{o['a']['hip_vector']}(8/6/4)"] * 2 + [f"{o['c']['hip_vector']}({o['c']['vgprs']})"])
        else:
            types = f"{s.a_type}*{s.b_type}->{s.c_type}"
            vecs = " ".join(f"{o[k]['hip_vector']}({o[k]['vgprs']})" for k in ("a", "b", "c"))
        table.append([
            s.name, s.arch, str(s.wave), f"{s.m}x{s.n}x{s.k}", types, vecs,
            "-" if s.dense else f"{s.n_sets}x{32 // s.n_sets}b",
            f"{s.default_model} ({r['evidence']} [{note}])",
        ])
    head = ["builtin", "arch", "wave", "MxNxK", "A*B->C/D", "A B C vectors (VGPRs)", "index", "default model"]
    widths = [max(len(h), *(len(t[i]) for t in table)) for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    print(fmt(head))
    print(fmt(["-" * w for w in widths]))
    for t in table:
        print(fmt(t))
    print()
    print("Legend: names drop the __builtin_amdgcn_ prefix. K in MxNxK is the DENSE K (sparse builtins:")
    print("A holds K/2 compressed values per row, with a 2-bit position each in the index register;")
    print("wmma_*: dense, no index). Vectors are the HIP register types of A, B, C with their VGPRs per")
    print("lane; 8/4-bit data are packed 4/8 per int, f16/bf16 2 per VGPR. index: 2x16b = two 16-bit index")
    print("sets (bits 15:0 / 31:16), 4x8b = four 8-bit sets, 1x32b = one 32-bit set. gfx12 = RDNA4 (wave32),")
    print("gfx1100 = RDNA3 (also gfx1151; _w32 and _w64 forms; A and B whole in every 16-lane group, read")
    print("from lanes 0-15),")
    print("gfx950 = CDNA4, gfx942 = CDNA3/MI300 (wave64; these also run on gfx950: target='gfx950' decodes")
    print("their fp8/bf8 as OCP instead of FNUZ; fp8_fnuz/bf8_fnuz = ml_dtypes float8_e4m3fnuz/e5m2fnuz).")
    print("The f32, f16 and bf16_1k single-block MFMA also run on gfx90a (MI200) and, but for bf16_1k, gfx908")
    print("(MI100), with their own default models (cdna2, cdna1) and blgp 0..7 on every form: --target;")
    print("the non-1k bf16 (cdna1 / CDNA2(group=2)) and old i8 (exact) single-block MFMA run on gfx908, their")
    print("default, and gfx90a only.")
    print("mfma_*: dense CDNA MFMA (docs/spec/BUILTINS_DENSE.md): long = 8 packed bytes in a 64-bit")
    print("operand; xf32 = float32 registers the unit reads to 10 mantissa bits (gfx942 only); the f32")
    print("forms take blgp 0..7 (B lane patterns). mfma_scale_*: A and B are v8int holding 32 elements of")
    print("the formats fmt_a/fmt_b pick (0 fp8 E4M3, 1 bf8 E5M2, 2 fp6 E2M3, 3 bf6 E3M2, 4 fp4 E2M1; 8, 6")
    print("or 4 VGPRs used), with E8M0 scales per 32 K in scale_a/scale_b (byte opsel of a lane).")
    print("Multi-block MFMA (32x32x1f32, 16x16x4f16, 4x4x4i8, ...: 64/M independent blocks per call): cbsz/abid")
    print("give block b the A of block (b // 2**cbsz) * 2**cbsz + abid; blgp 0..7 on every chip; fragments")
    print("take and return (blocks, M, K) etc.")
    if OPTIONAL:
        print(f"Not emulated: {OPTIONAL}.")
    print("Default model evidence (measured* = measured on a dense relative, transfer assumed):")
    for text, n in notes.items():
        print(f"  [{n}] {text}")
    print("Other models: jwmma.models.PRESETS (model=... on every builtin).")
    return 0


def add(sub):
    """Register ``jwmma list`` on an argparse subparsers object."""
    p = sub.add_parser("list", help="the 113 builtins: shapes, types, registers, default model",
                       description="List every builtin of the instruction table.")
    p.add_argument("--arch", choices=sorted({s.arch for s in BUILTINS.values()} | set(all_targets())),
                   help="only RDNA4 (gfx12), RDNA3 (gfx1100; --target gfx1151 for Strix Halo), CDNA4 (gfx950) or "
                   "CDNA3 (gfx942) rows; gfx90a (CDNA2) and gfx908 (CDNA1): the rows that run there, as --target")
    p.add_argument("--target", metavar="CHIP", default=None,
                   help="only the builtins that run on this chip, with their element types and default "
                   "models there (e.g. gfx950: the CDNA4 SMFMAC and the CDNA3 SMFMAC with OCP fp8/bf8; "
                   "gfx90a, gfx908: the MI200/MI100 dense MFMA)")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.set_defaults(func=cmd_list)
