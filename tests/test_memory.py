"""Issue #10 item 6: bounded memory (builtin calls in wave blocks, gemm in row blocks). Builtin calls and gemm at growing batch sizes; the peak
resident memory is measured in a child process (mem_child.py: VmHWM of /proc/self/status;
tracemalloc is blind to XLA's allocations).

Goal (the issue's): peak memory under 4x the operand bytes plus a fixed working set, at any
batch size. Measured as a slope: between two sizes of the same call in one process, the peak
may grow by at most 4x the growth of the operand bytes (inputs + D), plus TOLERANCE for the
compilation of the larger shape and allocator noise. The large cases are marked slow; each
child stops early once its peak passes JWMMA_TEST_MEM_BUDGET, so a defect cannot take the shared
machine's memory (the test then fails with the numbers measured so far).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
CHILD = os.path.join(HERE, "mem_child.py")
FACTOR = 4
TOLERANCE = 48 * 2**20
MB = 2**20


def mem_available() -> int:
    with open("/proc/meminfo") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return 8 * 2**30


def measure(*args, timeout=1200):
    budget = min(6 * 2**30, mem_available() // 2)
    env = dict(os.environ, JWMMA_TEST_MEM_BUDGET=str(budget), JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, CHILD, *map(str, args)], capture_output=True, text=True, timeout=timeout,
                          env=env, cwd=HERE)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_slope(res, what):
    sizes, hwm, ops = res["sizes"], res["hwm"], res["operand_bytes"]
    table = "\n".join(f"  size {s:>7}: operands {o / MB:9.1f} MB, peak RSS {h / MB:9.1f} MB"
                      for s, o, h in zip(sizes, ops, hwm))
    lines = []
    for i in range(1, len(sizes)):
        d_peak, d_ops = hwm[i] - hwm[0], ops[i] - ops[0]
        per_unit = d_peak / max(1, sizes[i] - sizes[0])
        lines.append(f"  {sizes[0]} -> {sizes[i]}: peak +{d_peak / MB:.1f} MB for operands +{d_ops / MB:.1f} MB "
                     f"(x{d_peak / max(1, d_ops):.1f}; {per_unit / MB:.3f} MB per unit)")
    report = f"{what}\n{table}\n" + "\n".join(lines)
    print(report)
    assert len(sizes) >= 2, f"stopped at the memory budget before a second size:\n{report}"
    assert not res.get("stopped"), f"stopped at the memory budget (peak {hwm[-1] / MB:.0f} MB):\n{report}"
    for i in range(1, len(sizes)):
        allowed = FACTOR * (ops[i] - ops[0]) + TOLERANCE
        assert hwm[i] - hwm[0] <= allowed, (
            f"peak memory grows faster than {FACTOR}x the operands:\n{report}\n"
            f"  allowed at size {sizes[i]}: +{allowed / MB:.1f} MB")


def test_builtin_memory_small_default_case():
    """Default-run case: 256 -> 4096 waves of smfmac_f32_16x16x128_fp8_fp8 (default model).
    Before the wave blocks (engine/builtins.run_waves) the peak grew by about 0.23 MB per
    wave (44x the operands)."""
    res = measure("builtin", "smfmac_f32_16x16x128_fp8_fp8", "default", 256, 4096)
    check_slope(res, "smfmac_f32_16x16x128_fp8_fp8, default model")


@pytest.mark.slow
@pytest.mark.parametrize("name,model,sizes", [
    ("smfmac_f32_16x16x128_fp8_fp8", "default", (1024, 8192, 32768)),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", (256, 2048, 8192)),
    ("swmmac_f32_16x16x32_f16_w32", "default", (1024, 8192, 32768)),
    ("smfmac_f32_32x32x32_bf16", "default", (512, 4096, 16384)),
    ("swmmac_i32_16x16x32_iu8_w32", "default", (1024, 16384, 65536)),
])
def test_builtin_memory_large(name, model, sizes):
    check_slope(measure("builtin", name, model, *sizes), f"{name}, model {model}")


# gemm (issue #10 item 6, gemm side). Each block's operands are converted inside the bounded
# loop (jwmma.tiled.blocks), so besides a fixed working set only the operands themselves, their
# copy into the compiled program and D grow with the batch (XLA's own accounting: arguments +
# D + a temp that stays constant past the first full chunk). The working set is full once a
# chunk of whole GEMMs fills the model's budget (2**24 products per step for the fp8 models with
# matrix-product group sums: 1024 GEMMs of 16x16x128 or 16x16x256; row blocks of 1024 rows at
# N = 256, 2048 at N = 128); below that the working set itself still grows with the batch
# (256 -> 1024 GEMMs of 16x16x128: +190 MB for +3.9 MB of operands), so the first size of each
# case is at least that. Measured (load ~5-6, 2-core machine), peak growth over the operand
# growth, the 48 MB tolerance not subtracted: 16x16x128 1024 -> 8192 x3.2-4.1 (before: x10.3);
# 16x16x256 exact 1024 -> 4096 x4.9 (the margin is the tolerance); rows x2.9-4.6.


@pytest.mark.slow
def test_gemm_memory_growing_batch_small_case():
    """gemm of 1024 -> 4096 small fp8 GEMMs (16x16x128), default model. Before the batch was
    cut into chunks of whole GEMMs the peak grew by about 0.24 MB per GEMM (x50); before each
    chunk's operands were converted inside the loop, x8.9 over these sizes."""
    res = measure("gemm", "smfmac_f32_16x16x128_fp8_fp8", "default", 16, 16, 128, 1024, 4096)
    check_slope(res, "gemm smfmac_f32_16x16x128_fp8_fp8 (16, 16, 128), default model, growing batch")


@pytest.mark.slow
@pytest.mark.parametrize("name,model,mnk,sizes", [
    ("smfmac_f32_16x16x128_fp8_fp8", "default", (16, 16, 128), (1024, 4096, 8192)),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", (16, 16, 256), (1024, 2048, 4096)),
    ("swmmac_f32_16x16x32_f16_w32", "default", (32, 32, 64), (64, 512, 2048)),
])
def test_gemm_memory_growing_batch(name, model, mnk, sizes):
    check_slope(measure("gemm", name, model, *mnk, *sizes), f"gemm {name} {mnk}, model {model}, growing batch")


@pytest.mark.slow
@pytest.mark.parametrize("name,model,nk,rows", [
    ("smfmac_f32_16x16x128_fp8_fp8", "default", (256, 2048), (1024, 4096, 16384)),
    ("smfmac_f32_16x16x128_fp8_fp8", "exact", (128, 1024), (2048, 4096, 16384)),
])
def test_gemm_memory_growing_rows(name, model, nk, rows):
    check_slope(measure("gemm_rows", name, model, *nk, *rows), f"gemm {name} N, K = {nk}, model {model}, growing M")
