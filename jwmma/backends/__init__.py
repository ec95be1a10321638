"""Other ways to run the same arithmetic: `pallas` (fused per-tile GPU kernels;
benchmarks/RESULTS.md "Pallas backend, one H200").

Layer: above `engine` (a backend builds on the models, the formats and the instruction
context) and below `tiled`, whose GEMM matrix path hands a whole GEMM to a backend when
``options.backend`` names it. Every backend gives the XLA path's bits.
"""

__all__ = ["pallas"]
