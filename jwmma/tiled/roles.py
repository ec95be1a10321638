"""``mesh=`` / ``mesh_axes=`` of `jwmma.gemm`, or inputs already sharded: which mesh axes split
the batch dims, M and N (the roles), and the checks that D can be sharded evenly. The rules are
`jwmma.tiled.plan`'s module doc; `jwmma.tiled.plan.plan_gemm` calls these.
"""
from __future__ import annotations

import math
import re

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..engine.validation import is_concrete

__all__ = ["ROLE_RE", "default_roles", "roles_from_inputs", "roles_on_mesh", "check_roles"]


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


def _named_sharding(x):
    sh = getattr(x, "sharding", None) if isinstance(x, jax.Array) and is_concrete(x) else None
    if isinstance(sh, NamedSharding) and sh.mesh.size > 1:
        return sh
    return None


def default_roles(mesh: Mesh, batch_shape, taken: dict, free_axes) -> dict:
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


def roles_from_inputs(a, b, c, batch_shape):
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


def check_roles(mesh: Mesh, roles: dict, batch_shape, m_dim, n_dim, how: str):
    """ValueError unless ``roles`` ({role: mesh axes}) name real axes, each once, divide the batch
    dims, and leave D (*batch, M, N) sharded over at least one axis; ``how`` (where the roles
    came from) goes into the message."""
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
    return default_roles(mesh, batch_shape, names, free)


def roles_on_mesh(mesh: Mesh, out_spec, mesh_axes, a, b, c, batch_shape) -> tuple[dict, str]:
    """(roles, how) for an explicit mesh: from D's spec, ``mesh_axes``, the inputs'
    shardings over the same mesh, or the axis names, in that order."""
    how = f"mesh {dict(mesh.shape)}"
    if out_spec is not None:
        return _roles_from_out_spec(out_spec, batch_shape), how + f", D sharded as {out_spec}"
    if mesh_axes is not None:
        return _roles_from_mesh_axes(mesh, mesh_axes, batch_shape), how + f", mesh_axes={mesh_axes!r}"
    inferred = roles_from_inputs(a, b, c, batch_shape)
    if inferred is not None and inferred[0] == mesh and inferred[1]:
        return inferred[1], how + " (roles from the inputs' shardings)"
    return _roles_by_name(mesh, batch_shape), how
