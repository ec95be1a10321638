"""``devices=`` of `jwmma.gemm`: which devices (an int, ``"all"``, ``"local"`` or a sequence of
`jax.Device`; spread evenly over the processes of a multi-process job) and the automatic
layout over them (the batch x M x N split with the least work per device). The rules are
`jwmma.tiled.plan`'s module doc; `jwmma.tiled.plan.plan_gemm` calls these.
"""
from __future__ import annotations

import itertools
import math

import jax
import numpy as np
from jax.sharding import Mesh

__all__ = ["per_process", "resolve_devices", "auto_layout", "auto_mesh"]


def per_process(avail, n: int):
    """The first n // P devices of each of the P processes of ``avail`` (process-major), so
    that a mesh built from them splits its first axis across hosts and the rest within one;
    ``avail[:n]`` for one process. ValueError when n does not spread evenly."""
    procs = sorted({d.process_index for d in avail})
    if len(procs) == 1:
        return list(avail[:n])
    if n % len(procs):
        raise ValueError(
            f"devices={n} does not spread evenly over the {len(procs)} processes of this job "
            f"({len(avail)} devices in all); use a multiple of {len(procs)}, 'all', or 'local' "
            f"(this process's {jax.local_device_count()} devices only)")
    per = n // len(procs)
    out = []
    for p in procs:
        mine = [d for d in avail if d.process_index == p]
        if per > len(mine):
            raise ValueError(f"devices={n} needs {per} devices on each process, process {p} has {len(mine)}")
        out += mine[:per]
    return out


_DEVICES_TYPE = "devices must be an int, 'all', 'local' or a sequence of jax devices"


def resolve_devices(devices):
    """The devices ``devices=`` names: an int N (`per_process` of `jax.devices()`), "all", "local"
    (this process's) or a sequence of jax devices; ValueError/TypeError for anything else."""
    avail = jax.devices()  # every process's devices in a multi-process job
    if isinstance(devices, str):
        if devices == "local":  # this process's devices only: no cross-host work
            return list(jax.local_devices())
        if devices != "all":
            raise ValueError(f"{_DEVICES_TYPE}, got {devices!r}")
        return list(avail)
    if isinstance(devices, (bool, np.bool_)):
        raise TypeError(f"{_DEVICES_TYPE}, got {devices!r}")
    if isinstance(devices, (int, np.integer)):
        n = int(devices)
        if n < 1:
            raise ValueError(f"devices must be >= 1, got {n}")
        if n > len(avail):
            raise ValueError(
                f"devices={n} but only {len(avail)} {jax.default_backend()} device(s) are available "
                f"(on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)"
            )
        return per_process(avail, n)
    try:
        devs = list(devices)
    except TypeError:
        raise TypeError(f"{_DEVICES_TYPE}, got {devices!r}") from None
    if not devs or not all(isinstance(d, jax.Device) for d in devs):
        raise TypeError(f"devices given as a sequence must hold jax devices, got {devices!r}")
    if len(set(devs)) != len(devs):
        raise ValueError("devices lists a device twice")
    return devs


def _divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def auto_layout(n_devices: int, batch_shape, m: int, n: int, tile=(16, 16)) -> tuple:
    """Splits (per batch dim..., M, N) for at most ``n_devices`` devices (see module doc)."""
    tm, tn = tile
    divs = _divisors(n_devices)
    cands = [[d for d in divs if size % d == 0] for size in (*batch_shape, m, n)]
    best, best_key = None, None
    for combo in itertools.product(*cands):
        used = math.prod(combo)
        if used > n_devices:
            continue
        *db, dm, dn = combo
        work = math.prod(s // d for s, d in zip(batch_shape, db)) * (-(-m // (tm * dm)) * tm) * (-(-n // (tn * dn)) * tn)
        key = (work, work * used, tuple(-d for d in combo))
        if best_key is None or key < best_key:
            best, best_key = combo, key
    return tuple(best)


def auto_mesh(devices, batch_shape, m: int, n: int, tile=(16, 16)):
    """(Mesh, {role: axes}) of the automatic layout over ``devices``; None for one device."""
    combo = auto_layout(len(devices), batch_shape, m, n, tile)
    names = [f"batch{i}" for i in range(len(batch_shape))] + ["m", "n"]
    axes = [(nm, d) for nm, d in zip(names, combo) if d > 1]
    if not axes:
        return None
    used = math.prod(d for _, d in axes)
    chosen = list(devices[:used])
    if len({d.process_index for d in devices}) > 1:
        try:  # a subset over several processes: the same number from each
            chosen = per_process(devices, used)
        except ValueError:
            pass
    mesh = Mesh(np.array(chosen, dtype=object).reshape([d for _, d in axes]), tuple(nm for nm, _ in axes))
    return mesh, {nm: (nm,) for nm, _ in axes}
