"""Issue #10 leftover: jwmma's check messages under `jax.vmap` name the same row/group (wave,
lane) as the same call on the whole batch outside vmap, in every mode a failed check surfaces
in (eager vmap, vmap inside a user's jit, `jwmma.checked`). Before, JAX's batching of the
host callback / checkify check handed the message one batch element: "row () group 1".
Public API only; the expected texts are written out here (the outside-vmap call's)."""
from __future__ import annotations

import re

import jax
import ml_dtypes
import numpy as np
import pytest

import jwmma

import edges_oracles as O
from edges_helpers import call_builtin

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
I8_C4 = "smfmac_i32_16x16x128_i8"


def _raises_everywhere(fn, args, pattern):
    """``fn`` under jax.vmap: a ValueError eagerly and under `jwmma.checked`, an error carrying
    the message when jitted (JaxRuntimeError wrapping the callback's ValueError)."""
    with pytest.raises(ValueError, match=pattern):
        jax.block_until_ready(jax.vmap(fn)(*args))
    with pytest.raises(ValueError, match=pattern):
        jax.block_until_ready(jwmma.checked(jax.vmap(fn))(*args))
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(jax.vmap(fn))(*args))
    assert re.search(pattern, str(info.value)), str(info.value)[-1500:]


def test_compress_under_vmap_names_the_row():
    a = np.zeros((3, 8), np.float32)
    a[2, 4:8] = [1, 2, 3, 4]
    want = r"a24 is not 2:4 sparse: row 2 group 1 \(elements 4\.\.7\) has 4 non-zeros \(1 such group\(s\)\)"
    with pytest.raises(ValueError, match=want):  # outside vmap: the reference text
        jwmma.compress_2_4(a)
    _raises_everywhere(jwmma.compress_2_4, (a,), want)


def test_nested_vmap_names_both_batch_axes_and_counts_the_whole_batch():
    a = np.zeros((2, 3, 8), np.float32)
    a[1, 2, 0:4] = [1, 2, 3, 0]
    a[1, 2, 4:8] = [5, 6, 7, 8]
    want = r"row \(1, 2\) group 0 \(elements 0\.\.3\) has 3 non-zeros \(2 such group\(s\)\)"
    with pytest.raises(ValueError, match=want):
        jwmma.compress_2_4(a)
    with pytest.raises(ValueError, match=want):
        jax.vmap(jax.vmap(jwmma.compress_2_4))(a)
    with pytest.raises(ValueError, match=want):
        jwmma.checked(jax.vmap(jax.vmap(jwmma.compress_2_4)))(a)


def test_gemm_under_vmap_names_the_batch_row_and_the_prune_hint():
    rng = np.random.default_rng(0)
    a = np.array(jwmma.prune_2_4(rng.standard_normal((3, 16, 128)).astype(ml_dtypes.float8_e4m3fn)))
    a[1, 5, 8:12] = ml_dtypes.float8_e4m3fn(1.0)  # batch 1, row 5, group 2: four non-zeros
    b = rng.standard_normal((3, 128, 16)).astype(ml_dtypes.float8_e4m3fn)
    want = r"\ba is not 2:4 sparse: row \(1, 5\) group 2 \(elements 8\.\.11\) has 4 non-zeros .*prune=True"
    with pytest.raises(ValueError, match=want):
        jwmma.gemm(a, b, builtin=FP8)
    _raises_everywhere(lambda a, b: jwmma.gemm(a, b, builtin=FP8), (a, b), want)


def test_checked_builtin_under_vmap_names_the_wave():
    bt = O.TABLE[I8_C4]
    pos = np.tile(np.array([0, 1], np.int64), (bt.m, bt.kc // 2))
    good = O.pack_index(bt, pos).view(np.uint32)
    words = np.stack([good] * 3).copy()
    lane, pair = 37, 2
    words[2, lane] = (words[2, lane] & ~np.uint32(0xF << (4 * pair))) | np.uint32((2 | 1 << 2) << (4 * pair))
    idx = words.view(np.int32)
    regs = [np.zeros((3, bt.wave, bt.regs(w)), bt.reg_dtypes(w)[0]) for w in "abc"]
    want = r"first at wave \(2,\) lane 37 pair 2\b"
    with pytest.raises(ValueError, match=want):  # outside vmap: three waves in one call
        call_builtin(I8_C4, *regs, idx, check=True)
    _raises_everywhere(lambda a, b, c, i: call_builtin(I8_C4, a, b, c, i, check=True), (*regs, idx), want)
