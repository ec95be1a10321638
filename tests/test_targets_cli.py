"""``--target`` on the command line (issue #13): the 14 CDNA3 SMFMAC run on gfx942 (FNUZ fp8/bf8,
the default) or gfx950 (OCP, BUILTINS_MORE.md 1.1); every other row runs on its one chip.

The OCP bits are checked against the plain-Python oracle of BUILTINS_MORE.md 1.1 / NUMERICS.md 0
(`oracles.sib_formats`: E4M3FN bias 7 vs E4M3FNUZ bias 8, ...), never against jwmma itself; the
allowed targets in the expected messages come from the table row (`BuiltinSpec.targets`).
"""
from __future__ import annotations

import json

import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import kernel
from jwmma.cli import gemm as gemm_cli
from jwmma.cli import main
from jwmma.study import sweep
from oracles import sib_formats as SF

CDNA3_FP8 = "smfmac_f32_16x16x64_fp8_fp8"  # gfx942 (FNUZ) and gfx950 (OCP)
RDNA4 = "swmmac_f32_16x16x32_f16_w32"      # one target: gfx12
CDNA4_FP8 = "smfmac_f32_16x16x128_fp8_fp8"  # one target: gfx950


def run(capsys, *argv):
    rc = main(list(argv))
    out, err = capsys.readouterr()
    return rc, out, err


def _refusal_text(name, given):
    """What the message must hold: --target, every target of the row, the value given."""
    return ["--target", *jwmma.BUILTINS[name].targets, repr(given)]


def oracle_d(a_codes, b_codes, fa, fb):
    """D = A @ B (C = 0) under `exact`, one K step, as f32 bits: the oracle's exact dot of
    every (i, j) over the dense K (pruned zeros included: they add exact zeros)."""
    m, k = a_codes.shape
    n = b_codes.shape[1]
    out = np.zeros((m, n), np.uint32)
    for i in range(m):
        for j in range(n):
            out[i, j] = SF.exact_dot(fa, fb, SF.F32, zip(a_codes[i].tolist(), b_codes[:, j].tolist()), 0)
    return out


def _recording(monkeypatch, module):
    """Wrap ``module.gemm`` so that every call's operands, keywords and D are kept."""
    calls = []
    real = module.gemm

    def rec(a, b, c=None, **kw):
        d = real(a, b, c, **kw)
        calls.append((np.asarray(a), np.asarray(b), kw, np.asarray(d)))
        return d

    monkeypatch.setattr(module, "gemm", rec)
    return calls


# ------------------------------------------------------------------- gemm: the OCP bits
def test_gemm_target_gfx950_decodes_ocp(capsys, monkeypatch):
    calls = _recording(monkeypatch, gemm_cli)
    rc, out, err = run(capsys, "gemm", "--builtin", CDNA3_FP8, "-m", "16", "-n", "16", "-k", "64",
                       "--model", "exact", "--target", "gfx950", "--no-progress", "--json")
    assert rc == 0, err
    row = json.loads(out)[0]
    assert row["target"] == "gfx950" and row["builtin"] == CDNA3_FP8
    a, b, kw, d = calls[0]
    assert kw["target"] == "gfx950"
    assert a.dtype == ml_dtypes.float8_e4m3fn and b.dtype == ml_dtypes.float8_e4m3fn  # OCP operands
    a_codes, b_codes = a.view(np.uint8).astype(int), b.view(np.uint8).astype(int)
    ocp = oracle_d(a_codes, b_codes, SF.E4M3FN, SF.E4M3FN)
    assert np.array_equal(d.view(np.uint32), ocp)
    # the same bytes read as FNUZ (bias 8: every product a quarter) would give other bits
    fnuz = oracle_d(a_codes, b_codes, SF.E4M3FNUZ, SF.E4M3FNUZ)
    assert (ocp != fnuz).mean() > 0.9
    # the Python API call with target="gfx950" on the same operands: the same bits
    api = np.asarray(jwmma.gemm(a, b, builtin=CDNA3_FP8, model="exact", target="gfx950"))
    assert np.array_equal(api.view(np.uint32), ocp)
    # exact, one K step: the CLI's own measure agrees (every output correctly rounded)
    assert row["ident"] == 1.0


def test_gemm_default_target_is_fnuz(capsys, monkeypatch):
    """Without --target: gfx942, FNUZ operands (only the dtypes: the bits are the API's own
    tests' subject, tests/test_siblings.py)."""
    calls = []
    monkeypatch.setattr(gemm_cli, "gemm", lambda a, b, c=None, **kw: calls.append((a, b, kw)) or
                        jnp.zeros((16, 16), jnp.float32))
    rc, out, err = run(capsys, "gemm", "--builtin", CDNA3_FP8, "-m", "16", "-n", "16", "-k", "64",
                       "--model", "exact", "--no-progress", "--json")
    assert rc == 0, err
    a, b, kw = calls[0]
    assert kw["target"] == "gfx942" and np.asarray(a).dtype == ml_dtypes.float8_e4m3fnuz
    assert json.loads(out)[0]["target"] == "gfx942"


# ------------------------------------------------------------------- refusals
@pytest.mark.parametrize("argv, name, given", [
    (["gemm", "--builtin", CDNA3_FP8, "--target", "gfx90a"], CDNA3_FP8, "gfx90a"),
    (["gemm", "--builtin", RDNA4, "--target", "gfx950"], RDNA4, "gfx950"),
    (["gemm", "--format", "fp8", "--target", "gfx942"], CDNA4_FP8, "gfx942"),  # --format's builtin
    (["layout", CDNA3_FP8, "--target", "gfx12"], CDNA3_FP8, "gfx12"),
    (["layout", RDNA4, "--target", "gfx942"], RDNA4, "gfx942"),
    (["study", "--builtin", CDNA3_FP8, "--target", "GFX950", "-o", "unused"], CDNA3_FP8, "GFX950"),
    (["study", "--builtin", CDNA3_FP8, "--format", "fp8", "--target", "gfx942", "-o", "unused"],
     CDNA4_FP8, "gfx942"),  # every builtin of the sweep must run on it
    (["demo", "--builtin", RDNA4, "--target", "gfx942"], RDNA4, "gfx942"),
])
def test_bad_target_is_refused_with_the_rows_targets(capsys, tmp_path, monkeypatch, argv, name, given):
    monkeypatch.chdir(tmp_path)  # a study that ran would write here
    rc, out, err = run(capsys, *argv)
    assert rc == 2 and out == ""
    assert err.startswith("jwmma: error: ")
    for part in _refusal_text(name, given):
        assert part in err, (part, err)
    assert name in err
    assert not (tmp_path / "unused").exists()


@pytest.mark.parametrize("command", [["list"], ["demo", "--no-gemm"]])
def test_list_and_demo_refuse_an_unknown_chip(capsys, command):
    rc, _, err = run(capsys, *command, "--target", "gfx1030")  # RDNA2: no matrix core instruction of the table
    assert rc == 2 and "--target" in err and "'gfx1030'" in err
    for chip in {t for s in jwmma.BUILTINS.values() for t in s.targets}:
        assert chip in err


def test_a_single_target_row_takes_its_own(capsys):
    """A row with one target accepts exactly that one (and the same as omitting it)."""
    spec = jwmma.BUILTINS[RDNA4]
    assert spec.targets == (spec.target,)
    rc, with_t, err = run(capsys, "layout", RDNA4, "--lane", "0-1", "--target", spec.target)
    assert rc == 0, err
    rc, without, _ = run(capsys, "layout", RDNA4, "--lane", "0-1")
    assert rc == 0 and with_t == without


# ------------------------------------------------------------------- layout and list
def test_layout_shows_the_targets_element_types(capsys):
    rc, fnuz, _ = run(capsys, "layout", CDNA3_FP8, "--lane", "0")
    assert rc == 0
    rc, ocp, _ = run(capsys, "layout", CDNA3_FP8, "--lane", "0", "--target", "gfx950")
    assert rc == 0
    assert f"{CDNA3_FP8}: gfx942," in fnuz and "fp8_fnuz elements per lane" in fnuz
    assert f"{CDNA3_FP8}: gfx950," in ocp and "8 fp8 elements per lane" in ocp
    # the positions themselves do not depend on the target (BUILTINS_MORE.md 1.1: assumed equal)
    rc, j942, _ = run(capsys, "layout", CDNA3_FP8, "--json")
    rc, j950, _ = run(capsys, "layout", CDNA3_FP8, "--json", "--target", "gfx950")
    assert json.loads(j942) == json.loads(j950)


def test_list_target_gives_the_rows_of_that_chip(capsys):
    rc, out, err = run(capsys, "list", "--target", "gfx950", "--json")
    assert rc == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    want = {n for n, s in jwmma.BUILTINS.items() if "gfx950" in s.targets}
    # + the dense MFMA: 16 gfx942 rows (not xf32), 8 gfx950, 12 multi-block and 2 f64
    assert set(rows) == want and len(want) == 28 + 24 + 12 + 2
    assert all(r["target"] == "gfx950" for r in rows.values())
    assert rows[CDNA3_FP8]["operands"]["a"]["type"] == "fp8"          # OCP there
    assert rows["smfmac_f32_32x32x32_bf8_fp8"]["operands"]["a"]["type"] == "bf8"
    rc, out, _ = run(capsys, "list", "--target", "gfx942", "--json")
    rows = {r["name"]: r for r in json.loads(out)}
    assert len(rows) == 14 + 18 + 12 + 2 and rows[CDNA3_FP8]["operands"]["a"]["type"] == "fp8_fnuz"  # SMFMAC, dense, multi-block, f64
    rc, out, _ = run(capsys, "list", "--json")
    assert {r["name"]: r for r in json.loads(out)}[CDNA3_FP8]["target"] == "gfx942"


# ------------------------------------------------------------------- study
def test_study_target_gfx950_runs_ocp(capsys, tmp_path, monkeypatch):
    """The sweep draws OCP operands, asks gemm for gfx950, and measures against an OCP
    reference: gemm is replaced by the oracle's OCP product (gemm's own decoding under
    target= is the subject of the gemm and kernel tests here), so ident = 1 only if the
    study's exact reference decodes OCP too."""
    calls = []

    def oracle_gemm(a, b, c=None, **kw):
        a, b, c = np.asarray(a), np.asarray(b), np.asarray(c)
        assert not c.any()  # one K step from C = 0
        calls.append((a, b, kw))
        d = np.stack([oracle_d(x.view(np.uint8).astype(int), y.view(np.uint8).astype(int), SF.E4M3FN, SF.E4M3FN)
                      for x, y in zip(a, b)])
        return d.view(np.float32)

    monkeypatch.setattr(sweep, "gemm", oracle_gemm)
    rc, out, err = run(capsys, "study", "--builtin", CDNA3_FP8, "--target", "gfx950", "--k", "64",
                       "--size", "16", "--seeds", "1", "--model", "exact", "--no-plots", "--no-progress",
                       "--json", "-o", str(tmp_path))
    assert rc == 0, err
    (row,) = json.loads(out.splitlines()[-1])
    assert row["builtin"] == CDNA3_FP8 and row["format"] == "fp8"  # OCP label (FNUZ: fp8_fnuz)
    assert row["ident"] == 1.0
    ((a, b, kw),) = calls
    assert kw["target"] == "gfx950" and kw["builtin"] == CDNA3_FP8
    assert a.dtype == ml_dtypes.float8_e4m3fn and b.dtype == ml_dtypes.float8_e4m3fn
    cfg = json.loads((tmp_path / "config.json").read_text())
    assert cfg["builtins"] == [CDNA3_FP8] and cfg["targets"] == ["gfx950"]


def test_study_resolves_fnuz_builtins():
    """The gfx942 fp8 rows are float builtins of the study (they were refused before)."""
    label, spec = jwmma.study.resolve_format(CDNA3_FP8)
    assert (label, spec.target, spec.a_type) == ("fp8_fnuz", "gfx942", "fp8_fnuz")
    label, spec = jwmma.study.resolve_format("smfmac_f32_16x16x64_bf8_fp8", "gfx950")
    assert (label, spec.target) == ("bf8_fp8", "gfx950")
    a, b = jwmma.study.make_operands("normal", 64, 16, 16, 0, spec)
    assert a.dtype == ml_dtypes.float8_e5m2 and b.dtype == ml_dtypes.float8_e4m3fn
    a2, _ = jwmma.study.make_operands("normal", 64, 16, 16, 0, "smfmac_f32_16x16x64_bf8_fp8", target="gfx950")
    assert np.array_equal(a2.view(np.uint8), a.view(np.uint8))
    a3, b3 = jwmma.study.make_operands("normal", 64, 16, 16, 0, "smfmac_f32_16x16x64_bf8_fp8")  # gfx942
    assert a3.dtype == ml_dtypes.float8_e5m2fnuz and b3.dtype == ml_dtypes.float8_e4m3fnuz
    assert float(np.abs(b3.astype(np.float64)).max()) == 240.0  # row scaling to the FNUZ E4M3 max
    with pytest.raises(ValueError, match=r"target for smfmac_f32_16x16x128_fp8_fp8 must be one of \['gfx950'\]"):
        jwmma.study.resolve_format("fp8", "gfx942")


# ------------------------------------------------------------------- kernel
class Cdna3Fp8Policy:
    """smfmac_f32_16x16x64_fp8_fp8 per lane, from BUILTINS_MORE.md 1.2: g = lane // 16,
    r = lane % 16; A: row r, compressed columns 8g..8g+7 (2 words); B: column r, k = 16g + f
    (4 words); index: the 8 positions in bits 2e (metadata bytes 2g, 2g+1 of the row);
    C/D: element t is row 4g + t, column r."""

    builtin = CDNA3_FP8

    @staticmethod
    def load_a(sA, warp_m, lane, tk_comp):
        g, r = lane // 16, lane % 16
        off = (warp_m * 16 + r) * tk_comp + 8 * g + 4 * jnp.arange(2)
        return kernel.pack_bytes(sA[off], sA[off + 1], sA[off + 2], sA[off + 3])

    @staticmethod
    def load_b(sB, warp_n, lane, cta_n):
        g, r = lane // 16, lane % 16
        k = 16 * g + 4 * jnp.arange(4)
        col = warp_n * 16 + r
        return kernel.pack_bytes(sB[k * cta_n + col], sB[(k + 1) * cta_n + col],
                                 sB[(k + 2) * cta_n + col], sB[(k + 3) * cta_n + col])

    @staticmethod
    def index(sM, warp_m, lane, tm):
        g, r = lane // 16, lane % 16
        row = (warp_m * 16 + r) * tm
        return kernel.pack_bytes(sM[row + 2 * g], sM[row + 2 * g + 1], 0, 0)

    @staticmethod
    def store_c(d, sub_m, sub_n, N, lane):
        g, r = lane // 16, lane % 16
        return (sub_m + 4 * g + jnp.arange(4)) * N + sub_n + r, d


def _ocp_problem(rng, m=16, n=16, k=64):
    a = rng.standard_normal((m, k)).astype(ml_dtypes.float8_e4m3fn)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.float8_e4m3fn)
    return np.asarray(jwmma.prune_2_4(a)), b


def test_kernel_target_gfx950(rng):
    a, b = _ocp_problem(rng)
    d = np.asarray(kernel.run(Cdna3Fp8Policy, a, b, model="exact", target="gfx950"))
    a_codes, b_codes = a.view(np.uint8).astype(int), b.view(np.uint8).astype(int)
    assert np.array_equal(d.view(np.uint32), oracle_d(a_codes, b_codes, SF.E4M3FN, SF.E4M3FN))

    class Declared(Cdna3Fp8Policy):  # the policy may name its chip itself
        target = "gfx950"

    assert np.array_equal(np.asarray(kernel.run(Declared, a, b, model="exact")).view(np.uint32), d.view(np.uint32))


@pytest.mark.slow
def test_kernel_check_passes_target_to_its_reference_gemm(rng):
    """kernel.check compares with jwmma.gemm(target=...) (several blocks, waves and K steps)."""
    a, b = _ocp_problem(rng, m=40, n=32, k=192)
    c = rng.standard_normal((40, 32)).astype(np.float32)
    d = kernel.check(Cdna3Fp8Policy, a, b, c, waves=(2, 1), target="gfx950")
    ref = jwmma.gemm(a, b, c, builtin=CDNA3_FP8, target="gfx950")
    assert np.array_equal(np.asarray(d).view(np.uint32), np.asarray(ref).view(np.uint32))


def test_kernel_target_refusals(rng):
    a, b = _ocp_problem(rng)
    with pytest.raises(TypeError, match="float8_e4m3fnuz"):  # default gfx942: FNUZ operands
        kernel.run(Cdna3Fp8Policy, a, b)
    with pytest.raises(ValueError, match=r"target for smfmac_f32_16x16x64_fp8_fp8 must be one of "
                                         r"\['gfx942', 'gfx950'\], got 'gfx90a'"):
        kernel.run(Cdna3Fp8Policy, a, b, target="gfx90a")
    with pytest.raises(TypeError, match="target must be a chip name"):
        kernel.check(Cdna3Fp8Policy, a, b, target=950)

    class Declared(Cdna3Fp8Policy):
        target = "gfx942"

    with pytest.raises(ValueError, match="contradicts"):
        kernel.run(Declared, a, b, target="gfx950")


# ------------------------------------------------------------------- pack / unpack
def test_pack_and_unpack_take_target(rng):
    """Registers hold raw bytes: OCP values packed for gfx950 give the registers of the same
    bytes packed as FNUZ for gfx942; unpack returns the target's dtype."""
    name = CDNA3_FP8
    x = rng.integers(0, 256, (3, 16, 32)).astype(np.uint8)
    ocp, fnuz = x.view(ml_dtypes.float8_e4m3fn), x.view(ml_dtypes.float8_e4m3fnuz)
    regs = jwmma.pack_a(name, ocp, target="gfx950")
    assert np.array_equal(np.asarray(regs), np.asarray(jwmma.pack_a(name, fnuz)))
    back = np.asarray(jwmma.unpack_a(name, regs, target="gfx950"))
    assert back.dtype == ml_dtypes.float8_e4m3fn and np.array_equal(back.view(np.uint8), x)
    y = rng.integers(0, 256, (64, 16)).astype(np.uint8)
    regs_b = jwmma.pack_b(name, y.view(ml_dtypes.float8_e4m3fn), target="gfx950")
    assert np.array_equal(np.asarray(jwmma.unpack_b(name, regs_b, target="gfx950")).view(np.uint8), y)
    with pytest.raises(ValueError, match=r"must be one of \['gfx942', 'gfx950'\], got 'gfx12'"):
        jwmma.pack_a(name, ocp, target="gfx12")
