"""Shared by the Pallas tests (`test_pallas`, `test_pallas_mosaic`): adversarial tile-padded
codes for a kernel against the XLA path, running a matrix path on them, and the abstract GPU
to lower kernels for where none is attached."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from jwmma.backends.pallas.testdata import gemm_codes
from jwmma.numerics.formats import F32, FLOAT_FORMATS
from jwmma.numerics.rounding import x64_scope

M, N = 64, 128


def cases(spec, clamp):
    """(a, pos, b, c) codes: two testdata draws, then hand-made edges on rows 32..63."""
    k = 2 * spec.k
    out = [gemm_codes(spec, M, N, k, seed=s, clamp=clamp) for s in (1, 2)]
    a, p, b, c = (x.copy() for x in gemm_codes(spec, M, N, k, seed=3, clamp=clamp))
    if spec.integer:  # C at the edge of overflow both ways, products pushing over it
        c[32:48] = 2**31 - 1 - np.arange(N, dtype=np.int64).astype(np.int32)
        c[48:64] = -(2**31) + np.arange(N, dtype=np.int32)
    else:  # all-zero A rows (+-0) and subnormal C: subnormal results
        fc = F32 if spec.c_type == "f32" else FLOAT_FORMATS[spec.c_type]
        a[32:48] = np.where(np.arange(a.shape[1]) % 3 == 0, 1 << (spec.a_format.bits - 1), 0)
        rng = np.random.default_rng(4)
        sub = rng.integers(1, 1 << fc.mbits, (16, N)) | (rng.integers(0, 2, (16, N)) << (fc.bits - 1))
        c[32:48] = sub.astype(np.int64).astype(np.int32)
        fb = spec.b_format  # NaN and +-Inf B elements in columns 3, 4 (every format has a NaN)
        b[::5, 3] = fb.qnan
        if fb.inf:
            inf = ((1 << fb.ebits) - 1) << fb.mbits
            b[1::7, 4], b[2::7, 4] = inf, inf | (1 << (fb.bits - 1))
        c[48:64, :8] = 0  # +0 C with the cancelling pattern below
        a[48:64, 0::2] = a[48:64, 1::2] ^ (1 << (spec.a_format.bits - 1))  # x, -x in every block
        if spec.dense:  # the pair multiplies B rows 2q, 2q+1, equal in columns 48-63 (testdata)
            c[48:64, 48:56] = 0
        else:
            p[48:64, 0::2] = p[48:64, 1::2]
    out.append((a, p, b, c))
    return out


def run(path, opts, spec, model, clamp, a, p, b, c):
    with x64_scope():
        return np.asarray(path(jnp.asarray(a), jnp.asarray(p), jnp.asarray(b), jnp.asarray(c), spec=spec, model=model,
                               options=opts, a_signed=True, b_signed=True, clamp=clamp))


def abstract_gpu():
    """A context naming the GPU to lower for where none is attached: JAX 0.11 asks for an
    abstract device (Pallas reads its compute capability from it); older JAX falls back to
    compute capability 9.0 by itself."""
    import contextlib

    mesh_cls, device_cls = jax.sharding.AbstractMesh, getattr(jax.sharding, "AbstractDevice", None)
    if device_cls is None or not hasattr(jax.sharding, "use_abstract_mesh"):
        return contextlib.nullcontext()
    try:
        device = device_cls(device_kind="NVIDIA H200", num_cores=132, platform="gpu")
        auto = (jax.sharding.AxisType.Auto,)  # no sharding in the types: only the device matters
        mesh = mesh_cls((1,), ("gpu",), axis_types=auto, abstract_device=device)
    except TypeError:  # an AbstractMesh without abstract devices: the old fallback applies
        return contextlib.nullcontext()
    return jax.sharding.use_abstract_mesh(mesh)


