"""Dense CDNA3/CDNA4 MFMA and CDNA4 block-scaled f8f6f4 MFMA: layouts and slow references.

Written from docs/spec/BUILTINS_DENSE.md (sections 2 and 4: dense layouts; 3: the BLGP lane
swizzle; 5.2/5.3: scaled packing, layouts and scale lanes; 5.4: rocjitsu's scaled arithmetic;
6: MMA-Sim's gfx942 xf32/f32 arithmetic) and NUMERICS.md section 1 (the CDNA3 fused-group
algorithm). Plain Python ints and Fractions, one output at a time; numpy only to hold arrays.
Never imports jwmma.

Layouts: functions of the lane ``L`` (0..63) and the element index ``e`` (``t`` for C/D) giving a
matrix coordinate, and inverse functions giving (lane, element) back. ``M`` is the instruction's
M (= N), ``K`` the K of its name.

References:
* `scaled_mfma_reference` - one scaled MFMA (``D = f(A, B, C, scales)``) under the parametrised
  block-scaled model (product- or block-level scaling, fused groups or an FMA chain);
* `xf32_mfma_reference` - gfx942 xf32 (MMA-Sim 2.x ``MMA_TR_FDPA(F=24, F2=31, 'RNE-FP32',
  L_max=4)`` on operands cut to xf32), through `ref_models.cdna3_dot`;
* `f32_mfma_reference` - the f32 forms: an f32 FMA chain in k order from C.
"""
from __future__ import annotations

import numpy as np

from . import mx
from .formats import F32, decode, encode, inf_bits, qnan
from .ref_models import FusedParams, cdna3_dot, fma_chain_dot

QNAN32 = 0x7FC00000


# =========================================================================== dense layouts
def dense_nk(M: int, K: int) -> int:
    """K values per lane of a single-block dense MFMA: nk = K // (64 // M)."""
    return K // (64 // M)


def dense_a(M: int, K: int, L: int, e: int):
    """A element e of lane L -> (i, k) = (L % M, (K // (64 // M)) * (L // M) + e)."""
    return L % M, dense_nk(M, K) * (L // M) + e


def dense_b(M: int, K: int, L: int, e: int):
    """B element e of lane L -> (k, j) = ((K // (64 // M)) * (L // M) + e, L % M)."""
    return dense_nk(M, K) * (L // M) + e, L % M


def dense_a_inverse(M: int, K: int, i: int, k: int):
    """A[i][k] -> (L, e) = (M * (k // nk) + i, k % nk)."""
    nk = dense_nk(M, K)
    return M * (k // nk) + i, k % nk


def dense_b_inverse(M: int, K: int, k: int, j: int):
    """B[k][j] -> (L, e) = (M * (k // nk) + j, k % nk)."""
    nk = dense_nk(M, K)
    return M * (k // nk) + j, k % nk


def cd_elems(M: int) -> int:
    """32-bit C/D elements per lane: 4 (16x16) or 16 (32x32)."""
    return M * M // 64


def cd(M: int, L: int, t: int):
    """32-bit C/D element t of lane L -> (i, j): 16x16 ``(4 * (L // 16) + t, L % 16)``;
    32x32 ``(8 * (t // 4) + 4 * (L // 32) + t % 4, L % 32)``."""
    if M == 16:
        return 4 * (L // 16) + t, L % 16
    if M == 32:
        return 8 * (t // 4) + 4 * (L // 32) + t % 4, L % 32
    raise ValueError(f"M must be 16 or 32, got {M}")


def cd_inverse(M: int, i: int, j: int):
    """(i, j) -> (L, t): 16x16 ``(16 * (i // 4) + j, i % 4)``; 32x32
    ``(32 * ((i // 4) % 2) + j, 4 * (i // 8) + i % 4)``."""
    if M == 16:
        return 16 * (i // 4) + j, i % 4
    if M == 32:
        return 32 * ((i // 4) % 2) + j, 4 * (i // 8) + i % 4
    raise ValueError(f"M must be 16 or 32, got {M}")


def cd_f64(L: int, t: int):
    """f64 16x16x4 C/D element t (VGPR pair [2t+1:2t]) of lane L -> (4 * t + L // 16, L % 16)."""
    return 4 * t + L // 16, L % 16


def cd_f64_inverse(i: int, j: int):
    """(i, j) -> (L, t) = (16 * (i % 4) + j, i // 4) for the f64 16x16x4 C/D."""
    return 16 * (i % 4) + j, i // 4


# ------------------------------------------------------------------- BLGP (CDNA3 f32 forms)
def blgp_source_lane(blgp: int, L: int) -> int:
    """The lane the B value of lane L is read from under BLGP 0..7 (the two f32 CDNA3 forms):
    L, L % 32, 32 + L % 32, (L + 16) % 64, L % 16, 16 + L % 16, 32 + L % 16, 48 + L % 16."""
    table = (L, L % 32, 32 + L % 32, (L + 16) % 64, L % 16, 16 + L % 16, 32 + L % 16, 48 + L % 16)
    if not 0 <= blgp <= 7:
        raise ValueError(f"blgp must be 0..7, got {blgp}")
    return table[blgp]


def blgp_b_source(M: int, K: int, blgp: int, k: int, j: int):
    """(lane, element) of the builtin's B register whose value is used as B[k][j] under BLGP:
    element k % nk of lane P(N * (k // nk) + j) (N = M, P = `blgp_source_lane`)."""
    nk = dense_nk(M, K)
    return blgp_source_lane(blgp, M * (k // nk) + j), k % nk


# =========================================================================== scaled layouts
SCALED_ELEMS = 32  # elements per lane of both scaled shapes (16x128/64 = 32x64/64)


def scaled_k(M: int, w: int, L: int, e: int) -> int:
    """k held by element e of lane L of a scaled operand with w-bit elements:
    w = 8: ``16 * (64 // M) * (e // 16) + 16 * (L // M) + e % 16`` (16-element chunks);
    w = 6, 4: ``32 * (L // M) + e`` (contiguous)."""
    if w == 8:
        return 16 * (64 // M) * (e // 16) + 16 * (L // M) + e % 16
    if w in (4, 6):
        return 32 * (L // M) + e
    raise ValueError(f"element width must be 4, 6 or 8, got {w}")


def scaled_a(M: int, w: int, L: int, e: int):
    """Scaled A element e of lane L -> (i, k) = (L % M, `scaled_k`)."""
    return L % M, scaled_k(M, w, L, e)


def scaled_b(M: int, w: int, L: int, e: int):
    """Scaled B element e of lane L -> (k, j) = (`scaled_k`, L % M)."""
    return scaled_k(M, w, L, e), L % M


def scaled_inverse(M: int, w: int, idx: int, k: int):
    """(row i of A, or column j of B; k) -> (L, e). w = 8: ``(M * ((k // 16) % (64 // M)) + idx,
    16 * (k // (16 * (64 // M))) + k % 16)``; w = 6, 4: ``(M * (k // 32) + idx, k % 32)``."""
    if w == 8:
        return M * ((k // 16) % (64 // M)) + idx, 16 * (k // (16 * (64 // M))) + k % 16
    if w in (4, 6):
        return M * (k // 32) + idx, k % 32
    raise ValueError(f"element width must be 4, 6 or 8, got {w}")


def scale_lane(M: int, idx: int, kb: int) -> int:
    """Lane holding the scale of A row idx (or B column idx), K-block kb = k // 32: M * kb + idx."""
    return M * kb + idx


def scale_byte(word: int, opsel: int) -> int:
    """The E8M0 byte opsel (0..3) selects from a lane's 32-bit scale value."""
    if not 0 <= opsel <= 3:
        raise ValueError(f"opsel must be 0..3, got {opsel}")
    return (int(word) >> (8 * opsel)) & 0xFF


def scale_words(scales, M: int, opsel: int, fill: int = 0) -> list:
    """64 lane words carrying ``scales`` (idx x K/32 nested lists: sa as given, sb transposed to
    column x block) in byte opsel of lane M * kb + idx; the other bytes hold ``fill``."""
    base = sum((fill & 0xFF) << (8 * b) for b in range(4) if b != opsel)
    words = [base] * 64
    for idx, row in enumerate(scales):
        for kb, s in enumerate(row):
            words[scale_lane(M, idx, kb)] = base | ((int(s) & 0xFF) << (8 * opsel))
    return words


def scales_from_words(words, M: int, K: int, opsel: int) -> list:
    """Inverse of `scale_words`: M x (K // 32) E8M0 codes (idx x block)."""
    return [[scale_byte(words[scale_lane(M, idx, kb)], opsel) for kb in range(K // 32)] for idx in range(M)]


def scaled_regs(codes, fmt, M: int, which: str) -> np.ndarray:
    """Matrix codes (A: M x K, B: K x M) -> (64, 8) uint32 lane words, packed with `mx.pack_lane`
    in the `scaled_a` / `scaled_b` order; unused words zero."""
    f = mx.fmt_of(fmt)
    codes = np.asarray(codes)
    out = np.zeros((64, mx.LANE_WORDS), np.uint32)
    for L in range(64):
        lane = []
        for e in range(SCALED_ELEMS):
            r, c = (scaled_a if which == "a" else scaled_b)(M, f.bits, L, e)
            lane.append(int(codes[r, c]))
        out[L] = mx.pack_lane(lane, f.bits)
    return out


def scaled_from_regs(regs, fmt, M: int, which: str) -> np.ndarray:
    """Inverse of `scaled_regs`: (64, 8) lane words -> matrix codes (int64)."""
    f = mx.fmt_of(fmt)
    K = 2048 // M
    out = np.zeros((M, K) if which == "a" else (K, M), np.int64)
    for L in range(64):
        lane = mx.unpack_lane([int(x) for x in regs[L]], f.bits, SCALED_ELEMS)
        for e, c in enumerate(lane):
            out[(scaled_a if which == "a" else scaled_b)(M, f.bits, L, e)] = c
    return out


def d_from_regs(regs, M: int) -> np.ndarray:
    """(64, M*M/64) 32-bit C/D registers -> M x M matrix (same dtype)."""
    regs = np.asarray(regs)
    out = np.zeros((M, M), regs.dtype)
    for L in range(64):
        for t in range(cd_elems(M)):
            out[cd(M, L, t)] = regs[L, t]
    return out


def d_to_regs(D, M: int) -> np.ndarray:
    """M x M matrix -> (64, M*M/64) C/D registers (same dtype)."""
    D = np.asarray(D)
    out = np.zeros((64, cd_elems(M)), D.dtype)
    for L in range(64):
        for t in range(cd_elems(M)):
            out[L, t] = D[cd(M, L, t)]
    return out


# =========================================================================== f32 helpers
def _val_terms(v):
    """(n, e, neg_zero) of a finite f32 `Val`: value n * 2**e."""
    return (-v.sig if v.neg else v.sig), v.exp - F32.mbits, bool(v.zero and v.neg)


def _add_exact(acc: int, n: int, e: int, neg_zero: bool) -> int:
    """f32 bits of RN_f32(acc + n * 2**e), IEEE: a NaN acc stays NaN (0x7FC00000), an Inf acc
    absorbs the finite term; an exact zero sum is -0 only if acc is -0 and the term is -0
    (``n == 0 and neg_zero``); overflow to Inf, gradual underflow."""
    va = decode(acc, F32)
    if va.kind == "nan":
        return QNAN32
    if va.kind == "inf":
        return acc & 0xFFFFFFFF
    an, ae, az = _val_terms(va)
    if n == 0 and an == 0:
        return encode(F32, 0, 0, neg_zero=az and neg_zero)
    lo = min(ae, e)
    total = (an << (ae - lo)) + (n << (e - lo))
    return encode(F32, total, lo)  # a nonzero sum is never an exact zero; cancellation -> +0


def _add_f32(x: int, y: int) -> int:
    """IEEE f32 addition of two bit patterns, RNE (NaN result 0x7FC00000)."""
    vx, vy = decode(x, F32), decode(y, F32)
    if vx.kind == "nan" or vy.kind == "nan":
        return QNAN32
    if vx.kind == "inf" and vy.kind == "inf":
        return QNAN32 if vx.neg != vy.neg else x & 0xFFFFFFFF
    if vx.kind == "inf":
        return x & 0xFFFFFFFF
    if vy.kind == "inf":
        return y & 0xFFFFFFFF
    n, e, z = _val_terms(vy)
    return _add_exact(x, n, e, z)


def _ldexp_f32(x: int, sh: int) -> int:
    """f32 bits of ldexp(x, sh) rounded to f32 (RNE, gradual underflow, overflow to Inf); zeros,
    Infs keep their sign, NaN -> 0x7FC00000."""
    v = decode(x, F32)
    if v.kind == "nan":
        return QNAN32
    if v.kind == "inf" or v.zero:
        return x & 0xFFFFFFFF
    n, e, _ = _val_terms(v)
    return encode(F32, n, e + sh)


# =========================================================================== scaled MFMA
def _prod(va, vb):
    """('nan',) | ('inf', neg) | ('num', neg, P, ea, eb): the IEEE product of two decoded codes."""
    if va.kind == "nan" or vb.kind == "nan":
        return ("nan",)
    neg = va.neg ^ vb.neg
    if va.kind == "inf" or vb.kind == "inf":
        if va.zero or vb.zero:
            return ("nan",)
        return ("inf", neg)
    return ("num", neg, va.sig * vb.sig, va.exp, vb.exp)


def _verdict(prods, vc):
    """f32 bits of the IEEE special result decided from the products and C, or None."""
    nan = vc.kind == "nan" or any(p[0] == "nan" for p in prods)
    pinf = (vc.kind == "inf" and not vc.neg) or any(p[0] == "inf" and not p[1] for p in prods)
    ninf = (vc.kind == "inf" and vc.neg) or any(p[0] == "inf" and p[1] for p in prods)
    if nan or (pinf and ninf):
        return qnan(F32)
    if pinf or ninf:
        return inf_bits(F32, ninf)
    return None


def _fused_group(items, F: int, mab: int):
    """items: (neg, P, E) with value (-1)**neg * P * 2**(E - mab) and E the MMA-Sim exponent sum
    (scale included where the model says so). Returns (S, u, neg_zero): the sum of the products,
    each truncated toward zero to a multiple of 2**u, u = ET - F, ET = max E over the nonzero
    products (a group of zero products: S = 0, u = 0); neg_zero: always False: the group's
    truncated sum is an integer, so a zero sum is +0 (as the CDNA3 fused group: an exact zero
    is +0, ref_models.cdna3_dot)."""
    es = [E for _, P, E in items if P]
    neg_zero = False
    if not es:
        return 0, 0, neg_zero
    u = max(es) - F
    S = 0
    for neg, P, E in items:
        sh = u - (E - mab)  # right shift of P onto the 2**u grid
        m = P << -sh if sh <= 0 else P >> sh
        S += -m if neg else m
    return S, u, False


def scaled_dot(a, b, c: int, sa, sb, fa, fb, *, scale_at, block_sum, group=32, frac_bits=24,
               subbyte_frac_bits=None, nan_scale="nan") -> int:
    """One output of the scaled MFMA: f32 bits of f(a, b, c) for the K codes ``a`` (format fa),
    ``b`` (fb), the f32 bits ``c``, and the E8M0 codes ``sa[kb]``, ``sb[kb]`` of the K-blocks
    kb = k // 32. The model is the one of `scaled_mfma_reference` (which documents it)."""
    fa, fb = mx.fmt_of(fa), mx.fmt_of(fb)
    if scale_at not in ("product", "block"):
        raise ValueError(f"scale_at must be 'product' or 'block', got {scale_at!r}")
    if block_sum not in ("fused", "fma_chain"):
        raise ValueError(f"block_sum must be 'fused' or 'fma_chain', got {block_sum!r}")
    if nan_scale not in ("nan", "exponent"):
        raise ValueError(f"nan_scale must be 'nan' or 'exponent', got {nan_scale!r}")
    if int(group) < 1:
        raise ValueError(f"group must be >= 1, got {group}")
    K = len(a)
    assert len(b) == K
    nb = -(-K // 32)
    sa = [int(x) & 0xFF for x in sa]
    sb = [int(x) & 0xFF for x in sb]
    assert len(sa) == nb and len(sb) == nb, "one scale per 32-k block"
    c = int(c) & 0xFFFFFFFF

    # ---- NaN scales, then IEEE specials of the inputs (before any rounding)
    if nan_scale == "nan" and (mx.E8M0_NAN in sa or mx.E8M0_NAN in sb):
        return QNAN32
    prods = [_prod(decode(int(x), fa), decode(int(y), fb)) for x, y in zip(a, b)]
    sp = _verdict(prods, decode(c, F32))
    if sp is not None:
        return sp

    F = subbyte_frac_bits if (fa.bits < 8 and fb.bits < 8 and subbyte_frac_bits is not None) else frac_bits
    mab = fa.mbits + fb.mbits
    sx = [(sa[kb] - 127) + (sb[kb] - 127) for kb in range(nb)]  # scale exponent of block kb

    def item(k, scaled):
        _, neg, P, ea, eb = prods[k]
        return neg, P, ea + eb + (sx[k // 32] if scaled else 0)

    acc = c
    if scale_at == "product":
        if block_sum == "fma_chain":
            for k in range(K):
                neg, P, E = item(k, True)
                acc = _add_exact(acc, -P if neg else P, E - mab, bool(neg and not P))
        else:
            for lo in range(0, K, group):
                S, u, nz = _fused_group([item(k, True) for k in range(lo, min(K, lo + group))], F, mab)
                acc = _add_exact(acc, S, u, nz)
        return acc

    g = min(int(group), 32)
    for kb in range(nb):
        ks = range(32 * kb, min(K, 32 * kb + 32))
        s = 0  # +0.0
        if block_sum == "fma_chain":
            for k in ks:
                neg, P, E = item(k, False)
                s = _add_exact(s, -P if neg else P, E - mab, bool(neg and not P))
        else:
            for lo in range(ks.start, ks.stop, g):
                S, u, nz = _fused_group([item(k, False) for k in range(lo, min(ks.stop, lo + g))], F, mab)
                s = _add_exact(s, S, u, nz)
        acc = _add_f32(acc, _ldexp_f32(s, sx[kb]))
    return acc


def scaled_mfma_reference(fa, fb, A, B, C, sa, sb, *, scale_at, block_sum, group=32, frac_bits=24,
                          subbyte_frac_bits=None, nan_scale="nan") -> np.ndarray:
    """D bits (M x N numpy uint32) of one block-scaled MFMA, D = f(A, B, C, scales), under the
    parametrised model BlockScaled(scale_at, block_sum, group, frac_bits, subbyte_frac_bits,
    nan_scale).

    Inputs are codes: ``A`` M x K codes of ``fa``, ``B`` K x N codes of ``fb`` (fa, fb: 'fp8'
    (OCP E4M3FN), 'bf8' (OCP E5M2), 'fp6' (E2M3), 'bf6' (E3M2), 'fp4' (E2M1), a format code 0..4
    or a `formats.Fmt`), ``C`` M x N f32 bit patterns, ``sa`` M x ceil(K/32) and ``sb``
    ceil(K/32) x N E8M0 codes (the instruction has K = 128 with M = N = 16, or K = 64 with
    M = N = 32; any shape is accepted). Block kb = k // 32; the factor of a product of block kb
    is 2**(sa[i][kb] - 127) * 2**(sb[kb][j] - 127).

    Per output (i, j), in this order:

    1. ``nan_scale='nan'``: an sa[i][kb] or sb[kb][j] equal to 255 (any kb) gives 0x7FC00000;
       ``'exponent'``: 255 is the exponent 128 like any other code.
    2. Specials, decided before any rounding as an exact sum would: a NaN product (a NaN operand,
       Inf x 0) or a NaN C, or +Inf and -Inf both among the products and C -> 0x7FC00000; else
       an Inf product or an Inf C -> that Inf.
    3. Finite: the MMA-Sim exponent of an operand is e(x) = max(biased exponent, 1) - bias
       (subnormals at the minimum exponent); P_k = a_k * b_k exactly.

       * ``scale_at='product', block_sum='fma_chain'``: acc = C; for k in order:
         acc = RN_f32(acc + P_k * factor).
       * ``scale_at='product', block_sum='fused'``: the K scaled products in k order in
         consecutive groups of ``group`` (the last may be shorter); per group E_k = e(a_k) +
         e(b_k) + (sa - 127) + (sb - 127) for the products with a nonzero significand product,
         ET = max E_k (a group of only zero products contributes exactly 0), every product
         truncated toward zero to a multiple of 2**(ET - F), S = their exact sum,
         acc = RN_f32(acc + S). F = ``subbyte_frac_bits`` when both formats are 6- or 4-bit
         and it is not None, else ``frac_bits``.
       * ``scale_at='block', block_sum='fma_chain'`` (rocjitsu ``exec_f32_scaled_mixed``): acc =
         C; per block kb in order: s = +0.0; for k of the block in order s = RN_f32(s + P_k)
         (unscaled); v = RN_f32(s * factor); acc = RN_f32(acc + v).
       * ``scale_at='block', block_sum='fused'``: as the previous, but s is formed with the
         fused rule (groups of min(group, 32) within the block, unscaled exponents, s starting
         at +0.0 and becoming RN_f32(s + S) per group).

    RN_f32 is round to nearest even with gradual underflow and overflow to Inf; an exact zero
    sum keeps the sign IEEE addition gives (+0 unless both addends are -0; the S of a group is
    -0 when all its products are -0). Once acc is Inf it stays Inf in the product modes; in
    the block modes v = -Inf meeting acc = +Inf (both from overflow) gives NaN as IEEE does.
    Every NaN result is 0x7FC00000.

    Note: step 2 happens before the arithmetic, so a product mode never turns an overflowed
    accumulator plus an opposite Inf *input* product into NaN (an IEEE FMA chain would)."""
    A = np.asarray(A, np.int64)
    B = np.asarray(B, np.int64)
    C = np.asarray(C, np.int64)
    sa = np.asarray(sa, np.int64)
    sb = np.asarray(sb, np.int64)
    M, K = A.shape
    K2, N = B.shape
    nb = -(-K // 32)
    if K2 != K or C.shape != (M, N) or sa.shape != (M, nb) or sb.shape != (nb, N):
        raise ValueError(f"shapes A {A.shape}, B {B.shape}, C {C.shape}, sa {sa.shape}, sb {sb.shape} disagree")
    D = np.zeros((M, N), np.uint32)
    for i in range(M):
        a = [int(x) for x in A[i]]
        for j in range(N):
            D[i, j] = scaled_dot(a, [int(x) for x in B[:, j]], int(C[i, j]), sa[i], sb[:, j], fa, fb,
                                 scale_at=scale_at, block_sum=block_sum, group=group, frac_bits=frac_bits,
                                 subbyte_frac_bits=subbyte_frac_bits, nan_scale=nan_scale)
    return D


def scaled_builtin_reference(a_regs, b_regs, c_regs, fmt_a, fmt_b, opsel_a, scale_a, opsel_b, scale_b, M,
                             **model) -> np.ndarray:
    """`scaled_mfma_reference` at the register level of ``mfma_scale_f32_{16x16x128,32x32x64}
    _f8f6f4`` (M = 16 or 32): ``a_regs``, ``b_regs`` (64, 8) uint32 lane words, ``c_regs``
    (64, M*M/64) f32 bit patterns (or a float32 array, read as bits), format codes 0..4, opsel 0..3 and the 64 scale words of each
    operand. Returns D registers (64, M*M/64) uint32. ``model``: the keyword arguments of
    `scaled_mfma_reference`."""
    K = 2048 // M
    A = scaled_from_regs(a_regs, fmt_a, M, "a")
    B = scaled_from_regs(b_regs, fmt_b, M, "b")
    c_regs = np.asarray(c_regs)
    if c_regs.dtype == np.float32:
        c_regs = c_regs.view(np.uint32)
    C = d_from_regs(c_regs.astype(np.int64) & 0xFFFFFFFF, M)
    sa = scales_from_words(scale_a, M, K, opsel_a)
    sbT = scales_from_words(scale_b, M, K, opsel_b)
    sb = [list(r) for r in zip(*sbT)]
    D = scaled_mfma_reference(fmt_a, fmt_b, A, B, C, sa, sb, **model)
    return d_to_regs(D, M)


# =========================================================================== gfx942 f32 / xf32
#: MMA-Sim 2.x MMA_TR_FDPA(F=24, F2=31, rho='RNE-FP32', L_max=4) in ref_models' terms: single
#: stage, groups of 4, zero products out of the group maximum, sum floored to 31 (+1 while
#: aligning) fractional bits and C to 24 of max(ET, e_C), renormalised, f32 RNE per group.
XF32_PARAMS = FusedParams(group=4, frac_bits=24, sum_bits=31, two_stage=False, c_drop=False)


def _dot_matrix(A, B, C, dot) -> np.ndarray:
    A = np.asarray(A, np.int64) & 0xFFFFFFFF
    B = np.asarray(B, np.int64) & 0xFFFFFFFF
    C = np.asarray(C, np.int64) & 0xFFFFFFFF
    M, K = A.shape
    _, N = B.shape
    D = np.zeros((M, N), np.uint32)
    for i in range(M):
        a = [int(x) for x in A[i]]
        for j in range(N):
            D[i, j] = dot(a, [int(x) for x in B[:, j]], int(C[i, j]))
    return D


def xf32_dot(a, b, c: int, params: FusedParams = XF32_PARAMS) -> int:
    """f32 bits of one gfx942 xf32 output: a, b f32 bit patterns cut to xf32 (`mx.xf32_bits`),
    then the CDNA3 fused-group algorithm over consecutive groups of 4 (`ref_models.cdna3_dot`
    with f32 operand formats, MMA-Sim 2.x ``tr_fdpa``: E_k = e(a) + e(b) for nonzero products, a
    product >= 2**128 an Inf product, truncation toward zero to 24 fractional bits of ET; with
    Mx = max(ET, e_C) the group sum floored to 32 and C to 24 fractional bits of Mx, their sum
    renormalised and floored to 31 fractional bits of its leading bit, one f32 RNE per group;
    specials decided first; a NaN result is 0x7FC00000 where MMA-Sim writes 0x7FFFFFFF)."""
    return cdna3_dot([mx.xf32_bits(x) for x in a], [mx.xf32_bits(y) for y in b], int(c) & 0xFFFFFFFF, F32, F32,
                     params)


def xf32_mfma_reference(A, B, C, params: FusedParams = XF32_PARAMS) -> np.ndarray:
    """D bits (M x N uint32) of ``mfma_f32_{32x32x4,16x16x8}_xf32``: A (M x K), B (K x N), C
    (M x N) f32 bit patterns; `xf32_dot` per output."""
    return _dot_matrix(A, B, C, lambda a, b, c: xf32_dot(a, b, c, params))


def f32_dot(a, b, c: int) -> int:
    """f32 bits of acc = C; for k in order acc = RN_f32(acc + a_k * b_k) (exact product, one
    rounding per step, IEEE specials and signed zeros, subnormals kept)."""
    return fma_chain_dot([int(x) for x in a], [int(y) for y in b], int(c) & 0xFFFFFFFF, F32, F32, F32)


def f32_mfma_reference(A, B, C) -> np.ndarray:
    """D bits (M x N uint32) of ``mfma_f32_{32x32x2,16x16x4}f32`` (blgp 0: the B matrix as
    given; apply `blgp_b_source` to build B otherwise): `f32_dot` per output."""
    return _dot_matrix(A, B, C, f32_dot)


# =========================================================================== exact helper
def exact_value(bits: int):
    """The exact value of f32 bits as a Fraction, or 'nan' / 'inf' / '-inf'."""
    return mx.decode_code(F32, bits)

