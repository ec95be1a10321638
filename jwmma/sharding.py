"""GEMM emulation spread over several devices with `jax.sharding` (scale-out).

Every output element of `jwmma.gemm` depends only on its row of A, its column of B and the
K steps, which each output tile walks in hardware order. So the output tiles (rows M, columns
N) and the batch are split over a device mesh and every device runs the *same* kernel on its
shard over the full K: the bits are those of the single-device emulation, for every model.
K is never split (an output is one sequential chain over the K steps).

Each device holds only its rows of A, its columns of B and its tiles of C and D; B is
replicated along the mesh axes that split M and A along those that split N (inherent to a
2-D split). Nothing is gathered onto one device; D comes back sharded.

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

Command line helpers: `add_device_args` (``--devices N``, ``--mesh m=2,n=4``) and
`mesh_from_args` (their gemm keywords), for ``jwmma gemm`` and ``jwmma study``.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import itertools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from .rounding import x64_scope

__all__ = ["Plan", "plan_gemm", "auto_layout", "auto_mesh", "add_device_args", "mesh_from_args", "shard_map"]

_Axes = tuple  # tuple[str, ...]: mesh axes splitting one dim (empty: not split)


# ------------------------------------------------------------------------ JAX compatibility
def _shard_map_impl():
    if hasattr(jax, "shard_map"):
        fn = jax.shard_map
    else:  # older JAX
        from jax.experimental.shard_map import shard_map as fn
    params = inspect.signature(fn).parameters
    check = "check_vma" if "check_vma" in params else "check_rep" if "check_rep" in params else None
    return fn, check


def shard_map(f, mesh, in_specs, out_specs):
    """`jax.shard_map` (or the experimental one on older JAX), replication checks off."""
    fn, check = _shard_map_impl()
    kw = {check: False} if check else {}
    return fn(f, mesh=mesh, in_specs=in_specs, out_specs=out_specs, **kw)


def _auto_axes(mesh: Mesh) -> Mesh:
    """The same mesh with every axis of type Auto (explicit-sharding meshes would make the
    eager operand preparation type-check shardings); unchanged on JAX without axis types."""
    types = getattr(mesh, "axis_types", None)
    axis_type = getattr(jax.sharding, "AxisType", None)
    if types is None or axis_type is None or all(t == axis_type.Auto for t in types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(axis_type.Auto,) * len(mesh.axis_names))


try:
    _Tracer = jax.core.Tracer
except AttributeError:  # pragma: no cover - JAX versions that hide it
    from jax._src.core import Tracer as _Tracer


def _is_tracer(x) -> bool:
    return isinstance(x, _Tracer)


# ----------------------------------------------------------------------------------- plan
def _entry(axes: _Axes):
    return None if not axes else axes[0] if len(axes) == 1 else tuple(axes)


@dataclasses.dataclass(frozen=True)
class Plan:
    """How one GEMM is spread over ``mesh``: the mesh axes splitting each batch dim, M and N.

    ``batch_shape`` is the broadcast batch, ``shape`` the unpadded (M, N), ``tile`` the
    builtin's (m, n). Hashable: compiled kernels are cached per plan."""

    mesh: Mesh
    batch: tuple  # one _Axes per batch dim
    m: _Axes
    n: _Axes
    batch_shape: tuple
    shape: tuple
    tile: tuple

    # sizes and specs
    def size(self, axes: _Axes) -> int:
        return math.prod(self.mesh.shape[a] for a in axes)

    @property
    def splits(self) -> dict:
        """{role: number of shards}, e.g. {'batch0': 2, 'm': 4, 'n': 1}."""
        out = {f"batch{i}": self.size(ax) for i, ax in enumerate(self.batch)}
        out.update(m=self.size(self.m), n=self.size(self.n))
        return out

    def _specs(self):
        b = [_entry(ax) for ax in self.batch]
        m, n = _entry(self.m), _entry(self.n)
        return P(*b, m, None), P(*b, None, n), P(*b, m, n)

    @property
    def out_spec(self) -> P:
        """D's PartitionSpec: M (N) split only where M (N) divides evenly."""
        return _out_spec(self, self.shape)

    @property
    def out_sharding(self) -> NamedSharding:
        return NamedSharding(self.mesh, self.out_spec)

    def padded(self) -> tuple:
        """(Mp, Np): M, N padded to multiples of tile x mesh size along them."""
        (m_dim, n_dim), (tm, tn) = self.shape, self.tile
        qm, qn = tm * self.size(self.m), tn * self.size(self.n)
        return -(-m_dim // qm) * qm, -(-n_dim // qn) * qn

    def describe(self) -> str:
        mesh = ", ".join(f"{k}: {v}" for k, v in self.mesh.shape.items())
        roles = [f"batch{i}<-{'x'.join(ax)}" for i, ax in enumerate(self.batch) if ax]
        roles += [f"{r}<-{'x'.join(ax)}" for r, ax in (("M", self.m), ("N", self.n)) if ax]
        return f"mesh ({mesh}), {', '.join(roles) or 'no split'}"

    # placement of the user's operands, before they are prepared
    def _input_spec(self, shape, kind: str):
        """Spec of a raw operand of ``shape``; kind 'a' (*b, M, K), 'b' (*b, K, N), 'c' (*b, M, N).
        A dim is split only where it divides evenly (JAX arrays shard evenly); broadcast
        (size-1) batch dims are not split."""
        nb = len(shape) - 2
        entries = []
        for j in range(nb):
            i = len(self.batch_shape) - nb + j
            ax = self.batch[i] if 0 <= i < len(self.batch) else ()
            entries.append(_entry(ax) if ax and shape[j] % self.size(ax) == 0 and shape[j] > 1 else None)
        rows = self.m if kind in ("a", "c") else ()
        cols = self.n if kind in ("b", "c") else ()
        entries.append(_entry(rows) if rows and shape[-2] % self.size(rows) == 0 else None)
        entries.append(_entry(cols) if cols and shape[-1] % self.size(cols) == 0 else None)
        return P(*entries)

    def _put(self, x, kind: str):
        if not isinstance(x, (np.ndarray, jax.Array)) and not _is_tracer(x):
            return x  # lists, scalars...: gemm's own checks deal with them
        if np.ndim(x) < 2:
            return x
        sh = NamedSharding(self.mesh, self._input_spec(tuple(x.shape), kind))
        if _is_tracer(x):
            return jax.lax.with_sharding_constraint(x, sh)
        return jax.device_put(x, sh)

    def place(self, a, b, c):
        """The user's a (or (values, positions)), b, c placed on the mesh: each device receives
        only its shard, so the operand preparation runs sharded too."""
        if isinstance(a, tuple):
            a = tuple(self._put(x, "a") for x in a)
        else:
            a = self._put(a, "a")
        return a, self._put(b, "b"), (None if c is None else self._put(c, "c"))

    def zeros(self, dtype=jnp.int32):
        """(*batch, M, N) zeros created sharded like D (C = None), never whole on one device."""
        return _zeros_fn(tuple(self.batch_shape) + tuple(self.shape), np.dtype(dtype).name, self.out_sharding)()

    # the seam
    def emulate(self, kernel, a_codes, pos, b_codes, c_codes, shape=None):
        """`jwmma.gemm.emulate_padded` on the mesh: pad to whole tiles per shard, run ``kernel``
        on every shard (traced in `x64_scope`), cut D to ``shape`` (M, N), sharded."""
        shape = tuple(self.shape if shape is None else shape)
        with x64_scope():
            fn = _compiled(_kernel_key(kernel), kernel, self, shape)
            return fn(a_codes, pos, b_codes, c_codes)


@functools.lru_cache(maxsize=64)
def _zeros_fn(shape, dtype, sharding):
    return jax.jit(lambda: jnp.zeros(shape, dtype), out_shardings=sharding)


def _kernel_key(kernel):
    """A hashable key equal for equal kernels (gemm builds a fresh functools.partial per call)."""
    if isinstance(kernel, functools.partial):
        try:
            key = (kernel.func, kernel.args, tuple(sorted(kernel.keywords.items())))
            hash(key)
            return key
        except TypeError:
            pass
    return kernel


_COMPILED: dict = {}


def _compiled(key, kernel, plan: Plan, shape):
    ck = (key, plan, shape)
    fn = _COMPILED.get(ck)
    if fn is not None:
        return fn
    spec_a, spec_b, spec_c = plan._specs()
    mp, np_ = plan.padded()
    m_out, n_out = shape
    sharded = shard_map(kernel, plan.mesh, (spec_a, spec_a, spec_b, spec_c), spec_c)

    def run(a, p, b, c):
        def pad(x, rows, cols):
            pads = [(0, 0)] * (x.ndim - 2) + [(0, rows - x.shape[-2]), (0, cols - x.shape[-1])]
            return x if rows == x.shape[-2] and cols == x.shape[-1] else jnp.pad(x, pads)

        extra = mp - a.shape[-2]
        a = pad(a, mp, a.shape[-1])
        if extra:  # padding rows: zero values at positions (2, 3), as gemm pads
            fill = jnp.broadcast_to(jnp.tile(jnp.asarray([2, 3], p.dtype), p.shape[-1] // 2),
                                    p.shape[:-2] + (extra, p.shape[-1]))
            p = jnp.concatenate([p, fill], axis=-2)
        b = pad(b, b.shape[-2], np_)
        c = pad(c, mp, np_)
        d = sharded(a, p, b, c)
        return d[..., :m_out, :n_out]

    fn = jax.jit(run, out_shardings=NamedSharding(plan.mesh, _out_spec(plan, shape)))
    if len(_COMPILED) > 64:
        _COMPILED.clear()
    _COMPILED[ck] = fn
    return fn


def _out_spec(plan: Plan, shape) -> P:
    m = _entry(plan.m) if shape[0] % plan.size(plan.m) == 0 else None
    n = _entry(plan.n) if shape[1] % plan.size(plan.n) == 0 else None
    return P(*(_entry(ax) for ax in plan.batch), m, n)


# ----------------------------------------------------------------------- building a plan
_ROLE_RE = re.compile(r"^(m|n|batch(\d*))$")


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
    mt = _ROLE_RE.match(low)
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
    sh = getattr(x, "sharding", None) if isinstance(x, jax.Array) and not _is_tracer(x) else None
    if isinstance(sh, NamedSharding) and sh.mesh.size > 1:
        return sh
    return None


def _resolve_devices(devices):
    avail = jax.devices()
    if isinstance(devices, str):
        if devices != "all":
            raise ValueError(f"devices must be an int, 'all' or a sequence of jax devices, got {devices!r}")
        return list(avail)
    if isinstance(devices, (bool, np.bool_)):
        raise TypeError(f"devices must be an int, 'all' or a sequence of jax devices, got {devices!r}")
    if isinstance(devices, (int, np.integer)):
        n = int(devices)
        if n < 1:
            raise ValueError(f"devices must be >= 1, got {n}")
        if n > len(avail):
            raise ValueError(
                f"devices={n} but only {len(avail)} {jax.default_backend()} device(s) are available "
                f"(on CPU, XLA_FLAGS=--xla_force_host_platform_device_count=N before JAX starts)"
            )
        return list(avail[:n])
    try:
        devs = list(devices)
    except TypeError:
        raise TypeError(f"devices must be an int, 'all' or a sequence of jax devices, got {devices!r}") from None
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
    mesh = Mesh(np.array(devices[:used], dtype=object).reshape([d for _, d in axes]), tuple(nm for nm, _ in axes))
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


def plan_gemm(spec, a, b, c=None, *, mesh=None, mesh_axes=None, devices=None):
    """The `Plan` for ``jwmma.gemm(a, b, c, builtin=spec.name, ...)`` with these device keywords,
    or None for a single-device run (see the module doc for the rules)."""
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
    devs = None if devices is None else _resolve_devices(devices)
    prob = _problem(spec, a, b, c)
    if prob is None:
        return None  # malformed operands: gemm raises the precise error
    batch_shape, m_dim, n_dim = prob
    tile = (spec.m, spec.n)

    if devs is not None:
        if len(devs) == 1:
            return None
        got = auto_mesh(devs, batch_shape, m_dim, n_dim, tile)
        if got is None:
            return None
        mesh, roles = got
        how = f"devices={len(devs)}"
    elif mesh is not None:
        if mesh.size == 1:
            return None
        how = f"mesh {dict(mesh.shape)}"
        if out_spec is not None:
            roles = _roles_from_out_spec(out_spec, batch_shape)
            how += f", D sharded as {out_spec}"
        elif mesh_axes is not None:
            roles = _roles_from_mesh_axes(mesh, mesh_axes, batch_shape)
            how += f", mesh_axes={mesh_axes!r}"
        else:
            inferred = _roles_from_inputs(a, b, c, batch_shape)
            if inferred is not None and inferred[0] == mesh and inferred[1]:
                roles = inferred[1]
                how += " (roles from the inputs' shardings)"
            else:
                names = {}
                free = []
                for ax in mesh.axis_names:
                    r = ax.lower() if isinstance(ax, str) else None
                    r = "batch0" if r == "batch" else r
                    if r is not None and _ROLE_RE.match(r) and (not r.startswith("batch") or int(r[5:]) < len(batch_shape)) and r not in names:
                        names[r] = (ax,)
                    else:
                        free.append(ax)
                roles = _default_roles(mesh, batch_shape, names, free)
    else:
        inferred = _roles_from_inputs(a, b, c, batch_shape)
        if inferred is None:
            return None
        mesh, roles = inferred
        how = f"inputs sharded over mesh {dict(mesh.shape)}"
        if not roles:
            roles = _default_roles(mesh, batch_shape, {}, list(mesh.axis_names))
    _check_roles(mesh, roles, batch_shape, m_dim, n_dim, how)
    mesh = _auto_axes(mesh)
    return Plan(
        mesh=mesh,
        batch=tuple(tuple(roles.get(f"batch{i}", ())) for i in range(len(batch_shape))),
        m=tuple(roles.get("m", ())), n=tuple(roles.get("n", ())),
        batch_shape=batch_shape, shape=(m_dim, n_dim), tile=tile,
    )


# ---------------------------------------------------------------------------- CLI helpers
def add_device_args(parser):
    """Add ``--devices N`` and ``--mesh ROLE=SIZE,...`` to an argparse parser (``jwmma gemm``,
    ``jwmma study``)."""
    parser.add_argument(
        "--devices", default="all", metavar="N",
        help="devices to spread each GEMM over: a number or 'all' (default: all of jax.devices(); "
        "1 = no distribution); the layout (batch x M x N splits) is chosen per problem",
    )
    parser.add_argument(
        "--mesh", default=None, metavar="ROLE=SIZE,...",
        help="explicit layout instead, e.g. m=2,n=4 or batch=2,m=4 (uses the first "
        "product-of-sizes devices); roles: batch, batch<i>, m, n",
    )
    return parser


def _parse_mesh(text: str) -> list:
    out = []
    for part in str(text).split(","):
        mt = re.fullmatch(r"\s*([A-Za-z]\w*)\s*=\s*(\d+)\s*", part)
        if not mt:
            raise ValueError(f"--mesh takes ROLE=SIZE[,ROLE=SIZE...], e.g. m=2,n=4; got {text!r}")
        role, size = mt.group(1).lower(), int(mt.group(2))
        role = "batch0" if role == "batch" else role
        if not _ROLE_RE.match(role):
            raise ValueError(f"--mesh: roles are batch, batch<i>, m, n; got {mt.group(1)!r}")
        if size < 1:
            raise ValueError(f"--mesh: sizes must be >= 1, got {role}={size}")
        if role in (r for r, _ in out):
            raise ValueError(f"--mesh names {role} twice")
        out.append((role, size))
    return out


def mesh_from_args(args) -> dict:
    """The `jwmma.gemm` keywords for the parsed ``--devices`` / ``--mesh``: {} (one device),
    {'devices': N} or {'mesh': Mesh}. Raises ValueError on a bad value. Use as
    ``jwmma.gemm(a, b, **mesh_from_args(args))``."""
    avail = jax.devices()
    mesh_text = getattr(args, "mesh", None)
    if mesh_text:
        layout = _parse_mesh(mesh_text)
        used = math.prod(s for _, s in layout)
        if used > len(avail):
            raise ValueError(f"--mesh {mesh_text} needs {used} devices, only {len(avail)} are available")
        if used == 1:
            return {}
        return {"mesh": Mesh(np.array(avail[:used], dtype=object).reshape([s for _, s in layout]),
                             tuple(r for r, _ in layout))}
    text = getattr(args, "devices", "all")
    if text is None or str(text).lower() == "all":
        n = len(avail)
    else:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"--devices takes a number or 'all', got {text!r}") from None
        if n < 1:
            raise ValueError(f"--devices must be >= 1, got {n}")
        if n > len(avail):
            raise ValueError(f"--devices {n}: only {len(avail)} {jax.default_backend()} device(s) are available")
    return {} if n == 1 else {"devices": n}
