"""The Pallas Triton kernels as an sm_90 GPU would run them, measured on a machine without one:
registers, spills and instructions per product (RESULTS.md "Kernels compiled offline").

    pip install triton            # (Linux x86-64 wheels carry ptxas and cuobjdump); no GPU needed
    python benchmarks/kernel_regs.py                                   # every row that runs a kernel
    python benchmarks/kernel_regs.py --rows mxfp8_cdna4_mx --pallas tm=8 tn=32 num_warps=2
    python benchmarks/kernel_regs.py --rows smfmac_f32_16x16x64_bf16:exact

Each row (`rows.ROWS`, this folder's shared rows, or ``builtin:model``) is lowered as ``jwmma.gemm`` lowers it for a GPU
(``backend='pallas'``, ``platform='gpu'``, `jax.export` for CUDA under an abstract H200): JAX
writes the kernel's Triton IR, which this script keeps. A child process then compiles that IR
with the installed Triton for sm_90 (``num_warps`` of the row's tiling, one stage) and reads
the cubin with cuobjdump:

* ``regs``: registers a thread; ``stack``: bytes of local memory a thread (spilled registers,
  beyond ptxas's 255), ``spill ins``: its LDL/STL instructions;
* ``loop``: SASS instructions of the kernel's K loop body (the outermost loop, rare branches and
  their loops counted once, as written), and ``warp ins/product`` = loop x warps / (tm x tn x
  products of a K unit): the warp instructions an SM issues per emulated product, the kernel's
  cost where it is ALU-bound. One H200 issues about 1e12 warp instructions a second. A kernel
  whose K unit is itself a loop (`exact`, the integer kernel, ``chain_run``) is undercounted:
  its inner loop counts once;
* ``global B/p``, ``shared B/p``: bytes the loop body's loads read from global memory (LDG:
  L1, L2 or HBM) and from shared memory (LDS, LDSM: mostly Triton's layout conversions) per
  emulated product, counted like the instructions (every thread, one pass of the body);
* ``compile s``: CPU seconds of Triton's compile (its passes, LLVM and ptxas; no cache), a
  proxy for the part of a GPU first call that grows with the kernel.

It is an estimate of the kernel XLA compiles, not a measurement of it: XLA bundles its own
Triton and ptxas, and a static count ignores latency and memory. On an H200 (0a868c0) the rows'
MAC/s times this estimate came to 0.8-1.7e12 for kernels without spills, and to 3e11 for the
MXFP8 kernel, which spilled 2920 bytes a thread: spills are what it finds best.
"""
from __future__ import annotations

import argparse
import importlib.metadata
import importlib.util
import json
import os
import re
import subprocess
import sys
import tempfile

_HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, _HERE)
from rows import Row, operands, row_of  # noqa: E402  (this folder: the shared rows)

_TESTS = os.path.join(_HERE, "..", "tests")  # pallas_support.abstract_gpu, shared with the kernel tests

#: rows whose default model has a Pallas kernel (the float rows `backend='auto'` runs on it, and
#: the integer ones it leaves to XLA)
DEFAULT_ROWS = ["fp8_cdna3", "f16_cdna3", "bf16_cdna3", "f16_gfx12", "fp8_gfx12", "f16_wmma", "fp8_exact",
                "fp8_fma_chain", "mfma_fp8_cdna3", "mfma_f16_cdna3", "mfma_bf16_cdna3", "mxfp8_cdna4_mx",
                "mxfp4_cdna4_mx", "int8_cdna4"]

_COMPILE = r'''
import json, os, re, resource, subprocess, sys, tempfile, time
os.environ.setdefault("TRITON_DEFAULT_FP_FUSION", "0")
import triton
from triton.backends.compiler import GPUTarget
path, warps = sys.argv[1], int(sys.argv[2])
def cpu():  # this process and its children (ptxas runs as one)
    return time.process_time() + resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime

start = cpu()
k = triton.compile(path, target=GPUTarget("cuda", 90, 32), options={"num_warps": warps, "num_stages": 1})
seconds = cpu() - start
tools = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin")
cubin = path + ".cubin"
open(cubin, "wb").write(k.asm["cubin"])
usage = subprocess.run([os.path.join(tools, "cuobjdump"), "--dump-resource-usage", cubin], capture_output=True,
                       text=True, check=True).stdout
sass = subprocess.run([os.path.join(tools, "cuobjdump"), "-sass", cubin], capture_output=True, text=True,
                      check=True).stdout
m = re.search(r"REG:(\d+).*?STACK:(\d+)", usage)
print(json.dumps({"regs": int(m.group(1)), "stack": int(m.group(2)), "sass": sass, "seconds": seconds}))
'''


#: bytes a thread reads with one load of each SASS width suffix (none: 32 bits)
_WIDTH = {"U8": 1, "S8": 1, "U16": 2, "S16": 2, "64": 8, "128": 16}


def _load_bytes(text: str, op: str) -> int:
    """Bytes a thread reads with instruction ``text`` if it is an ``op`` load (LDG, LDS), else 0."""
    m = re.match(r"(?:@!?U?P\w+\s+)?" + op + r"((?:\.[A-Z0-9]+)*)\s", text + " ")
    if not m:
        return 0
    suffixes = m.group(1).split(".")[1:]
    return next((_WIDTH[x] for x in suffixes if x in _WIDTH), 4) * (4 if "M88" in suffixes and "4" in suffixes else 1)


def sass_loop(sass: str) -> tuple[int, int, int, int, int]:
    """(instructions, instructions of the outermost loop body, LDL/STL instructions, bytes a
    thread loads from global and from shared memory in one pass of that body) of a cuobjdump
    SASS listing: the loop is the longest backward branch."""
    ins = [(int(m.group(1), 16), m.group(2)) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", sass)]
    index = {a: i for i, (a, _) in enumerate(ins)}
    body, start = 0, 0
    for i, (a, text) in enumerate(ins):
        m = re.search(r"\bBRA\b.*?0x([0-9a-f]+)", text)
        target = int(m.group(1), 16) if m else None
        if target is not None and target < a and target in index and i - index[target] + 1 > body:
            body, start = i - index[target] + 1, index[target]
    spills = sum(1 for _, t in ins if re.search(r"\b(LDL|STL)\b", t))
    loop = [t for _, t in ins[start:start + body]]
    return (len(ins), body, spills, sum(_load_bytes(t, "LDG") for t in loop),
            sum(_load_bytes(t, "LDS") + _load_bytes(t, "LDSM") for t in loop))


def triton_ir(label: str, pallas: dict) -> tuple[str, object, object]:
    """The Triton IR of row ``label``'s kernel (the largest, when a GEMM has several), its
    `driver.Tiling` and `driver.Kernel`."""
    import jax
    from jax._src.pallas.triton import lowering  # where Pallas hands JAX its Triton module

    import jwmma
    from jwmma import models
    from jwmma.backends import pallas as kernels
    from jwmma.engine.step import context

    builtin, _, model = label.partition(":")
    row = Row(builtin, model) if model else row_of(label)
    spec = row.spec
    a, b, c, kw = operands(row, 64, 128, 4 * spec.k)
    opts = (kw.pop("options", None) or jwmma.Options()).replace(backend="pallas", platform="gpu",
                                                               pallas=jwmma.PallasOptions(**pallas))
    found = []
    original = lowering.lower_jaxpr_to_triton_module

    def keep(*args, **kwargs):
        out = original(*args, **kwargs)
        found.append(out.module.operation.get_asm(large_elements_limit=16))
        return out

    def gemm(a, b, c):
        return jwmma.gemm(a, b, c, builtin=spec.name, model=row.model, options=opts, **kw)

    if _TESTS not in sys.path:
        sys.path.insert(0, _TESTS)
    from pallas_support import abstract_gpu  # the abstract H200 the kernel tests lower for

    lowering.lower_jaxpr_to_triton_module = keep
    try:
        with abstract_gpu(), kernels.quiet_triton():
            jax.export.export(jax.jit(gemm), platforms=("cuda",), disabled_checks=[
                jax.export.DisabledSafetyCheck.custom_call("__gpu$xla.gpu.triton")])(a, b, c)
    finally:
        lowering.lower_jaxpr_to_triton_module = original
    if not found:
        raise SystemExit(f"row {label}: no Pallas kernel was lowered (no kernel for its model?)")
    model = models.resolve(row.model, context(spec, row.clamp), spec.default_model)
    tiling = kernels.tiling(spec, model, opts.pallas)
    kern = kernels.make_kernel(spec, model, tiling=tiling)
    return max(found, key=len), tiling, kern


def measure(label: str, pallas: dict, folder: str) -> dict:
    ir, t, kern = triton_ir(label, pallas)
    path = os.path.join(folder, f"{label}.ttir")
    with open(path, "w") as f:
        f.write(ir)
    env = dict(os.environ, TRITON_CACHE_DIR=os.path.join(folder, "cache", label))  # compile afresh, timed
    child = subprocess.run([sys.executable, "-c", _COMPILE, path, str(t.num_warps)], capture_output=True, text=True,
                           env=env)
    if child.returncode:
        raise SystemExit(f"row {label}: Triton could not compile the kernel:\n{child.stderr[-2000:]}")
    out = json.loads(child.stdout.strip().splitlines()[-1])
    total, body, spills, ldg, lds = sass_loop(out.pop("sass"))
    products = t.tm * t.tn * kern.unit_kc
    threads = 32 * t.num_warps
    return dict(row=label, tile=f"{t.tm}x{t.tn}", warps=t.num_warps, unit_kc=kern.unit_kc, regs=out["regs"],
                stack=out["stack"], spill_ins=spills, sass=total, loop=body,
                warp_ins_per_product=round(body * t.num_warps / products, 3),
                global_bytes_per_product=round(ldg * threads / products, 3),
                shared_bytes_per_product=round(lds * threads / products, 3), ir_lines=ir.count("\n"),
                compile_s=round(out["seconds"], 2))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", nargs="*", default=DEFAULT_ROWS,
                    help="labels of rows.ROWS, builtin names, or builtin:model")
    ap.add_argument("--pallas", nargs="*", metavar="NAME=VALUE", help="PallasOptions fields for every row")
    ap.add_argument("--json", metavar="FILE", help="also write the results here")
    args = ap.parse_args()
    # only the child imports Triton (its MLIR beside jaxlib's in one process is asking for trouble)
    if importlib.util.find_spec("triton") is None:
        raise SystemExit("kernel_regs.py needs Triton (pip install triton): it compiles the kernels for sm_90")
    version = importlib.metadata.version("triton")
    from bench_rows import pallas_options

    pallas = pallas_options(args.pallas)
    print(f"# sm_90 via Triton {version}; PallasOptions {pallas or 'defaults'}", flush=True)
    w = max(18, *(len(label) for label in args.rows))
    print(f"{'row':{w}s} {'tile':>6s} {'warps':>5s} {'regs':>4s} {'stack':>5s} {'spill ins':>9s} {'loop':>6s} "
          f"{'warp ins/product':>16s} {'global B/p':>10s} {'shared B/p':>10s} {'compile s':>9s}", flush=True)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        for label in args.rows:
            r = measure(label, pallas, folder)
            results.append(r)
            print(f"{label:{w}s} {r['tile']:>6s} {r['warps']:5d} {r['regs']:4d} {r['stack']:5d} {r['spill_ins']:9d} "
                  f"{r['loop']:6d} {r['warp_ins_per_product']:16.3f} {r['global_bytes_per_product']:10.3f} "
                  f"{r['shared_bytes_per_product']:10.3f} {r['compile_s']:9.2f}", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(dict(triton=version, pallas=pallas, rows=results), f, indent=1)


if __name__ == "__main__":
    main()
