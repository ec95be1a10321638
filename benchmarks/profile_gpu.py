"""Kernel-level time split of one GEMM emulation or one builtin call (jax.profiler perfetto
trace -> top device events).

    python benchmarks/profile_gpu.py --size 2048 --config fp8:cdna3 --out DIR
    python benchmarks/profile_gpu.py --size 8192 --row mfma_fp8_cdna3   # any bench_rows.py row
    python benchmarks/profile_gpu.py --call wmma_f32_16x16x16_f16_w32: --waves 65536   # a call, eager
    python benchmarks/profile_gpu.py --call f16:gfx12_dot4 --jit     # the same inside a user's jax.jit

A call row is `bench_calls.py`'s (``fmt:model`` or ``builtin:model``, its registers). Each
profile covers ``--reps`` calls after a compiling one; the events' totals are divided by it.
"""
from __future__ import annotations

import argparse
import collections
import glob
import gzip
import json
import os
import re
import tempfile

import jax

import jwmma
from rows import BUILTIN, ROWS, operands  # this folder: the shared rows and their operands


def _gemm(args):
    if args.row:  # a bench_rows.py row: M = N = K = size, its own operands, model and keywords
        row = ROWS[args.row]
        a, b, c, kw = operands(row, args.size, args.size, args.size, seed=0)
        a, b, c = jax.device_put((a, b, c))
        what = f"{args.row} ({row.builtin} {row.model_name}) {args.path} {args.size}^3"
        return what, lambda: jwmma.gemm(a, b, c, builtin=row.builtin, model=row.model_name, path=args.path,
                                        **kw), {}
    fmt, model = args.config.split(":")
    builtin = BUILTIN[fmt]
    a, b, _, _ = jax.device_put(operands(builtin, args.size, args.size, 2 * args.size, seed=0))
    return f"{builtin} {model} {args.path} {args.size}", lambda: jwmma.gemm(a, b, builtin=builtin, model=model,
                                                                           path=args.path), {}


def _call(args):
    """(what, the call, {fusion name: its op_name} when ``--hlo`` wrote the program)."""
    from bench_calls import _registers, jitted_call  # this folder

    fmt, _, model = args.call.partition(":")
    name = BUILTIN.get(fmt, fmt)
    spec = jwmma.BUILTINS[name]
    regs, kw = _registers(fmt, name, spec, args.waves)
    if model:
        kw["model"] = model
    fn = getattr(jwmma, name)
    what = f"{name} {model or 'default'} {args.waves} waves {'jit' if args.jit else 'eager'}"
    if not args.jit:
        return what, lambda: fn(*regs, **kw), {}
    jitted, call_args = jitted_call(fn, regs, kw)
    sources = {}
    if args.hlo:
        text = jitted.lower(*call_args).compile().as_text()
        with open(args.hlo, "w") as f:
            f.write(text)
        sources = _fusion_sources(text)
    return what, lambda: jitted(*call_args), sources


def _fusion_sources(hlo_text: str) -> dict:
    """{fusion name: the JAX operation it is rooted at} from a compiled program's text (the
    end of each fusion instruction's ``op_name``), so that the profile's events
    say which of jwmma's operations they run."""
    out = {}
    for m in re.finditer(r"^\s*%?([\w.\-]+) = [^\n]*? fusion\([^\n]*?op_name=\"([^\"]*)\"", hlo_text, re.M):
        out[m.group(1).replace(".", "_")] = m.group(2)[-70:]
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=2048)
    ap.add_argument("--config", default="fp8:cdna3")
    ap.add_argument("--row", default=None, choices=sorted(ROWS), help="a bench_rows.py row (dense ones included) "
                    "instead of --config, at M = N = K = --size")
    ap.add_argument("--path", default="matrix")
    ap.add_argument("--call", default=None, help="profile a builtin call (a bench_calls.py row) instead of a GEMM")
    ap.add_argument("--waves", type=int, default=65536)
    ap.add_argument("--jit", action="store_true", help="the call inside a user's jax.jit")
    ap.add_argument("--hlo", default=None, help="with --call --jit: write the compiled program's text (XLA's "
                    "fusions, named as in the events) to this file")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default=os.path.join(tempfile.gettempdir(), "jwmma_prof"))
    args = ap.parse_args()
    what, f, sources = _call(args) if args.call else _gemm(args)
    jax.block_until_ready(f())
    out = tempfile.mkdtemp(dir=args.out if os.path.isdir(args.out) else None)
    with jax.profiler.trace(out, create_perfetto_trace=True):
        for _ in range(args.reps):
            jax.block_until_ready(f())
    files = glob.glob(os.path.join(out, "**", "*perfetto_trace.json.gz"), recursive=True)
    ev = json.load(gzip.open(files[0]))
    events = ev["traceEvents"] if isinstance(ev, dict) else ev
    # device events only where the trace has a device process (a GPU): its kernels and copies
    names = {e["pid"]: e.get("args", {}).get("name", "") for e in events
             if e.get("ph") == "M" and e.get("name") == "process_name"}
    device = {pid for pid, name in names.items() if "/device:" in name and "CPU" not in name.upper()}
    tot = collections.Counter()
    cnt = collections.Counter()
    for e in events:
        if e.get("ph") == "X" and "dur" in e and (not device or e.get("pid") in device):
            tot[e["name"]] += e["dur"]
            cnt[e["name"]] += 1
    total = f"; device total {sum(tot.values()) / args.reps:.1f} us per rep" if device else ""
    print(f"# {jax.devices()[0].device_kind}: {what}: top {'device' if device else 'all'} events "
          f"(us per rep, count per rep){total}")
    for name, us in tot.most_common(args.top):
        src = sources.get(name.replace(".", "_"))
        print(f"{us / args.reps:12.1f} {cnt[name] / args.reps:8.1f}  {name[:60]}" + (f"  <- ...{src}" if src else ""))


if __name__ == "__main__":
    main()
