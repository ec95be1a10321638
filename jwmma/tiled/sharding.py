"""GEMM emulation spread over several devices with `jax.sharding` (scale-out): the `Plan`.

Every output element of `jwmma.gemm` depends only on its row of A, its column of B and the
K steps, which each output tile walks in hardware order. So the output tiles (rows M, columns
N) and the batch are split over a device mesh and every device runs the *same* kernel on its
shard over the full K: the bits are those of the single-device emulation, for every model.
K is never split (an output is one sequential chain over the K steps).

Each device holds only its rows of A, its columns of B and its tiles of C and D; B is
replicated along the mesh axes that split M and A along those that split N (inherent to a
2-D split). Nothing is gathered onto one device; D comes back sharded. A `Plan` says which
mesh axes split which dims (`jwmma.tiled.plan.plan_gemm` builds it from gemm's keywords) and
runs a kernel on every shard.
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ..engine.effort import jit_at_effort
from ..engine.validation import is_concrete
from ..numerics.rounding import x64_scope
from .operands import pad_a, pad_to

__all__ = ["Plan", "shard_map", "auto_axes", "entry"]

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


def auto_axes(mesh: Mesh) -> Mesh:
    """The same mesh with every axis of type Auto (explicit-sharding meshes would make the
    eager operand preparation type-check shardings); unchanged on JAX without axis types."""
    types = getattr(mesh, "axis_types", None)
    axis_type = getattr(jax.sharding, "AxisType", None)
    if types is None or axis_type is None or all(t == axis_type.Auto for t in types):
        return mesh
    return Mesh(mesh.devices, mesh.axis_names, axis_types=(axis_type.Auto,) * len(mesh.axis_names))



# ----------------------------------------------------------------------------------- plan
def entry(axes: _Axes):
    """A PartitionSpec entry for the mesh axes splitting one dim (None, one name, or a tuple)."""
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
        b = [entry(ax) for ax in self.batch]
        m, n = entry(self.m), entry(self.n)
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

    def static_description(self) -> dict:
        """The plan as plain data (mesh shape, device ids, roles, shapes), for the
        cross-process agreement check (`jwmma.tiled.processes.agree`)."""
        return dict(mesh=dict(self.mesh.shape), devices=[d.id for d in self.mesh.devices.flat],
                    batch=[list(ax) for ax in self.batch], m=list(self.m), n=list(self.n),
                    batch_shape=list(self.batch_shape), shape=list(self.shape), tile=list(self.tile))

    @property
    def spans_processes(self) -> bool:
        """True when the mesh holds devices of several processes (multi-controller JAX)."""
        return len({d.process_index for d in self.mesh.devices.flat}) > 1

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
            entries.append(entry(ax) if ax and shape[j] % self.size(ax) == 0 and shape[j] > 1 else None)
        rows = self.m if kind in ("a", "c") else ()
        cols = self.n if kind in ("b", "c") else ()
        entries.append(entry(rows) if rows and shape[-2] % self.size(rows) == 0 else None)
        entries.append(entry(cols) if cols and shape[-1] % self.size(cols) == 0 else None)
        return P(*entries)

    def _put(self, x, kind: str):
        if not isinstance(x, (np.ndarray, jax.Array)) and is_concrete(x):
            return x  # lists, scalars...: gemm's own checks deal with them
        if np.ndim(x) < 2:
            return x
        sh = NamedSharding(self.mesh, self._input_spec(tuple(x.shape), kind))
        if not is_concrete(x):
            return jax.lax.with_sharding_constraint(x, sh)
        if sh.is_fully_addressable:
            return jax.device_put(x, sh)
        return _put_across_processes(x, sh, kind)

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
        """Run ``kernel(a, p, b, c)`` (element codes, tile-padded) on the mesh: pad further to
        whole tiles per shard, run it on every shard (traced in `x64_scope`), cut D to
        ``shape`` (M, N); D comes back sharded."""
        shape = tuple(self.shape if shape is None else shape)
        with x64_scope():
            fn = _compiled(_kernel_key(kernel), kernel, self, shape)
            return fn(a_codes, pos, b_codes, c_codes)


def _put_across_processes(x, sh: NamedSharding, kind: str):
    """``x`` placed with a sharding that spans several processes (multi-controller JAX).

    * a global array (not fully addressable): resharded by `jax.device_put`, which needs the
      same device set (a mesh over other devices raises, naming both);
    * host data (numpy) or a process-local jax.Array: every process holds the whole operand
      and builds only its own shards from it (`jax.make_array_from_callback`). `jax.device_put`
      would instead gather the whole array from every process to check that they are equal
      (P copies of the operand through the network, on every call); `jwmma.gemm` compares a
      digest instead (`processes.agree`)."""
    if isinstance(x, jax.Array) and not x.is_fully_addressable:
        if x.sharding.device_set != sh.device_set:
            raise ValueError(
                f"{kind} is a global array over devices {sorted(d.id for d in x.sharding.device_set)}, "
                f"but the GEMM runs on mesh {dict(sh.mesh.shape)} over devices "
                f"{sorted(d.id for d in sh.device_set)}; JAX reshards across processes only within one "
                f"device set: build {kind} on the GEMM's mesh (jax.make_array_from_callback with its "
                f"NamedSharding), or pass mesh={kind}.sharding.mesh")
        return jax.device_put(x, sh)
    host = np.asarray(x)  # a process-local array is copied to the host once
    return jax.make_array_from_callback(host.shape, sh, lambda idx: host[idx])


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
        a, p = pad_a(a, p, mp, a.shape[-1])  # whole tiles on every shard, padded as gemm pads
        b = pad_to(b, {-1: np_})
        c = pad_to(c, {-2: mp, -1: np_})
        d = sharded(a, p, b, c)
        return d[..., :m_out, :n_out]

    # at the effort the GEMM settled (the kernel's ``options``), as its one-device program compiles
    options = kernel.keywords.get("options") if isinstance(kernel, functools.partial) else None
    fn = jit_at_effort(run, options, out_shardings=NamedSharding(plan.mesh, _out_spec(plan, shape)))
    if len(_COMPILED) > 64:
        _COMPILED.clear()
    _COMPILED[ck] = fn
    return fn


def _out_spec(plan: Plan, shape) -> P:
    m = entry(plan.m) if shape[0] % plan.size(plan.m) == 0 else None
    n = entry(plan.n) if shape[1] % plan.size(plan.n) == 0 else None
    return P(*(entry(ax) for ax in plan.batch), m, n)


