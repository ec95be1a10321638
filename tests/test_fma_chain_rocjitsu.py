"""Issue #14 item 4: rocjitsu's FMA-chain order for the CDNA4 8-bit SMFMAC builtins, its bf16
truncating narrowing and its NaN policy, as parameters of `FMAChain`; the ``fma_chain`` preset
follows rocjitsu, ``fma_chain_k`` keeps the earlier chain. Oracle: tests/oracles/rocjitsu_chain.py
(a transcription of rocjitsu's matrix_fma in Python fractions)."""
import ml_dtypes
import numpy as np
import pytest

import jwmma
from jwmma.isa.table import rocjitsu_chain_order as register_order
from jwmma.models import FMAChain
from nvidia_gen import accumulators, from_codes, operands
from oracles.rocjitsu_chain import chain

ROCJITSU = FMAChain(order="register", narrowing="truncate", nan="propagate")

F8 = ml_dtypes.float8_e4m3fn


def rocjitsu_step_columns(shape):
    """Transcription of rocjitsu's loops (shared/mma_exec.h, exec_smfmac_f32_*_fp8): chain step
    cc = 2q + s reads A byte `byte` of lane group `ga`; compressed column = lanes' group
    offset + byte (BUILTINS.md 4.2: byte b of lane group g is compressed 16g + b)."""
    cols = []
    for cc in range(64 if shape == "16x16x128" else 32):
        if shape == "16x16x128":
            ga = 2 * ((cc >> 5) & 1) + ((cc >> 3) & 1)
            hb = 2 * ((cc >> 2) & 1) + ((cc >> 4) & 1)
        else:
            ga = (cc >> 4) & 1
            hb = 2 * ((cc >> 2) & 1) + ((cc >> 3) & 1)
        cols.append(16 * ga + 4 * hb + (cc & 3))
    return tuple(cols)


def test_register_order_formula():
    issue_16 = [r for lo in (0, 32) for s in (0, 4) for j in (0, 8, 16, 24) for r in range(lo + s + j, lo + s + j + 4)]
    issue_32 = [r for lo in (0, 16) for s in (0, 4) for j in (0, 8) for r in range(lo + s + j, lo + s + j + 4)]
    assert register_order(64) == tuple(issue_16) == rocjitsu_step_columns("16x16x128")
    assert register_order(32) == tuple(issue_32) == rocjitsu_step_columns("32x32x64")


def reproducer(name):
    """Products +448*448, -448*448, 2**-9*2**-9 in A bytes 0, 4, 8 of lane 0 (compressed columns
    0, 4, 8 of row 0), idx 0x44444444 (positions 0 and 1), C = 0."""
    spec = jwmma.BUILTINS[name]
    A = np.zeros((spec.m, spec.kc), np.float32)
    A[0, [0, 4, 8]] = [448, -448, 2.0 ** -9]
    B = np.zeros((spec.k, spec.n), np.float32)
    B[[0, 8, 16], 0] = [448, 448, 2.0 ** -9]  # dense k = 4*(c//2) + pos: 0, 8, 16
    a, b = jwmma.pack_a(name, A.astype(F8)), jwmma.pack_b(name, B.astype(F8))
    c = np.zeros((64, 16 if spec.m == 32 else 4), np.float32)
    return a, b, c, np.full(64, 0x44444444, np.int32), spec.kc


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x128_fp8_fp8",
                                  pytest.param("smfmac_f32_32x32x64_fp8_fp8", marks=pytest.mark.slow)])
def test_rocjitsu_chain_order_reproducer(name):
    """The issue's reproducer: rocjitsu 0x00000000 (2**-18 absorbed by +200704 before -200704
    comes), the compressed-K chain 0x36800000."""
    a, b, c, idx, kc = reproducer(name)
    fn = getattr(jwmma, name)
    rj = np.asarray(fn(a, b, c, idx, model="fma_chain")).view(np.uint32)[0, 0]
    assert rj == np.asarray(fn(a, b, c, idx, model=FMAChain(order="register"))).view(np.uint32)[0, 0]
    k_order = np.asarray(fn(a, b, c, idx, model="fma_chain_k")).view(np.uint32)[0, 0]
    assert hex(k_order) == "0x36800000"
    # jwmma.dot on the same compressed products of output (0, 0): a free-standing dot has no
    # register order, so even the rocjitsu preset chains them in compressed-K order
    av = np.zeros((1, kc), F8)
    av[0, [0, 4, 8]] = [448, -448, 2.0 ** -9]
    bv = np.zeros((1, kc), F8)
    bv[0, [0, 4, 8]] = [448, 448, 2.0 ** -9]
    landed = np.asarray(jwmma.dot(av, bv, np.zeros(1, np.float32), model="fma_chain")).view(np.uint32)[0]  # dot: K order
    assert (hex(landed), hex(rj)) == ("0x36800000", "0x0")  # 2**-18 survives only in K order


@pytest.mark.parametrize("name", ["smfmac_f32_16x16x128_bf8_fp8", "smfmac_f32_32x32x64_fp8_bf8"])
def test_register_order_on_random_builtin_data(name):
    """The builtin with the register-order chain = the oracle chain over the gathered compressed
    products in rocjitsu's order (random fp8/bf8 values, random valid 2:4 indices)."""
    spec = jwmma.BUILTINS[name]
    rng = np.random.default_rng(7)
    fa, fb = {"fp8": "e4m3", "bf8": "e5m2"}[spec.a_type], {"fp8": "e4m3", "bf8": "e5m2"}[spec.b_type]
    A = from_codes(operands(rng, fa, spec.m, spec.kc, specials=False), fa)
    B = from_codes(operands(rng, fb, spec.k, spec.n, specials=False), fb)
    pairs = [(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)]
    pos = np.array([[pairs[p][c % 2] for c, p in enumerate(np.repeat(rng.integers(0, 6, spec.kc // 2), 2))] for _ in range(spec.m)])
    C = accumulators(rng, "f32", spec.m * spec.n, specials=False).reshape(spec.m, spec.n)
    a, b = jwmma.pack_a(name, A), jwmma.pack_b(name, B)
    c = jwmma.pack_c(name, from_codes(C, "f32"))
    idx = jwmma.pack_index(name, pos.astype(np.int32))
    order = register_order(spec.kc)
    d = np.asarray(jwmma.unpack_c(name, getattr(jwmma, name)(a, b, c, idx, model="fma_chain")))
    ac = A.view(np.uint8).astype(int)
    bc = B.view(np.uint8).astype(int)
    for i in range(0, spec.m, 7):
        for j in range(0, spec.n, 5):
            ks = [4 * (cc // 2) + pos[i, cc] for cc in range(spec.kc)]
            want = chain(list(ac[i]), [bc[k, j] for k in ks], int(C[i, j]), fa, fb, "f32", order=order)
            assert int(d[i, j:j + 1].view(np.uint32)[0]) == want, (i, j)


def test_rocjitsu_bf16_narrowing_truncates():
    """swmmac_bf16_16x16x32_bf16_w32, one product 0x3FC1 * 0x3FC1 = f32 0x40118000 (a tie):
    rocjitsu truncates to 0x4011, the earlier chain rounds to 0x4012."""
    name = "swmmac_bf16_16x16x32_bf16_w32"
    spec = jwmma.BUILTINS[name]
    x = np.array([0x3FC1], np.uint16).view(ml_dtypes.bfloat16)[0]
    A = np.zeros((16, spec.kc), ml_dtypes.bfloat16)
    A[0, 0] = x
    B = np.zeros((spec.k, 16), ml_dtypes.bfloat16)
    B[0, 0] = x
    pos = np.tile(np.arange(spec.kc) % 2, (16, 1)).astype(np.int32)
    args = (jwmma.pack_a(name, A), jwmma.pack_b(name, B), jwmma.pack_c(name, np.zeros((16, 16), ml_dtypes.bfloat16)),
            jwmma.pack_index(name, pos))
    out = lambda m: int(np.asarray(jwmma.unpack_c(name, jwmma.swmmac_bf16_16x16x32_bf16_w32(*args, model=m))).view(np.uint16)[0, 0])
    # 0x3FC1**2 = 2.27349853515625 = f32 0x40118000: truncation 0x4011, nearest 0x4012 (a tie, to even)
    assert (out("fma_chain_k"), out("fma_chain")) == (0x4012, 0x4011)
    dot = lambda m: int(np.asarray(jwmma.dot(A[:1, :1], B[:1, :1].T, np.zeros(1, ml_dtypes.bfloat16), model=m)).view(np.uint16)[0])
    assert (dot("fma_chain_k"), dot("fma_chain")) == (0x4012, 0x4011)
    assert chain([0x3FC1], [0x3FC1], 0, "bf16", "bf16", "bf16", narrowing="truncate") == 0x4011


NAN_CASES = [  # (a, b, c, rocjitsu's result): f16 operands (ints are f16 codes), f32 C code
    ([1.0, 2.0, 0.0], [1.0, 1.0, 0.0], 0x7F812345, 0x7FC12345),        # C's signalling NaN, quieted, payload kept
    ([0.0, np.inf, 0.0], [5.0, 0.0, 0.0], 0x3F800000, 0xFFC00000),     # Inf * 0: invalid
    ([np.inf, 1.0, 0.0], [1.0, -np.inf, 0.0], 0x0, 0xFFC00000),        # Inf - Inf: invalid
    ([1.0, 0xFE00, 1.0], [1.0, 1.0, 0x7E00], 0x7F812345, 0x7FC00000),  # the LAST step's NaN operand wins (B, step 2)
    ([0xFE00, 1.0, 0.0], [0x7E00, 1.0, 0.0], 0x0, 0xFFC00000),         # A before B within a step
]


def test_rocjitsu_nan_policy():
    f16 = lambda row: [np.array([x], np.uint16).view(np.float16)[0] if isinstance(x, int) else np.float16(x) for x in row]
    av = np.array([f16(r[0]) for r in NAN_CASES], np.float16)
    bv = np.array([f16(r[1]) for r in NAN_CASES], np.float16)
    cv = np.array([r[2] for r in NAN_CASES], np.uint32).view(np.float32)
    want = [r[3] for r in NAN_CASES]
    run = lambda m: np.asarray(jwmma.dot(av, bv, cv, model=m)).view(np.uint32).astype(int).tolist()
    assert run(FMAChain(nan="propagate")) == run("fma_chain") == want
    assert run(FMAChain(nan="canonical")) == run("fma_chain_k") == [0x7FC00000] * len(NAN_CASES)
    codes = lambda v: list(v.view(np.uint16).astype(int))
    assert [chain(codes(av[i]), codes(bv[i]), NAN_CASES[i][2], "f16", "f16", "f32") for i in range(len(NAN_CASES))] == want


def test_nan_narrowing_and_validation():
    """A propagated NaN narrows keeping its sign, quiet: f16 (nearest) and bf16 (truncated)."""
    x = np.array([[np.inf, 1.0]], np.float16)
    y = np.array([[0.0, 1.0]], np.float16)
    f16 = int(np.asarray(jwmma.dot(x, y, np.zeros(1, np.float16), model="fma_chain")).view(np.uint16)[0])
    assert f16 == 0xFE00  # 0xFFC00000 (invalid) narrowed
    xb, yb = x.astype(ml_dtypes.bfloat16), y.astype(ml_dtypes.bfloat16)
    bf = int(np.asarray(jwmma.dot(xb, yb, np.zeros(1, ml_dtypes.bfloat16), model="fma_chain")).view(np.uint16)[0])
    assert bf == 0xFFC0
    with pytest.raises(ValueError, match="order must be one of"):
        FMAChain(order="rocjitsu")
    with pytest.raises(ValueError, match="nan must be one of"):
        FMAChain(nan="negative")


def test_chain_order_only_on_the_eight_cdna4_8bit_builtins():
    ordered = sorted(n for n, s in jwmma.BUILTINS.items() if s.chain_order is not None)
    assert ordered == sorted(f"smfmac_f32_{s}_{a}_{b}" for s in ("16x16x128", "32x32x64")
                             for a in ("fp8", "bf8") for b in ("fp8", "bf8"))
    for n in ordered:
        assert jwmma.BUILTINS[n].chain_order == register_order(jwmma.BUILTINS[n].kc)
