"""A 2:4 violation inside a user's own `jax.jit` of `jwmma.gemm` in a two-process job (run by
every worker; started by `tests/test_multihost_checks.py` through `launch.py`).

A (64 x 128 fp8) is a global array over a mesh of 4 devices, rows split over the two
processes; row 50 (held by process 1 only) gets a group of four non-zeros. Each worker:

1. runs the jitted gemm on a valid A and compares its shards with a one-device run;
2. runs the same compiled program on the bad A and records the error it gets (its type, the
   ValueError text inside it, and the wall-clock time of the failure);
3. runs the valid call once more: the failed program left no process waiting in a
   collective, the job goes on;
4. the same with `jwmma.compress_2_4` inside the user's `jax.shard_map` (each device checks
   its own block: the devices agree over the mesh axes, the message names the block-local
   row of the first failing device), then a valid call again;

and writes {step: result} to $MH_OUT/check-<process>.json. ``MH_MODE=checked`` runs the
same under `jwmma.checked` (a checkify check) instead of a plain `jax.jit`.
"""
from __future__ import annotations

import json
import os
import re
import time
import traceback

from jwmma.tiled import processes

processes.initialize(os.environ["JAX_COORDINATOR_ADDRESS"], int(os.environ["JAX_NUM_PROCESSES"]),
                     int(os.environ["JAX_PROCESS_ID"]), timeout=60,
                     heartbeat_timeout=int(os.environ["JWMMA_HEARTBEAT_TIMEOUT"]))

import jax  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import jwmma  # noqa: E402

FP8 = "smfmac_f32_16x16x128_fp8_fp8"
PID = jax.process_index()
MODE = os.environ.get("MH_MODE", "jit")
MESSAGE = re.compile(r"\ba(24)? is not 2:4 sparse: [^\n]*")  # jwmma's message, out of JAX's wrapping text


def bits(x):
    return np.asarray(x).view(np.uint32)


def failure(fn, *args):
    """{error type, jwmma's message, wall-clock time} of a call that must fail."""
    try:
        jax.block_until_ready(fn(*args))
        return {"error": None}
    except Exception as e:  # noqa: BLE001 - what kind of error, and its text, is the result
        found = MESSAGE.search(str(e))
        return {"error": type(e).__name__, "message": found.group(0) if found else str(e)[-2000:],
                "time": time.time()}


def main():
    mesh = Mesh(np.array(jax.devices(), dtype=object).reshape(4), ("m",))
    rng = np.random.default_rng(7)  # the same on every process: every process can build the reference
    good = np.asarray(jwmma.prune_2_4(rng.standard_normal((64, 128)).astype(ml_dtypes.float8_e4m3fn)))
    bad = good.copy()
    bad[50, 8:12] = 1  # four non-zeros in group 2 of row 50: a row of process 1's devices
    b_host = rng.standard_normal((128, 16)).astype(ml_dtypes.float8_e4m3fn)
    rows = NamedSharding(mesh, P("m", None))

    def place(x, sharding):
        return jax.make_array_from_callback(x.shape, sharding, lambda i: x[i])

    b = place(b_host, NamedSharding(mesh, P()))

    def user(a, b):  # the user's own program, jitted by the user
        return jwmma.gemm(a, b, builtin=FP8, model="fma_chain") * 1

    run = jax.jit(user) if MODE == "jit" else jwmma.checked(user)
    ref = np.asarray(jwmma.gemm(good, b_host, builtin=FP8, model="fma_chain"))
    out = {}

    def check_good(step):
        d = run(place(good, rows), b)
        assert not d.is_fully_addressable
        for s in d.addressable_shards:
            np.testing.assert_array_equal(bits(s.data), bits(ref[s.index]), err_msg=f"shard {s.index}")
        out[step] = "passed"

    check_good("valid_before")
    held = [s.index for s in place(bad, rows).addressable_shards if s.index[0].start <= 50 < s.index[0].stop]
    out["holds_row_50"] = bool(held)
    out["bad"] = failure(run, place(bad, rows), b)
    check_good("valid_after")

    def blocks(a):  # the user's shard_map: each device compresses its own rows
        return jax.shard_map(lambda x: jwmma.compress_2_4(x)[0], mesh=mesh, in_specs=P("m", None),
                             out_specs=P("m", None))(a)

    run_blocks = jax.jit(blocks) if MODE == "jit" else jwmma.checked(blocks)
    out["shard_map_bad"] = failure(run_blocks, place(bad, rows))
    values = run_blocks(place(good, rows))
    want = np.asarray(jwmma.compress_2_4(good)[0])
    for s in values.addressable_shards:
        np.testing.assert_array_equal(np.asarray(s.data).view(np.uint8), want[s.index].view(np.uint8))
    out["shard_map_valid_after"] = "passed"
    return out


if __name__ == "__main__":
    try:
        result = main()
    except Exception:  # noqa: BLE001 - reported to the test
        result = {"crash": traceback.format_exc()[-3000:]}
    path = os.path.join(os.environ["MH_OUT"], f"check-{PID}.json")
    with open(path + ".tmp", "w") as fh:
        json.dump(result, fh)
    os.replace(path + ".tmp", path)
    print(f"process {PID}: {json.dumps(result)[:600]}", flush=True)
    processes.leave()
