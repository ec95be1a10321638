"""Software remedies around an emulated GEMM: split-K and accumulator promotion (definitions:
the module docstring of `jwmma.study`).
"""
from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Remedy", "parse_remedy"]


@dataclass(frozen=True)
class Remedy:
    """A software remedy around the emulated GEMM (see the module docstring).

    kind: 'none', 'split_k' (n = number of slices) or 'promote' (n = builtin K-steps per
    chunk; master 'f32' or 'f64')."""

    kind: str = "none"
    n: int = 1
    master: str = "f32"

    def __post_init__(self):
        if self.kind not in ("none", "split_k", "promote"):
            raise ValueError(f"remedy kind must be none, split_k or promote, got {self.kind!r}")
        if not isinstance(self.n, int) or self.n < 1:
            raise ValueError(f"remedy n must be a positive int, got {self.n!r}")
        if self.master not in ("f32", "f64"):
            raise ValueError(f"remedy master must be f32 or f64, got {self.master!r}")

    @property
    def label(self) -> str:
        if self.kind == "none":
            return "none"
        if self.kind == "split_k":
            return f"split_k:{self.n}"
        return f"promote:{self.n}" + (":f64" if self.master == "f64" else "")

    def chunk_length(self, k: int, step: int) -> int:
        """Dense K per chunk for a GEMM of depth k on a builtin of K-step ``step``."""
        if self.kind == "none":
            return k
        if self.kind == "split_k":
            if k % (4 * self.n):
                raise ValueError(f"split_k:{self.n} needs K to be a multiple of {4 * self.n}, got K={k}")
            return k // self.n
        return self.n * step


def parse_remedy(x) -> Remedy:
    """'none', 'split_k:4' (also 'splitk:4', 'split-k:4'), 'promote:4', 'promote:4:f64'."""
    if isinstance(x, Remedy):
        return x
    text = str(x).strip().lower().replace("-", "_")
    parts = text.split(":")
    kind = {"splitk": "split_k", "split": "split_k"}.get(parts[0], parts[0])
    try:
        if kind == "none" and len(parts) == 1:
            return Remedy()
        if kind == "split_k" and len(parts) == 2:
            return Remedy("split_k", int(parts[1]))
        if kind == "promote" and len(parts) in (2, 3):
            return Remedy("promote", int(parts[1]), parts[2] if len(parts) == 3 else "f32")
    except ValueError as e:
        raise ValueError(f"bad remedy {x!r}: {e}") from None
    raise ValueError(f"bad remedy {x!r}; use none, split_k:S, promote:N or promote:N:f64")
