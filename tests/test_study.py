"""`jwmma.study`: its numbers against jwmma.gemm + numpy computed here, the exact model's
per-step rounding bound, the truncation bias NUMERICS.md predicts, remedies, resume, CLI.

Every emulation uses 16x16 outputs and batches of 2, so that the few compiled shapes are
shared between the tests (compilation dominates the run time)."""
from __future__ import annotations

import json
import pathlib
import math
import os
import shutil
import sys
from fractions import Fraction

import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import study
from jwmma.cli import main
from jwmma.cli.study import parse_ks
from jwmma.models import FusedGroups
from jwmma.models.parse import split_list

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
F16 = "smfmac_f32_16x16x64_f16"
U = 2.0**-24
TINY = dict(ks=[128, 1024], models=["exact", "cdna3"], dists=["normal", "positive_lognormal"], seeds=2,
            m=16, n=16, progress=False)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("study") / "tiny")
    return study.run(**TINY, out=out, figures=False)


# ------------------------------------------------------------------------- independent math
def ordered_ref(x):
    """float32 -> integer order (an independent formulation: uint32 sign-magnitude)."""
    u = np.asarray(x, np.float32).view(np.uint32).astype(np.int64)
    return np.where(u >= 0x80000000, 0x80000000 - u, u)


def direct_metrics(d, a24, b):
    """The metrics of one point from scratch: the float64 matmul is exact for E4M3 operands
    (products are multiples of 2**-18 below 2**18, K-term sums stay below 2**53)."""
    a64, b64 = a24.astype(np.float64), b.astype(np.float64)
    ref = a64 @ b64
    ref32 = ref.astype(np.float32)  # one rounding of an exact value
    s = np.abs(a64) @ np.abs(b64)
    err = d.astype(np.float64) - ref
    ulp = ordered_ref(d) - ordered_ref(ref32)
    return dict(max_rel=np.max(np.abs(err) / s), mean_rel=np.mean(np.abs(err) / s), bias=np.mean(err / s),
                fro_rel=np.linalg.norm(err) / np.linalg.norm(ref), ident=np.mean(ulp == 0),
                mean_ulp=ulp.mean(), mean_abs_ulp=np.abs(ulp).mean(), max_abs_ulp=np.abs(ulp).max(),
                rn_mean_rel=np.mean(np.abs(ref32.astype(np.float64) - ref) / s), ulp=ulp)


# ------------------------------------------------------------------------- tiny sweep
def test_points_match_gemm_and_numpy(tiny):
    assert len(tiny.points) == 2 * 2 * 2 * 2 and len(tiny.summary) == 8
    for model in ("exact", "cdna3"):
        for dist in ("normal", "positive_lognormal"):
            rows = tiny.select(tiny.points, model=model, dist=dist, K=1024)
            ops = [study.make_operands(dist, 1024, 16, 16, r["seed"], FP8) for r in rows]
            a = np.stack([o[0] for o in ops])
            b = np.stack([o[1] for o in ops])
            d = np.asarray(jwmma.gemm(a, b, builtin=FP8, model=model))  # one GEMM over all of K
            for i, r in enumerate(rows):
                want = direct_metrics(d[i], a[i], b[i])
                for key in ("max_rel", "mean_rel", "bias", "fro_rel", "ident", "mean_ulp", "mean_abs_ulp",
                            "max_abs_ulp", "rn_mean_rel"):
                    assert r[key] == pytest.approx(float(want[key]), rel=1e-12, abs=1e-300), (model, dist, key)
                bins = study.ulp_bins(want["ulp"])
                assert r["ulp_hist"] == {str(k): int((bins == k).sum()) for k in np.unique(bins)}
                assert r["nonfinite"] == 0 and r["steps"] == 8


def test_summary_is_mean_and_t_interval_over_seeds(tiny):
    for row in tiny.summary:
        pts = tiny.select(tiny.points, **{k: row[k] for k in study.SUMMARY_KEY})
        v = np.array([p["mean_rel"] for p in pts])
        half = 12.706 * v.std(ddof=1) / math.sqrt(2)  # t(0.975, df=1)
        assert row["seeds"] == 2
        assert row["mean_rel"] == pytest.approx(v.mean(), rel=1e-12)
        assert row["mean_rel_lo"] == pytest.approx(v.mean() - half, rel=1e-9, abs=1e-30)
        assert row["mean_rel_hi"] == pytest.approx(v.mean() + half, rel=1e-9, abs=1e-30)
        assert sum(row["ulp_hist"].values()) == 2 * 16 * 16


def test_exact_model_one_step_is_correctly_rounded(tiny):
    """K = one instruction: the exact model rounds once, so every output is the correctly
    rounded reference (0 ulp; half an ulp is at most u = 2**-24 relative to |ref| <= sum|a*b|)."""
    for r in tiny.select(tiny.points, model="exact", K=128):
        assert r["ident"] == 1.0 and r["max_abs_ulp"] == 0, r
        assert r["max_rel"] <= U
        assert r["mean_rel"] == pytest.approx(r["rn_mean_rel"], rel=1e-12)


def test_exact_model_within_one_rounding_per_step(tiny):
    """K = 8 instructions: the exact model rounds once per instruction, d_s = RN(d_{s-1} + T_s),
    so |d - ref| <= u * (1+u)^8 * sum_s S_s, S_s = sum of |a*b| over the first s steps (and so
    rel <= 8u(1+u)^8). Multi-step results are not correctly rounded in general."""
    steps, k = 8, 1024
    for dist in ("normal", "positive_lognormal"):
        rows = tiny.select(tiny.points, model="exact", dist=dist, K=k)
        for r in rows:
            assert r["max_rel"] <= steps * U * (1 + U) ** steps
        ops = [study.make_operands(dist, k, 16, 16, r["seed"], FP8) for r in rows]
        a = np.stack([o[0] for o in ops]).astype(np.float64)
        b = np.stack([o[1] for o in ops]).astype(np.float64)
        d = study.emulate(np.stack([o[0] for o in ops]), np.stack([o[1] for o in ops]), FP8, "exact")
        ref = a @ b
        prefix = sum(np.abs(a[..., : s * 128]) @ np.abs(b[:, : s * 128]) for s in range(1, steps + 1))
        assert np.all(np.abs(d - ref) <= U * (1 + U) ** steps * prefix)
        assert np.any(d != ref.astype(np.float32))  # the bound is needed: not correctly rounded


def test_normal_data_unbiased_and_models_ordered(tiny):
    """Symmetric data: no significant bias; one rounding per step (exact) is never worse than
    four per step (cdna3) on average."""
    for r in tiny.select(dist="normal"):
        assert abs(r["mean_ulp"]) < 0.5
    for k in (128, 1024):
        ex = tiny.select(model="exact", dist="normal", K=k)[0]
        cd = tiny.select(model="cdna3", dist="normal", K=k)[0]
        assert ex["mean_rel"] <= cd["mean_rel"]


def test_truncation_bias_on_positive_data():
    """NUMERICS.md 1.3: CDNA3 truncates every product to 24 fractional bits of the group's
    largest product. On positive data with a wide dynamic range (so that some products of a
    group fall below that window) the result is biased low; the same model with products
    rounded to nearest is not. (With U(0, 1) data no f16 or fp8 product ever falls below
    the window, so truncation changes nothing there.)"""
    st = study.run(ks=[64], models=["cdna3", FusedGroups(product_rounding="nearest")], formats=["f16"],
                   dists=["positive_lognormal"], seeds=2, m=16, n=16, progress=False)
    for p in st.select(st.points, model="cdna3"):
        assert p["mean_ulp"] < -0.25 and p["bias"] < 0, p
    for p in st.select(st.points, model="FusedGroups(product_rounding='nearest')"):
        assert abs(p["mean_ulp"]) < 0.1, p
    trunc = st.select(model="cdna3")[0]
    near = st.select(model="FusedGroups(product_rounding='nearest')")[0]
    assert trunc["bias"] < 0 and trunc["bias"] < 5 * near["bias"] - 1e-9


def test_remedies_are_what_the_docs_say():
    """split_k:2 = fl32(P0 + P1), promote:1:f64 = fl32(P0 + P1 in float64), P_i = the GEMM of
    the i-th K-slice from C = 0 (here each slice is one instruction)."""
    a, b = study.make_operands("lognormal", 256, 16, 16, 7, FP8)
    a2 = np.stack([a[:, :128], a[:, 128:]])
    b2 = np.stack([b[:128], b[128:]])
    p = np.asarray(jwmma.gemm(a2, b2, builtin=FP8, model="cdna3"))
    split = study.emulate(a, b, FP8, "cdna3", "split_k:2")
    assert split.view(np.uint32).tolist() == (p[0] + p[1]).astype(np.float32).view(np.uint32).tolist()
    prom = study.emulate(a, b, FP8, "cdna3", study.Remedy("promote", 1, "f64"))
    want = (p[0].astype(np.float64) + p[1].astype(np.float64)).astype(np.float32)
    assert prom.view(np.uint32).tolist() == want.view(np.uint32).tolist()
    same = study.emulate(a, b, FP8, "cdna3", "promote:1")  # f32 master: split_k with 1-step chunks
    assert same.view(np.uint32).tolist() == split.view(np.uint32).tolist()


# ------------------------------------------------------------------------- resume, CLI
def test_resume_skips_finished_points_and_recovers_a_torn_file(tiny, tmp_path):
    out = str(tmp_path / "resumed")
    shutil.copytree(tiny.out, out)
    again = study.run(**TINY, out=out, figures=False)
    cfg = json.loads(pathlib.Path(os.path.join(out, "config.json")).read_text())
    assert cfg["computed_points"] == 0
    assert again.summary == tiny.summary
    # interrupt: the last point (both seeds) lost, and a half-written line
    path = os.path.join(out, "points.jsonl")
    lines = pathlib.Path(path).read_text().splitlines()
    pathlib.Path(path).write_text("\n".join(lines[:-2]) + "\n" + lines[-1][: len(lines[-1]) // 2])
    third = study.run(**TINY, out=out, figures=False)
    assert json.loads(pathlib.Path(os.path.join(out, "config.json")).read_text())["computed_points"] == 2
    def strip(rows):  # the timing is the only field that may change
        return [{k: v for k, v in r.items() if k != "seconds"} for r in rows]

    assert strip(third.points) == strip(tiny.points)
    assert len(study.read_points(path)) == len(tiny.points)
    csv_rows = pathlib.Path(os.path.join(out, "points.csv")).read_text().splitlines()
    assert len(csv_rows) == 1 + len(tiny.points)
    # a fresh run starts over
    study.run(**{**TINY, "ks": [128], "models": ["exact"], "dists": ["normal"]}, out=out, resume=False,
              figures=False)
    assert len(study.read_points(path)) == 2


def test_cli_tiny_sweep(tmp_path, capsys):
    out = str(tmp_path / "cli")
    rc = main(["study", "--k", "128", "--model", "exact,cdna3", "--seeds", "2", "--size", "16x16",
               "--out", out, "--no-plots", "--no-progress"])
    text, _ = capsys.readouterr()
    assert rc == 0
    cells = [line.split() for line in text.splitlines()]
    exact = [c for c in cells if c[:6] == ["normal", "fp8", "exact", "none", "128", "2"]]
    assert len(exact) == 1 and exact[0][9] == "100%" and exact[0][10] == "0"  # one step: correctly rounded
    for f in ("points.jsonl", "points.csv", "summary.csv", "summary.json", "config.json"):
        assert os.path.exists(os.path.join(out, f)), f
    rows = json.loads(pathlib.Path(os.path.join(out, "summary.json")).read_text())
    assert {r["model"] for r in rows} == {"exact", "cdna3"} and all(r["seeds"] == 2 for r in rows)
    assert {r["builtin"] for r in rows} == {FP8}
    rc = main(["study", "--k", "128", "--model", "exact", "--seeds", "2", "--size", "16", "--out", out,
               "--json", "-q"])
    got = json.loads(capsys.readouterr()[0])
    assert rc == 0 and len(got) == 1 and got[0]["model"] == "exact"
    assert json.loads(pathlib.Path(os.path.join(out, "config.json")).read_text())["computed_points"] == 0  # resumed


@pytest.mark.parametrize("argv, msg", [
    (["--dist", "nope"], "unknown distribution"),
    (["--model", "nope"], "unknown model"),
    (["--format", "i8"], "unknown format"),
    (["--builtin", "smfmac_i32_16x16x128_i8"], "is an integer builtin"),
    (["--builtin", "mfma_f64_16x16x4f64"], "measures errors against float64 products"),
    (["--remedy", "split_k:3", "--k", "128"], "multiple of 12"),
    (["--k", "130"], "multiple of 4"),
    (["--model", "FusedGroups(group=-1)"], "group must be"),
])
def test_cli_errors(tmp_path, capsys, argv, msg):
    rc = main(["study", "--out", str(tmp_path), "--no-progress", *argv])
    assert rc == 2
    assert msg in capsys.readouterr()[1]


# ------------------------------------------------------------------------- helpers
def test_parsers_and_labels():
    assert study.parse_remedy("none") == study.Remedy()
    assert study.parse_remedy("split-k:4").label == "split_k:4"
    assert study.parse_remedy("promote:2:f64") == study.Remedy("promote", 2, "f64")
    assert study.parse_remedy("promote:2").label == "promote:2"
    with pytest.raises(ValueError):
        study.parse_remedy("promote")
    m = study.parse_model("FusedGroups(group=32, product_rounding='nearest')")
    assert m == FusedGroups(group=32, product_rounding="nearest")
    assert study.model_label(m) == "FusedGroups(group=32, product_rounding='nearest')"
    assert study.parse_model(study.model_label(m)) == m
    assert study.model_label("cdna3") == "cdna3"
    with pytest.raises(ValueError):
        study.parse_model("__import__('os')")
    assert parse_ks("128:1024") == [128, 256, 512, 1024]
    assert parse_ks("64,100:256") == [64, 128, 256]
    assert split_list("a, B(x=1, y=2),c") == ["a", "B(x=1, y=2)", "c"]
    assert study.resolve_format("e4m3")[1].name == FP8
    assert study.resolve_format("swmmac_f32_16x16x32_bf8_fp8_w32")[0] == "bf8_fp8"


def test_make_operands_pipeline():
    a, b = study.make_operands("normal", 256, 8, 12, 3, FP8)
    assert a.dtype == ml_dtypes.float8_e4m3fn and b.dtype == ml_dtypes.float8_e4m3fn
    assert a.shape == (8, 256) and b.shape == (256, 12)
    nz = (a.astype(np.float32) != 0).reshape(8, 64, 4).sum(-1)
    assert nz.max() <= 2  # 2:4
    assert np.all(np.abs(a.astype(np.float32)).max(1) == 448)  # amax per row -> format max
    assert np.all(np.abs(b.astype(np.float32)).max(0) == 448)  # amax per column
    a2, b2 = study.make_operands("normal", 256, 8, 12, 3, FP8)
    assert a.tobytes() == a2.tobytes() and b.tobytes() == b2.tobytes()
    a16, _ = study.make_operands("normal", 256, 8, 12, 3, F16)  # same raw data, scaling none
    dense = study.sample("normal", (8, 256), study.data_rng(3, "normal", 256, 8, 12, "a"))
    raw = study.prune_2_4_f64(dense)
    assert np.array_equal(a16, raw.astype(np.float16))
    kept = np.asarray(jwmma.prune_2_4(dense.astype(np.float32))) != 0  # the library's pruning rule
    assert np.array_equal(kept, raw != 0)
    a_t, _ = study.make_operands("channels", 512, 4, 4, 0, FP8, scaling="tensor")
    assert np.abs(a_t.astype(np.float32)).max() == 448


def test_quantise_rounds_once_from_float64():
    """ml_dtypes casts float64 through float32 (two roundings); quantise rounds once."""
    x = np.array([1.0625 + 2.0**-40, 1.0625, -(1.0625 + 2.0**-40), 1 + 2.0**-8 + 2.0**-40, 3.0 * 2.0**-10])
    q8 = study.quantise(x[:3], ml_dtypes.float8_e4m3fn, "none", 0).astype(np.float64)
    assert q8.tolist() == [1.125, 1.0, -1.125]  # above the tie: up; the tie itself: to even
    assert float(study.quantise(x[3:4], ml_dtypes.bfloat16, "none", 0)[0]) == 1 + 2.0**-7
    assert float(study.quantise(x[4:], ml_dtypes.float8_e4m3fn, "none", 0)[0]) == 2.0**-8  # subnormal tie: even
    with pytest.raises(ValueError, match="overflows"):
        study.make_operands("normal", 64, 4, 4, 0, "smfmac_f32_16x16x64_bf16", scaling="row")


def _exact_rounded_f32(vals) -> float:
    """Correctly rounded float32 of a sum of floats, by exact rational arithmetic."""
    x = sum(Fraction(float(v)) for v in vals)
    r = np.float32(float(x))  # within one ulp; fix it up exactly
    best = None
    for c in (np.nextafter(r, np.float32(-np.inf)), r, np.nextafter(r, np.float32(np.inf))):
        dist = abs(Fraction(float(c)) - x)
        even = (int(np.float32(c).view(np.uint32)) & 1) == 0
        if best is None or dist < best[0] or (dist == best[0] and even):
            best = (dist, c)
    return float(best[1])


@pytest.mark.parametrize("fmt, dt", [("f16", np.float16), ("bf8", ml_dtypes.float8_e5m2),
                                     ("bf16", ml_dtypes.bfloat16)])
def test_reference_is_exact_and_correctly_rounded(fmt, dt):
    """Wide-range data (a plain float64 matmul is not exact): the banded reference equals
    exact rational arithmetic."""
    rng = np.random.default_rng(5)
    k = 96
    a = (rng.choice([-1, 1], (3, k)) * np.exp2(rng.integers(-14, 15, (3, k))) * rng.uniform(1, 2, (3, k))).astype(dt)
    b = (rng.choice([-1, 1], (k, 4)) * np.exp2(rng.integers(-14, 15, (k, 4))) * rng.uniform(1, 2, (k, 4))).astype(dt)
    ref = study.reference(a, b)
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    for i in range(3):
        for j in range(4):
            terms = a64[i] * b64[:, j]
            exact = sum(Fraction(float(t)) for t in terms)
            assert ref.exact[i, j] == float(exact)
            assert ref.f32[i, j] == _exact_rounded_f32(terms)
    assert np.allclose(ref.scale, np.abs(a64) @ np.abs(b64))


def test_reference_tie_breaking_uses_the_remainder():
    """Exact value = a float32 midpoint + a tail below float64 precision: the float64 sum
    rounds to the midpoint and a plain cast would round to even (down); the reference rounds
    up, as the exact value demands. f16 products: 2**15*2**15 + 2**3*2**3 + 2**-24*2**-24."""
    v = np.array([2.0**15, 2.0**3, 2.0**-24, 0.0])
    a = v[None, :].astype(np.float16)
    b = v[:, None].astype(np.float16)
    ref = study.reference(a, b)
    exact = Fraction(2**30) + Fraction(2**6) + Fraction(1, 2**48)
    assert float(ref.exact[0, 0]) == 2.0**30 + 2.0**6  # the midpoint (float64 rounding)
    assert np.float32(float(exact)) == 2.0**30  # what a plain cast gives
    assert float(ref.f32[0, 0]) == 2.0**30 + 2.0**7  # correct rounding of the exact value


def test_ulp_measure():
    x = np.array([1.0, -1.0, 0.0, -0.0, 2.0**-149], np.float32)
    y = np.array([np.nextafter(np.float32(1), np.float32(2)), -1.0, -0.0, 2.0**-149, -(2.0**-149)], np.float32)
    assert study.ulp_diff(y, x).tolist() == [1, 0, 0, 1, -2]
    assert study.ulp_bins(np.array([0, 1, -1, 2, 3, -4, 7, 8])).tolist() == [0, 1, -1, 2, 2, -3, 3, 4]


def test_mean_ci():
    m, lo, hi = study.mean_ci([1.0, 2.0, 3.0])
    assert m == 2.0 and hi - m == pytest.approx(4.303 * 1.0 / math.sqrt(3))
    assert study.mean_ci([5.0]) == (5.0, 5.0, 5.0)
    assert study.t975(200) == pytest.approx(1.972, abs=2e-3)


# ------------------------------------------------------------------------- plots
def test_figures_and_layout_plot(tiny, tmp_path):
    pytest.importorskip("matplotlib")
    paths = tiny.figures(str(tmp_path))
    assert [os.path.basename(p) for p in paths] == ["error_vs_k.png", "max_error_vs_k.png", "bias_vs_k.png",
                                                     "ident_vs_k.png", "ulp_hist.png"]
    assert all(os.path.getsize(p) > 5000 for p in paths)
    import matplotlib.pyplot as plt

    fig = jwmma.plot_layout("swmmac_f32_16x16x32_f16_w32", "c")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert len(texts) == 256
    # C[i][j]: lane = (i // 8) * 16 + j, VGPR = i % 8 (the RDNA4 reference page)
    assert texts[9 * 16 + 3] == "L19\nv1"
    fig2 = jwmma.plot_layout("smfmac_f32_16x16x128_fp8_fp8", "b")  # big: colours only
    assert not fig2.axes[0].texts
    with pytest.raises(ValueError):
        jwmma.plot_layout("smfmac_f32_16x16x128_fp8_fp8", "x")
    plt.close("all")


def test_missing_matplotlib_is_a_clear_error(monkeypatch):
    from jwmma.study import plots as plotting

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'jwmma\[plot\]'"):
        plotting.require_matplotlib()
