"""The device options of ``jwmma gemm`` and ``jwmma study``: ``--devices N`` and
``--mesh ROLE=SIZE,...``, and the `jwmma.gemm` keywords they stand for."""
from __future__ import annotations

import math
import re

import jax
import numpy as np
from jax.sharding import Mesh

from ..tiled.plan import ROLE_RE, per_process

__all__ = ["add_device_args", "parse_mesh", "mesh_from_args"]


def add_device_args(parser):
    """Add ``--devices N`` and ``--mesh ROLE=SIZE,...`` to an argparse parser (``jwmma gemm``,
    ``jwmma study``)."""
    parser.add_argument(
        "--devices", default="all", metavar="N",
        help="devices to spread each GEMM over: a number, 'all' or 'local' (default: all of "
        "jax.devices(), every process's in a multi-process job; local: this process's only; "
        "1 = no distribution); the layout (batch x M x N splits) is chosen per problem",
    )
    parser.add_argument(
        "--mesh", default=None, metavar="ROLE=SIZE,...",
        help="explicit layout instead, e.g. m=2,n=4 or batch=2,m=4 (uses the first "
        "product-of-sizes devices, the same number from each process); roles: batch, batch<i>, m, n",
    )
    return parser


def parse_mesh(text: str) -> list:
    """'m=2,n=4' -> [('m', 2), ('n', 4)] (roles batch, batch<i>, m, n; ValueError otherwise)."""
    out = []
    for part in str(text).split(","):
        mt = re.fullmatch(r"\s*([A-Za-z]\w*)\s*=\s*(\d+)\s*", part)
        if not mt:
            raise ValueError(f"--mesh takes ROLE=SIZE[,ROLE=SIZE...], e.g. m=2,n=4; got {text!r}")
        role, size = mt.group(1).lower(), int(mt.group(2))
        role = "batch0" if role == "batch" else role
        if not ROLE_RE.match(role):
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
        layout = parse_mesh(mesh_text)
        used = math.prod(s for _, s in layout)
        if used > len(avail):
            raise ValueError(f"--mesh {mesh_text} needs {used} devices, only {len(avail)} are available")
        if used == 1:
            return {}
        return {"mesh": Mesh(np.array(per_process(avail, used), dtype=object).reshape([s for _, s in layout]),
                             tuple(r for r, _ in layout))}
    text = getattr(args, "devices", "all")
    if text is not None and str(text).lower() == "local":
        return {"devices": "local"} if jax.local_device_count() > 1 else {}
    if text is None or str(text).lower() == "all":
        n = len(avail)
    else:
        try:
            n = int(text)
        except ValueError:
            raise ValueError(f"--devices takes a number or 'all' (or 'local'), got {text!r}") from None
        if n < 1:
            raise ValueError(f"--devices must be >= 1, got {n}")
        if n > len(avail):
            raise ValueError(f"--devices {n}: only {len(avail)} {jax.default_backend()} device(s) are available")
    if n > 1:
        per_process(avail, n)  # raises now when n does not spread over the processes
    return {} if n == 1 else {"devices": n}
