"""The benchmarks' rows, declared once: what a row runs, how its operands are made, the native
dots it is timed beside and the timer.

A row (`Row`) is a builtin, its model (None: the builtin's default), the element formats of a
block-scaled builtin and the `jwmma.gemm` keywords it needs (``clamp``, `jwmma.Options`
fields). `ROWS` names every row a benchmark runs; a script picks its rows by label and keeps
its own command line and table. `BUILTIN` maps the short format names of the ``format:model``
command lines (``fp8:cdna3``) to their builtins.

Operands are drawn from ``numpy.random.default_rng(seed)`` as numpy arrays (place them on the
device before timing):

* `operands`: a GEMM's ``(a, b, c, gemm keywords)``; for a sparse builtin A is the (values,
  positions) pair of `jwmma.compress_2_4` (`jwmma.prune_2_4` first), as it returns them (JAX
  arrays). ``kind="normal"``: realistic values, standard normal rounded once into the row's
  formats (`jwmma.numerics.cast`), integers over the whole int8 range, C of int32 rows within
  +-2**20, MX block scales 2**-7 .. 2**7; ``kind="bits"``: every bit pattern of A's and B's
  formats (NaN, Inf and subnormals included; random bytes for the elements of a block-scaled
  builtin), float32 C normal values times 10**-30 .. 10**29, MX scales 2**-9 .. 2**9.
* `registers`: a builtin call's registers over ``waves`` waves (A, B, C and the index word of
  a sparse builtin). ``kind="normal"``: 8- and 16-bit float elements hold rounded normal values,
  in float registers and packed into integer words alike (fp8 four to a word, the bf16 MFMA's
  int16 shorts); integer elements, integer C and sub-byte float elements (fp6, fp4) random words;
  ``kind="bits"``: random words everywhere. The index words select a valid pair of every
  group of four.

`native_dot` gives the baselines (`NATIVE`: ``jnp.dot`` at precision HIGHEST, f32, bf16 -> f32
and int8 -> int32); `timed` times a call: the first call (trace, compile and run), then the
median of further calls, each ended by ``block_until_ready``; `macs` counts a GEMM's emulated
multiply-adds (M*N*K, half of it for a sparse builtin: A is compressed).

Only public jwmma names are used (`benchmarks/bench_speed.py` imports this file under an older
installed jwmma).
"""
from __future__ import annotations

import dataclasses
import statistics
import time
from typing import NamedTuple

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np

import jwmma


@dataclasses.dataclass(frozen=True)
class Row:
    """One benchmark row (module doc)."""

    builtin: str
    model: str | None = None  # None: the builtin's default model
    formats: tuple | None = None  # block-scaled builtins: (A, B) format codes of `FMT` (None: (0, 0))
    clamp: bool = False  # integer builtins: the clamp modifier
    options: dict | None = dataclasses.field(default=None, hash=False)  # jwmma.Options fields

    @property
    def spec(self):
        return jwmma.BUILTINS[self.builtin]

    @property
    def model_name(self) -> str:
        """The model's name (the builtin's default where the row leaves it to the builtin)."""
        return self.model or self.spec.default_model

    def gemm_keywords(self) -> dict:
        """The `jwmma.gemm` keywords of the row itself (operand-dependent ones: `operands`)."""
        kw = {"clamp": True} if self.clamp else {}
        if self.options:
            kw["options"] = jwmma.Options(**self.options)
        return kw


_FP8 = "smfmac_f32_16x16x128_fp8_fp8"
_MX = "mfma_scale_f32_16x16x128_f8f6f4"

#: label -> Row
ROWS = {
    "fp8_cdna3": Row(_FP8),
    "bf8fp8_cdna3_942": Row("smfmac_f32_16x16x64_bf8_fp8"),
    "f16_cdna3": Row("smfmac_f32_16x16x64_f16"),
    "bf16_cdna3": Row("smfmac_f32_16x16x64_bf16"),
    "f16_gfx12": Row("swmmac_f32_16x16x32_f16_w32"),
    "bf16_gfx12": Row("swmmac_f32_16x16x32_bf16_w32"),
    "fp8_gfx12": Row("swmmac_f32_16x16x32_fp8_fp8_w32"),
    "f16acc_gfx12": Row("swmmac_f16_16x16x32_f16_w32"),
    "f16_wmma": Row("wmma_f32_16x16x16_f16_w32_gfx12"),
    "bf16_wmma_gfx12": Row("wmma_f32_16x16x16_bf16_w32_gfx12"),
    "int8_cdna4": Row("smfmac_i32_16x16x128_i8"),
    "iu8_staged": Row("swmmac_i32_16x16x32_iu8_w32", clamp=True),
    "fp8_exact": Row(_FP8, "exact"),
    "fp8_fma_chain": Row(_FP8, "fma_chain"),
    "fp8_fma_chain_k": Row(_FP8, "fma_chain_k"),
    "fp8_cdna3_xla_dots": Row(_FP8, options=dict(backend="xla", group_dots=True)),
    "mfma_fp8_cdna3": Row("mfma_f32_16x16x32_fp8_fp8"),
    "mfma_f16_cdna3": Row("mfma_f32_16x16x16f16"),
    "mfma_bf16_950": Row("mfma_f32_32x32x16_bf16"),
    "mfma_int8_942": Row("mfma_i32_16x16x32_i8"),
    "mfma_bf16_cdna3": Row("mfma_f32_16x16x16bf16_1k"),
    "fp8_wmma_gfx12": Row("wmma_f32_16x16x16_fp8_fp8_w32_gfx12"),
    "f16acc_wmma_gfx12": Row("wmma_f16_16x16x16_f16_w32_gfx12"),
    "mxfp8_cdna4_mx": Row(_MX, formats=(0, 0)),
    "mxfp4_cdna4_mx": Row(_MX, formats=(4, 4)),
    "mxfp4_mxfp8_cdna4_mx": Row(_MX, formats=(4, 0)),
    "mxfp8_mxfp4_cdna4_mx": Row(_MX, formats=(0, 4)),
}
ROWS["f16_wmma_gfx12"] = ROWS["f16_wmma"]  # bench_pallas.py's label of the same row

#: short format names of the ``format:model`` command lines -> builtin
BUILTIN = {"fp8": ROWS["fp8_cdna3"].builtin, "f16": ROWS["f16_gfx12"].builtin, "f16c": ROWS["f16_cdna3"].builtin,
           "bf16": ROWS["bf16_cdna3"].builtin}

#: a block-scaled builtin's element format codes -> ml_dtypes
FMT = {0: ml_dtypes.float8_e4m3fn, 1: ml_dtypes.float8_e5m2, 2: ml_dtypes.float6_e2m3fn,
       3: ml_dtypes.float6_e3m2fn, 4: ml_dtypes.float4_e2m1fn}

KINDS = ("normal", "bits")


def row_of(row) -> Row:
    """A `Row`, a label of `ROWS` or a builtin name (its default model) as a `Row`."""
    if isinstance(row, Row):
        return row
    return ROWS[row] if row in ROWS else Row(row)


def random_bits(rng, shape, dtype) -> np.ndarray:
    """Random bit patterns of ``dtype`` (every code equally likely)."""
    d = np.dtype(dtype)
    raw = rng.integers(0, 256, tuple(shape) + (d.itemsize,), dtype=np.uint8)
    return raw.view(d).reshape(shape)


def _normal(rng, shape, dtype) -> np.ndarray:
    return np.asarray(jwmma.numerics.cast(rng.standard_normal(shape), dtype))


def operands(row, m: int, n: int, k: int, *, seed: int = 0, kind: str = "normal") -> tuple:
    """``(a, b, c, gemm keywords)`` of D (m, n) = A (m, k) x B (k, n) + C for ``row`` (module doc).

    Args:
        row: a `Row`, a label of `ROWS` or a builtin name.
        m, n, k: the GEMM's shape (k: the dense K).
        seed: ``numpy.random.default_rng``'s seed; kind: 'normal' or 'bits' (module doc).
    Returns:
        numpy ``a`` (`jwmma.compress_2_4`'s (values, positions) pair for a sparse builtin), ``b``, ``c`` and the
        keywords ``jwmma.gemm`` takes besides ``builtin`` and ``model`` (the row's own, and the
        format codes and block scales of a block-scaled builtin).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    row = row_of(row)
    spec = row.spec
    rng = np.random.default_rng(seed)
    kw = row.gemm_keywords()
    bits = kind == "bits"
    if spec.integer:
        a = rng.integers(-128, 128, (m, k)).astype(np.int8)
        b = rng.integers(-128, 128, (k, n)).astype(np.int8) if spec.b_type != "iu8" else \
            rng.integers(0, 256, (k, n)).astype(np.uint8)
        c = rng.integers(-2**20, 2**20, (m, n)).astype(np.int32)
    elif spec.scaled:
        fa, fb = row.formats or (0, 0)
        if bits:
            a = rng.integers(0, 256, (m, k)).astype(np.uint8)
            b = rng.integers(0, 256, (k, n)).astype(np.uint8)
        else:
            a = _normal(rng, (m, k), FMT[fa]).view(np.uint8)
            b = _normal(rng, (k, n), FMT[fb]).view(np.uint8)
        c = rng.standard_normal((m, n)).astype(np.float32)
        lo, hi = (118, 137) if bits else (120, 135)
        kw.update(fmt_a=fa, fmt_b=fb, scale_a=rng.integers(lo, hi, (m, -(-k // 32))).astype(np.uint8),
                  scale_b=rng.integers(lo, hi, (-(-k // 32), n)).astype(np.uint8))
    elif bits:
        a = random_bits(rng, (m, k), spec.a_format.dtype)
        b = random_bits(rng, (k, n), spec.b_format.dtype)
        c = (rng.standard_normal((m, n)) * 10.0 ** rng.integers(-30, 30, (m, n))).astype(np.float32) \
            if spec.c_type == "f32" else random_bits(rng, (m, n), spec.c_format.dtype)
    else:
        a = _normal(rng, (m, k), spec.a_format.dtype)
        b = _normal(rng, (k, n), spec.b_format.dtype)
        c = rng.standard_normal((m, n)).astype(np.float32) if spec.c_type == "f32" else \
            _normal(rng, (m, n), spec.c_format.dtype)
    if not spec.dense:
        a = jwmma.compress_2_4(jwmma.prune_2_4(a))
    return a, b, c, kw


def index_words(rng, shape) -> np.ndarray:
    """Random int32 index words of a sparse builtin: in every nibble a valid pair, (0, 1),
    (0, 2), ... (2, 3) (bits 1..3 random, bit 2 set)."""
    return (rng.integers(0, 2**31 - 1, shape).astype(np.int32) & 0x0E0E0E0E) | 0x04040404


def registers(row, waves: int, *, seed: int = 0, kind: str = "normal") -> tuple:
    """numpy ``(a, b, c, index)`` registers of ``waves`` waves for a call of ``row``'s builtin
    (module doc), each (waves, lanes, registers per lane) in the builtin's register dtype;
    ``index`` (waves, lanes) int32 (what a sparse builtin reads; others ignore it)."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
    spec = row_of(row).spec
    rng = np.random.default_rng(seed)

    def reg(op, fmt):
        shape = (waves, spec.lanes, op.n)
        if kind == "bits":
            return random_bits(rng, shape, op.dtype)
        if fmt is None:  # integers: random words of the register dtype
            info = np.iinfo(op.dtype)
            return rng.integers(info.min, int(info.max) + 1, shape, dtype=np.int64).astype(op.dtype)
        word_bits = np.dtype(op.dtype).itemsize * 8
        if np.dtype(op.dtype).kind in "iu" and fmt.bits in (8, 16) and word_bits % fmt.bits == 0:
            # 8- and 16-bit floats in integer words (bf16 MFMA shorts, four fp8 to a word): normal
            # values, element i in bits [i * bits, (i + 1) * bits) as `codes_to_regs` packs them
            per = word_bits // fmt.bits
            return np.ascontiguousarray(_normal(rng, shape[:-1] + (shape[-1] * per,), fmt.dtype)).view(op.dtype)
        if np.dtype(op.dtype).kind in "iu":  # sub-byte elements (fp6, fp4 words): random words
            info = np.iinfo(op.dtype)
            return rng.integers(0, int(info.max) + 1, shape, dtype=np.int64).astype(op.dtype)
        return _normal(rng, shape, op.dtype)

    a, b, c = reg(spec.a, spec.a_format), reg(spec.b, spec.b_format), reg(spec.c, spec.c_format)
    return a, b, c, index_words(rng, (waves, spec.lanes))


def call_arguments(row, waves: int, **kw) -> dict:
    """Every argument of a call of ``row``'s builtin over ``waves`` waves, by name: the
    registers of `registers` (``kw`` passed on) as ``a``, ``b``, ``c`` and the index (``index``
    or ``idx``, where the builtin reads one), False for the sign and clamp modifiers that have
    no default."""
    import jwmma

    a, b, c, index = registers(row, waves, **kw)
    named = dict(a=a, b=b, c=c, index=index, idx=index)
    out = {}
    for p, prm in getattr(jwmma, row_of(row).spec.name).__signature__.parameters.items():
        if p in named:
            out[p] = named[p]
        elif prm.default is prm.empty and prm.kind is not prm.KEYWORD_ONLY:
            out[p] = False
    return out


def macs(spec, m: int, n: int, k: int):
    """Emulated multiply-adds of an (m, n, k) GEMM (k dense): M*N*K / 2 for a sparse builtin
    (compressed A), M*N*K for a dense one."""
    return m * n * k if spec.dense else m * n * k / 2


#: the native baselines, ``jnp.dot`` at precision HIGHEST: label -> (operand dtype, result dtype)
NATIVE = {"f32 HIGHEST": (jnp.float32, jnp.float32), "bf16->f32": (jnp.bfloat16, jnp.float32),
          "int8->int32": (jnp.int8, jnp.int32)}


def native_dot(label: str, m: int, n: int, k: int, rng=None) -> tuple:
    """``(jitted dot, (x, y))`` of the baseline ``label`` (`NATIVE`) on (m, k) x (k, n) random
    values on the device (standard normal, times 50 for int8), drawn from ``rng`` (default:
    ``default_rng(0)``)."""
    dt, result = NATIVE[label]
    rng = np.random.default_rng(0) if rng is None else rng
    scale = 50 if dt == jnp.int8 else 1
    x = jnp.asarray(rng.standard_normal((m, k)) * scale).astype(dt)
    y = jnp.asarray(rng.standard_normal((k, n)) * scale).astype(dt)
    f = jax.jit(lambda x, y: jnp.dot(x, y, precision=jax.lax.Precision.HIGHEST, preferred_element_type=result))
    return f, (x, y)


class Timing(NamedTuple):
    """`timed`'s result: seconds of the first call and median seconds of the others, and the
    last call's output."""

    first: float
    median: float
    out: object


def mmasim_rate(builtin: str, model: str | None, n: int, k: int, *, seed: int = 1, budget_s: float = 60.0):
    """MMA-Sim's rate (compressed products per second) on 16 rows of a GEMM of depth ``k`` and
    ``n`` columns, one instruction step at a time as the kernel issues them (CDNA3's
    `MMA_GTR_FDPA` / `MMA_TR_FDPA` fed the compressed A values and the selected B rows), for
    the sparse CDNA3-datapath rows (``model`` 'cdna3' or None on an smfmac builtin); None
    elsewhere or without torch and mmasim. The same per-product work as a builtin call's, so
    the rate compares with a call's and a GEMM's (stop after ``budget_s`` and extrapolate)."""
    try:
        import torch
        from mmasim.arithmetic.fdpa import MMA_GTR_FDPA, MMA_TR_FDPA
    except Exception:
        return None
    spec = jwmma.BUILTINS[builtin]
    if model not in (None, "cdna3") or spec.dense or spec.default_model != "cdna3":
        return None
    n_rows = 16
    (values, pos), b, _, _ = operands(builtin, n_rows, n, k, seed=seed)
    vals = np.asarray(jnp.asarray(values).astype(jnp.float32))
    p = np.asarray(pos)
    bb = np.asarray(jnp.asarray(b).astype(jnp.float32))
    kidx = 4 * (np.arange(k // 2) // 2)[None, :] + p  # the selected dense rows
    tdt = {"fp8": torch.float8_e4m3fn, "bf8": torch.float8_e5m2, "f16": torch.float16, "bf16": torch.bfloat16}[spec.a_type]
    op = MMA_GTR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=16) if spec.a.elem_bits == 8 else \
        MMA_TR_FDPA(F=24, F2=31, rho="RNE-FP32", L_max=8)
    kc = spec.kc
    t0 = time.perf_counter()
    done = 0
    c = torch.zeros((n_rows, n), dtype=torch.float32)
    for s in range(k // spec.k):  # one instruction step at a time, as the kernel does
        sl = slice(s * kc, (s + 1) * kc)
        av = torch.tensor(vals[:, sl]).to(tdt)[:, None, :].expand(n_rows, n, kc)
        bsel = torch.tensor(np.take_along_axis(bb[None, :, :], kidx[:, sl, None], axis=1)).to(tdt)  # (rows, kc, n)
        c = op.dpa(av, bsel.permute(0, 2, 1), c)
        done += n_rows * n * kc
        if time.perf_counter() - t0 > budget_s:
            break
    return done / (time.perf_counter() - t0)


def timed(fn, repeat: int) -> Timing:
    """``fn()`` once (trace, compile and run: ``first``), then ``repeat`` more times (their
    ``median``), each call ended by ``jax.block_until_ready``."""
    t0 = time.perf_counter()
    out = jax.block_until_ready(fn())
    first = time.perf_counter() - t0
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = jax.block_until_ready(fn())
        ts.append(time.perf_counter() - t0)
    return Timing(first, statistics.median(ts), out)
