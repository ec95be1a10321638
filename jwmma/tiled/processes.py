"""Several processes (hosts) as one JAX job: joining, agreement checks, barriers (README "Several machines").

jwmma uses JAX's multi-controller runtime as it is: every process runs the same program,
`jax.distributed.initialize` joins them, `jax.devices()` lists every process's devices and a
`Mesh` over them spans hosts. This module adds small things around it:

* `initialize`: join a job from explicit values (the CLI, `jwmma.cli.processes`, finds them
  in its options, the environment or a SLURM / Open MPI allocation; nothing here reads the
  environment). gloo CPU collectives; optionally recoverable (survivors of a dead peer keep
  running, for study sweeps whose processes exchange no data).
* `agree`: every process checks that the others make the same call (shapes, dtypes,
  options, mesh, versions, host-data digests) before any collective on data; a mismatch
  raises the same ValueError on every process, naming the fields and processes that
  differ, instead of a hang or garbage.
* `barrier`, `wait_all`, `leave`, `check_shared_directory`: waits with timeouts that tell a
  dead peer from a slow one (the coordination service's client, JAX-internal but present
  since 0.4; a fallback to `multihost_utils` where it is missing).

Never called while tracing.
"""
from __future__ import annotations

import hashlib
import json
import os
import re

__all__ = ["initialize", "is_multiprocess", "agree", "barrier", "wait_all", "leave", "check_shared_directory",
           "describe_array", "process_allgather_bytes", "ADDRESS_RE"]

ADDRESS_RE = re.compile(r"^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.\-]+):(\d{1,5})$")


def initialize(coordinator=None, num_processes=None, process_id=None, *, timeout: int = 300,
               heartbeat_timeout: int | None = None, recoverable: bool = False) -> None:
    """Join a multi-process JAX job (`jax.distributed.initialize`), with gloo CPU collectives.

    Args:
        coordinator: process 0's ``HOST:PORT`` (the same on every process); num_processes,
            process_id: the job's size and this process's index. A value left None is JAX's
            to find (``JAX_COORDINATOR_ADDRESS``, or a SLURM / Open MPI allocation).
        timeout: seconds to wait for every process to join; heartbeat_timeout: seconds
            without heartbeats after which a peer counts as dead (None: JAX's 100).
        recoverable: the survivors keep running when a peer dies (JAX's
            ``jax_enable_recoverability``; for study sweeps, whose processes exchange no data)
            instead of being terminated by the coordination service.
    Must run before any other JAX call (JAX refuses otherwise: RuntimeError saying so). A job
    already joined is left as it is.
    """
    import jax

    if coordinator is not None and not ADDRESS_RE.match(str(coordinator)):
        raise ValueError(f"coordinator must be HOST:PORT (e.g. 10.0.0.1:4321), got {coordinator!r}")
    if num_processes is not None and process_id is not None and not 0 <= int(process_id) < int(num_processes):
        raise ValueError(f"process_id must be in [0, {int(num_processes) - 1}] for {num_processes} processes, "
                         f"got {process_id}")
    if jax.distributed.is_initialized():
        return
    jax.config.update("jax_cpu_collectives_implementation", "gloo")  # the default since 0.4.3x
    if recoverable:
        jax.config.update("jax_enable_recoverability", True)
    kw = {k: v for k, v in (("coordinator_address", coordinator), ("num_processes", num_processes),
                            ("process_id", process_id)) if v is not None}
    if heartbeat_timeout is not None:
        kw["heartbeat_timeout_seconds"] = int(heartbeat_timeout)
    try:
        jax.distributed.initialize(**kw, initialization_timeout=int(timeout))
    except RuntimeError as e:
        if "must be called before" in str(e):
            raise RuntimeError(
                "jwmma.tiled.processes.initialize() must run before any other JAX call (jax.devices(), "
                "an array, a jit...): call it first thing, or use the jwmma CLI options "
                "--coordinator/--num-processes/--process-id") from None
        raise


def is_multiprocess() -> bool:
    """True in a job of more than one process (`jax.process_count` > 1)."""
    import jax

    return jax.process_count() > 1


# ----------------------------------------------------------------------------- agreement
def describe_array(x) -> dict | None:
    """What must agree about an operand across processes: shape, dtype and, for a global
    array, its sharding; for host data (numpy, lists) a digest of the bytes, since each
    process passes its own copy (JAX's device_put checks equality by gathering the whole
    array; jwmma places host data without that and checks this digest instead)."""
    import jax
    import numpy as np

    if x is None:
        return None
    if isinstance(x, tuple):
        return {"pair": [describe_array(v) for v in x]}
    if isinstance(x, jax.core.Tracer):
        return {"traced": [list(x.shape), str(x.dtype)]}
    if isinstance(x, jax.Array):
        out = {"shape": list(x.shape), "dtype": str(x.dtype)}
        sh = x.sharding
        if not x.is_fully_addressable:
            mesh = getattr(sh, "mesh", None)
            out["sharding"] = (str(getattr(sh, "spec", sh)),
                               None if mesh is None else [dict(mesh.shape), [d.id for d in mesh.devices.flat]])
            return out
        x = np.asarray(x)  # a process-local array: its values must agree like host data
    a = np.ascontiguousarray(np.asarray(x))
    return {"shape": list(a.shape), "dtype": str(a.dtype),
            "digest": hashlib.blake2b(a.view(np.uint8).reshape(-1).data if a.size else b"", digest_size=16).hexdigest()}


def process_allgather_bytes(payload: bytes) -> list[bytes]:
    """Every process's ``payload`` (any lengths), in process order, through two small
    all-gathers (lengths, then padded bytes) of `jax.experimental.multihost_utils`."""
    import numpy as np
    from jax.experimental import multihost_utils

    n = np.asarray(multihost_utils.process_allgather(np.array([len(payload)], np.int32))).reshape(-1)
    width = int(n.max()) if n.size else 0
    buf = np.zeros(max(width, 1), np.uint8)
    buf[: len(payload)] = np.frombuffer(payload, np.uint8)
    rows = np.asarray(multihost_utils.process_allgather(buf)).reshape(len(n), -1)
    return [bytes(rows[i, : int(n[i])]) for i in range(len(n))]


def _flat(d, prefix=""):
    out = {}
    if isinstance(d, dict):
        for k, v in d.items():
            out.update(_flat(v, f"{prefix}.{k}" if prefix else str(k)))
    elif isinstance(d, list) and d and isinstance(d[0], dict):
        for i, v in enumerate(d):
            out.update(_flat(v, f"{prefix}[{i}]"))
    else:
        out[prefix] = d
    return out


def agree(description: dict, what: str) -> None:
    """Raise the same ValueError on every process unless all processes pass an equal
    ``description`` (a JSON-able dict). One all-gather of a 16-byte digest when they agree;
    on a mismatch the descriptions are gathered to name the differing fields.

    Every process must call it at the same point (it is a collective): call it before any
    other collective of the operation it guards."""
    import numpy as np
    from jax.experimental import multihost_utils

    text = json.dumps(description, sort_keys=True, default=str).encode()
    digest = np.frombuffer(hashlib.blake2b(text, digest_size=16).digest(), np.uint8)
    got = np.asarray(multihost_utils.process_allgather(digest)).reshape(-1, 16)
    if (got == got[0]).all():
        return
    texts = [json.loads(t) for t in process_allgather_bytes(text)]
    ref = _flat(texts[0])
    lines = []
    for i, t in enumerate(texts[1:], 1):
        other = _flat(t)
        keys = sorted(set(ref) | set(other))
        diff = [f"{k}: {ref.get(k)!r} on process 0, {other.get(k)!r} on process {i}"
                for k in keys if ref.get(k) != other.get(k)]
        lines += diff[:6] + ([f"... and {len(diff) - 6} more"] if len(diff) > 6 else [])
    raise ValueError(
        f"the processes disagree on {what}; every process must make the same call with the same "
        f"shapes, options and host data:\n  " + "\n  ".join(lines))


# ----------------------------------------------------------------------------- barriers
def _client():
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover
        return None
    return distributed.global_state.client


def barrier(name: str, timeout_s: float = 600.0) -> bool:
    """Wait until every process reaches ``barrier(name)``. Returns False (instead of
    hanging or aborting) when that does not happen within ``timeout_s`` or a peer is gone,
    so that the caller can finish what it can alone (e.g. merge the parts that exist).

    Uses the coordination service's barrier (``wait_at_barrier``; a JAX-internal client,
    stable since 0.4 but not public API); without it, an XLA all-gather
    (`multihost_utils.sync_global_devices`), which fails at once on a dead peer's closed
    gloo connection but cannot time out on a live, stuck one."""
    import jax

    if jax.process_count() == 1:
        return True
    client = _client()
    try:
        if client is not None and hasattr(client, "wait_at_barrier"):
            client.wait_at_barrier(f"jwmma/{name}", int(timeout_s * 1000))
        else:
            from jax.experimental import multihost_utils

            multihost_utils.sync_global_devices(f"jwmma/{name}")
        return True
    except Exception:  # noqa: BLE001 - JaxRuntimeError (deadline, dead peer); nothing to recover
        return False


def wait_all(name: str, timeout_s: float | None = None, poll_s: float = 0.2, value: str = "1") -> tuple:
    """Say that this process is done with ``name`` (leaving ``value``, a short text, for
    the others) and wait until every process is done or gone. Returns (the processes that
    did not finish (dead, or still running when ``timeout_s`` ran out), {process: value}
    of those that did).

    A dead peer does not make this hang: the coordination service's live-node list tells a
    dead process from a slow one. (Needs the service's key-value store, a JAX-internal
    client; without it an XLA barrier is used, which fails at once on a dead peer.)"""
    import time

    import jax

    n, me = jax.process_count(), jax.process_index()
    if n == 1:
        return [], {me: str(value)}
    client = _client()
    if client is None or not all(hasattr(client, a) for a in ("key_value_set", "key_value_dir_get", "get_live_nodes")):
        ok = barrier(name, timeout_s or 1e9)
        return ([], {}) if ok else ([p for p in range(n) if p != me], {me: value})
    prefix = f"jwmma/{name}/done/"
    client.key_value_set(prefix + str(me), str(value), allow_overwrite=True)
    deadline = None if timeout_s is None else time.monotonic() + timeout_s
    while True:
        # live nodes first, then the done keys: a process records "done" before it leaves,
        # so one that is neither done nor live (as of before the read) died unfinished
        try:
            live = set(client.get_live_nodes(list(range(n))))
        except Exception:  # noqa: BLE001 - the service itself is gone (process 0 died)
            live = None
        try:
            done = {int(k.rsplit("/", 1)[-1]): v for k, v in client.key_value_dir_get(prefix)} if live is not None else {}
        except Exception:  # noqa: BLE001 - the service went away meanwhile
            live, done = None, {}
        done.setdefault(me, str(value))
        missing = [p for p in range(n) if p not in done]
        if not missing:
            return [], done
        if live is None or not any(p in live for p in missing):
            return missing, done  # the rest are dead: nothing more will come
        if deadline is not None and time.monotonic() > deadline:
            return missing, done
        time.sleep(poll_s)


def leave(timeout_s: float = 60.0) -> None:
    """Leave the job cleanly at the end of a program. In a recoverable job (no shutdown
    barrier) every process but 0 disconnects now and process 0, which hosts the
    coordination service, waits (``timeout_s`` at most) until the others are gone: else it
    may exit first and a peer still disconnecting is aborted (SIGABRT) by the runtime. In
    a default job, `jax.distributed.shutdown` (a barrier of all processes)."""
    import time

    import jax

    if not jax.distributed.is_initialized():
        return
    n = jax.process_count()
    client = _client()
    recoverable = bool(getattr(jax.config, "jax_enable_recoverability", False))
    # not recoverable: shutdown() is itself a barrier of every process (process 0 waiting
    # for the others to leave first would deadlock with it)
    if recoverable and jax.process_index() == 0 and n > 1 and client is not None and hasattr(client, "get_live_nodes"):
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                if set(client.get_live_nodes(list(range(n)))) <= {0}:
                    break
            except Exception:  # noqa: BLE001
                break
            time.sleep(0.1)
    jax.distributed.shutdown()


def check_shared_directory(path: str) -> None:
    """Raise the same ValueError on every process unless they all see one directory
    ``path``: process 0 writes a random token there, the others read it back. A sweep over
    several hosts needs a shared filesystem for its part files (or ``share=`` and a merge)."""
    import secrets

    import jax

    if jax.process_count() == 1:
        return
    token_path = os.path.join(path, ".jwmma-share-check")
    if jax.process_index() == 0:
        os.makedirs(path, exist_ok=True)
        tmp = f"{token_path}.tmp"
        with open(tmp, "w") as f:
            f.write(secrets.token_hex(16))
        os.replace(tmp, token_path)
    process_allgather_bytes(b"")  # a barrier: the token is written before anyone reads it
    try:
        with open(token_path) as f:
            seen = f.read().encode()
    except OSError:
        seen = b""
    got = process_allgather_bytes(seen)
    if any(g != got[0] for g in got):
        blind = [i for i, g in enumerate(got) if g != got[0]]
        raise ValueError(
            f"the output directory {path!r} is not the same directory on every process: process(es) "
            f"{blind} do not see the file process 0 wrote there. A sweep over several hosts writes its "
            f"points to a shared filesystem; without one, run each host with share=(index, count) "
            f"(jwmma study --share I/N) and merge the directories afterwards (--merge-only)")
