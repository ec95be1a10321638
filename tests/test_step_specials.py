"""The chained-step models' special values at every step of a long dot (NUMERICS.md 2.2, 2.3).

`gfx11_dot2` (RDNA3, steps of 2 products) finds every step's factor specials before the
steps and reads them step by step, eight steps to an int32 word (on a CPU; for a GPU each
step finds its own, which runs here as ``Options(platform='gpu')``); `gfx12_dot4` (RDNA4, steps
of 4) works them out in each step. Here a dot is long enough for three words (gfx11: 20
steps; gfx12: 12 steps), and each row puts one kind of special product (+Inf, -Inf, both,
NaN, Inf times zero) into one step, every step taken in turn; later steps then see an Inf or
NaN C. Rows without any special run as a call of their own (the branch that finds none).
References: the slow scalar oracles (`ref_gfx11.dot2`, `ref_gfx12.dot_bits`), folded over the
steps, Python ints only.
"""
from __future__ import annotations

import numpy as np
import pytest

import jwmma
from oracles import ref_gfx11, ref_gfx12
from oracles.gfx11_codes import random_codes

POS_INF, NEG_INF, NAN, ZERO, ONE = 0x7C00, 0xFC00, 0x7E01, 0x0000, 0x3C00  # f16 codes
KINDS = ("+inf", "-inf", "both", "nan", "inf*0")


def _rows(rng, k, step, with_specials):
    """(a, b, c) f16 codes (uint16, uint16, f32 bits as uint32) of 5 * steps rows."""
    steps = k // step
    n = len(KINDS) * steps
    a = random_codes(rng, "f16", (n, k)) & 0xFBFF  # no special of their own: exponent field <= 30
    b = random_codes(rng, "f16", (n, k)) & 0xFBFF
    c = np.where(rng.random(n) < 0.5, 0x3F800000, 0xC0400000).astype(np.uint32)  # 1.0, -3.0
    if with_specials:
        for r in range(n):
            kind, s = KINDS[r % len(KINDS)], r // len(KINDS)
            i, j = s * step, s * step + step - 1  # the step's first and last products
            if kind in ("+inf", "-inf", "both"):
                a[r, i], b[r, i] = (NEG_INF if kind == "-inf" else POS_INF), ONE
            if kind == "both":
                a[r, j], b[r, j] = NEG_INF, ONE
            if kind == "nan":
                b[r, j] = NAN
            if kind == "inf*0":
                a[r, j], b[r, j] = ZERO, POS_INF
    return a.astype(np.uint16), b.astype(np.uint16), c


def _model(a, b, c, model, platform=None):
    options = None if platform is None else jwmma.Options(platform=platform, backend="xla")
    d = jwmma.dot(a.view(np.float16), b.view(np.float16), c.view(np.float32), model=model, options=options)
    return np.asarray(d).view(np.uint32).astype(np.int64)


def _gfx11(a, b, c):
    out = []
    for r in range(a.shape[0]):
        acc = int(c[r])
        for i in range(0, a.shape[1], 2):
            acc = ref_gfx11.dot2(int(a[r, i]), int(b[r, i]), int(a[r, i + 1]), int(b[r, i + 1]), acc, "f16")
        out.append(acc)
    return np.array(out, np.int64)


def _gfx12(a, b, c):
    return np.array([ref_gfx12.dot_bits([int(x) for x in a[r]], [int(x) for x in b[r]], int(c[r]), "f16", "f16",
                                        "f32") for r in range(a.shape[0])], np.int64)


@pytest.mark.parametrize("model,k,step,ref,platform", [("gfx11_dot2", 40, 2, _gfx11, None),
                                                       ("gfx11_dot2", 40, 2, _gfx11, "gpu"),
                                                       ("gfx12_dot4", 48, 4, _gfx12, None)])
@pytest.mark.parametrize("with_specials", [True, False])
def test_every_step_special_matches_the_oracle(rng, model, k, step, ref, platform, with_specials):
    a, b, c = _rows(rng, k, step, with_specials)
    got, want = _model(a, b, c, model, platform), ref(a, b, c)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, (f"{model}: {bad.size} of {got.size} rows differ; first row {bad[0]} "
                           f"(kind {KINDS[bad[0] % len(KINDS)]}, step {bad[0] // len(KINDS)}): "
                           f"got {int(got[bad[0]]):#010x} want {int(want[bad[0]]):#010x}")
    if with_specials:  # the specials reached the output: every row ends Inf or NaN
        assert np.all((want & 0x7F800000) == 0x7F800000)
