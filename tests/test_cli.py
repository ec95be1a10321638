"""The `jwmma` command line, run in-process: list, layout (against the seed pages' tables and
against the library's own packing), the index view, errors, and a tiny demo."""
from __future__ import annotations

import json
import re

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.isa import view as layout_view
from jwmma.cli import main


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def lines_of(out: str) -> list[str]:
    return [re.sub(r"\s+", " ", line).strip() for line in out.splitlines()]


def has_line(out: str, pattern: str) -> bool:
    """A line matching ``pattern`` (a regex over whitespace-normalised lines)."""
    return any(re.search(pattern, line) for line in lines_of(out))


# ------------------------------------------------------------------------------------ list
def test_list_shows_every_builtin(capsys):
    rc, out, _ = run(capsys, "list")
    assert rc == 0
    for name in jwmma.BUILTINS:
        assert has_line(out, rf"^{name} ")
    assert has_line(out, r"^swmmac_f32_16x16x32_f16_w32 gfx12 32 16x16x32 f16\*f16->f32 v8half\(4\) v16half\(8\) v8float\(8\) 2x16b gfx12_dot4 \(measured\* \[\d\]\)")
    assert has_line(out, r"^smfmac_f32_16x16x128_fp8_fp8 gfx950 64 16x16x128 fp8\*fp8->f32 v4int\(4\) v8int\(8\) v4float\(4\) 1x32b cdna3 \(assumed \[\d\]\)")
    assert has_line(out, r"^swmmac_i32_16x16x32_iu4_w32 .* int\(1\) v2int\(2\) v8int\(8\) 2x16b staged_clamp")
    assert "DENSE K" in out and "Legend" in out


def test_list_arch_and_json(capsys):
    rc, out, _ = run(capsys, "list", "--arch", "gfx950")
    assert rc == 0
    names = [ln.split()[0] for ln in lines_of(out) if ln.startswith(("smfmac", "swmmac"))]
    assert len(names) == 14 and all(n.startswith("smfmac") for n in names)
    rc, out, _ = run(capsys, "list", "--json")
    rows = json.loads(out)
    assert rc == 0 and len(rows) == 113
    r = {x["name"]: x for x in rows}["swmmac_f16_16x16x32_f16_w32"]
    assert (r["m"], r["n"], r["k_dense"], r["k_compressed"]) == (16, 16, 32, 16)
    assert r["operands"]["c"] == {"type": "f16", "hip_vector": "v8half", "n": 8, "elements": 8,
                                  "elem_bits": 16, "vgprs": 4}
    assert r["evidence"] in ("measured", "measured*", "assumed", "second-hand")
    assert r["index_sets"] == [{"set": 0, "bits": [15, 0]}, {"set": 1, "bits": [31, 16]}]
    r = {x["name"]: x for x in rows}["swmmac_i32_16x16x64_iu4_w32"]
    assert r["index_sets"] == [{"set": 0, "bits": [31, 0]}]


def test_list_mi100_mi200(capsys):
    """--arch gfx90a / gfx908 (chips only rows' other targets name): the rows that run there, with
    the chip's default model (the non-1k bf16 rows' own CDNA2(group=2) on gfx90a, exact for i8),
    single- and multi-block rows, the two f64 rows on gfx90a; --target alike; an empty selection is an error, not a traceback."""
    from jwmma.isa.table import lookup
    for chip, model, n, n_model in (("gfx90a", "cdna2", 27, 17), ("gfx908", "cdna1", 20, 15)):
        for flag in ("--arch", "--target"):
            rc, out, _ = run(capsys, "list", flag, chip)
            rows = [ln for ln in lines_of(out) if re.match(r"mfma_\w+ +gfx", ln)]
            assert rc == 0 and len(rows) == n, out
            assert all(f" {chip} " in r and f" {lookup(r.split()[0], chip).default_model} (" in r for r in rows), out
            assert sum(f" {model} (" in r for r in rows) == n_model
            assert sum(" exact (" in r for r in rows) == 5  # the i8 rows
    rc, _, err = run(capsys, "list", "--arch", "gfx908", "--target", "gfx942")
    assert rc != 0 and "no builtin has --arch gfx908" in err


# ------------------------------------------------------------------ layout vs the seed pages
def test_rdna4_f16_a_matches_seed_table(capsys):
    rc, out, _ = run(capsys, "layout", "swmmac_f32_16x16x32_f16_w32", "--operand", "a", "--lane", "0,16")
    assert rc == 0
    # SEED-R4: lane group 1 VGPR 0 = compressed K {4, 5}; group 0 VGPR 2 = {8, 9}
    assert has_line(out, r"^lane 16 elem 0 v\[0\] bits \[15:0\] -> A\[0\]\[4\] \(compressed; dense group q = 2: dense k = 8 \+ idx\[16\] bits \[1:0\]\)")
    assert has_line(out, r"^lane 16 elem 1 v\[0\] bits \[31:16\] -> A\[0\]\[5\] ")
    assert has_line(out, r"^lane 16 elem 4 v\[2\] bits \[15:0\] -> A\[0\]\[12\] ")
    assert has_line(out, r"^lane 0 elem 4 v\[2\] bits \[15:0\] -> A\[0\]\[8\] ")
    assert has_line(out, r"^lane 0 elem 7 v\[3\] bits \[31:16\] -> A\[0\]\[11\] ")
    assert "K is the dense K" in out


def test_rdna4_b_and_c(capsys):
    _, out, _ = run(capsys, "layout", "swmmac_f32_16x16x32_f16_w32", "-o", "b", "--lane", "16")
    # SEED-R4: lane group 1 holds K rows 8-15 in VGPRs 0-3 and 24-31 in VGPRs 4-7
    assert has_line(out, r"^lane 16 elem 0 v\[0\] bits \[15:0\] -> B\[8\]\[0\]$")
    assert has_line(out, r"^lane 16 elem 15 v\[7\] bits \[31:16\] -> B\[31\]\[0\]$")
    _, out, _ = run(capsys, "layout", "swmmac_f32_16x16x32_f16_w32", "-o", "c", "--lane", "16")
    # SEED-R4: i = (L // 16) * 8 + g, j = L % 16
    for g in range(8):
        assert has_line(out, rf"^lane 16 elem {g} v\[{g}\] bits \[31:0\] -> C\[{8 + g}\]\[0\]$")
    # packed f16 accumulator: element t in VGPR t//2, bits 16*(t%2)+15 : 16*(t%2)
    _, out, _ = run(capsys, "layout", "swmmac_f16_16x16x32_f16_w32", "-o", "d", "--lane", "17")
    assert has_line(out, r"^lane 17 elem 3 v\[1\] bits \[31:16\] -> C\[11\]\[1\]$")
    _, out, _ = run(capsys, "layout", "swmmac_i32_16x16x32_iu8_w32", "-o", "b", "--lane", "16")
    assert has_line(out, r"^lane 16 elem 5 v\[1\] bits \[15:8\] -> B\[21\]\[0\]$")


def test_cdna4_c_matches_seed_formulas(capsys):
    _, out, _ = run(capsys, "layout", "smfmac_f32_16x16x64_f16", "-o", "c", "--lane", "16")
    assert has_line(out, r"^lane 16 elem 0 v\[0\] bits \[31:0\] -> C\[4\]\[0\]$")  # row 4
    _, out, _ = run(capsys, "layout", "smfmac_f32_32x32x32_bf16", "-o", "c", "--lane", "32")
    # SEED-C4: i = 8*(G//4) + 4*(L//32) + G%4
    assert has_line(out, r"^lane 32 elem 4 v\[4\] bits \[31:0\] -> C\[12\]\[0\]$")
    _, out, _ = run(capsys, "layout", "smfmac_f32_16x16x128_fp8_fp8", "-o", "a", "--element", "1,17")
    assert has_line(out, r"^lane 17 elem 1 v\[0\] bits \[15:8\] -> A\[1\]\[17\] \(compressed; dense group q = 8: dense k = 32 \+ idx\[17\] bits \[3:2\]\)")


def test_grid_view(capsys):
    rc, out, _ = run(capsys, "layout", "swmmac_f32_16x16x32_f16_w32", "--grid")
    assert rc == 0
    assert has_line(out, r"^i0 0:0 0:0 0:1 0:1 16:0 16:0 16:1 16:1 0:2 0:2 0:3 0:3 16:2 16:2 16:3 16:3$")
    _, out, _ = run(capsys, "layout", "smfmac_f32_16x16x64_f16", "-o", "c", "--grid")
    assert has_line(out, r"^i4 16:0 17:0 18:0 ")
    _, out, _ = run(capsys, "layout", "smfmac_f32_16x16x128_fp8_fp8", "-o", "a", "--grid")
    assert sum(ln.startswith("i\\c") for ln in lines_of(out)) == 4  # 64 columns in 4 panels


# ------------------------------------------------------------------------------ index view
def test_index_view_and_sets(capsys):
    _, out, _ = run(capsys, "layout", "swmmac_f32_16x16x32_f16_w32", "-o", "index", "--lane", "16")
    assert "reads set 0 unless called with index_key=1" in out
    assert has_line(out, r"^lane 16 elem 0 idx bits \[1:0\] -> position of A\[0\]\[4\] \(group q = 2: dense k = 8 \+ field\)$")
    _, out, _ = run(capsys, "layout", "smfmac_f32_16x16x64_f16", "-o", "index", "--index-set", "1", "--lane", "16")
    assert "abid[0] when cbsz[1:0] == 0" in out
    assert has_line(out, r"^lane 16 elem 0 idx bits \[17:16\] -> position of A\[0\]\[8\] ")
    _, out, _ = run(capsys, "layout", "swmmac_i32_16x16x64_iu4_w32", "-o", "index", "--lane", "0")
    assert "one 32-bit index set" in out
    assert has_line(out, r"^lane 0 elem 15 idx bits \[31:30\] -> position of A\[0\]\[15\] ")
    rc, _, err = run(capsys, "layout", "swmmac_i32_16x16x64_iu4_w32", "-o", "index", "--index-set", "1")
    assert rc == 2 and "--index-set" in err


# -------------------------------------------------- layout view vs the library's own packing
_ONE = {"f16": np.float16(1), "bf16": ml_dtypes.bfloat16(1), "fp8": ml_dtypes.float8_e4m3fn(1),
        "bf8": ml_dtypes.float8_e5m2(1), "f32": np.float32(1), "iu8": 1, "iu4": 1, "i8": 1, "i32": 1}


def _words(regs) -> np.ndarray:
    """(*batch, lanes, n) registers -> (*batch, lanes, VGPRs) uint32 words."""
    r = np.asarray(regs)
    r = r.view(np.uint16 if r.dtype.itemsize == 2 else np.uint32)
    if r.dtype == np.uint16:
        r = (r[..., 0::2].astype(np.uint32) | (r[..., 1::2].astype(np.uint32) << 16))
    return r


@pytest.mark.parametrize("name", [
    "swmmac_f16_16x16x32_f16_w32", "swmmac_i32_16x16x32_iu8_w32", "swmmac_i32_16x16x32_iu4_w32",
    "swmmac_i32_16x16x64_iu4_w32", "smfmac_f32_16x16x64_bf16", "smfmac_f32_32x32x64_fp8_bf8",
    "smfmac_i32_16x16x128_i8",
])
@pytest.mark.parametrize("operand", ["a", "b", "c", "index"])
def test_view_agrees_with_pack(name, operand):
    """Every printed (lane, VGPR, bits) is where pack_* puts that matrix element, and nowhere else."""
    spec = jwmma.BUILTINS[name]
    index_set = len(spec.index_sets) - 1
    rows = layout_view.entries(spec, operand, index_set)
    shape = {"a": (spec.m, spec.kc), "index": (spec.m, spec.kc), "b": (spec.k, spec.n), "c": (spec.m, spec.n)}[operand]
    n = shape[0] * shape[1]
    if operand == "index":
        one_hot = np.eye(n, dtype=np.int32).reshape(n, *shape) * 3
        words = np.asarray(jwmma.pack_index(name, one_hot, index_set)).view(np.uint32)[..., None]
    else:
        t = {"a": spec.a_type, "b": spec.b_type, "c": spec.c_type}[operand]
        one = _ONE[t]
        dtype = np.asarray(one).dtype if not isinstance(one, int) else np.int32
        one_hot = np.zeros((n, *shape), dtype)
        one_hot.reshape(n, -1)[np.arange(n), np.arange(n)] = one
        words = _words(getattr(jwmma, f"pack_{operand}")(name, one_hot))
    assert len(rows) == n
    for en in rows:
        w = words[en.row * shape[1] + en.col]
        field = (int(w[en.lane, en.vgpr]) >> en.lo) & ((1 << (en.hi - en.lo + 1)) - 1)
        assert field != 0, en
        rest = w.copy()
        rest[en.lane, en.vgpr] &= ~np.uint32(((1 << (en.hi - en.lo + 1)) - 1) << en.lo)
        assert not rest.any(), en


# ---------------------------------------------------------------------------------- errors
def test_unknown_builtin(capsys):
    rc, out, err = run(capsys, "layout", "swmac_f32_16x16x32_f16", "-o", "a")
    assert rc == 2 and out == ""
    assert "unknown builtin" in err and "did you mean" in err and "swmmac_f32_16x16x32_f16_w32" in err
    rc, _, err = run(capsys, "layout", "__builtin_amdgcn_smfmac_f32_16x16x64_f16", "-o", "c", "--lane", "64")
    assert rc == 2 and "lanes 0..63" in err
    rc, _, err = run(capsys, "layout", "smfmac_f32_16x16x64_f16", "--element", "16,0")
    assert rc == 2 and "--element 16,0: A is 16x32; element (16, 0) is outside it" in err
    # D (C's layout) with --json and --grid: the refusal names the option too
    rc, out, err = run(capsys, "layout", "swmmac_i32_16x16x64_iu4_w32", "-o", "d", "--element=99,0", "--grid", "--json")
    assert rc == 2 and out == "" and "--element 99,0: C is 16x16; element (99, 0) is outside it" in err
    rc, _, err = run(capsys, "demo", "--builtin", "nonsense")
    assert rc == 2 and "unknown builtin" in err
    # a demo builtin whose demo case runs none of the named models: refused, not an empty table
    rc, out, err = run(capsys, "demo", "--builtin", "smfmac_f32_16x16x64_fp8_fp8", "--model", "exact")
    assert rc == 2 and out == ""
    assert "--model exact is not in the demo of smfmac_f32_16x16x64_fp8_fp8: it runs cdna3" in err
    assert "jwmma gemm --builtin smfmac_f32_16x16x64_fp8_fp8 --model NAME" in err
    assert main([]) == 2
    with pytest.raises(SystemExit) as e:
        main(["layout", "smfmac_f32_16x16x64_f16", "-o", "z"])
    assert e.value.code == 2


# ------------------------------------------------------------------------------------ demo
def test_demo_tiny(capsys):
    rc, out, _ = run(capsys, "demo", "--waves", "64", "--builtin", "smfmac_f32_16x16x128_fp8_fp8",
                     "--builtin", "swmmac_i32_16x16x32_iu8_w32", "--model", "exact", "--model", "staged_clamp")
    assert rc == 0
    assert has_line(out, r"^smfmac_f32_16x16x128_fp8_fp8 exact 64 100\.000% ")
    assert has_line(out, r"^swmmac_i32_16x16x32_iu8_w32 staged_clamp\*, clamp=0 64 100\.000% ")
    assert "inst/s" in out and "total" in out


@pytest.mark.slow
def test_demo_full_tiny(capsys):
    rc, out, _ = run(capsys, "demo", "--waves", "64")
    assert rc == 0
    assert has_line(out, r"^smfmac_f32_16x16x128_fp8_fp8 exact 64 100\.000% ")
    assert has_line(out, r"^swmmac_f32_16x16x32_f16_w32 fma_chain 64 ")
    assert has_line(out, r"^smfmac_f32_16x16x64_f16 cdna3\* 64 ")


def test_demo_skips_a_refusing_model(capsys, monkeypatch):
    """A model that refuses (e.g. one still being written) is skipped with its reason."""
    from dataclasses import dataclass

    from jwmma.models import Model

    @dataclass(frozen=True)
    class NotYet(Model):
        def check(self, ctx):
            return "not implemented yet"

    monkeypatch.setitem(jwmma.models.PRESETS, "gfx12_dot4", (NotYet(), None, "placeholder"))
    rc, out, _ = run(capsys, "demo", "--waves", "8", "--builtin", "swmmac_f32_16x16x32_f16_w32",
                     "--model", "gfx12_dot4")
    assert rc == 0
    assert has_line(out, r"^swmmac_f32_16x16x32_f16_w32 gfx12_dot4\* skipped: not implemented yet$")
