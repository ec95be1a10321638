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

import numpy as np
from jax.sharding import Mesh, NamedSharding

from .devices import auto_layout, auto_mesh, per_process, resolve_devices
from .roles import ROLE_RE, check_roles, default_roles, roles_from_inputs, roles_on_mesh
from .sharding import Plan, auto_axes

__all__ = ["plan_gemm", "auto_layout", "auto_mesh", "per_process", "ROLE_RE"]


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
    devs = None if devices is None else resolve_devices(devices)
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
        roles, how = roles_on_mesh(mesh, out_spec, mesh_axes, a, b, c, batch_shape)
    else:
        inferred = roles_from_inputs(a, b, c, batch_shape)
        if inferred is None:
            return None
        mesh, roles = inferred
        how = f"inputs sharded over mesh {dict(mesh.shape)}"
        roles = roles or default_roles(mesh, batch_shape, {}, list(mesh.axis_names))
    check_roles(mesh, roles, batch_shape, m_dim, n_dim, how)
    return Plan(
        mesh=auto_axes(mesh),
        batch=tuple(tuple(roles.get(f"batch{i}", ())) for i in range(len(batch_shape))),
        m=tuple(roles.get("m", ())), n=tuple(roles.get("n", ())),
        batch_shape=batch_shape, shape=(m_dim, n_dim), tile=tile,
    )
