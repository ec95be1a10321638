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
builtin tile per wave (a multi-block row's call: its blocks side by side, see below). The tiles
given to the loaders are flat, row-major 1-D arrays, like the HIP pointers into LDS: ``sA`` is
``block_m x k_step/2`` (row stride ``tk_comp = k_step/2``; a dense builtin's: ``k_step``),
``sB`` is ``k_step x block_n`` (row stride ``cta_n = block_n``), ``sM`` is
``block_m x k_step/8`` bytes (a dense builtin's index is unused). Element storage: 8-bit data
are ``uint8`` bytes (fp8/bf8 bit patterns, two's-complement integers), 4-bit data one ``uint8``
per element (the nibble; pack the nibbles yourself), 16-bit data the register dtype of the
builtin (float16, bfloat16, or int16 for RDNA4 and CDNA bf16), f32 data float32, doubles
float64. Metadata byte ``b`` of a row holds, in bits ``[2s+1:2s]``, the 2:4
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

Multi-block rows
----------------
The CDNA multi-block MFMA (``mfma_f32_32x32x1f32``: 2 blocks, ``_16x16x1f32``: 4,
``_4x4x1f32``: 16, the x4f16, x4bf16_1k, x4i8 and x2bf16 forms likewise, and
``mfma_f64_4x4x4f64``: 4; docs/spec/BUILTINS_DENSE.md 10) compute ``blocks`` independent
M x N x K products in one call. A wave's tile is the call's blocks **side by side along N**:
``thread_tile_m = M``, ``thread_tile_n = blocks*N`` (64 on every form but the f64 4x4x4's 16),
``k_step = K``; block ``b`` computes wave-tile columns ``b*N .. b*N+N-1`` from the wave's M
rows of A (the same rows for every block) and those columns of B. So ``load_a`` gets ``sA``
(``block_m x k_step``) and fills every block's A lanes with the wave's rows (on the f32, f16,
bf16 and i8 forms lane L, of block L // M, holds row L % M); ``load_b`` gets ``sB``
(``k_step x block_n``) and reads column ``warp_n*blocks*N + b*N + j`` (there: column
``warp_n*64 + L``); ``store_c`` gets the lane's registers of every block and returns offsets in
the wave tile at (sub_m, sub_n), e.g. for ``mfma_f32_16x16x1f32`` element t of lane L (block
t // 4) -> row ``4*(L//16) + t%4``, column ``16*(t//4) + L%16``. This is how `jwmma.gemm`'s
register path fills a call, with consecutive output tiles of a row of tiles (its matrix path
computes each M x N tile as one block; the blocks being independent, both give the bits that
`check` compares). The default mma passes cbsz = abid = 0, blgp = 0 (every block reads its own A
lanes); since all blocks of a wave tile read the same A rows, a kernel's own mma may broadcast
block 0's A instead (cbsz = log2(blocks), abid = 0; then only block 0's A lanes matter).

f64 rows
--------
``mfma_f64_16x16x4f64`` and ``mfma_f64_4x4x4f64`` (BUILTINS_DENSE.md 11): memory and registers
hold doubles as float64 (``load_a``/``load_b``: one double per lane; ``store_c``: 4 per lane on
16x16x4, 1 on 4x4x4), and A, B, C are float64 as `jwmma.gemm` takes them (numpy arrays, or JAX
arrays with jax_enable_x64 on). The kernel runs inside `jwmma.numerics.rounding.x64_scope`, never
switching the user's flag, so the policy's code sees 64-bit JAX types (``jnp.arange`` gives
int64; offsets are taken as int32). D is what gemm gives: a float64 JAX array with
jax_enable_x64 on, a numpy float64 array (the same bits) with it off. The builtin takes each
double as two uint32 words, low word first; the default mma converts on the bits. A policy's own
mma gets and returns float64 registers and converts itself: words
``lax.bitcast_convert_type(x, jnp.uint32).reshape(64, -1)``, back
``lax.bitcast_convert_type(w.reshape(64, -1, 2), jnp.float64)``.

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
