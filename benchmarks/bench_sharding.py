"""Scale-out of GEMM emulation: fp8 `cdna3` throughput on 1 vs several devices.

For each device count, jwmma.gemm (traced in jax.jit, operands already placed on the
devices as jwmma.sharding places them) is compiled by a first call and then timed over
--repeat calls with block_until_ready (median). Throughput counts emulated multiply-adds =
compressed products = M * N * K / 2. speed-up = t(1 device) / t(n devices), efficiency =
speed-up / n. cpu s = process CPU seconds per call, cores = cpu s / seconds (on CPU: how many
cores the emulation kept busy; on a shared machine a low figure means it was starved). The outputs of every device count are checked bit for bit against 1 device.

    python benchmarks/bench_sharding.py                       # CPU: forced host devices, 1 vs all
    python benchmarks/bench_sharding.py --size 16384 --devices 1,2     # 2 GPUs, M = N = K = 16384

On CPU, --host-devices N (default: the number of cores) is put into XLA_FLAGS before JAX
starts; it does not touch GPU runs.
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import time


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=None, help="M = N = K (overridden by --m/--n/--k)")
    ap.add_argument("--m", type=int, default=None, help="rows of A and D (default: 512 on CPU, 16384 on GPU)")
    ap.add_argument("--n", type=int, default=None, help="columns of B and D (default: as M)")
    ap.add_argument("--k", type=int, default=None, help="dense K (default: 2 x M on CPU, M on GPU)")
    ap.add_argument("--batch", type=int, default=None, help="optional batch of independent GEMMs")
    ap.add_argument("--devices", default="1,all", help="device counts to compare, e.g. 1,2,4 or 1,all (1,all)")
    ap.add_argument("--builtin", default="smfmac_f32_16x16x128_fp8_fp8")
    ap.add_argument("--model", default="cdna3")
    ap.add_argument("--path", default="matrix", choices=["matrix", "registers"])
    ap.add_argument("--repeat", type=int, default=3, help="timed calls after the compiling one (3)")
    ap.add_argument("--host-devices", type=int, default=os.cpu_count() or 1,
                    help="CPU only: host devices forced through XLA_FLAGS (default: cores)")
    ap.add_argument("--no-check", action="store_true", help="skip the bit check against 1 device")
    ap.add_argument("--seed", type=int, default=0)
    return ap.parse_args(argv)


def operands(spec, batch, m, n, k, seed):
    """Random finite operands as numpy: A compressed (values, positions int8), B dense."""
    import ml_dtypes
    import numpy as np

    rng = np.random.default_rng(seed)
    lead = () if batch is None else (batch,)
    dt = {"fp8": ml_dtypes.float8_e4m3fn, "bf8": ml_dtypes.float8_e5m2, "f16": np.float16,
          "bf16": ml_dtypes.bfloat16}

    def floats(kind, shape):
        d = np.dtype(dt[kind])
        if d.itemsize == 1:  # random codes, finite ones only, fast at any size
            codes = rng.integers(0, 256, shape, dtype=np.uint8)
            x = codes.view(d)
            bad = ~np.isfinite(x.astype(np.float32))
            codes[bad] = 0
            return codes.view(d)
        return rng.standard_normal(shape, dtype=np.float32).astype(d)

    values = floats(spec.a_type, lead + (m, k // 2))
    pairs = np.array([(0, 1), (0, 2), (0, 3), (1, 2), (1, 3), (2, 3)], np.int8)
    pos = pairs[rng.integers(0, 6, lead + (m, k // 4))].reshape(lead + (m, k // 2))
    b = floats(spec.b_type, lead + (k, n))
    return values, pos, b


def main(argv=None):
    args = parse_args(argv)
    flags = re.sub(r"--xla_force_host_platform_device_count=\d+", "", os.environ.get("XLA_FLAGS", ""))
    os.environ["XLA_FLAGS"] = f"{flags} --xla_force_host_platform_device_count={args.host_devices}".strip()

    import jax
    import numpy as np

    import jwmma
    from jwmma.tiled import plan_gemm

    backend = jax.default_backend()
    gpu = backend != "cpu"
    m = args.m or args.size or (16384 if gpu else 512)
    n = args.n or args.size or m
    k = args.k or args.size or (m if gpu else 2 * m)
    avail = jax.device_count()
    counts = []
    for tok in args.devices.split(","):
        c = avail if tok.strip() == "all" else int(tok)
        if not 1 <= c <= avail:
            sys.exit(f"--devices: {c} is not in 1..{avail} ({backend})")
        if c not in counts:
            counts.append(c)
    spec = jwmma.BUILTINS[args.builtin]
    dev = jax.devices()[0]
    print(f"# {avail} x {dev.platform} {dev.device_kind}; jax {jax.__version__}; cpus {os.cpu_count()}; "
          f"{spec.name} model={args.model} path={args.path}", flush=True)
    print(f"# M={m} N={n} K={k}" + (f" batch={args.batch}" if args.batch else "")
          + f"; MACs = M*N*K/2 = {m * n * k / 2 * (args.batch or 1):.3e}; median of {args.repeat} calls after compiling",
          flush=True)
    values, pos, b = operands(spec, args.batch, m, n, k, args.seed)
    macs = m * n * k / 2 * (args.batch or 1)

    rows, ref = [], None
    for count in counts:
        devices = None if count == 1 else count
        plan = plan_gemm(spec, (values, pos), b, devices=devices)
        if plan is not None:
            (v_d, p_d), b_d, _ = plan.place((values, pos), b, None)
            layout = plan.describe()
        else:
            v_d, p_d, b_d = (jax.device_put(x, jax.devices()[0]) for x in (values, pos, b))
            layout = "one device"
        used = 1 if plan is None else plan.mesh.size
        f = jax.jit(lambda v, p, bb: jwmma.gemm((v, p), bb, builtin=spec.name, model=args.model,
                                                 path=args.path, devices=devices))
        try:
            t0 = time.perf_counter()
            d = jax.block_until_ready(f(v_d, p_d, b_d))
            t_first = time.perf_counter() - t0
            ts, cpu = [], []
            for _ in range(max(1, args.repeat)):
                t0, c0 = time.perf_counter(), time.process_time()
                d = jax.block_until_ready(f(v_d, p_d, b_d))
                ts.append(time.perf_counter() - t0)
                cpu.append((time.process_time() - c0) / ts[-1])
        except Exception as e:  # e.g. out of memory on one device: report, go on
            msg = str(e).strip().splitlines()[0][:160] if str(e).strip() else type(e).__name__
            print(f"  {count} device(s): FAILED ({type(e).__name__}: {msg}), {layout}", flush=True)
            del v_d, p_d, b_d
            continue
        t = statistics.median(ts)
        shard = sorted({tuple(s.data.shape) for s in d.addressable_shards})
        same = None
        if not args.no_check:
            host = np.asarray(d).view(np.uint32)
            if ref is None:
                ref = host
            same = bool(np.array_equal(host, ref))
        del d, v_d, p_d, b_d
        rows.append(dict(devices=count, used=used, layout=layout, seconds=t, first=t_first,
                         macs_per_s=macs / t, shard=shard, same=same, cpu=statistics.median(cpu)))
        print(f"  {count} device(s): {t:.3f} s ({t_first:.1f} s first call), {layout}", flush=True)

    if not rows:
        print("nothing ran")
        return 1
    # speed-up against 1 device; if that failed (e.g. memory), against the smallest count that ran
    base_row = rows[0]
    base = base_row["seconds"] * base_row["used"] if base_row["used"] > 1 else base_row["seconds"]
    print()
    if base_row["used"] > 1:
        print(f"(no 1-device timing: speed-up = {base_row['used']} x t({base_row['used']} devices) / t, "
              f"i.e. assuming {base_row['used']} devices scale perfectly)")
    head = f"{'devices':>7} {'used':>4}  {'seconds':>9} {'MAC/s':>10} {'speed-up':>8} {'efficiency':>10}  {'D shard':>16}  {'bits':>4} {'cpu s':>6} {'cores':>5}  layout"
    print(head)
    print("-" * len(head))
    for r in rows:
        sp = base / r["seconds"]
        eff = sp / r["used"]
        bits = "-" if r["same"] is None else ("same" if r["same"] else "DIFF")
        print(f"{r['devices']:>7} {r['used']:>4}  {r['seconds']:>9.3f} {r['macs_per_s']:>10.3e} {sp:>7.2f}x "
              f"{eff:>9.0%}  {'x'.join(map(str, r['shard'][0])):>16}  {bits:>4} {r['cpu'] * r['seconds']:>6.2f} {r['cpu']:>5.2f}  {r['layout']}")
    if any(r["same"] is False for r in rows):
        print("ERROR: sharded results differ from one device")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
