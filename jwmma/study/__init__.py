"""Numerical studies of accumulation error in emulated sparse GEMMs (``jwmma study``).

A *point* of a study is one (builtin, input format, data distribution, scaling, model,
software remedy, K, M, N, seed). For each point the study

1. draws float64 data (`DISTRIBUTIONS`), 2:4-prunes A in float64 (the two largest |values|
   of every group of four along K are kept, ties to the lower position, as
   `jwmma.prune_2_4`), scales it into the format's range and quantises it with ml_dtypes
   (round to nearest even; see `make_operands`);
2. emulates the GEMM D = A24 @ B (C = 0) with `jwmma.gemm` under the model, with the remedy
   (`Remedy`) applied around it;
3. compares D with the exact product of the *same quantised inputs* (`reference`): the exact
   float64 sum (computed error-free by exponent banding + `math.fsum`) and its correctly
   rounded float32 value.

Error measures (per output (i, j), `metrics`):

* ``rel``: |d - ref| / s with s = sum_k |a_ik * b_kj| (the componentwise scale of the
  dot product: |ref| <= s, equality for same-sign data; the standard error bound of
  a summation is a multiple of s). Outputs with s = 0 have ref = d = 0 and rel = 0.
  ``max_rel`` and ``mean_rel`` are its maximum and mean over the M x N outputs.
* ``bias``: mean over outputs of (d - ref) / s, the mean signed relative error
  (negative: the model loses magnitude on positive data / rounds down).
* ``fro_rel``: ||D - ref||_F / ||ref||_F, the usual normwise relative error.
* ulps: ``ulp`` = (ordered f32 index of d) - (ordered f32 index of ref32), i.e. how many
  float32 values lie between the result and the correctly rounded reference (signed; +0 and
  -0 are one value). ``ident``: fraction of outputs with ulp == 0 (bit-identical to the
  correctly rounded reference, up to the sign of zero). ``mean_ulp`` (signed), ``mean_abs_ulp``,
  ``max_abs_ulp`` and ``ulp_hist``, a histogram over signed log2 bins: bin 0 holds ulp == 0,
  bin +b (-b) holds 2**(b-1) <= ulp < 2**b (the same, negative).
* ``nonfinite``: outputs that are NaN/Inf (they count as rel = inf and are left out of the
  ulp statistics).
* ``rn_mean_rel``: mean_rel of the correctly rounded reference itself, |ref32 - ref| / s:
  the floor that no float32 result can beat (a model at the floor is "as good as f32 gets").

Across seeds, `aggregate` gives for every metric the mean and a 95% Student-t interval of
the mean (``<metric>_lo``, ``<metric>_hi``; equal to the mean when there is one seed);
``ulp_hist`` is summed.

Remedies (`Remedy`; chunk results are always computed from C = 0, i.e. the matrix-core
accumulator restarts at every chunk):

* ``none``: one GEMM over all of K (the kernel issues ceil(K/k) builtins in K order, each
  builtin's D the next one's C).
* ``split_k:S``: K is cut into S contiguous slices of K/S (K must be a multiple of 4*S); each
  slice is a GEMM from C = 0 and the S float32 partials are added **in slice order in
  float32**: D = fl32(...fl32(fl32(P_0 + P_1) + P_2)... + P_{S-1}) (a serial split-K
  reduction; an atomic reduction would add in a non-deterministic order).
* ``promote:N`` / ``promote:N:f64`` (DeepSeek-V3 style accumulator promotion): every N
  builtin K-steps (N*k dense K, the last chunk may be shorter) the accumulator is added into
  a master accumulator and restarted from zero: with an f32 master
  (default) master = fl32(master + P_c) in chunk order, D = master; with an f64 master
  master = master + P_c in float64 and D = fl32(master) (round to nearest even) at the end.
  ``promote:N`` with an f32 master is ``split_k`` with fixed-length chunks.

Output of `run` with ``out=DIR``: ``points.jsonl`` / ``points.csv`` (one row per point,
appended as each point finishes, so an interrupted run resumes where it stopped),
``summary.csv`` / ``summary.json`` (aggregated rows), ``config.json``, and PNG figures.

Modules: `data` (distributions, pruning, quantisation), `exact_product` (the reference),
`measures` (the error metrics), `remedies`, `sweep` (`run`, `emulate`), `store` (`Study`, the files and resume),
`stats` (intervals, aggregation, the table), `plots` (figures; matplotlib optional). The
command line is `jwmma.cli.study`. `network` (a digits MLP) and `transformer` (a byte-level
transformer, Flax) ask the same of trained networks (`jwmma study-net`).
"""
from __future__ import annotations

from . import data, exact_product, measures, network, parts, plots, remedies, share, stats, store, sweep, transformer
from ..models.parse import model_label, parse_model
from .data import (
    DISTRIBUTIONS, FORMAT_ALIASES, FORMATS, SCALINGS, auto_scaling, data_rng, make_operands, prune_2_4_f64,
    quantise, resolve_format, sample, to_f32_odd,
)
from .measures import HIST_BINS, U32, metrics, ordered, ulp_bins, ulp_diff, ulp_histogram
from .exact_product import Reference, reference
from .remedies import Remedy, parse_remedy
from .stats import KEY, METRICS, SUMMARY_KEY, aggregate, format_table, mean_ci, t975
from .store import POINT_COLUMNS, SUMMARY_COLUMNS, Study, load, read_points, write_csv
from .sweep import DEFAULT_KS, DEFAULT_M, DEFAULT_MODELS, DEFAULT_N, DEFAULT_SEEDS, emulate, run

__all__ = [
    "run", "emulate", "load", "Study", "Remedy", "parse_remedy", "make_operands", "reference", "Reference",
    "metrics", "aggregate", "mean_ci", "t975", "format_table", "read_points", "write_csv", "resolve_format",
    "model_label", "parse_model", "sample", "data_rng", "prune_2_4_f64", "quantise", "to_f32_odd",
    "auto_scaling", "ordered", "ulp_diff", "ulp_bins", "ulp_histogram", "DISTRIBUTIONS", "FORMATS",
    "FORMAT_ALIASES", "SCALINGS", "HIST_BINS", "U32", "KEY", "METRICS", "SUMMARY_KEY", "POINT_COLUMNS",
    "SUMMARY_COLUMNS", "DEFAULT_KS", "DEFAULT_MODELS", "DEFAULT_SEEDS", "DEFAULT_M", "DEFAULT_N",
    "data", "exact_product", "measures", "plots", "remedies", "stats", "store", "sweep", "network", "transformer",
]
