"""The transformer study's weights file: parameters as float16 values in an ``.npz``.

`WEIGHTS` ships with the package (the default `ModelConfig`'s network as
`jwmma.study.transformer.training.train_weights` trains it; 4.1 MB compressed): float16 keeps it
under 5 MB, and the float32 network is the one loaded from it (float16 values widened exactly),
so every float32 number of the study is that network's.
"""
from __future__ import annotations

import json
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["WEIGHTS", "save_weights", "load_weights"]

#: the shipped weights of the default model (float16 values; `load_weights`), package data of
#: ``jwmma.study`` (pyproject.toml)
WEIGHTS = Path(__file__).parent.with_name("transformer_weights.npz")


def _flat(params, prefix=""):
    """{"block_0/qkv/kernel": array, ...} of nested dicts."""
    out = {}
    for k, v in params.items():
        name = f"{prefix}/{k}" if prefix else k
        out.update(_flat(v, name) if isinstance(v, dict) else {name: v})
    return out


def save_weights(params, meta: dict, path) -> Path:
    """Write ``params`` as float16 arrays in a compressed ``.npz``.

    Args:
        params: nested dicts of float arrays (Linen's ``params``).
        meta: JSON-serialisable facts about them (stored as ``__meta__``).
        path: the file to write.
    Returns:
        ``path``; ValueError if a value does not fit float16's range.
    """
    arrays = {}
    for name, v in _flat(jax.device_get(params)).items():
        v = np.asarray(v, np.float32)
        if np.max(np.abs(v)) >= 65504:
            raise ValueError(f"{name} exceeds float16's range")
        arrays[name] = v.astype(np.float16)
    arrays["__meta__"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), np.uint8)
    path = Path(path)
    with open(path, "wb") as fh:
        np.savez_compressed(fh, **arrays)
    return path


def load_weights(path=WEIGHTS):
    """Read `save_weights`' file.

    Returns:
        ``(params, meta)``: nested dicts of float32 arrays (the float16 values widened
        exactly) and the stored meta dict.
    """
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(bytes(z["__meta__"]).decode())
        params: dict = {}
        for name in z.files:
            if name == "__meta__":
                continue
            node = params
            *parents, leaf = name.split("/")
            for p in parents:
                node = node.setdefault(p, {})
            node[leaf] = jnp.asarray(z[name].astype(np.float32))
    return params, meta
