"""pack_*/unpack_* (API.md section 3) against a scalar packing written from BUILTINS.md
section 1 (little-endian 16-bit halves, bytes and nibbles in 32-bit words) and the layout
formulas of tests/reference.py."""
import ml_dtypes
import numpy as np
import pytest

import jwmma
from oracles.reference import (NAMES, Ref, lane_codes_to_regs, matrix_to_lane_codes, pack_index, regs_to_lane_codes,
                       unpack_index)

FLOAT_DTYPES = {
    "f16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8": ml_dtypes.float8_e4m3fn,
    "bf8": ml_dtypes.float8_e5m2, "f32": np.float32,
}
INT_BITS = {"iu8": 8, "i8": 8, "iu4": 4, "i32": 32}
BATCH = (2, 3)


def _type(ref, which):
    return {"a": ref.a_type, "b": ref.b_type, "c": ref.c_type}[which]


def _random_matrix(rng, ref, which, signed=True):
    """Random logical values (all bit patterns, NaNs included) and their element codes."""
    t = _type(ref, which)
    shape = BATCH + ref.shape(which)
    if t in FLOAT_DTYPES:
        dt = np.dtype(FLOAT_DTYPES[t])
        width = {1: np.uint8, 2: np.uint16, 4: np.uint32}[dt.itemsize]
        codes = rng.integers(0, 1 << (8 * dt.itemsize), shape, dtype=np.uint64).astype(width)
        return codes.view(dt), codes.astype(np.int64)
    bits = INT_BITS[t]
    if t == "i32":
        vals = rng.integers(-(2**31), 2**31, shape, dtype=np.int64)
        return vals.astype(np.int32), vals & 0xFFFFFFFF
    lo, hi = (-(1 << (bits - 1)), (1 << (bits - 1)) - 1) if signed else (0, (1 << bits) - 1)
    vals = rng.integers(lo, hi + 1, shape)
    dtype = {(8, True): np.int8, (8, False): np.uint8, (4, True): np.int8, (4, False): np.uint8}[(bits, signed)]
    return vals.astype(dtype), vals & ((1 << bits) - 1)


def _ref_pack(ref, which, codes):
    out = np.stack([
        np.stack([lane_codes_to_regs(ref, which, matrix_to_lane_codes(ref, which, codes[b0, b1].tolist()))
                  for b1 in range(codes.shape[1])])
        for b0 in range(codes.shape[0])
    ])
    return out


def _bits(x):
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[x.dtype.itemsize])


PACK = {"a": (jwmma.pack_a, jwmma.unpack_a), "b": (jwmma.pack_b, jwmma.unpack_b), "c": (jwmma.pack_c, jwmma.unpack_c)}


@pytest.mark.parametrize("which", ["a", "b", "c"])
@pytest.mark.parametrize("name", NAMES)
def test_pack_matches_scalar_packing_and_round_trips(name, which, rng):
    ref = Ref(name)
    pack, unpack = PACK[which]
    signs = [True, False] if (which != "c" and ref.signed_choice) else [True]
    for signed in signs:
        mat, codes = _random_matrix(rng, ref, which, signed)
        regs = np.asarray(pack(name, mat))
        assert regs.shape == BATCH + (ref.wave, ref.vec(which))
        assert regs.dtype == ref.reg_dtype(which)
        want = _ref_pack(ref, which, codes)
        np.testing.assert_array_equal(_bits(regs), _bits(want))
        kw = {"signed": signed} if which != "c" else {}
        back = np.asarray(unpack(name, regs, **kw))
        assert back.shape == mat.shape
        if _type(ref, which) in FLOAT_DTYPES:
            assert back.dtype == mat.dtype
            np.testing.assert_array_equal(_bits(back), _bits(mat))
        else:
            np.testing.assert_array_equal(back.astype(np.int64), mat.astype(np.int64))


@pytest.mark.parametrize("which", ["a", "b", "c"])
@pytest.mark.parametrize("name", NAMES)
def test_unpack_random_registers_round_trips(name, which, rng):
    """Every register bit pattern unpacks to the element the layout puts there and packs back."""
    ref = Ref(name)
    pack, unpack = PACK[which]
    dt = ref.reg_dtype(which)
    width = {2: np.uint16, 4: np.uint32}[dt.itemsize]
    assert ref.elems(which) * ref.elem_bits(which) == 8 * dt.itemsize * ref.vec(which)  # no unused bits
    regs = rng.integers(0, 1 << (8 * dt.itemsize), BATCH + (ref.wave, ref.vec(which)), dtype=np.uint64).astype(width)
    regs = regs.view(dt)
    mat = np.asarray(unpack(name, regs, **({"signed": False} if which != "c" else {})))
    assert mat.shape == BATCH + ref.shape(which)
    t = _type(ref, which)
    got = _bits(mat).astype(np.int64) if t in FLOAT_DTYPES else mat.astype(np.int64) & ((1 << ref.elem_bits(which)) - 1)
    for b in [(0, 0), (1, 2)]:  # expectation: walk the lanes with the reference layout and packing
        lane_codes = regs_to_lane_codes(ref, which, regs[b])
        for lane in range(ref.wave):
            for x in range(ref.elems(which)):
                i, j = ref.coord(which, lane, x)
                assert got[b + (i, j)] == lane_codes[lane][x], (b, lane, x, i, j)
    np.testing.assert_array_equal(_bits(np.asarray(pack(name, mat))), _bits(regs))


@pytest.mark.parametrize("name", NAMES)
def test_pack_index_matches_scalar_and_round_trips(name, rng):
    ref = Ref(name)
    for set_no, s in enumerate(ref.index_sets):
        pos = rng.integers(0, 4, BATCH + ref.shape("a"))
        idx = np.asarray(jwmma.pack_index(name, pos, index_set=set_no))
        assert idx.shape == BATCH + (ref.wave,) and idx.dtype == np.int32
        for b0 in range(BATCH[0]):
            for b1 in range(BATCH[1]):
                want = pack_index(ref, pos[b0, b1].tolist(), s)  # other bits zero
                np.testing.assert_array_equal(idx[b0, b1].view(np.uint32), want.view(np.uint32))
        # bits of the other set are ignored by unpack_index
        garbage = rng.integers(0, 2**32, BATCH + (ref.wave,), dtype=np.uint64).astype(np.uint32)
        used = np.uint32(sum(3 << (s + 2 * e) for e in range(ref.na)) & 0xFFFFFFFF)
        noisy = ((idx.view(np.uint32) & used) | (garbage & ~used)).view(np.int32)
        back = np.asarray(jwmma.unpack_index(name, noisy, index_set=set_no))
        np.testing.assert_array_equal(back, pos)
        for b1 in range(BATCH[1]):
            assert unpack_index(ref, noisy[0, b1], s) == pos[0, b1].tolist()


@pytest.mark.parametrize("name", ["swmmac_f32_16x16x32_f16_w32", "smfmac_f32_16x16x64_f16", "swmmac_i32_16x16x32_iu8_w32"])
def test_pack_index_positions_of_a_container(name):
    """Nibble t of a lane's index covers its A container (2t, 2t+1): low 2 bits the first
    stored value, high 2 bits the second (BUILTINS.md section 1)."""
    ref = Ref(name)
    pos = np.zeros(ref.shape("a"), int)
    for i in range(ref.m):
        for c in range(ref.kc):
            pos[i, c] = 0 if c % 2 == 0 else 2  # positions (0, 2) -> nibble 0x8
    idx = np.asarray(jwmma.pack_index(name, pos)).view(np.uint32)
    assert set(idx.tolist()) == {int("8" * (ref.na // 2), 16)}
    pos[:, 0::2], pos[:, 1::2] = 2, 3  # (2, 3) -> 0xE
    idx = np.asarray(jwmma.pack_index(name, pos)).view(np.uint32)
    assert set(idx.tolist()) == {int("E" * (ref.na // 2), 16)}


def test_bf16_register_dtype_alternatives():
    """RDNA4 bf16 is `short` storage (int16, bfloat16 accepted); CDNA4 is __bf16 (int16 /
    uint16 bit patterns accepted)."""
    rng = np.random.default_rng(5)
    for name in ("swmmac_f32_16x16x32_bf16_w32", "smfmac_f32_16x16x64_bf16"):
        ref = Ref(name)
        regs = rng.integers(0, 2**16, (ref.wave, 8), dtype=np.uint64).astype(np.uint16)
        outs = [np.asarray(jwmma.unpack_a(name, regs.view(dt))) for dt in (np.int16, np.uint16, ml_dtypes.bfloat16)]
        for o in outs:
            assert o.dtype == np.dtype(ml_dtypes.bfloat16)
            np.testing.assert_array_equal(o.view(np.uint16), outs[0].view(np.uint16))
    assert np.asarray(jwmma.pack_a("swmmac_f32_16x16x32_bf16_w32", np.zeros((16, 16), ml_dtypes.bfloat16))).dtype == np.int16
    assert np.asarray(jwmma.pack_a("smfmac_f32_16x16x64_bf16", np.zeros((16, 32), ml_dtypes.bfloat16))).dtype == ml_dtypes.bfloat16


def test_iu4_small_int_inputs():
    """iu4 accepts int4/uint4 and small ints; nibble e of the lone A int is compressed column 8h+e."""
    name = "swmmac_i32_16x16x32_iu4_w32"
    ref = Ref(name)
    vals = np.arange(16 * 16).reshape(16, 16) % 16 - 8
    r1 = np.asarray(jwmma.pack_a(name, vals.astype(np.int32)))
    r2 = np.asarray(jwmma.pack_a(name, vals.astype(ml_dtypes.int4)))
    np.testing.assert_array_equal(r1, r2)
    assert r1.shape == (32, 1)
    for lane in range(32):
        h, r = lane // 16, lane % 16
        word = int(r1[lane, 0]) & 0xFFFFFFFF
        for e in range(8):
            assert (word >> (4 * e)) & 0xF == vals[r, 8 * h + e] & 0xF
    assert ref.na == 8
