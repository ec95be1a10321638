"""Lane-parallel kernel emulation: write one wave's code, run it over a grid of blocks and waves.

A kernel author ports the compute policy of a HIP kernel (the ``ComputePolicy`` of the seed
pages: ``load_a``, ``load_b``, ``mma``, ``store_c``) to JAX *per lane*, runs it here on a
whole tiled GEMM and compares the result with `jwmma.gemm`, before having hardware. Wrong
loaders, wrong index packing or a wrong store show up as a readable diff.

The kernel that `run` emulates (one builtin per K step, as the seed pages' generic kernel)::

    for every block (bm, bn) of the grid, every wave (wm, wn) of the block:      # vmap
        sub_m = bm*block_m + wm*tile_m ;  sub_n = bn*block_n + wn*tile_n
        d = C[store_c offsets]                                # zeros when C is None
        for every K step s:                                   # lax.scan
            sA = block's compressed A tile, rows bm*block_m.., compressed cols s*k_step/2..
            sB = block's B tile, rows s*k_step.., cols bn*block_n..
            sM = block's sparsity metadata tile (hipSPARSELt bytes, see below)
            a   = [load_a(sA, wm, lane, k_step/2)   for lane]   # vmap over lanes
            b   = [load_b(sB, wn, lane, block_n)    for lane]
            idx = [index(sM, wm, lane, k_step/8)    for lane]
            d   = mma(d, a, b, idx)                               # the wave's builtin call
        D[offsets] = values  where  offsets, values = store_c(d[lane], sub_m, sub_n, N, lane)

with ``block_m = waves[0]*tile_m``, ``block_n = waves[1]*tile_n`` and one ``tile_m x tile_n``
builtin tile per wave. The tiles given to the loaders are flat, row-major 1-D arrays, like the
HIP pointers into LDS: ``sA`` is ``block_m x k_step/2`` (row stride ``tk_comp = k_step/2``),
``sB`` is ``k_step x block_n`` (row stride ``cta_n = block_n``), ``sM`` is
``block_m x k_step/8`` bytes. Element storage: 8-bit data are ``uint8`` bytes (fp8/bf8 bit
patterns, two's-complement integers), 4-bit data one ``uint8`` per element (the nibble; pack
the nibbles yourself), 16-bit data the register dtype of the builtin (float16, bfloat16, or
int16 for RDNA4 bf16). Metadata byte ``b`` of a row holds, in bits ``[2s+1:2s]``, the 2:4
position (0..3) of compressed element ``4b+s`` (hipSPARSELt order, BUILTINS.md 5).

Writing a policy
----------------
A policy is any object (a class with plain functions, as below, or a `Policy`) with:

* ``builtin``: the builtin's name; tile sizes follow from it (``thread_tile_m/n``, ``k_step``
  = dense K per call; if the policy defines them they must agree);
* ``load_a(sA, warp_m, lane, tk_comp)`` -> the lane's A register vector;
  ``load_b(sB, warp_n, lane, cta_n)`` -> the lane's B vector;
  ``index(sM, warp_m, lane, tm)`` -> the lane's int32 index word (`const_index` for a fixed one);
  ``store_c(d, sub_m, sub_n, N, lane)`` -> ``(offsets, values)``: flat row-major offsets into
  D (leading dimension ``N``) of the lane's accumulator elements, and the values (``d``);
* optionally ``mma(d, a, b, idx, model)`` (whole-wave registers; default: the builtin, HIP
  argument order, ``cbsz=abid=0``, signed integers, no clamp).
* optionally ``target``: the chip, for a builtin that runs on several (the CDNA3 SMFMAC:
  'gfx942', the default, FNUZ fp8/bf8; 'gfx950', OCP), also ``target=`` of `run` and `check`.

``lane``, ``warp_m`` and ``warp_n`` are 0-d int32 JAX arrays: write the code for one lane
with ``jnp`` indexing, exactly as the HIP code is written, and `run` vmaps it over lanes and
waves (so no Python ``if`` on them: use ``jnp.where``). Use `pack_bytes` to build int32 words
from bytes and `i32` for 32-bit constants such as ``0x88888888``. Out-of-range reads do not
fail (JAX clamps them; negative indices wrap): they show up in the diff. Example, for
``smfmac_f32_16x16x64_f16`` (layouts from BUILTINS.md 4.2)::

    import jax.numpy as jnp
    from jwmma import kernel

    class SmfmacF16Policy:                        # one 16x16 tile per wave, K step 64
        builtin = "smfmac_f32_16x16x64_f16"

        def load_a(sA, warp_m, lane, tk_comp):    # lane group g: compressed cols 8g..8g+7
            g, r = lane // 16, lane % 16
            return sA[(warp_m * 16 + r) * tk_comp + 8 * g + jnp.arange(8)]

        def load_b(sB, warp_n, lane, cta_n):      # two K halves: k = 32*(f//8) + 8g + f%8
            g, r = lane // 16, lane % 16
            f = jnp.arange(16)
            return sB[(32 * (f // 8) + 8 * g + f % 8) * cta_n + warp_n * 16 + r]

        def index(sM, warp_m, lane, tm):          # 8 elements x 2 bits: metadata bytes 2g, 2g+1
            g, r = lane // 16, lane % 16
            row = (warp_m * 16 + r) * tm
            return kernel.pack_bytes(sM[row + 2 * g], sM[row + 2 * g + 1], 0, 0)

        def store_c(d, sub_m, sub_n, N, lane):    # element t -> row 4g + t, column r
            g, r = lane // 16, lane % 16
            return (sub_m + 4 * g + jnp.arange(4)) * N + sub_n + r, d

    d = kernel.check(SmfmacF16Policy, a, b, waves=(2, 2))   # AssertionError with a diff if wrong

Entry points: `run` (D of the emulated kernel), `check` (run and compare bit for bit with
`jwmma.gemm`; raises AssertionError with the diff), `compare` (the diff text or None),
`metadata` (positions -> metadata bytes). Worked examples: ``examples/cdna4_fp8_policy.py``
and ``examples/rdna4_f16_policy.py``.

Modules: `policy` (the `Policy` record and the helpers above), `runner` (`run`, `check`),
`diff` (`compare`). ``options=`` / ``backend=`` of `run` and `check` reach the default mma and
the reference gemm (`jwmma.Options`).

Cost: the loaders run for all waves and K steps at once (memory ~ waves x steps x lanes x
registers), so this is meant for small multi-tile problems, not for large GEMMs (use
`jwmma.gemm`). The builtin calls are compiled separately from the loaders and cached by
(builtin, mma, model, shapes): editing a loader recompiles only the cheap part.
"""

from __future__ import annotations

from . import diff, policy, runner
from .diff import compare
from .policy import Policy, as_policy, const_index, i32, metadata, pack_bytes
from .runner import Geometry, check, run

__all__ = ["Policy", "as_policy", "run", "check", "compare", "pack_bytes", "i32", "const_index", "metadata",
           "Geometry", "policy", "runner", "diff"]
