"""Independent oracles: slow, obvious references written from the specs (BUILTINS.md,
NUMERICS.md), never from jwmma, and never importing it (tests/test_layering.py checks).

`formats` (number formats: decoding and rounding), `reference` (the 25 builtins: table,
layouts, register packing, generic semantics, the exact model), `ref_models` (the arithmetic
models in Python ints, and input generators), `ref_gfx12` (the gfx1201 DOT4 step), `fdpa` (NVIDIA's truncated fused dot-product-add,
MMA-Sim's T-FDPA), `rocjitsu_chain` (rocjitsu's matrix_fma chain: order, NaN choice, narrowing).
"""
