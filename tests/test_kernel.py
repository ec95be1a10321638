"""jwmma.kernel: lane-parallel policies run over a grid of blocks and waves.

The oracle is `jwmma.gemm` (it never sees the policies' loaders), plus a float64 matmul of the
decompressed operands as a sanity check of the exact model. Problem shapes are shared between
tests so that the compiled builtin steps are reused (keeps the file fast).
"""
from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma import kernel
from jwmma.engine import effort

_EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def _load_example(name):
    spec = importlib.util.spec_from_file_location(f"jwmma_example_{name}", _EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


C4 = _load_example("cdna4_fp8_policy")
R4 = _load_example("rdna4_f16_policy")

# multi-tile problems: several blocks, several waves per block, several K steps
CDNA4_SHAPE = dict(m=64, n=96, k=512)     # waves (2, 2): 2x3 blocks x 4 waves, 4 K steps of 128
RDNA4_SHAPE = dict(m=40, n=64, k=96)      # waves (2, 2): 2x2 blocks (M padded to 64), 3 K steps of 32
WAVES = (2, 2)


def _exact_sanity(d, a, b, c, steps):
    """Exact model: one f32 rounding per K step, so |D - (A@B + C)| <= steps * 2^-24 * (|A|@|B| + |C|)."""
    dense = np.asarray(jwmma.decompress_2_4(*a)).astype(np.float64)
    b64 = np.asarray(b).astype(np.float64)
    ref = dense @ b64 + np.asarray(c, np.float64)
    bound = steps * 2.0 ** -24 * (np.abs(dense) @ np.abs(b64) + np.abs(np.asarray(c, np.float64))) + 1e-30
    assert np.all(np.abs(np.asarray(d, np.float64) - ref) <= bound)


# ------------------------------------------------------------------- the seed policies agree
@pytest.mark.parametrize("model", ["exact", None])
def test_cdna4_seed_policy_matches_gemm(rng, model):
    a, b = C4.problem(rng, **CDNA4_SHAPE)
    c = rng.standard_normal((CDNA4_SHAPE["m"], CDNA4_SHAPE["n"])).astype(np.float32)
    d = kernel.check(C4.SmfmacCdna4FP8Policy, a, b, c, waves=WAVES, model=model)
    ref = jwmma.gemm(a, b, c, builtin="smfmac_f32_16x16x128_fp8_fp8", model=model)
    assert np.array_equal(np.asarray(d).view(np.int32), np.asarray(ref).view(np.int32))
    if model == "exact":
        _exact_sanity(d, a, b, c, steps=4)
    else:  # the model reaches the builtin: the default (cdna3) rounds differently from exact
        exact = jwmma.gemm(a, b, c, builtin="smfmac_f32_16x16x128_fp8_fp8", model="exact")
        assert not np.array_equal(np.asarray(d), np.asarray(exact))
    # run() gives the same D
    d2 = kernel.run(C4.SmfmacCdna4FP8Policy, a, b, c, waves=WAVES, model=model)
    assert np.array_equal(np.asarray(d2).view(np.int32), np.asarray(d).view(np.int32))
    # a run this small compiled its three stages with the platform's 'fast' options, as a GEMM does
    fast = effort.compiler_options(jax.default_backend(), "fast")
    if fast:
        from jwmma.kernel import runner
        assert all(fast in stage._jits for stage in (runner._load, runner._mma_steps, runner._store))


@pytest.mark.parametrize("model", ["exact", None])
def test_rdna4_policy_matches_gemm(rng, model):
    a, b = R4.problem(rng, **RDNA4_SHAPE)
    c = rng.standard_normal((RDNA4_SHAPE["m"], RDNA4_SHAPE["n"])).astype(np.float32)
    d = kernel.check(R4.SwmmacRdna4F16Policy, a, b, c, waves=WAVES, model=model)
    ref = jwmma.gemm(a, b, c, builtin="swmmac_f32_16x16x32_f16_w32", model=model)
    assert d.shape == (40, 64)
    assert np.array_equal(np.asarray(d).view(np.int32), np.asarray(ref).view(np.int32))
    if model == "exact":
        _exact_sanity(d, a, b, c, steps=3)
    else:  # default gfx12_dot4 rounds differently from exact on this data
        exact = jwmma.gemm(a, b, c, builtin="swmmac_f32_16x16x32_f16_w32", model="exact")
        assert not np.array_equal(np.asarray(d), np.asarray(exact))


def test_metadata_index_policies_random_pattern(rng):
    """Index words packed from hipSPARSELt metadata bytes, on random 2:4 patterns."""
    a, b = C4.problem(rng, fixed=False, **CDNA4_SHAPE)
    kernel.check(C4.SmfmacCdna4FP8MetadataPolicy, a, b, waves=WAVES)
    a, b = R4.problem(rng, fixed=False, **RDNA4_SHAPE)
    kernel.check(R4.SwmmacRdna4F16MetadataPolicy, a, b, waves=WAVES)
    # the fixed-index policy on the same data must fail: the index is part of what is checked
    with pytest.raises(AssertionError, match="differ bitwise"):
        kernel.check(R4.SwmmacRdna4F16Policy, a, b, waves=WAVES)


def test_metadata_bytes():
    pos = np.array([[0, 2, 1, 3, 0, 1, 2, 3]])
    # byte b bits [2s+1:2s] = position of compressed element 4b+s
    want = [0 | 2 << 2 | 1 << 4 | 3 << 6, 0 | 1 << 2 | 2 << 4 | 3 << 6]
    assert np.asarray(kernel.metadata(pos)).tolist() == [want]
    assert int(kernel.i32(0x88888888)) == -0x77777778
    w = kernel.pack_bytes(jnp.uint8(0x01), 0x23, 0x45, 0x67)
    assert int(w) == 0x67452301


# --------------------------------------------------------------- wrong kernels visibly fail
class _LaneLocalA(C4.SmfmacCdna4FP8Policy):
    """H1's lane-local A loader (BUILTINS.md 8): c = 32*(e//8) + 8g + e%8. Wrong under H2."""

    @staticmethod
    def load_a(sA, warp_m, lane, tk_comp):
        g, n = lane // 16, lane % 16
        e = jnp.arange(16)
        byte = sA[(warp_m * 16 + n) * tk_comp + 32 * (e // 8) + 8 * g + e % 8].reshape(4, 4)
        return kernel.pack_bytes(byte[:, 0], byte[:, 1], byte[:, 2], byte[:, 3])


class _SwappedHalf(R4.SwmmacRdna4F16Policy):
    """The RDNA4 A loader with the lane halves swapped."""

    @staticmethod
    def load_a(sA, warp_m, lane, tk_comp):
        h, r = 1 - lane // 16, lane % 16
        e = jnp.arange(8)
        return sA[(warp_m * 16 + r) * tk_comp + 8 * (e // 4) + 4 * h + e % 4]


def _first_mismatch(msg):
    m = re.search(r"\(row (\d+), col (\d+)\) \[block \((\d+), (\d+)\) wave \((\d+), (\d+)\) lane (\d+) d\[(\d+)\]\]: "
                  r"(\S+) \(0x([0-9a-f]{8})\) vs (\S+) \(0x([0-9a-f]{8})\), (\d+) ulp", msg)
    assert m, msg
    return m


def test_cdna4_lane_local_loader_fails_with_diff(rng):
    a, b = C4.problem(rng, **CDNA4_SHAPE)
    with pytest.raises(AssertionError) as info:
        kernel.check(_LaneLocalA, a, b, waves=WAVES, model="exact")
    msg = str(info.value)
    assert msg.startswith("_LaneLocalA (smfmac_f32_16x16x128_fp8_fp8): kernel D differs from jwmma.gemm")
    assert "grid 2x3 blocks of 2x2 waves x 64 lanes, wave tile 16x16, 4 K step(s) of 128" in msg
    assert "max ulp difference" in msg and "wave tiles with mismatches: 24 of 24" in msg
    assert "every wave tile differs: suspect the per-lane layout" in msg
    assert "store_c:" not in msg  # the store is right
    # the reported first mismatch agrees with an independent recomputation
    m = _first_mismatch(msg)
    r, c = int(m.group(1)), int(m.group(2))
    good = np.asarray(jwmma.gemm(a, b, builtin=_LaneLocalA.builtin, model="exact"))
    bad = np.asarray(kernel.run(_LaneLocalA, a, b, waves=WAVES, model="exact"))
    assert int(m.group(12), 16) == int(good[r, c].view(np.uint32))
    assert int(m.group(10), 16) == int(bad[r, c].view(np.uint32))
    diff = np.argwhere(good.view(np.int32) != bad.view(np.int32))
    assert (r, c) == tuple(diff[0])
    assert f"{len(diff)} of {good.size} element(s) differ bitwise" in msg
    # lane/register of the first mismatch follow the accumulator layout: i = 4g + t, j = L%16
    lane, t = int(m.group(7)), int(m.group(8))
    assert (r % 16, c % 16) == (4 * (lane // 16) + t, lane % 16)


def test_rdna4_swapped_half_fails_with_diff(rng):
    a, b = R4.problem(rng, **RDNA4_SHAPE)
    with pytest.raises(AssertionError) as info:
        kernel.check(_SwappedHalf, a, b, waves=WAVES, model="exact")
    msg = str(info.value)
    assert "_SwappedHalf (swmmac_f32_16x16x32_f16_w32)" in msg
    assert "D 40x64, K=96 (padded 64x64, K=96)" in msg
    assert "wave tiles with mismatches: 12 of 12" in msg   # 3 tile rows (40 rows) x 4 tile cols
    assert "first mismatches (kernel vs reference)" in msg
    _first_mismatch(msg)


def test_store_c_coverage_is_checked(rng):
    class BadStore(R4.SwmmacRdna4F16Policy):
        @staticmethod
        def store_c(d, sub_m, sub_n, N, lane):   # column lane % 8: half the columns twice
            return (sub_m + 8 * (lane // 16) + jnp.arange(8)) * N + sub_n + lane % 8, d

    a, b = R4.problem(rng, **RDNA4_SHAPE)
    with pytest.raises(AssertionError) as info:
        kernel.check(BadStore, a, b, waves=WAVES, model="exact")
    msg = str(info.value)
    assert "store_c: 2048 element(s) of D never written, first (row, col): (0, 8)" in msg
    assert "store_c: 2048 element(s) of D written more than once, first: (0, 0) x2" in msg
    assert "hint: store_c does not cover D exactly once" in msg


def test_policy_errors_are_readable(rng):
    a, b = R4.problem(rng, **RDNA4_SHAPE)

    class WrongDtype(R4.SwmmacRdna4F16Policy):
        @staticmethod
        def load_a(sA, warp_m, lane, tk_comp):
            return R4.SwmmacRdna4F16Policy.load_a(sA, warp_m, lane, tk_comp).astype(jnp.float32)

    with pytest.raises(TypeError, match=r"WrongDtype.load_a gives \(8,\) float32 per lane; "
                                        r"swmmac_f32_16x16x32_f16_w32 wants \(8,\) float16"):
        kernel.run(WrongDtype, a, b, waves=WAVES)

    class WrongTile(R4.SwmmacRdna4F16Policy):
        k_step = 64

    with pytest.raises(ValueError, match="k_step = 64"):
        kernel.run(WrongTile, a, b)
    with pytest.raises(TypeError, match="missing index, store_c"):
        kernel.run(type("P", (), {"builtin": "swmmac_f32_16x16x32_f16_w32", "load_a": 0, "load_b": 0}), a, b)


# ------------------------------------------------------------------------ docs and examples
@pytest.mark.slow
def test_docstring_example_policy(rng):
    """The 20-line policy of jwmma.kernel's docstring is correct (default mma, Policy as a class)."""
    doc = kernel.__doc__
    code = doc[doc.index("    import jax.numpy as jnp"): doc.index("    d = kernel.check(")]
    ns = {}
    exec(compile("\n".join(line[4:] for line in code.splitlines()), "kernel-docstring", "exec"), ns)
    pol = ns["SmfmacF16Policy"]
    m, n, k = 32, 64, 128
    dense = rng.standard_normal((m, k)).astype(np.float16)
    a = jwmma.compress_2_4(jwmma.prune_2_4(dense))
    b = rng.standard_normal((k, n)).astype(np.float16)
    d = kernel.check(pol, a, b, waves=(2, 1), model="exact")
    _exact_sanity(d, a, b, np.zeros((m, n), np.float32), steps=2)
    # the same code as a functional Policy value
    p2 = kernel.Policy(pol.builtin, pol.load_a, pol.load_b, pol.index, pol.store_c)
    assert np.array_equal(np.asarray(kernel.run(p2, a, b, waves=(1, 2), model="exact")), np.asarray(d))


def test_example_scripts_report(capsys):
    C4.main()
    R4.main()
    out = capsys.readouterr().out
    assert out.count("bit-identical to jwmma.gemm") == 6 and out.count("OK") == 2
