"""Which process computes which study points (sweeps spread over processes; README
"Several machines").

The unit of work is a *data unit*: (builtin, format, dist, scaling, K, M, N, seed), i.e.
one draw of operands and its exact reference, shared by every (model, remedy) point of the
sweep; splitting finer would redo the reference, coarser would balance worse. Units are
given to processes by longest-processing-time first (LPT) on a cost model that depends
on the sweep's configuration only (K * M * N * (points per unit + 1)):

* deterministic: every process computes the same assignment from the same configuration and
  process count, with no communication (ties broken by the unit's text, then the lower
  process index);
* independent of what is already done: a resumed run (any process count) assigns the
  same way whatever each process happened to read from the shared files, so two processes
  never both own a point, and a finished point (found in any process's file) is skipped;
* balanced: powers-of-two K sweeps give every process nearly the same work (LPT is within
  4/3 of the optimum; with several seeds per K each process gets seeds of every K).

A study point never spans processes: each process runs its units' GEMMs on its own devices
(`devices='local'`): sweep points are independent, so splitting them needs no cross-host
traffic at all, while a GEMM over a global mesh pays for operand distribution and its
collectives; a global-mesh GEMM is for problems too big for one host (`jwmma.gemm`).
"""
from __future__ import annotations

__all__ = ["UNIT_FIELDS", "unit_of", "unit_cost", "assign", "balance", "resolve_share", "local_gemm_kw"]

UNIT_FIELDS = ("builtin", "format", "dist", "scaling", "K", "M", "N", "seed")


def unit_of(row: dict) -> tuple:
    """The data unit of a point (or of a point's base description plus its seed)."""
    return tuple(row[k] for k in UNIT_FIELDS)


def unit_cost(unit: tuple, points_per_unit: int) -> float:
    """Relative cost of a unit: its emulated GEMMs and its reference all scale with K*M*N."""
    k, m, n = unit[4], unit[5], unit[6]
    return float(k) * m * n * (points_per_unit + 1)


def assign(units, count: int, points_per_unit: int = 1) -> dict:
    """{unit: owning process index} over ``count`` processes (LPT, deterministic)."""
    if not isinstance(count, int) or count < 1:
        raise ValueError(f"the process count must be a positive int, got {count!r}")
    units = sorted(set(units), key=lambda u: (-unit_cost(u, points_per_unit), repr(u)))
    loads = [0.0] * count
    owner = {}
    for u in units:
        p = min(range(count), key=lambda q: (loads[q], q))
        owner[u] = p
        loads[p] += unit_cost(u, points_per_unit)
    return owner


def balance(owner: dict, count: int, points_per_unit: int = 1) -> list:
    """Each process's share of the total cost (for logs and tests)."""
    loads = [0.0] * count
    for u, p in owner.items():
        loads[p] += unit_cost(u, points_per_unit)
    total = sum(loads) or 1.0
    return [x / total for x in loads]


def resolve_share(share=None) -> tuple:
    """(index, count) of this process: ``share`` when given (e.g. (2, 8) for job-array
    tasks that never talk to each other), else JAX's process index and count (1 process
    unless `jax.distributed` was initialised)."""
    if share is not None:
        try:
            index, count = (int(x) for x in share)
        except (TypeError, ValueError):
            raise ValueError(f"share must be (index, count), e.g. (0, 2), got {share!r}") from None
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"share = (index, count) needs 0 <= index < count, got {share!r}")
        return index, count
    import jax

    return jax.process_index(), jax.process_count()


def local_gemm_kw(gemm_kw: dict | None, count: int) -> dict:
    """The gemm keywords of a point on this process's devices only. In a sweep over several
    processes ``devices='all'`` (the CLI default) or N mean this process's devices; a
    ``mesh=`` spanning processes is refused (the sweep, not the GEMM, is what is split)."""
    kw = dict(gemm_kw or {})
    if count == 1:
        return kw
    import jax

    local = jax.local_devices()
    mesh = kw.get("mesh")
    if mesh is not None:
        m = getattr(mesh, "mesh", mesh)
        if any(d.process_index != jax.process_index() for d in m.devices.flat):
            raise ValueError(
                "a study sweep over several processes runs every point on one process's devices: "
                "give devices (or a mesh of this process's jax.local_devices()), not a mesh spanning "
                "processes; GEMMs over a global mesh are jwmma.gemm's (mesh= / devices='all')")
        return kw
    dev = kw.get("devices")
    if dev is None:
        return kw
    if dev in ("all", "local"):
        kw["devices"] = "local" if len(local) > 1 else 1
    elif isinstance(dev, int):
        if dev > len(local):
            raise ValueError(f"devices={dev} per point, but this process has {len(local)} device(s)")
        kw["devices"] = local[:dev] if dev > 1 else 1
    return kw
