"""The CPU half of `benchmarks/crosscheck.py` (issue 20): on its data classes (normal, wide
exponents and format limits, pruning ties, NaN/Inf/-0, saturating integers; odd M/N/K, a batch
dim), every GEMM result equals the XLA matrix path's bit for bit, NaN payloads included:
the Pallas kernels in interpret mode and the register path.

The default run takes a spread subset, one builtin per family and Pallas kernel family, every
data class in each call (`SUBSET`); ``-m slow`` the whole grid. The reference is always the
other implementation (``backend='xla', path='matrix'``), computed in the same run. A defect
listed in the crosscheck's ``KNOWN`` is a strict xfail of its keys (none is listed now: the dense
WMMA GEMMs on ``backend='pallas'`` raised until the driver learnt dense A).
"""
from __future__ import annotations

import functools
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"


def _load():
    sys.path.insert(0, str(BENCH))  # crosscheck imports crosscheck_data
    try:
        spec = importlib.util.spec_from_file_location("crosscheck", BENCH / "crosscheck.py")
        mod = importlib.util.module_from_spec(spec)
        sys.modules["crosscheck"] = mod  # dataclasses look their module up
        spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


X = _load()
D = sys.modules["crosscheck_data"]

def _known(key):
    why = X.known_defect(key)
    return [pytest.mark.xfail(strict=True, raises=AssertionError, reason=why)] if why else []

#: (builtin, model, clamp, path, backend): one per family (RDNA4 SWMMAC, CDNA4 SMFMAC, CDNA3
#: SMFMAC, RDNA4 WMMA), both paths, and Pallas kernels of the gfx12, fma_chain and integer
#: families (tests/test_pallas.py runs every family on its own data; the slow grid all of them)
SUBSET = [
    ("swmmac_f16_16x16x32_f16_w32", "gfx12_dot4", False, "matrix", "pallas"),
    ("smfmac_f32_16x16x128_bf8_bf8", "fma_chain", False, "registers", "xla"),
    ("smfmac_f32_32x32x16_bf16", "fma_chain_k", False, "matrix", "pallas"),
    ("swmmac_i32_16x16x32_iu8_w32", "exact", True, "matrix", "pallas"),
    ("smfmac_i32_16x16x64_i8", "staged_clamp", False, "registers", "xla"),
    ("wmma_f32_16x16x16_bf16_w32_gfx12", "gfx12_dot4", False, "registers", "xla"),
    ("wmma_f32_16x16x16_bf16_w32_gfx12", "gfx12_dot4", False, "matrix", "pallas"),
]


@functools.lru_cache(maxsize=None)
def _result(key_text: str):
    bits, info = X.run_key(X.Key.parse(key_text))
    return bits, info


def _check(key):
    ref, rinfo = _result(str(key.anchor))
    assert rinfo.get("error") is None, f"{key.anchor}: {rinfo['error']}"
    got, info = _result(str(key))
    assert info.get("error") is None, f"{key}: {info['error']}"
    assert got.shape == ref.shape and got.dtype == ref.dtype
    for i, cls in enumerate(info["classes"]):
        bad = np.argwhere(got[i] != ref[i])
        assert bad.size == 0, (
            f"{key} class {cls}: {len(bad)} of {ref[i].size} outputs differ from {key.anchor.path}/"
            f"{key.anchor.backend}, first at {tuple(bad[0])}: {int(got[i][tuple(bad[0])]):#x} vs "
            f"{int(ref[i][tuple(bad[0])]):#x}")


def _id(case):
    b, m, clamp, path, backend = case
    return f"{b}-{m}{'+clamp' if clamp else ''}-{path}-{backend}"


@pytest.mark.parametrize("case", SUBSET, ids=lambda c: _id(c) if isinstance(c, tuple) else None)
def test_subset_same_bits_as_xla_matrix(case):
    b, m, clamp, path, backend = case
    _check(X.Key("gemm", b, m, path, backend, clamp))


def _grid_cases():
    out = []
    for key in X.grid(parts=("gemm",)):
        if key.anchor is None:
            continue
        marks = _known(key)
        out.append(pytest.param(key, marks=marks, id=str(key).replace("|", "-")))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("key", _grid_cases())
def test_grid_same_bits_as_xla_matrix(key):
    _check(key)


def test_classes_hold_what_they_promise():
    """The subset's anchors show the classes' purpose (data that could not fail proves nothing):
    Inf and subnormal f32 results in 'wide', NaN/Inf in 'specials', finite 'ties' outputs,
    saturated integers with clamp; and the tie groups hold their ties."""
    bits, info = _result(str(X.Key("gemm", "smfmac_f32_32x32x16_bf16", "fma_chain_k", "matrix", "xla")))
    cls = {c: bits[i] for i, c in enumerate(info["classes"])}
    exp, man = cls["wide"] & 0x7F800000, cls["wide"] & 0x7FFFFF
    assert ((exp == 0x7F800000) & (man == 0)).any()  # overflow to Inf
    assert ((exp == 0) & (man != 0)).any()  # subnormal results
    assert ((exp == 0x7F000000)).any()  # near the maximum
    sp = cls["specials"].view(np.float32)
    assert np.isnan(sp).any() and np.isinf(sp).any()
    assert np.isfinite(cls["ties"].view(np.float32)).all() and np.isfinite(cls["normal"].view(np.float32)).all()

    bits, info = _result(str(X.Key("gemm", "swmmac_i32_16x16x32_iu8_w32", "exact", "matrix", "xla", True)))
    sat = bits[info["classes"].index("saturate")].view(np.int32)
    assert (sat == 2**31 - 1).mean() > 0.3 and (sat == -(2**31)).mean() > 0.3

    spec = X.spec_of("smfmac_f32_32x32x16_bf16")
    a = D.gemm_operands(spec)[0][info_index("ties")]
    g = a.view(np.uint16).astype(np.int64)[..., : a.shape[-1] // 4 * 4].reshape(-1, 4)
    mag = np.sort(g & 0x7FFF, axis=1)
    tie = mag[:, 2] == mag[:, 1]  # 2nd and 3rd largest magnitudes equal
    assert tie.mean() > 0.4
    opposite = tie & (((g & 0x7FFF) == mag[:, [2]]) & (g >= 0x8000)).any(1) & (((g & 0x7FFF) == mag[:, [2]]) &
                                                                             (g < 0x8000)).any(1)
    assert opposite.any()  # equal magnitudes of opposite signs
    zeros = (mag[:, 1] == 0) & (mag[:, 2] == 0) & (g == 0x8000).any(1) & (g == 0).any(1)
    assert zeros.any()  # +0 against -0


def info_index(cls: str) -> int:
    return D.FLOAT_CLASSES.index(cls)


def test_compare_rules():
    """The comparison of two runs: NaN by NaN-ness unless the model defines payloads, and
    payload-only differences still counted."""
    ref = np.array([0x7FC00000, 0x3F800000, 0xFFC00A3D], np.uint32)
    got = np.array([0x7FC12345, 0x3F800000, 0x7FC00000], np.uint32)
    eq, extra = X.compare(got, ref, "f32", payloads=False)
    assert eq.all() and extra == 2
    eq, extra = X.compare(got, ref, "f32", payloads=True)
    assert eq.tolist() == [False, True, False] and extra == 2
    eq, _ = X.compare(np.array([0x7FC0, 0xFF81], np.uint16), np.array([0xFFC1, 0x7FC0], np.uint16), "bf16", False)
    assert eq.all()
    eq, _ = X.compare(np.array([0x7C01], np.uint16), np.array([0x7E00], np.uint16), "f16", payloads=True)
    assert not eq.any()
    eq, _ = X.compare(None, ref, "f32", payloads=False)
    assert not eq.any()


def test_save_load_and_diff(tmp_path):
    """A saved run read back compares as identical with itself; a changed output, an error
    and different inputs are reported."""
    k1 = X.Key("gemm", "swmmac_f16_16x16x32_f16_w32", "exact", "matrix", "xla")
    k2 = X.Key("gemm", "swmmac_f16_16x16x32_f16_w32", "exact", "registers", "xla")
    bits = np.arange(2 * 6, dtype=np.uint16).reshape(2, 6)
    infos = {str(k1): {"classes": ["normal", "wide"], "kind": "f16", "payloads": False, "digest": "a"},
             str(k2): {"classes": ["normal", "wide"], "kind": "f16", "payloads": False, "digest": "a"}}
    X.save(tmp_path / "ref.npz", {str(k1): bits, str(k2): bits}, infos, {"backend": "cpu"})
    r, i, env = X.load(tmp_path / "ref.npz")
    assert env == {"backend": "cpu"} and all(row.ok for row in X.compare_runs(r, i, r, i, "ref"))
    other = dict(r)
    other[str(k2)] = bits.copy()
    other[str(k2)][1, 3] ^= 1
    rows = {str(row.key): row for row in X.compare_runs(other, i, r, i, "ref")}
    assert rows[str(k2)].counts == [("normal", 6, 6), ("wide", 5, 6)] and rows[str(k1)].ok
    i2 = {str(k1): dict(i[str(k1)], digest="b"), str(k2): {"error": "ValueError: x", "classes": ["normal", "wide"]}}
    rows = {str(row.key): row for row in X.compare_runs({str(k1): bits, str(k2): None}, i2, r, i, "ref")}
    assert "INPUTS DIFFER" in rows[str(k1)].note and rows[str(k2)].error == "ValueError: x"
    assert rows[str(k2)].counts == [("normal", 0, 6), ("wide", 0, 6)]


def test_key_files_select_and_skip(tmp_path, capsys):
    """``--keys`` runs only the named keys of the grid, ``--skip-keys`` all but them; the file
    may be a progress log (words around the keys), and a word that is no key selects nothing."""
    wanted = "gemm|mfma_i32_32x32x16_i8|exact|matrix|xla"
    (tmp_path / "k.txt").write_text(f"[1/2   0.1s] {wanted} 0.5s\nnot-a-key\n")
    base = ["--list", "--only", "mfma_i32_32x32x16_i8", "--parts", "gemm"]
    X.main(base)
    every = [line for line in capsys.readouterr().out.splitlines() if "|" in line]
    X.main(base + ["--keys", str(tmp_path / "k.txt")])
    only = [line for line in capsys.readouterr().out.splitlines() if "|" in line]
    X.main(base + ["--skip-keys", str(tmp_path / "k.txt")])
    rest = [line for line in capsys.readouterr().out.splitlines() if "|" in line]
    assert wanted in every and only == [wanted]
    assert sorted(rest + only) == sorted(every)
