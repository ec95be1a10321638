"""`jwmma gemm` (jwmma/cli/gemm.py): tiny problems through the CLI and `gemm_cli.run`.

The numbers the CLI reports are checked against `jwmma.gemm` on the same operands and an
independent exact reference (Python integers, from test_gemm's helpers): for the `exact`
model on a single K step the result is the correctly rounded exact sum, so `ident` is 1.0.
Problem shapes are shared between tests so that each model compiles once.
"""
from __future__ import annotations

import json

import numpy as np
import pytest

import jwmma
from jwmma import study
from jwmma.cli import gemm as gemm_cli
from jwmma.cli import main
from oracles.scaled import round_scaled, to_scaled_int

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
IU8 = "swmmac_i32_16x16x32_iu8_w32"
M, N = 19, 11
K_FP8 = 128  # one instruction step of FP8


def run_cli(capsys, *argv):
    rc = main(["gemm", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


def exact_reference(a, b):
    """(exact sum rounded to float64, exact sum correctly rounded to f32, sum |a b|)."""
    a64, b64 = np.asarray(a).astype(np.float64), np.asarray(b).astype(np.float64)
    m, n = a64.shape[0], b64.shape[1]
    ex, f32 = np.zeros((m, n)), np.zeros((m, n), np.float32)
    for i in range(m):
        ks = np.nonzero(a64[i])[0]
        prods = a64[i, ks][:, None] * b64[ks]  # exact in float64
        for j in range(n):
            t = sum(to_scaled_int(float(p)) for p in prods[:, j])
            ex[i, j] = float(t) * 2.0**-400  # float(int) rounds once; the scaling is exact
            f32[i, j] = round_scaled(t, "f32")
    scale = np.abs(a64) @ np.abs(b64)
    return ex, f32, scale


def same_f32(x, y):
    """Bit-identical, with +0 == -0 (as the CLI's ulp distance counts them)."""
    x, y = np.asarray(x, np.float32), np.asarray(y, np.float32)
    return (x.view(np.uint32) == y.view(np.uint32)) | ((x == 0) & (y == 0))


# ------------------------------------------------------------------- float builtin
def test_cli_table_several_models(capsys):
    rc, out, err = run_cli(capsys, "--builtin", FP8, "-m", str(M), "-n", str(N), "-k", str(K_FP8),
                           "--model", "exact,cdna3", "--no-progress")
    assert rc == 0, err
    lines = out.splitlines()
    assert lines[0].startswith(f"{FP8}: M={M} N={N} K={K_FP8} batch=() dist=normal seed=0 path=matrix")
    assert "identical" in lines[1] and "ulp distance" in lines[1]
    rows = {ln.split()[0]: ln.split() for ln in lines[2:]}
    assert set(rows) == {"exact", "cdna3"}
    assert rows["exact"][6] == "1.0000"  # ident column: exact on one K step is the RN(f32) sum
    assert rows["exact"][7] == "0:100%"  # every output at ulp distance 0


def test_cli_json_matches_gemm_and_own_reference(capsys):
    seed = 0
    rc, out, err = run_cli(capsys, "--builtin", FP8, "-m", str(M), "-n", str(N), "-k", str(K_FP8),
                           "--model", "exact", "--model", "cdna3", "--seed", str(seed), "--json",
                           "--no-progress")
    assert rc == 0, err
    rows = json.loads(out)
    assert [r["model"] for r in rows] == ["exact", "cdna3"]
    for r in rows:
        assert (r["builtin"], r["m"], r["n"], r["k"], r["batch"], r["dist"], r["seed"], r["path"]) == (
            FP8, M, N, K_FP8, [], "normal", seed, "matrix")
        assert r["seconds"] > 0 and r["macs_per_s"] > 0
    # the same operands, through jwmma.gemm and an exact reference written here
    a, b = study.make_operands("normal", K_FP8, M, N, seed, builtin=FP8)
    ex, f32, scale = exact_reference(a, b)
    for r in rows:
        d = np.asarray(jwmma.gemm(a, b, builtin=FP8, model=r["model"]), np.float32)
        ident = float(np.mean(same_f32(d, f32)))
        assert r["ident"] == ident, r["model"]
        rel = np.abs(d.astype(np.float64) - ex) / np.where(scale > 0, scale, 1.0)
        assert r["max_rel"] == pytest.approx(float(rel.max()), rel=1e-9, abs=1e-30)
        assert r["mean_rel"] == pytest.approx(float(rel.mean()), rel=1e-9, abs=1e-30)
        assert r["nonfinite"] == 0
        if r["model"] == "exact":
            assert ident == 1.0 and r["max_abs_ulp"] == 0 and r["ulp_hist"] == {"0": M * N}
            assert same_f32(d, f32).all()


# ----------------------------------------------------------------- integer builtin
def test_cli_integer_builtin(capsys):
    rc, out, err = run_cli(capsys, "--builtin", IU8, "-m", str(M), "-n", str(N), "-k", "64",
                           "--batch", "2", "--clamp", "--json", "--no-progress")
    assert rc == 0, err
    rows = json.loads(out)
    # default models: the builtin's default and exact
    assert [r["model"] for r in rows] == ["staged_clamp", "exact"]
    for r in rows:
        assert r["identical"] == 1.0 and r["max_abs_err"] == 0 and r["batch"] == [2]
    # own reference on the CLI's operands: nothing saturates, so every model is the int64 dot
    spec = jwmma.BUILTINS[IU8]
    a, b = gemm_cli.int_operands(spec, M, N, 64, 0, (2,))
    want = np.matmul(a.astype(np.int64), b.astype(np.int64))
    assert np.abs(want).max() < 2**31
    d = np.asarray(jwmma.gemm(a, b, builtin=IU8, clamp=True))
    assert np.array_equal(d, want)
    # table form
    rc, out, err = run_cli(capsys, "--builtin", IU8, "-m", str(M), "-n", str(N), "-k", "64",
                           "--batch", "2", "--clamp", "--no-progress")
    assert rc == 0, err
    lines = out.splitlines()
    assert "identical" in lines[1] and "max|err|" in lines[1]
    assert [ln.split()[0] for ln in lines[2:]] == ["staged_clamp", "exact"]
    assert all(ln.split()[3] == "1.0000" and ln.split()[4] == "0" for ln in lines[2:])


def test_run_chunked_k_equals_one_call():
    """`run` issues the K steps in chunks, each chunk's D the next chunk's C: same bits as one
    gemm over the whole K (compared through the metrics, which see every output)."""
    kw = dict(batch=(2,), clamp=True, progress=False)  # shapes of test_cli_integer_builtin
    one = gemm_cli.run(IU8, ["exact"], M, N, 64, **kw)
    chunked = gemm_cli.run(IU8, ["exact"], M, N, 64, chunk_steps=1, **kw)
    for r in (one[0], chunked[0]):
        assert r["identical"] == 1.0 and r["max_abs_err"] == 0


@pytest.mark.slow
def test_run_chunked_k_equals_one_call_float():
    kw = dict(batch=(2,), progress=False, seed=5)
    one = gemm_cli.run(FP8, ["cdna3"], M, N, 3 * K_FP8, **kw)[0]
    chunked = gemm_cli.run(FP8, ["cdna3"], M, N, 3 * K_FP8, chunk_steps=1, **kw)[0]
    for key in ("max_rel", "mean_rel", "bias", "ident", "ulp_hist", "max_abs_ulp"):
        assert one[key] == chunked[key], key


@pytest.mark.slow
def test_cli_format_default_models(capsys):
    rc, out, err = run_cli(capsys, "--format", "f16", "-m", "16", "-n", "16", "-k", "64", "--json",
                           "--no-progress")
    assert rc == 0, err
    rows = json.loads(out)
    assert rows[0]["builtin"] == "smfmac_f32_16x16x64_f16"
    assert [r["model"] for r in rows] == ["cdna3", "exact"]
    assert rows[1]["ident"] == 1.0


# -------------------------------------------------------------------------- errors
def test_cli_unknown_dist_exits_2(capsys):
    rc, out, err = run_cli(capsys, "--builtin", FP8, "-m", "16", "-n", "16", "-k", "128", "--dist", "gauss")
    assert rc == 2 and out == ""
    assert "jwmma: error: unknown distribution 'gauss'" in err
    assert all(d in err for d in study.DISTRIBUTIONS)


def test_cli_unknown_builtin_model_format_exit_2(capsys):
    rc, _, err = run_cli(capsys, "--builtin", "smfmac_f32_16x16x128_fp9", "-k", "128")
    assert rc == 2 and "unknown builtin" in err
    rc, _, err = run_cli(capsys, "--builtin", FP8, "-m", "16", "-n", "16", "-k", "128", "--model", "cdna4")
    assert rc == 2 and "unknown model 'cdna4'" in err
    rc, _, err = run_cli(capsys, "--builtin", IU8, "-m", "16", "-n", "16", "-k", "32", "--model", "cdna3")
    assert rc == 2 and "does not apply to integer builtins" in err
    rc, _, err = run_cli(capsys, "--format", "fp9", "-k", "128")
    assert rc == 2 and "fp9" in err
    with pytest.raises(SystemExit) as e:  # argparse: --path has fixed choices
        main(["gemm", "--path", "regs"])
    assert e.value.code == 2
