"""One worker of the two-processes-vs-one benchmark (run by `bench_multihost_run.py`, or by hand).

Every process builds only its shards of A and B (`make_array_from_callback` on the global
mesh of all processes' devices; rows of A / columns of B drawn from per-row seeds), runs
`jwmma.gemm` once to compile, then ``--reps`` more times, and process 0 prints one JSON line:
the median and minimum seconds per GEMM and the emulated MAC/s (compressed products), plus
a digest of D (gathered) so that runs in different layouts can be compared bit for bit.

    JAX_COORDINATOR_ADDRESS=127.0.0.1:4321 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=0 \\
        XLA_FLAGS=--xla_force_host_platform_device_count=1 python benchmarks/bench_multihost.py -m 1024 ...
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import time

p = argparse.ArgumentParser()
p.add_argument("-m", type=int, default=1024)
p.add_argument("-n", type=int, default=1024)
p.add_argument("-k", type=int, default=2048)
p.add_argument("--builtin", default="smfmac_f32_16x16x128_fp8_fp8")
p.add_argument("--model", default="cdna3")
p.add_argument("--reps", type=int, default=5)
p.add_argument("--devices", default="all", help="all (every process's devices) or a number per job")
p.add_argument("--label", default="")
args = p.parse_args()

from jwmma.tiled import processes  # noqa: E402

if int(os.environ.get("JAX_NUM_PROCESSES", "1")) > 1:  # before any other JAX call
    processes.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_NUM_PROCESSES"]),
                         int(os.environ["JAX_PROCESS_ID"]), timeout=120)

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.experimental import multihost_utils  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jwmma  # noqa: E402
from jwmma.isa.table import lookup  # noqa: E402
from jwmma.tiled.plan import per_process  # noqa: E402

spec = lookup(args.builtin)
dt = {"fp8": ml_dtypes.float8_e4m3fn, "f16": np.float16}[spec.a_type]
ndev = len(jax.devices()) if args.devices == "all" else int(args.devices)
devs = per_process(jax.devices(), ndev)


def rows(seed, lo, hi, width):
    out = np.empty((hi - lo, width), dt)
    for i in range(lo, hi):
        r = np.random.default_rng([seed, i]).standard_normal(width)
        if seed == 1:  # A: 2:4 prune (keep the two largest |values| of every four)
            g = r.reshape(-1, 4)
            keep = np.argsort(-np.abs(g), axis=1, kind="stable")[:, :2]
            mask = np.zeros_like(g, bool)
            np.put_along_axis(mask, keep, True, axis=1)
            r = np.where(mask, g, 0).reshape(-1)
        out[i - lo] = r.astype(dt)
    return out


if ndev > 1:
    mesh = Mesh(np.array(devs, dtype=object), ("m",))  # rows of A and D over every device
    sa, sb = NamedSharding(mesh, P("m", None)), NamedSharding(mesh, P(None, None))
    t_data = time.perf_counter()
    a = jax.make_array_from_callback((args.m, args.k), sa, lambda i: rows(1, *i[0].indices(args.m)[:2], args.k))
    b = jax.make_array_from_callback((args.k, args.n), sb, lambda i: rows(2, 0, args.n, args.k).T[i])
    kw = {}
else:
    t_data = time.perf_counter()
    a, b = rows(1, 0, args.m, args.k), rows(2, 0, args.n, args.k).T.copy()
    kw = {}
t_data = time.perf_counter() - t_data


def once():
    d = jwmma.gemm(a, b, builtin=args.builtin, model=args.model, **kw)
    jax.block_until_ready(d)
    return d


t0 = time.perf_counter()
d = once()
t_first = time.perf_counter() - t0
times = []
cpu0 = time.process_time()  # every thread of this process: XLA's intra-op pool included
for _ in range(args.reps):
    t0 = time.perf_counter()
    d = once()
    times.append(time.perf_counter() - t0)
cpu = (time.process_time() - cpu0) / args.reps
# core-seconds per GEMM of the whole job: on a machine shared with other users, wall time
# also measures how much of the CPU this job managed to take from them
cpu_all = sum(float(x) for x in processes.process_allgather_bytes(repr(cpu).encode())) if jax.process_count() > 1 else cpu
full = np.asarray(multihost_utils.process_allgather(d, tiled=True)) if not d.is_fully_addressable else np.asarray(d)
digest = hashlib.blake2b(full.view(np.uint32).tobytes(), digest_size=8).hexdigest()
macs = args.m * args.n * args.k / 2
if jax.process_index() == 0:
    print(json.dumps(dict(label=args.label, processes=jax.process_count(), devices=ndev, m=args.m, n=args.n, k=args.k,
                          model=args.model, first_s=t_first, data_s=t_data, median_s=statistics.median(times),
                          min_s=min(times), macs_per_s=macs / statistics.median(times), cpu_s=cpu_all,
                          load=os.getloadavg()[0], digest=digest)), flush=True)
processes.leave()
