"""pack_*/unpack_* (and pack_index/unpack_index) on host operands (numpy and JAX arrays on the CPU: the numpy codec, no
program compiled) against the same calls traced inside `jax.jit` (the compiled codec), on
every row, chip, block-scale format, opsel half and signedness, from random register bits
(every bit pattern: NaN payloads, subnormals, both signs of zero).

`test_fragments.py` checks the host form against a scalar packing written from BUILTINS.md
section 1; this file ties the compiled form to it. It also checks that a host pack or unpack
compiles nothing and keeps a committed array's device, and the block-scaled rows' scale
registers (pack_scale / unpack_scale) in both forms.
"""
from __future__ import annotations

import logging
from typing import NamedTuple

import jax
import numpy as np
import pytest

import jwmma
from jwmma.engine import fragments
from jwmma.isa.table import lookup

# by default one row of each register form: 16-bit floats, bf16 as int16, packed 8- and 4-bit
# words (with a sign choice), fp8 / fp6 bit strings / fp4 (the block-scaled row), an opsel C
# and replicated A/B (RDNA3), wave64, multi-block A/B, 32-bit A/B; every row with -m slow
DEFAULT = {"smfmac_f32_16x16x64_f16", "smfmac_f32_16x16x32_bf16", "smfmac_f32_16x16x128_fp8_fp8",
           "swmmac_i32_16x16x32_iu4_w32", "mfma_scale_f32_16x16x128_f8f6f4", "wmma_f16_16x16x16_f16_tied_w32",
           "wmma_i32_16x16x16_iu8_w64", "mfma_f32_16x16x4f16", "mfma_i32_16x16x4i8", "mfma_f32_16x16x1f32"}
# (name, every chip of the row); by default a row's own chip only: the chips share the layouts
NAMES = ([(n, False) for n in sorted(DEFAULT)]
         + [pytest.param(n, True, marks=pytest.mark.slow) for n in sorted(jwmma.BUILTINS)])
BATCH = (2, 3)
SIX_BIT = (2, 3)  # fmt codes of fp6 / bf6: JAX has no 6-bit type, their values exist on the host only
PACK = {"a": jwmma.pack_a, "b": jwmma.pack_b, "c": jwmma.pack_c}
UNPACK = {"a": jwmma.unpack_a, "b": jwmma.unpack_b, "c": jwmma.unpack_c}


def _bits(x):
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def _random_regs(rng, spec, which):
    op = getattr(spec, which)
    dt = np.dtype(op.dtype)
    width = {2: np.uint16, 4: np.uint32}[dt.itemsize]
    words = rng.integers(0, 1 << (8 * dt.itemsize), BATCH + (spec.lanes, op.n), dtype=np.uint64)
    return words.astype(width).view(dt)


def _cases(name, all_targets):
    """(which, keywords of the pack/unpack call, the row's spec) of every variant of a row."""
    spec = jwmma.BUILTINS[name]
    for target in (spec.targets if all_targets else (spec.target,)):
        fmts = range(5) if spec.scaled else [None]
        for fmt in fmts:
            formats = None if fmt is None else (fmt, 0)
            for which in ("a", "b", "c"):
                if which == "c" and fmt not in (None, 0) or getattr(spec, which).elem_bits == 64:
                    continue  # (f64 registers: numpy in both forms, `fragments._unpack_f64`)
                row = lookup(name, target, None if fmt is None else (formats if which != "b" else (0, fmt)))
                halves = (0, 1) if (which == "c" and spec.opsel) else (None,)
                signs = (True, False) if (which != "c" and spec.signed_choice) else (None,)
                for half in halves:
                    for signed in signs:
                        kw = {"target": target}
                        if fmt is not None and which != "c":
                            kw["fmt"] = fmt
                        if half is not None:
                            kw["opsel"] = half
                        yield which, kw, signed, row


def _six_bit_unpack(which, name, regs, signed, row):
    """A 6-bit format's values are made on the host from the compiled program's codes, as the
    eager call of a device array does (JAX has no 6-bit type)."""
    codes = fragments._unpack_words(jax.numpy.asarray(regs), spec=row, which=which, half=0,
                                    signed=True if signed is None else signed)
    return fragments.codes_to_values(getattr(row, f"{which}_type"), np.asarray(codes))


def _six_bit_pack(which, values, row):
    return fragments._pack_words(fragments.to_codes(getattr(row, f"{which}_type"), values), spec=row, which=which,
                                 half=0)


def _signed_kw(signed):
    return {} if signed is None else {"signed": signed}


class _Variant(NamedTuple):
    """One variant of a row's registers (`_cases`) and its host codec's results."""

    which: str
    kw: dict
    signed: bool | None
    row: object
    regs: np.ndarray
    host: np.ndarray  # unpacked on the host
    host_packed: np.ndarray  # ``host`` packed again on the host

    @property
    def skw(self):
        return _signed_kw(self.signed)

    @property
    def six_bit(self):
        return self.kw.get("fmt") in SIX_BIT


@pytest.mark.parametrize("name,all_targets", NAMES)
def test_host_and_compiled_codec_agree(name, all_targets, rng):
    variants = []
    for which, kw, signed, row in _cases(name, all_targets):
        regs = _random_regs(rng, row, which)
        host = np.asarray(UNPACK[which](name, regs, **kw, **_signed_kw(signed)))
        variants.append(_Variant(which, kw, signed, row, regs, host, PACK[which](name, host, **kw)))
    traced = [v for v in variants if not v.six_bit]

    # the compiled codec: every variant's public calls traced inside one jit (one program per
    # row, not one per call: the calls are the same)
    def compiled(regs, values):
        return ([UNPACK[v.which](name, r, **v.kw, **v.skw) for v, r in zip(traced, regs)],
                [PACK[v.which](name, x, **v.kw) for v, x in zip(traced, values)])

    got = iter(zip(*jax.jit(compiled)([v.regs for v in traced], [v.host for v in traced])))
    for v in variants:
        if v.six_bit:
            unpacked = _six_bit_unpack(v.which, name, v.regs, v.signed, v.row)
            packed = _six_bit_pack(v.which, v.host, v.row)
        else:
            unpacked, packed = next(got)
        assert v.host.dtype == np.asarray(unpacked).dtype, (v.which, v.kw)
        assert v.host.shape == np.asarray(unpacked).shape, (v.which, v.kw)
        np.testing.assert_array_equal(_bits(v.host), _bits(unpacked), err_msg=f"unpack_{v.which} {v.kw} {v.skw}")
        assert v.host_packed.dtype == packed.dtype and v.host_packed.shape == packed.shape, (v.which, v.kw)
        np.testing.assert_array_equal(_bits(v.host_packed), _bits(packed), err_msg=f"pack_{v.which} {v.kw}")


def _compiles(fn):
    """Programs XLA compiled while ``fn`` ran (JAX's compile log)."""
    seen = []

    class Catch(logging.Handler):
        def emit(self, record):
            if "Finished XLA compilation" in record.getMessage():
                seen.append(record.getMessage())

    log = logging.getLogger("jax")
    handler, level = Catch(level=logging.DEBUG), log.level
    log.addHandler(handler)
    log.setLevel(logging.DEBUG)
    try:
        with jax.log_compiles(True):
            fn()
    finally:
        log.removeHandler(handler)
        log.setLevel(level)
    return seen


def test_host_operands_compile_nothing_and_keep_their_device(rng):
    name = "smfmac_f32_16x16x64_f16"
    spec = jwmma.BUILTINS[name]
    a = rng.standard_normal((5, 7) + spec.a_shape).astype(np.float16)  # a batch shape no test uses
    device = jax.devices("cpu")[-1]
    on_device = jax.device_put(a, device)
    got = {}

    def calls():
        got["regs"] = jwmma.pack_a(name, a)
        got["committed"] = jwmma.pack_a(name, on_device)
        got["back"] = jwmma.unpack_a(name, got["committed"])
        got["idx"] = jwmma.pack_index(name, np.zeros((5, 7) + spec.a_shape, np.int32) + 2)
        got["pos"] = jwmma.unpack_index(name, got["idx"])

    assert _compiles(calls) == []
    assert isinstance(got["regs"], jax.Array) and not got["regs"].committed
    assert got["committed"].committed and got["committed"].sharding.device_set == {device}
    assert got["back"].committed and got["back"].sharding.device_set == {device}
    np.testing.assert_array_equal(_bits(got["back"]), _bits(a))
    np.testing.assert_array_equal(np.asarray(got["pos"]), 2)


SPARSE = [n for n in sorted(jwmma.BUILTINS) if not jwmma.BUILTINS[n].dense]
DEFAULT_INDEX = {"smfmac_f32_16x16x64_f16", "smfmac_f32_16x16x128_fp8_fp8", "swmmac_i32_16x16x32_iu4_w32",
                 "smfmac_f32_32x32x64_fp8_fp8", "swmmac_f32_16x16x32_f16_w32"}


@pytest.mark.parametrize("name", [n if n in DEFAULT_INDEX else pytest.param(n, marks=pytest.mark.slow)
                                  for n in SPARSE] + ["mfma_f32_16x16x16f16"])
def test_host_and_compiled_index_words_agree(name, rng):
    """pack_index / unpack_index of every index set: random positions and random words."""
    spec = jwmma.BUILTINS[name]
    for index_set in range(spec.n_sets):
        pos = rng.integers(0, 4, BATCH + (spec.m, spec.kc)).astype(np.int32)
        host = jwmma.pack_index(name, pos, index_set)
        compiled = jax.jit(lambda p: jwmma.pack_index(name, p, index_set))(pos)
        assert host.dtype == compiled.dtype == np.int32 and host.shape == compiled.shape
        np.testing.assert_array_equal(np.asarray(host), np.asarray(compiled), err_msg=f"pack_index set {index_set}")
        words = rng.integers(0, 1 << 32, BATCH + (spec.lanes,), dtype=np.uint64).astype(np.uint32).view(np.int32)
        host = jwmma.unpack_index(name, words, index_set)
        compiled = jax.jit(lambda w: jwmma.unpack_index(name, w, index_set))(words)
        assert host.dtype == compiled.dtype == np.int32 and host.shape == compiled.shape
        np.testing.assert_array_equal(np.asarray(host), np.asarray(compiled), err_msg=f"unpack_index set {index_set}")


SCALED = [n for n in sorted(jwmma.BUILTINS) if jwmma.BUILTINS[n].scaled]


@pytest.mark.parametrize("name", SCALED)
def test_host_and_compiled_scale_registers_agree(name, rng):
    """pack_scale / unpack_scale of both operands at every opsel byte: random E8M0 codes and
    random words; a host call compiles nothing."""
    spec = jwmma.BUILTINS[name]
    nb = spec.k // 32
    for which, shape in (("a", (spec.m, nb)), ("b", (nb, spec.n))):
        for opsel in range(4):
            codes = rng.integers(0, 256, BATCH + shape).astype(np.uint8)
            words = rng.integers(0, 1 << 32, BATCH + (spec.lanes,), dtype=np.uint64).astype(np.uint32).view(np.int32)
            got = {}

            def calls():
                got["pack"] = jwmma.pack_scale(name, codes, which, opsel=opsel)
                got["unpack"] = jwmma.unpack_scale(name, words, which, opsel=opsel)

            assert _compiles(calls) == []
            packed = jax.jit(lambda x: jwmma.pack_scale(name, x, which, opsel=opsel))(codes)
            unpacked = jax.jit(lambda w: jwmma.unpack_scale(name, w, which, opsel=opsel))(words)
            for what, host, compiled in (("pack", got["pack"], packed), ("unpack", got["unpack"], unpacked)):
                assert host.dtype == compiled.dtype and host.shape == compiled.shape, (what, which, opsel)
                np.testing.assert_array_equal(np.asarray(host), np.asarray(compiled), err_msg=f"{what} {which} {opsel}")


def test_a_repeated_shape_tiers_up_to_the_compiled_program(rng, monkeypatch):
    """After `effort.TIER_UP_CALLS` host calls of one shape, the next compiles the program
    (a loop of large packs runs at the compiled speed); the bits stay the same. The test run
    sets the count out of reach (conftest.py), so it is set here."""
    from jwmma.engine import effort

    monkeypatch.setattr(effort, "TIER_UP_CALLS", 2)
    name = "smfmac_f32_16x16x128_fp8_fp8"
    spec = jwmma.BUILTINS[name]
    codes = rng.integers(0, 256, (3, 11) + spec.a_shape).astype(np.uint8)  # a batch shape no other test uses
    a = codes.view(spec.a_format.dtype)
    runs = []
    for _ in range(4):
        got = {}
        runs.append((_compiles(lambda: got.update(regs=jwmma.pack_a(name, a))), np.asarray(got["regs"])))
    assert [len(c) for c, _ in runs[:2]] == [0, 0]
    assert len(runs[2][0]) == 1 and "_pack_words" in runs[2][0][0]
    assert runs[3][0] == []  # the program is in use now
    for _, regs in runs[1:]:
        np.testing.assert_array_equal(regs.view(np.uint32), runs[0][1].view(np.uint32))
