"""The CDNA4 FP8 compute policy of the seed page (SmfmacCdna4FP8Policy), per lane in JAX.

HIP original: ``__builtin_amdgcn_smfmac_f32_16x16x128_fp8_fp8``, one 16x16 output tile per
wave64, K step 128 (dense), A compressed by keeping positions 0 and 2 of every group of four,
so the index is the constant 0x88888888. Each function below is the seed's code line for line;
``lane``/``warp_m``/``warp_n`` are 0-d int32 arrays and `jwmma.kernel.run` vmaps over them.

    python examples/cdna4_fp8_policy.py      # checks it against jwmma.gemm, prints a report
"""
from __future__ import annotations

import jax.numpy as jnp

import jwmma
from jwmma import kernel


class SmfmacCdna4FP8Policy:
    builtin = "smfmac_f32_16x16x128_fp8_fp8"
    thread_tile_m = 16
    thread_tile_n = 16
    k_step = 128

    @staticmethod
    def load_a(sA, warp_m, lane, tk_comp):      # sA: uint8 bytes of the compressed A tile
        g = lane // 16
        n = lane % 16
        a_off = (warp_m * 16 + n) * tk_comp + g * 16
        j = jnp.arange(4)
        return kernel.pack_bytes(sA[a_off + j * 4 + 0], sA[a_off + j * 4 + 1],
                                 sA[a_off + j * 4 + 2], sA[a_off + j * 4 + 3])      # v4int

    @staticmethod
    def load_b(sB, warp_n, lane, cta_n):        # sB: uint8 bytes of the B tile (K x cta_n)
        g = lane // 16
        n = lane % 16
        b_col = warp_n * 16 + n
        v = jnp.arange(8)
        kk = (v // 4) * 64 + g * 16 + (v % 4) * 4
        return kernel.pack_bytes(sB[kk * cta_n + b_col], sB[(kk + 1) * cta_n + b_col],
                                 sB[(kk + 2) * cta_n + b_col], sB[(kk + 3) * cta_n + b_col])  # v8int

    # positions 0 and 2 of every group: nibble 0x8 for each of the lane's 8 containers
    index = staticmethod(kernel.const_index(0x88888888))

    @staticmethod
    def mma(d, a, b, idx, model=None):
        return jwmma.smfmac_f32_16x16x128_fp8_fp8(a, b, d, idx, 0, 0, model=model)

    @staticmethod
    def store_c(d, sub_m, sub_n, N, lane):      # D[(sub_m + g*4 + r)*N + sub_n + n] = d[r]
        g = lane // 16
        n = lane % 16
        r = jnp.arange(4)
        return (sub_m + g * 4 + r) * N + sub_n + n, d


class SmfmacCdna4FP8MetadataPolicy(SmfmacCdna4FP8Policy):
    """The same kernel for any 2:4 pattern: the index word of lane group g is the row's
    metadata bytes 4g..4g+3 (2 bits per stored byte of A, little-endian)."""

    @staticmethod
    def index(sM, warp_m, lane, tm):
        g = lane // 16
        n = lane % 16
        off = (warp_m * 16 + n) * tm + g * 4
        return kernel.pack_bytes(sM[off], sM[off + 1], sM[off + 2], sM[off + 3])


def problem(rng, m=64, n=96, k=512, fixed=True):
    """Random fp8 A (as (values, positions)) and B. ``fixed``: positions 0 and 2 of every
    group (the seed's host compression); otherwise a random 2:4 pattern."""
    import ml_dtypes
    import numpy as np

    scale = 2.0 ** rng.integers(-4, 4, (m, k // 2))
    values = (rng.standard_normal((m, k // 2)) * scale).astype(ml_dtypes.float8_e4m3fn)
    if fixed:
        pos = np.tile(np.array([0, 2], np.int32), (m, k // 4))
    else:
        pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], np.int32)
        pos = pairs[rng.integers(0, 6, (m, k // 4))].reshape(m, k // 2)
    b = rng.standard_normal((k, n)).astype(ml_dtypes.float8_e4m3fn)
    return (values, pos), b


def main():
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = problem(rng)
    dense = np.asarray(jwmma.decompress_2_4(*a)).astype(np.float64)
    ref64 = dense @ np.asarray(b).astype(np.float64)
    spec = jwmma.BUILTINS[SmfmacCdna4FP8Policy.builtin]
    print(f"SmfmacCdna4FP8Policy ({spec.name}): A {a[0].shape[0]}x{dense.shape[1]} (2:4, positions 0,2), "
          f"B {b.shape[0]}x{b.shape[1]}, 2x2 waves per block")
    for model in ("exact", None):
        d = kernel.check(SmfmacCdna4FP8Policy, a, b, waves=(2, 2), model=model)
        rel = np.abs(np.asarray(d, np.float64) - ref64).max() / np.abs(ref64).max()
        print(f"  model {model or spec.default_model + ' (default)'}: bit-identical to jwmma.gemm "
              f"({d.size} elements); max |D - float64 A@B| / max|A@B| = {rel:.2g}")
    a2, b2 = problem(rng, fixed=False)
    d = kernel.check(SmfmacCdna4FP8MetadataPolicy, a2, b2, waves=(2, 2))
    print(f"  metadata index, random 2:4 pattern: bit-identical to jwmma.gemm ({d.size} elements)")
    print("OK")


if __name__ == "__main__":
    main()
