"""Stored bits of adversarial GEMMs: every machine and JAX version must reproduce them.

The rest of the suite compares a machine with itself (a path with another, a model with its
oracle on the same machine), so a version of JAX that computes the same wrong bits on both sides
would pass it: JAX 0.11's XLA:CPU flushed bf16 subnormals in a float pad and every test stayed
green (docs/ARCHITECTURE.md, "Same bits on every device"). This test compares with digests
stored in `tests/data/stored_digests.json`: SHA-256 of the output bits, per data class, of
crosscheck keys (`benchmarks/crosscheck.py`, its operands built from integer codes) on its
adversarial classes (wide exponents with products at the format limits and subnormal results,
pruning ties, NaN/Inf/-0, saturating integers), recorded with JAX 0.10.2 on a CPU, whose bits
an H200 matched (benchmarks/RESULTS.md). Rewrite them only after a deliberate change of bits:

    python tests/test_stored_digests.py --write      # with the JAX those bits were checked on
"""
from __future__ import annotations

import hashlib
import importlib.util
import json
import pathlib
import sys

import numpy as np
import pytest

HERE = pathlib.Path(__file__).resolve().parent
DATA = HERE / "data" / "stored_digests.json"
BENCH = HERE.parent / "benchmarks"

#: one key per family and accumulator kind, the bf16 keys of the JAX 0.11 report, the new rows
KEYS = (
    "gemm|smfmac_f32_16x16x64_bf16|exact|matrix|xla",
    "gemm|smfmac_f32_16x16x64_bf16|cdna3|matrix|xla",
    "gemm|swmmac_f32_16x16x32_bf16_w32|gfx12_dot4|matrix|xla",
    "gemm|swmmac_bf16_16x16x32_bf16_w32|gfx12_dot4|registers|xla",
    "gemm|smfmac_f32_16x16x128_fp8_bf8|cdna3|matrix|xla",
    "gemm|smfmac_f32_32x32x64_fp8_fp8|fma_chain|matrix|xla",
    "gemm|wmma_f16_16x16x16_f16_w32_gfx12|gfx12_dot4|matrix|xla",
    "gemm|swmmac_i32_16x16x32_iu8_w32|staged_clamp+clamp|matrix|xla",
    "gemm|mfma_f32_16x16x16bf16_1k|cdna3|matrix|xla",
    "gemm|mfma_f32_16x16x8_xf32|cdna3|matrix|xla",
    "gemm|mfma_f32_32x32x16_bf8_fp8|cdna3|matrix|xla",
    "gemm|mfma_i32_16x16x32_i8|exact|matrix|xla",
    "gemm|mfma_scale_f32_16x16x128_f8f6f4@f14|cdna4_mx|matrix|xla",
    "gemm|mfma_scale_f32_32x32x64_f8f6f4@f23|mx_rocjitsu|matrix|xla",
    "prune|bf16|largest|eager|-",
)


def _crosscheck():
    sys.path.insert(0, str(BENCH))  # crosscheck imports crosscheck_data
    try:
        spec = importlib.util.spec_from_file_location("crosscheck", BENCH / "crosscheck.py")
        mod = sys.modules.get("crosscheck")
        if mod is None:
            mod = importlib.util.module_from_spec(spec)
            sys.modules["crosscheck"] = mod  # dataclasses look their module up
            spec.loader.exec_module(mod)
        return mod
    finally:
        sys.path.remove(str(BENCH))


def digests(key_text: str) -> dict:
    """{class: SHA-256 of that class's output bits, little-endian} and the operands' digest."""
    x = _crosscheck()
    bits, info = x.run_key(x.Key.parse(key_text))
    assert info.get("error") is None, f"{key_text}: {info['error']}"
    out = {"operands": info["digest"]}
    for i, cls in enumerate(info["classes"]):
        out[cls] = hashlib.sha256(np.ascontiguousarray(bits[i]).astype(bits.dtype.newbyteorder("<")).tobytes()).hexdigest()
    return out


@pytest.mark.parametrize("key", KEYS)
def test_stored_bits(key):
    stored = json.loads(DATA.read_text())["digests"]
    assert key in stored, f"no stored digest for {key}: run python tests/test_stored_digests.py --write"
    got = digests(key)
    assert got["operands"] == stored[key]["operands"], "the operands differ from the stored run's (crosscheck_data)"
    bad = [c for c in stored[key] if c != "operands" and got.get(c) != stored[key][c]]
    assert not bad, f"{key}: classes {bad} give other bits than the stored run ({json.loads(DATA.read_text())['made']})"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit(__doc__)
    import jax
    import ml_dtypes

    made = dict(jax=jax.__version__, ml_dtypes=ml_dtypes.__version__, numpy=np.__version__,
                backend=jax.default_backend())
    DATA.write_text(json.dumps({"made": made, "digests": {k: digests(k) for k in KEYS}}, indent=1, sort_keys=True)
                    + "\n")
    print(f"wrote {DATA} ({made})")
