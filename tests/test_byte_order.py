"""Big-endian numpy inputs (``np.dtype('>f4')``, ``'>f2'``, ``'>i4'``, e.g. read from a file
written on another machine) are taken as the same values in native byte order by every public
entry point: 2:4 helpers, fragment packing, gemm, dot and the builtins give the bits they give
for the native array."""
from __future__ import annotations

import numpy as np
import pytest

import jwmma

CDNA4 = "smfmac_f32_16x16x64_f16"
RDNA4 = "swmmac_f32_16x16x32_f16_w32"
INT = "smfmac_i32_16x16x128_i8"


def big(x):
    """The same values as a big-endian array (1-byte types have no byte order)."""
    x = np.asarray(x)
    out = x.astype(x.dtype.newbyteorder(">"))
    assert x.dtype.itemsize == 1 or not out.dtype.isnative
    np.testing.assert_array_equal(out, x)
    return out


def bits(x):
    x = np.asarray(x)
    return x.view({1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[x.dtype.itemsize])


def same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.dtype.isnative and got.shape == want.shape
    np.testing.assert_array_equal(bits(got), bits(want))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_prune_2_4(rng, dtype):
    a = (rng.standard_normal((8, 64)) * 50).astype(dtype)
    same(jwmma.prune_2_4(big(a)), jwmma.prune_2_4(a))
    if dtype == np.float16:  # hipSPARSELt's rule takes its own dtypes only
        same(jwmma.prune_2_4(big(a), rule="hipsparselt"), jwmma.prune_2_4(a, rule="hipsparselt"))


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.int32])
def test_compress_and_decompress_2_4(rng, dtype):
    a24 = np.asarray(jwmma.prune_2_4((rng.standard_normal((8, 64)) * 50).astype(dtype)))
    v, p = (np.asarray(x) for x in jwmma.compress_2_4(a24))
    for got, want in zip(jwmma.compress_2_4(big(a24)), (v, p)):
        same(got, want)
    same(jwmma.decompress_2_4(big(v), big(p)), a24)
    same(jwmma.decompress_2_4(big(v), p.astype(">i4")), a24)


def operands(rng, name):
    spec = jwmma.BUILTINS[name]
    dt = np.int8 if spec.a_type == "i8" else np.float16
    cdt = np.int32 if spec.c_type == "i32" else np.float32
    a = (rng.standard_normal((spec.m, spec.k)) * 20).astype(dt)
    a24 = np.asarray(jwmma.prune_2_4(a))
    b = (rng.standard_normal((spec.k, spec.n)) * 20).astype(dt)
    c = (rng.standard_normal((spec.m, spec.n)) * 20).astype(cdt)
    return a24, b, c


@pytest.mark.parametrize("name", [CDNA4, RDNA4, INT])
def test_pack_and_unpack(rng, name):
    a24, b, c = operands(rng, name)
    v, p = (np.asarray(x) for x in jwmma.compress_2_4(a24))
    regs = {"a": jwmma.pack_a(name, v), "b": jwmma.pack_b(name, b), "c": jwmma.pack_c(name, c),
            "index": jwmma.pack_index(name, p)}
    same(jwmma.pack_a(name, big(v)), regs["a"])
    same(jwmma.pack_b(name, big(b)), regs["b"])
    same(jwmma.pack_c(name, big(c)), regs["c"])
    same(jwmma.pack_index(name, big(p)), regs["index"])
    same(jwmma.unpack_a(name, big(regs["a"])), jwmma.unpack_a(name, regs["a"]))
    same(jwmma.unpack_b(name, big(regs["b"])), jwmma.unpack_b(name, regs["b"]))
    same(jwmma.unpack_c(name, big(regs["c"])), jwmma.unpack_c(name, regs["c"]))
    same(jwmma.unpack_index(name, big(regs["index"])), jwmma.unpack_index(name, regs["index"]))


@pytest.mark.parametrize("name", [CDNA4, RDNA4, INT])
def test_builtin(rng, name):
    a24, b, c = operands(rng, name)
    v, p = (np.asarray(x) for x in jwmma.compress_2_4(a24))
    regs = [np.asarray(r) for r in (jwmma.pack_a(name, v), jwmma.pack_b(name, b), jwmma.pack_c(name, c),
                                    jwmma.pack_index(name, p))]
    fn = getattr(jwmma, name)
    same(fn(*(big(r) for r in regs)), fn(*regs))


@pytest.mark.parametrize("name", [CDNA4, INT])
@pytest.mark.parametrize("path", ["matrix", pytest.param("registers", marks=pytest.mark.slow)])
def test_gemm(rng, name, path):
    a24, b, c = operands(rng, name)
    kw = dict(builtin=name, path=path, model="exact" if name == CDNA4 else None)  # the conversion is the model's input
    want = jwmma.gemm(a24, b, c, **kw)
    same(jwmma.gemm(big(a24), big(b), big(c), **kw), want)
    v, p = jwmma.compress_2_4(a24)
    same(jwmma.gemm((big(v), big(p)), big(b), big(c), **kw), want)


def test_dot(rng):
    a = (rng.standard_normal((4, 8)) * 20).astype(np.float16)
    b = (rng.standard_normal((4, 8)) * 20).astype(np.float16)
    c = rng.standard_normal(4).astype(np.float32)
    same(jwmma.dot(big(a), big(b), big(c), model="exact"), jwmma.dot(a, b, c, model="exact"))


def test_input_left_as_it_was(rng):
    a = big(rng.standard_normal((4, 8)).astype(np.float32))
    before = a.copy()
    jwmma.prune_2_4(a)
    assert a.dtype == np.dtype(">f4")
    np.testing.assert_array_equal(bits(a), bits(before))
