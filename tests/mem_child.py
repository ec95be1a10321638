"""Child process of test_memory.py: run ONE jwmma call and print its peak resident memory.

    python mem_child.py builtin NAME MODEL SIZE [SIZE ...]      # MODEL: "default" or a preset
    python mem_child.py gemm NAME MODEL M N K SIZE [SIZE ...]     # SIZE: batch elements
    python mem_child.py gemm_rows NAME MODEL N K M [M ...]        # one GEMM, growing M

For each SIZE (increasing), the call runs once on operands of that many waves (gemm: batch
elements) and the process's peak resident set (VmHWM, /proc/self/status) is read afterwards.
Peaks only grow, so the difference of two consecutive readings is what the larger call needed
beyond the smaller one: the slope of peak memory against operand bytes. tracemalloc cannot
see XLA's allocations, hence the kernel's counter. Prints one JSON line:
{"sizes": [...], "hwm": [bytes...], "operand_bytes": [bytes...], "stopped": bool}. Public API
only. $JWMMA_TEST_MEM_BUDGET (bytes): stop before the next size once the peak passes it (so that a
defect does not take the shared machine's memory); "stopped" says it did.
"""
from __future__ import annotations

import json
import os
import sys

import numpy as np


def over_budget(hwm) -> bool:
    budget = int(os.environ.get("JWMMA_TEST_MEM_BUDGET", "0") or 0)
    return bool(budget) and hwm[-1] > budget


def vm_hwm() -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def reg_array(rng, shape, dtype):
    """Random register contents with the right dtype (any bit pattern; NaNs allowed)."""
    dtype = np.dtype(dtype)
    bits = rng.integers(0, 2**32, size=shape, dtype=np.uint64).astype(np.uint32)
    if dtype.itemsize == 4:
        return bits.view(dtype)
    return bits.astype(np.uint16).view(dtype)


def builtin_case(name, model, sizes):
    import jax

    import jwmma

    spec = jwmma.BUILTINS[name]
    fn = getattr(jwmma, name)
    lanes = spec.a_layout.shape[0]
    rng = np.random.default_rng(0)
    kw = {} if model == "default" else {"model": model}

    def n_regs(which):
        t, elems = getattr(spec, f"{which}_type"), getattr(spec, f"{which}_layout").shape[1]
        bits = {"fp8": 8, "bf8": 8, "i8": 8, "iu8": 8, "iu4": 4}.get(t)
        return elems if bits is None else -(-elems * bits // 32)

    def operands(w):
        a = reg_array(rng, (w, lanes, n_regs("a")), _reg_dtype(spec, "a"))
        b = reg_array(rng, (w, lanes, n_regs("b")), _reg_dtype(spec, "b"))
        c = reg_array(rng, (w, lanes, n_regs("c")), _reg_dtype(spec, "c"))
        idx = np.full((w, lanes), 0x44444444, np.int64).astype(np.int32)  # pairs (0, 1)
        return a, b, c, idx

    def call(a, b, c, idx):
        if spec.arch == "gfx12" and spec.a_type in ("iu8", "iu4"):
            return fn(True, a, True, b, c, idx, False, **kw)
        return fn(a, b, c, idx, **kw)

    hwm, nbytes = [], []
    for w in sizes:
        ops = operands(w)
        d = jax.block_until_ready(call(*ops))
        assert d.shape == ops[2].shape
        nbytes.append(sum(x.nbytes for x in ops) + ops[2].nbytes)  # inputs + D (C's size)
        del d, ops
        hwm.append(vm_hwm())
        if over_budget(hwm):
            break
    return dict(sizes=list(sizes)[:len(hwm)], hwm=hwm, operand_bytes=nbytes, stopped=len(hwm) < len(sizes))


def _reg_dtype(spec, which):
    t = getattr(spec, f"{which}_type")
    if t == "f16":
        return np.float16
    if t == "bf16":
        if which == "c" or spec.arch == "gfx12":
            return np.int16
        import ml_dtypes
        return ml_dtypes.bfloat16
    if t == "f32":
        return np.float32
    return np.int32


def gemm_case(name, model, m, n, k, sizes, rows=None):
    import jax
    import ml_dtypes

    import jwmma

    spec = jwmma.BUILTINS[name]
    dt = {"fp8": ml_dtypes.float8_e4m3fn, "bf8": ml_dtypes.float8_e5m2, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16}
    rng = np.random.default_rng(0)
    kw = {} if model == "default" else {"model": model}

    def normal(shape, dtype):
        """Normal samples of ``dtype`` drawn in pieces: the float64 temporaries of one big draw
        would dominate the peak this child measures."""
        out = np.empty(shape, dtype)
        flat = out.reshape(-1)
        piece = 1 << 18
        for i in range(0, flat.size, piece):
            flat[i:i + piece] = rng.standard_normal(min(piece, flat.size - i)).astype(np.float32).astype(dtype)
        return out

    def operands(bt, m):
        lead = () if rows is not None else (bt,)
        a = normal(lead + (m, k), dt[spec.a_type])
        a.reshape(lead + (m, k // 4, 4))[..., 2:] = 0  # 2:4 sparse: positions (0, 1) kept
        return a, normal(lead + (k, n), dt[spec.b_type])

    hwm, nbytes = [], []
    steps = [(1, mm) for mm in rows] if rows is not None else [(bt, m) for bt in sizes]
    sizes = list(rows) if rows is not None else list(sizes)
    for bt, mm in steps:
        a, b = operands(bt, mm)
        d = jax.block_until_ready(jwmma.gemm(a, b, builtin=name, **kw))
        assert d.shape == a.shape[:-1] + (n,)
        nbytes.append(a.nbytes + b.nbytes + d.nbytes)
        del a, b, d
        hwm.append(vm_hwm())
        if over_budget(hwm):
            break
    return dict(sizes=list(sizes)[:len(hwm)], hwm=hwm, operand_bytes=nbytes, stopped=len(hwm) < len(sizes))


def gemm_rows_case(name, model, n, k, ms):
    """One GEMM (no batch) with a growing number of rows M."""
    out = gemm_case(name, model, 0, n, k, [], rows=ms)
    return out


def main(argv):
    kind = argv[0]
    if kind == "builtin":
        out = builtin_case(argv[1], argv[2], [int(x) for x in argv[3:]])
    elif kind == "gemm":
        out = gemm_case(argv[1], argv[2], int(argv[3]), int(argv[4]), int(argv[5]), [int(x) for x in argv[6:]])
    elif kind == "gemm_rows":
        out = gemm_rows_case(argv[1], argv[2], int(argv[3]), int(argv[4]), [int(x) for x in argv[5:]])
    else:
        raise SystemExit(f"unknown case {kind!r}")
    print(json.dumps(out))


if __name__ == "__main__":
    main(sys.argv[1:])
