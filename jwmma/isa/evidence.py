"""The evidence behind each row's default model, and the per-chip model choices of the rows that
run on several CDNA generations (`jwmma.isa.table` names them in its rows: one string per kind
of evidence, cited by `jwmma list` and `jwmma models`). Data only; BUILTINS.md, BUILTINS_MORE.md
and BUILTINS_DENSE.md give the sources."""
from __future__ import annotations

__all__ = [
    "GFX12_F32", "GFX12_16", "GFX12_8", "STAGED", "WMMA_F32", "WMMA_16", "WMMA_8", "WMMA_INT", "CDNA3",
    "EXACT_I8", "CDNA3_942", "MFMA_942", "MFMA_F32", "MFMA_XF32", "MFMA_950", "MFMA_908", "MFMA_90A",
    "MFMA_F32_12", "ON_CDNA12", "ON_CDNA12_F32", "ON_CDNA2", "BF16_908", "BF16_90A", "ON_CDNA12_BF16",
    "MFMA_I8_12", "MFMA_I8", "GFX11_F32", "GFX11_16", "GFX11_INT", "MFMA_MX", "MFMA_F64", "MFMA_F64_90A",
    "ON_CDNA2_F64"
]

GFX12_F32 = ("measured on gfx1201 dense f16/bf16 WMMA (rocjitsu); transfer to SWMMAC and its "
             "4-product step grouping assumed")
GFX12_16 = "measured on gfx1201 dense packed WMMA (narrowing after every step); transfer to SWMMAC assumed"
GFX12_8 = "assumed: no RDNA4 fp8 matrix captures; single-grid DOT4 step by analogy"
STAGED = ("second-hand: GoC's gfx1201 SWMMAC digests need saturation after each compressed-K half "
          "(64/64 for iu4 K64); without clamp the i32 result wraps")
WMMA_F32 = ("measured on gfx1201 dense f16/bf16 WMMA (rocjitsu): 4 products per step in documented K "
            "order reproduce all 24 one-output captures")
WMMA_16 = ("measured on gfx1201 dense packed f16/bf16 WMMA (rocjitsu): narrowing after every 4-product "
           "step reproduces all 18 packed captures")
WMMA_8 = "assumed: no RDNA4 fp8 matrix captures; gfx12_dot4's 8-bit step (one grid per 4 products)"
WMMA_INT = ("second-hand: GoC's gfx1201 dense integer digests need saturation after each K-half "
            "(384/384; one final saturation, model 'exact': 240/384); without clamp the i32 result wraps")
CDNA3 = ("assumed: MMA-Sim's bit-accurate CDNA3 (gfx942) algorithm with OCP fp8 decoding; no gfx950 "
         "characterisation is published")
EXACT_I8 = "assumed: exact dot, i32 result wraps (the builtin has no clamp operand)"
CDNA3_942 = ("measured on MI300X (gfx942) dense MFMA by MMA-Sim (its bit-accurate CDNA3 algorithm; FNUZ "
             "fp8/bf8 on gfx942, OCP on gfx950); its application to sparse SMFMAC, and to gfx950, assumed")
MFMA_942 = ("measured: MMA-Sim's CDNA3 algorithm, validated on MI300X (gfx942) dense MFMA (f16/bf16 groups of 8, "
            "fp8/bf8 16 in two stages); the same on gfx950 (target='gfx950', OCP fp8) is an assumption")
MFMA_F32 = ("measured: MMA-Sim's CDNA3 f32 MFMA is an f32 FMA chain in K order, validated on MI300X; the same on "
            "gfx950 is an assumption")
MFMA_XF32 = ("measured: MMA-Sim's CDNA3 xf32 MFMA (operands cut to xf32, fused groups of 4), validated on MI300X; "
             "gfx942 only")
MFMA_950 = ("[ASSUMED]: MMA-Sim's CDNA3 parameters applied to the gfx950 doubled-K form (no gfx950 "
            "characterisation is published)")
MFMA_908 = ("measured: MMA-Sim 2.1.1's CDNA1 algorithm (exact fused groups of 4 f16 products, f32 RNE per group), "
            "validated on MI100 (gfx908) by its authors")
MFMA_90A = ("measured: MMA-Sim 2.1.1's CDNA2 algorithm (f32 products, pairwise tree of 4 in f32 RNE, denormals "
            "flushed at every step), validated on MI200 (gfx90a) by its authors")
MFMA_F32_12 = ("measured: MMA-Sim 2.1.1's CDNA1/CDNA2 f32 MFMA is an f32 FMA chain in K order (MMA_FMA), validated on "
               "MI100/MI200 by its authors")
#: the single-block rows on gfx908/gfx90a: their model and evidence, blgp swizzles B's lanes
ON_CDNA12 = {"gfx908": dict(model="cdna1", evidence=MFMA_908, blgp="swizzle"),
             "gfx90a": dict(model="cdna2", evidence=MFMA_90A, blgp="swizzle")}
ON_CDNA12_F32 = {t: dict(r, evidence=MFMA_F32_12) for t, r in ON_CDNA12.items()}
ON_CDNA2 = {"gfx90a": ON_CDNA12["gfx90a"]}
#: the non-1k bf16 rows (gfx908/gfx90a only): MMA-Sim's CDNA1 groups of 2 (the cdna1 preset picks 2 for
#: bf16) and its CDNA2 tree of 2 (MMA_FTZ_MUL_ADD(P=2): the format does not tell it from bf16_1k, P=4, so the
#: row names the model)
BF16_908 = ("measured: MMA-Sim 2.1.1's CDNA1 algorithm for the non-1k bf16 MFMA (exact fused groups of 2 bf16 "
            "products, f32 RNE per group), validated on MI100 (gfx908) by its authors")
BF16_90A = ("measured: MMA-Sim 2.1.1's CDNA2 algorithm for the non-1k bf16 MFMA (f32 products, pairwise tree of 2 "
            "in f32 RNE, denormals flushed at every step), validated on MI200 (gfx90a) by its authors")
ON_CDNA12_BF16 = {"gfx908": dict(model="cdna1", evidence=BF16_908, blgp="swizzle"),
                  "gfx90a": dict(model="CDNA2(group=2)", evidence=BF16_90A, blgp="swizzle")}
MFMA_I8_12 = ("exact dot, i32 result wraps (integer products and sums are exact; no clamp operand: the builtin "
              "has none and LLVM's gfx908 syntax lists only cbsz/abid/blgp); MMA-Sim has no i8 MFMA")
MFMA_I8 = "exact dot, i32 result wraps (integer products and sums are exact; no clamp operand)"
GFX11_F32 = ("measured on gfx1100: rocjitsu's gfx11 DOT2 chain (8 steps of 2 products, sign-frame truncation) "
             "reproduces its W7900 captures (all 103 DOT2 cases and the 256-output WMMA matrix); [ASSUMED] on "
             "gfx1151 (RDNA3.5), whose silicon is reported to differ (ROCm/rocm-systems issue 12056, open)")
GFX11_16 = ("measured on gfx1100: rocjitsu's gfx11 DOT2 chain on a 16-bit accumulator (C widened, an f16 C aligned "
            "on a -14 floor, narrowed after every step: f16 by RNE from the integer total, bf16 by truncating the f32 "
            "result) reproduces its W7900 packed-WMMA captures (all 28 result matrices, both wave sizes, f16 and bf16: "
            "7168/7168 outputs; both OPSEL halves: the 132 operand captures a builtin expresses); [ASSUMED] on "
            "gfx1151 (ROCm/rocm-systems issue 12056)")
GFX11_INT = "exact dot, i32 result wraps; clamp saturates once at the end (rocjitsu's gfx11 model)"
MFMA_MX = ("[ASSUMED]: no gfx950 characterisation is published; BlockScaled's fields say each choice "
           "(scales per product, fused groups of 32, 24 fractional bits, 0xFF scale -> NaN); rocjitsu's chain is "
           "preset mx_rocjitsu")
#: the f64 MFMA (BUILTINS_DENSE.md 11): MMA-Sim's MMA_FMA on doubles (std::fma per product, K order, from C)
MFMA_F64 = ("measured: MMA-Sim 2.1.1's CDNA3 f64 MFMA is an f64 FMA chain in K order from C (MMA_FMA), validated on "
            "MI300X by its authors; the same on gfx950 is an assumption")
MFMA_F64_90A = ("measured: MMA-Sim 2.1.1's CDNA2 f64 MFMA is an f64 FMA chain in K order from C (MMA_FMA), validated "
                "on MI200 (gfx90a) by its authors; f64 is not flushed there (PyTorch's MI200 note)")
#: the f64 rows on gfx90a: CDNA2's model (the same chain) and no BLGP (the calculator: "BLGP bits supported: False")
ON_CDNA2_F64 = {"gfx90a": dict(model="cdna2", evidence=MFMA_F64_90A, blgp="")}
