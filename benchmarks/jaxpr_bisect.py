"""Find the first jaxpr equation whose value differs between two devices (for a GPU-vs-CPU drift).

    closed = jax.make_jaxpr(fn)(*args)          # inside jwmma.numerics.x64_scope() for jwmma code
    ref, _ = run_all(closed, args, jax.devices("cpu")[0], fused=False)
    test, _ = run_all(closed, args, jax.devices()[0], fused=True)   # or fused=False: op by op
    first_diff(ref, test)                       # [(equation path, equation, ref value, test value)]

Nested jit calls are inlined; loops (scan, while) and conditionals count as one equation each,
so bisect a single step (e.g. `jwmma.dot` on the products of one group) rather than a whole GEMM.
docs/ARCHITECTURE.md, "Same bits on every device", says how it was used.
"""
import numpy as np, jax, jax.numpy as jnp
from jax import core as jcore

CALLS = {"pjit", "jit", "closed_call", "core_call", "remat", "checkpoint", "custom_jvp_call", "custom_vjp_call"}

def _inner(eqn):
    p = eqn.params
    for k in ("jaxpr", "call_jaxpr", "fun_jaxpr"):
        if k in p:
            j = p[k]
            return (j.jaxpr, j.consts) if hasattr(j, "consts") else (j, ())
    return None

def flat_eval(jaxpr, consts, args, rec, path=""):
    env = {}
    def read(v):
        return v.val if type(v).__name__ == "Literal" else env[v]
    for v, x in zip(jaxpr.constvars, consts): env[v] = x
    for v, x in zip(jaxpr.invars, args): env[v] = x
    for i, eqn in enumerate(jaxpr.eqns):
        invals = [read(v) for v in eqn.invars]
        inn = _inner(eqn) if eqn.primitive.name in CALLS else None
        if inn is not None:
            outs = flat_eval(inn[0], inn[1], invals, rec, path + f"{i}.")
        else:
            outs = eqn.primitive.bind(*invals, **eqn.params)
            if not eqn.primitive.multiple_results: outs = [outs]
            for o, v in zip(outs, eqn.outvars):
                rec.append((path + str(i), eqn, o))
        for v, o in zip(eqn.outvars, outs): env[v] = o
    return [read(v) for v in jaxpr.outvars]

def same(x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.shape != y.shape: return False
    if x.dtype.kind == "f":
        w = {8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize]
        return np.array_equal(x.view(w), y.view(w)) or (np.array_equal(np.isnan(x), np.isnan(y)) and np.array_equal(x.view(w)[~np.isnan(x)], y.view(w)[~np.isnan(y)]))
    return np.array_equal(x, y)

def run_all(closed, args, dev, fused):
    """Values of every equation on ``dev``: op by op (fused=False) or one jit returning them all."""
    args = [jax.device_put(a, dev) for a in args]
    if not fused:
        rec = []
        with jax.default_device(dev):
            out = flat_eval(closed.jaxpr, closed.consts, args, rec)
        return [(k, e, np.asarray(o)) for k, e, o in rec], [np.asarray(o) for o in out]
    meta = []
    def f(*a):
        rec = []
        out = flat_eval(closed.jaxpr, closed.consts, a, rec)
        meta[:] = [(k, e) for k, e, _ in rec]
        return [o for _, _, o in rec], out
    with jax.default_device(dev):
        vals, out = jax.jit(f)(*args)
    return [(k, e, np.asarray(v)) for (k, e), v in zip(meta, vals)], [np.asarray(o) for o in out]

def first_diff(ref, test, limit=8):
    rows = []
    for (k, e, r), (_, _, t) in zip(ref, test):
        if not same(r, t):
            rows.append((k, e, r, t))
            if len(rows) >= limit: break
    return rows
