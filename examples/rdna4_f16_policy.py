"""An RDNA4 compute policy (SwmmacRdna4F16Policy) for ``swmmac_f32_16x16x32_f16_w32``, per lane.

Built from the RDNA4 seed page's tables (one 16x16 tile per wave32, K step 32 dense):
* srcA: lane L holds row L%16, half h = L//16; its 4 VGPRs (8 halves) hold compressed K
  {0,1},{2,3},{8,9},{10,11} (h=0) or {4,5},{6,7},{12,13},{14,15} (h=1);
* srcB: lane L holds column L%16; VGPRs 0-3 hold K rows 8h..8h+7, VGPRs 4-7 rows 16+8h..16+8h+7;
* accumulator: element g of lane L is D[8*(L//16) + g][L%16];
* index: positions 0 and 2 of every group (nibble 0x8 per pair of stored values); the builtin
  reads bits 15:0, so the word is 0x8888.

    python examples/rdna4_f16_policy.py      # checks it against jwmma.gemm, prints a report
"""
from __future__ import annotations

import jax.numpy as jnp

import jwmma
from jwmma import kernel


class SwmmacRdna4F16Policy:
    builtin = "swmmac_f32_16x16x32_f16_w32"
    thread_tile_m = 16
    thread_tile_n = 16
    k_step = 32

    @staticmethod
    def load_a(sA, warp_m, lane, tk_comp):      # sA: float16 compressed A tile, tk_comp = 16
        h = lane // 16
        r = lane % 16
        e = jnp.arange(8)                       # VGPR e//2, half e%2
        c = 8 * (e // 4) + 4 * h + e % 4        # compressed K held by element e
        return sA[(warp_m * 16 + r) * tk_comp + c]                       # v8 __fp16

    @staticmethod
    def load_b(sB, warp_n, lane, cta_n):        # sB: float16 B tile, 32 x cta_n
        h = lane // 16
        j = lane % 16
        f = jnp.arange(16)
        k = 16 * (f // 8) + 8 * h + f % 8       # VGPRs 0-3: 8h..8h+7, VGPRs 4-7: 16+8h..
        return sB[k * cta_n + warp_n * 16 + j]                           # v16 __fp16

    index = staticmethod(kernel.const_index(0x8888))

    @staticmethod
    def mma(d, a, b, idx, model=None):
        return jwmma.swmmac_f32_16x16x32_f16_w32(a, b, d, idx, model=model)

    @staticmethod
    def store_c(d, sub_m, sub_n, N, lane):      # D[sub_m + 8*(L//16) + g][sub_n + L%16] = d[g]
        i = 8 * (lane // 16) + jnp.arange(8)
        j = lane % 16
        return (sub_m + i) * N + sub_n + j, d


class SwmmacRdna4F16MetadataPolicy(SwmmacRdna4F16Policy):
    """The same kernel for any 2:4 pattern: elements 0-3 of half h are compressed 4h..4h+3
    (metadata byte h of the row), elements 4-7 are 8+4h.. (byte 2+h): index = byte[h] |
    byte[2+h] << 8."""

    @staticmethod
    def index(sM, warp_m, lane, tm):
        h = lane // 16
        row = (warp_m * 16 + lane % 16) * tm
        return kernel.pack_bytes(sM[row + h], sM[row + 2 + h], 0, 0)


def problem(rng, m=40, n=64, k=96, fixed=True):
    """Random float16 A (as (values, positions)) and B; ``fixed``: positions 0 and 2."""
    import numpy as np

    values = rng.standard_normal((m, k // 2)).astype(np.float16)
    if fixed:
        pos = np.tile(np.array([0, 2], np.int32), (m, k // 4))
    else:
        pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], np.int32)
        pos = pairs[rng.integers(0, 6, (m, k // 4))].reshape(m, k // 2)
    b = rng.standard_normal((k, n)).astype(np.float16)
    return (values, pos), b


def main():
    import numpy as np

    rng = np.random.default_rng(0)
    a, b = problem(rng)
    dense = np.asarray(jwmma.decompress_2_4(*a)).astype(np.float64)
    ref64 = dense @ np.asarray(b).astype(np.float64)
    spec = jwmma.BUILTINS[SwmmacRdna4F16Policy.builtin]
    print(f"SwmmacRdna4F16Policy ({spec.name}): A {dense.shape[0]}x{dense.shape[1]} (2:4, positions 0,2), "
          f"B {b.shape[0]}x{b.shape[1]}, 2x2 waves per block (M padded to 64)")
    for model in ("exact", None):
        d = kernel.check(SwmmacRdna4F16Policy, a, b, waves=(2, 2), model=model)
        rel = np.abs(np.asarray(d, np.float64) - ref64).max() / np.abs(ref64).max()
        print(f"  model {model or spec.default_model + ' (default)'}: bit-identical to jwmma.gemm "
              f"({d.size} elements); max |D - float64 A@B| / max|A@B| = {rel:.2g}")
    a2, b2 = problem(rng, fixed=False)
    d = kernel.check(SwmmacRdna4F16MetadataPolicy, a2, b2, waves=(2, 2))
    print(f"  metadata index, random 2:4 pattern: bit-identical to jwmma.gemm ({d.size} elements)")
    print("OK")


if __name__ == "__main__":
    main()
