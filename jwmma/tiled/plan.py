"""Which devices a GEMM runs on: the `Plan` built from `jwmma.gemm`'s device keywords.

Choosing the devices (keywords of `jwmma.gemm`):

* ``devices=N`` (an int, ``"all"``, or a sequence of `jax.Device`): the first N devices of
  `jax.devices()` with an automatic layout: over all factorisations of at most N devices into
  batch x M x N splits whose factors divide the batch dims, M and N (so that D can be returned
  evenly sharded), the one with the least work per device (padding included), then the least
  total work, then the one splitting batch first, then M, then N. Fewer than N devices are used
  when nothing better divides the problem; when no split works at all, it runs on one device.
  ``devices=1`` means no distribution.
* ``mesh=`` a `jax.sharding.Mesh`; ``mesh_axes`` says what each mesh axis splits: a tuple with
  one role per mesh axis (in ``mesh.axis_names`` order), or a dict ``{axis_name: role}``.
  Roles: ``"m"`` (rows of A, C, D), ``"n"`` (columns of B, C, D), ``"batch"`` = ``"batch0"``,
  ``"batch1"``... (the batch dims of the broadcast batch shape), or None (not split: the
  work is repeated along that axis). Several axes may share a role (M split over both, in
  axis order). Without ``mesh_axes``, axes named after a role take that role and the others
  take, in order, the batch dims (those the axis size divides), then M, then N.
  ``mesh=`` may also be a `NamedSharding` for D: its spec over (*batch, M, N) gives the roles,
  e.g. ``NamedSharding(mesh, P(None, "x", "y"))`` splits M over x and N over y.
* Neither: inputs that are `jax.Array`\\ s with a `NamedSharding` over more than one device
  are followed: the mesh axes that split the batch / M dims of ``a`` or ``c`` and the batch /
  N dims of ``b`` or ``c`` take those roles (a K split is undone: each device gathers full K
  for its rows/columns). Conflicting shardings raise. Otherwise (plain inputs): one device.

Padding and shapes: M and N are zero-padded to multiples of (tile x mesh size along them) so
that every shard holds whole tiles. A batch dim must be divisible by the mesh axes splitting
it (batch is not padded): otherwise ValueError. JAX arrays only shard evenly, so D is sharded
along M (N) only when M (N) is divisible by the mesh size splitting it; along the others D is
replicated over those axes. When that would leave D whole on every device, ValueError.

"""
from __future__ import annotations

import itertools
import math
import re

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..engine.validation import is_concrete
from .sharding import Plan, auto_axes

__all__ = ["plan_gemm", "auto_layout", "auto_mesh", "per_process", "ROLE_RE"]

ROLE_RE = re.compile(r"^(m|n|batch(\d*))$")


def _role(name, batch_shape, what: str):
    """Normalise a role name ('m', 'n', 'batch', 'batch<i>', None)."""
    if name is None:
        return None
    if not isinstance(name, str):
        raise TypeError(f"{what} must be a role name ('m', 'n', 'batch', 'batch1'...) or None, got {name!r}")
    low = name.lower()
    if low == "k":
        raise ValueError(
            f"{what}: K cannot be split over devices (every output is one sequential chain over "
            f"the K steps, in hardware order); split 'm', 'n' or a batch dim"
        )
    mt = ROLE_RE.match(low)
    if not mt:
        raise ValueError(f"{what} must be 'm', 'n', 'batch', 'batch<i>' or None, got {name!r}")
    if low.startswith("batch"):
        i = int(mt.group(2) or 0)
        if i >= len(batch_shape):
            raise ValueError(
                f"{what} = {name!r} names batch dim {i}, but the batch shape is {tuple(batch_shape)} "
                f"({len(batch_shape)} batch dim(s))"
            )
        return f"batch{i}"
    return low


def _shape_of(x):
    if x is None:
        return None
    s = getattr(x, "shape", None)
    return tuple(s) if s is not None else tuple(np.shape(x))


def _problem(spec, a, b, c):
    """(batch shape, M, N) from the raw operands, or None when they are malformed (gemm's own
    checks then raise the right error)."""
    sa = _shape_of(a[0] if isinstance(a, tuple) and a else a)
    sb, sc = _shape_of(b), _shape_of(c)
    if sa is None or sb is None or len(sa) < 2 or len(sb) < 2 or (sc is not None and len(sc) < 2):
        return None
    try:
        batch = np.broadcast_shapes(sa[:-2], sb[:-2], *([sc[:-2]] if sc is not None else []))
    except ValueError:
        return None
    return tuple(int(x) for x in batch), int(sa[-2]), int(sb[-1])


def _named_sharding(x):
    sh = getattr(x, "sharding", None) if isinstance(x, jax.Array) and is_concrete(x) else None
    if isinstance(sh, NamedSharding) and sh.mesh.size > 1:
        return sh
    return None


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


def _resolve_devices(devices):
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


def _default_roles(mesh: Mesh, batch_shape, taken: dict, free_axes) -> dict:
    """Axes not named after roles take, in order, the batch dims they divide, then M, then N."""
    order = [f"batch{i}" for i in range(len(batch_shape))] + ["m", "n"]
    roles = dict(taken)
    for ax in free_axes:
        size = mesh.shape[ax]
        for r in order:
            if r in roles:
                continue
            if r.startswith("batch") and batch_shape[int(r[5:])] % size:
                continue
            roles[r] = (ax,)
            break
        else:
            raise ValueError(
                f"cannot place mesh axis {ax!r} (size {size}) of mesh {dict(mesh.shape)}: batch "
                f"{tuple(batch_shape)}, M and N are taken or not divisible; say what each axis "
                f"splits with mesh_axes=(...), e.g. ('m', 'n')"
            )
    return roles


def _roles_from_out_spec(spec, batch_shape) -> dict:
    dims = [f"batch{i}" for i in range(len(batch_shape))] + ["m", "n"]
    spec = tuple(spec)
    if len(spec) > len(dims):
        raise ValueError(
            f"the sharding given for D has {len(spec)} entries ({spec}), but D is (*batch, M, N) with "
            f"{len(dims)} dims (batch shape {tuple(batch_shape)})"
        )
    roles = {}
    for role, e in zip(dims, spec):
        if e is None or e is _UNCONSTRAINED:
            continue
        axes = (e,) if isinstance(e, str) else tuple(e)
        if axes:
            roles[role] = axes
    return roles


def _roles_from_mesh_axes(mesh: Mesh, mesh_axes, batch_shape) -> dict:
    names = tuple(mesh.axis_names)
    if isinstance(mesh_axes, dict):
        unknown = [k for k in mesh_axes if k not in names]
        if unknown:
            raise ValueError(f"mesh_axes names {unknown[0]!r}, which is not an axis of the mesh {names}")
        pairs = [(ax, mesh_axes.get(ax)) for ax in names]
    else:
        if isinstance(mesh_axes, str):
            mesh_axes = (mesh_axes,)
        mesh_axes = tuple(mesh_axes)
        if len(mesh_axes) != len(names):
            raise ValueError(
                f"mesh_axes must give one role per mesh axis {names}, got {len(mesh_axes)}: {mesh_axes!r}"
            )
        pairs = list(zip(names, mesh_axes))
    roles: dict = {}
    for ax, r in pairs:
        r = _role(r, batch_shape, f"mesh_axes[{ax!r}]")
        if r is not None:
            roles[r] = roles.get(r, ()) + (ax,)
    return roles


_UNCONSTRAINED = getattr(P, "UNCONSTRAINED", object())


def _roles_from_inputs(a, b, c, batch_shape):
    """(mesh, {role: axes}) from the NamedShardings the inputs carry, or None."""
    dims = []  # (operand, array, kinds per dim)
    nb = len(batch_shape)
    for what, x, tail in (("a", a[0] if isinstance(a, tuple) else a, ("m", None)),
                          ("a positions", a[1] if isinstance(a, tuple) and len(a) > 1 else None, ("m", None)),
                          ("b", b, (None, "n")), ("c", c, ("m", "n"))):
        sh = _named_sharding(x)
        if sh is None:
            continue
        xb = x.ndim - 2
        kinds = [f"batch{nb - xb + j}" for j in range(xb)] + list(tail)
        dims.append((what, sh, kinds))
    if not dims:
        return None
    mesh = dims[0][1].mesh
    for what, sh, _ in dims[1:]:
        if sh.mesh != mesh:
            raise ValueError(
                f"inputs are sharded over different meshes: {dims[0][0]} over {dict(mesh.shape)} "
                f"(devices {[d.id for d in mesh.devices.flat]}), {what} over {dict(sh.mesh.shape)} "
                f"(devices {[d.id for d in sh.mesh.devices.flat]}); reshard them onto one mesh or pass mesh="
            )
    roles: dict = {}
    origin: dict = {}
    for what, sh, kinds in dims:
        spec = tuple(sh.spec) + (None,) * (len(kinds) - len(sh.spec))
        for kind, e in zip(kinds, spec):
            if kind is None or e is None or e is _UNCONSTRAINED:
                continue
            axes = (e,) if isinstance(e, str) else tuple(e)
            if not axes:
                continue
            if kind in roles and roles[kind] != axes:
                raise ValueError(
                    f"inputs disagree on how to split {kind.upper() if kind in 'mn' else kind}: "
                    f"{origin[kind]} splits it over {roles[kind]}, {what} over {axes}"
                )
            roles[kind], origin[kind] = axes, what
    return mesh, roles


def _check_roles(mesh: Mesh, roles: dict, batch_shape, m_dim, n_dim, how: str):
    seen: dict = {}
    for r, axes in roles.items():
        for ax in axes:
            if ax not in mesh.shape:
                raise ValueError(f"{how}: {ax!r} is not an axis of the mesh {dict(mesh.shape)}")
            if ax in seen:
                raise ValueError(f"{how}: mesh axis {ax!r} splits both {seen[ax]} and {r}")
            seen[ax] = r
    sizes = {r: math.prod(mesh.shape[a] for a in axes) for r, axes in roles.items()}
    for i, bs in enumerate(batch_shape):
        d = sizes.get(f"batch{i}", 1)
        if bs % d:
            raise ValueError(
                f"batch dim {i} of size {bs} (batch shape {tuple(batch_shape)}) does not divide over mesh "
                f"axes {roles[f'batch{i}']} of size {d} ({how}); batch dims are not padded: use a batch "
                f"that is a multiple of {d}, or split another dim"
            )
    if not any(sizes.get(r, 1) > 1 for r in roles):
        raise ValueError(f"{how}: no mesh axis of size > 1 splits the batch, M or N (mesh {dict(mesh.shape)})")
    split = math.prod(v for r, v in sizes.items() if r.startswith("batch"))
    split *= sizes.get("m", 1) if m_dim % sizes.get("m", 1) == 0 else 1
    split *= sizes.get("n", 1) if n_dim % sizes.get("n", 1) == 0 else 1
    if split == 1:
        raise ValueError(
            f"the output D (*batch, M, N) = {tuple(batch_shape) + (m_dim, n_dim)} cannot be sharded over "
            f"mesh {dict(mesh.shape)} ({how}): M={m_dim} over {sizes.get('m', 1)} and N={n_dim} over "
            f"{sizes.get('n', 1)} shard(s) do not divide, and JAX arrays shard evenly only, so D would be "
            f"gathered whole onto every device; use M or N divisible by the mesh size that splits it, "
            f"another mesh, or devices= (which picks a layout that divides)"
        )


def _roles_by_name(mesh: Mesh, batch_shape) -> dict:
    """Mesh axes named after a role take it; the others take the batch dims, then M, then N."""
    names, free = {}, []
    for ax in mesh.axis_names:
        r = ax.lower() if isinstance(ax, str) else None
        r = "batch0" if r == "batch" else r
        valid = r is not None and ROLE_RE.match(r) and (not r.startswith("batch") or int(r[5:]) < len(batch_shape))
        if valid and r not in names:
            names[r] = (ax,)
        else:
            free.append(ax)
    return _default_roles(mesh, batch_shape, names, free)


def _roles_on_mesh(mesh: Mesh, out_spec, mesh_axes, a, b, c, batch_shape) -> tuple[dict, str]:
    """(roles, how) for an explicit mesh: from D's spec, ``mesh_axes``, the inputs'
    shardings over the same mesh, or the axis names, in that order."""
    how = f"mesh {dict(mesh.shape)}"
    if out_spec is not None:
        return _roles_from_out_spec(out_spec, batch_shape), how + f", D sharded as {out_spec}"
    if mesh_axes is not None:
        return _roles_from_mesh_axes(mesh, mesh_axes, batch_shape), how + f", mesh_axes={mesh_axes!r}"
    inferred = _roles_from_inputs(a, b, c, batch_shape)
    if inferred is not None and inferred[0] == mesh and inferred[1]:
        return inferred[1], how + " (roles from the inputs' shardings)"
    return _roles_by_name(mesh, batch_shape), how


def _mesh_and_spec(mesh, mesh_axes, devices):
    """Check the device keywords; (mesh or None, D's PartitionSpec or None)."""
    if mesh is not None and devices is not None:
        raise ValueError("give either mesh= or devices=, not both")
    if mesh_axes is not None and mesh is None:
        raise ValueError("mesh_axes= needs mesh= (devices= picks its own layout)")
    out_spec = None
    if isinstance(mesh, NamedSharding):  # D's sharding: its spec over (*batch, M, N) gives the roles
        if mesh_axes is not None:
            raise ValueError("mesh_axes= goes with a Mesh; a NamedSharding for mesh= already says what each axis splits")
        mesh, out_spec = mesh.mesh, mesh.spec
    if mesh is not None and not isinstance(mesh, Mesh):
        raise TypeError(f"mesh must be a jax.sharding.Mesh or a NamedSharding for D, got {type(mesh).__name__}")
    return mesh, out_spec


def plan_gemm(spec, a, b, c=None, *, mesh=None, mesh_axes=None, devices=None):
    """How ``jwmma.gemm(a, b, c, builtin=spec.name, ...)`` spreads over devices (module doc).

    Args:
        spec: the builtin; a, b, c: gemm's raw operands (only shapes and shardings are read);
        mesh, mesh_axes, devices: gemm's device keywords.
    Returns:
        The `Plan`, or None for a single-device run (also for malformed operands: gemm then
        raises the precise error). ValueError/TypeError for keywords that do not fit.
    """
    mesh, out_spec = _mesh_and_spec(mesh, mesh_axes, devices)
    devs = None if devices is None else _resolve_devices(devices)
    prob = _problem(spec, a, b, c)
    if prob is None:
        return None
    batch_shape, m_dim, n_dim = prob
    tile = (spec.m, spec.n)
    if devs is not None:
        got = None if len(devs) == 1 else auto_mesh(devs, batch_shape, m_dim, n_dim, tile)
        if got is None:
            return None
        (mesh, roles), how = got, f"devices={len(devs)}"
    elif mesh is not None:
        if mesh.size == 1:
            return None
        roles, how = _roles_on_mesh(mesh, out_spec, mesh_axes, a, b, c, batch_shape)
    else:
        inferred = _roles_from_inputs(a, b, c, batch_shape)
        if inferred is None:
            return None
        mesh, roles = inferred
        how = f"inputs sharded over mesh {dict(mesh.shape)}"
        roles = roles or _default_roles(mesh, batch_shape, {}, list(mesh.axis_names))
    _check_roles(mesh, roles, batch_shape, m_dim, n_dim, how)
    return Plan(
        mesh=auto_axes(mesh),
        batch=tuple(tuple(roles.get(f"batch{i}", ())) for i in range(len(batch_shape))),
        m=tuple(roles.get("m", ())), n=tuple(roles.get("n", ())),
        batch_shape=batch_shape, shape=(m_dim, n_dim), tile=tile,
    )
