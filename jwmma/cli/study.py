"""``jwmma study``: accumulation-error sweeps from the command line (`jwmma.study.run`)."""
from __future__ import annotations

import argparse
import json
import re
import sys
import time

import jax

from .. import models as _models
from ..engine.step import context
from ..models.parse import model_label, parse_model, split_list
from ..study.data import DISTRIBUTIONS, SCALINGS, resolve_format
from ..study.share import resolve_share
from ..study.store import json_default, merge
from ..study.sweep import DEFAULT_KS, DEFAULT_M, DEFAULT_MODELS, DEFAULT_N, DEFAULT_SEEDS, run
from .common import CliError, add_target_arg, check_target, many
from .devices import add_device_args, mesh_from_args
from .processes import add_process_args, init_from_args, leave

__all__ = ["parse_ks", "parse_size", "parse_share", "cmd_study", "add"]


def _int(text: str, option: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{option}: {what} must be an integer, got {text!r}") from None


def parse_ks(text: str) -> list[int]:
    """'128,1024' or '128:16384' (powers of two from..to) or a mix -> the K values (positive
    multiples of 4); ValueError naming --k otherwise."""
    out = []
    parts = split_list(text)
    if not parts:
        raise ValueError(f"--k: give K values such as 128,1024 or 128:16384, got {text!r}")
    for part in parts:
        if ":" in part:
            lo, hi = (_int(x, "--k", "each end of a K range") for x in part.split(":", 1))
            if lo < 1 or hi < lo:
                raise ValueError(f"--k: bad K range {part!r} (want 1 <= from <= to)")
            k = 1 << (lo - 1).bit_length()
            while k <= hi:
                out.append(k)
                k <<= 1
        else:
            out.append(_int(part, "--k", "K"))
    bad = [k for k in out if k < 4 or k % 4]
    if bad:
        raise ValueError(f"--k: every K must be a positive multiple of 4, got {bad[0]}")
    return out


def parse_size(text: str) -> tuple[int, int]:
    """'64' or '64x32' -> (M, N), both positive; ValueError naming --size otherwise."""
    t = text.lower().split("x")
    if len(t) not in (1, 2):
        raise ValueError(f"--size takes M or MxN, got {text!r}")
    try:
        m, n = (int(t[0]), int(t[-1]))
    except ValueError:
        raise ValueError(f"--size takes M or MxN (positive integers), got {text!r}") from None
    if m < 1 or n < 1:
        raise ValueError(f"--size: M and N must be positive, got {text!r}")
    return m, n


def parse_share(text: str) -> tuple[int, int]:
    """'0/4' -> (0, 4): share INDEX of COUNT (ValueError otherwise)."""
    mt = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(text))
    if not mt:
        raise ValueError(f"--share takes INDEX/COUNT, e.g. 0/4, got {text!r}")
    return resolve_share((int(mt.group(1)), int(mt.group(2))))


def _local_device_kw(args) -> dict:
    """--devices / --mesh in a sweep over several processes: this process's devices."""
    if getattr(args, "mesh", None):
        raise ValueError("--mesh is not for sweeps over several processes (each point runs on one process's "
                         "devices); use --devices N (per process)")
    text = str(getattr(args, "devices", "all") or "all").lower()
    if text in ("all", "local"):
        return {"devices": "local"} if jax.local_device_count() > 1 else {}
    try:
        n = int(text)
    except ValueError:
        raise ValueError(f"--devices takes a number or 'all' (or 'local'), got {text!r}") from None
    if not 1 <= n <= jax.local_device_count():
        raise ValueError(f"--devices {n}: each process has {jax.local_device_count()} device(s)")
    return {} if n == 1 else {"devices": n}


def _refusal(model, spec) -> str | None:
    """Why ``model`` cannot run ``spec`` (its formats), or None."""
    try:
        _models.resolve(model, context(spec), spec.default_model)
    except (ValueError, TypeError) as e:
        return str(e)
    return None


def _study_models(given, specs, say=None) -> list:
    """The models of the sweep: those given (each must run on every builtin of the sweep; a
    CliError names the ones that do), or DEFAULT_MODELS less those that do not apply, plus the
    builtins' own default models (a study of an RDNA4 builtin compares its gfx12_dot4)."""
    if not given:
        own = [s.default_model for s in specs if isinstance(s.default_model, str)]
        candidates = list(dict.fromkeys(list(DEFAULT_MODELS) + own))
        kept = [m for m in candidates if all(_refusal(m, s) is None for s in specs)]
        if not kept:
            raise CliError(f"no default model ({', '.join(DEFAULT_MODELS)}) runs on "
                           f"{', '.join(s.name for s in specs)}; give --model")
        left = [m for m in candidates if m not in kept]
        if left and say:
            say(f"jwmma study: default models {', '.join(kept)} ({', '.join(left)} does not apply to "
                f"{', '.join(s.name for s in specs)})")
        return [parse_model(m) for m in kept]
    try:
        models = [parse_model(x) for x in many(given, ())]
    except ValueError as e:
        raise CliError(f"--model: {e}") from None
    for mo in models:
        for spec in specs:
            why = _refusal(mo, spec)
            if why is not None:
                runs = [n for n in _models.names() if _refusal(n, spec) is None]
                raise CliError(f"--model {model_label(mo)} cannot run {spec.name}: {why}. Models that run on "
                               f"{spec.name}: {', '.join(runs) or 'none'} (without --model: "
                               f"{', '.join(m for m in dict.fromkeys([*DEFAULT_MODELS, spec.default_model]) if m in runs) or 'none'})")
    return models


def cmd_study(args) -> int:
    """``jwmma study``: run the sweep (or this process's share of it), print the table (or JSON)."""
    if args.m_given is not None:  # -m is M in `jwmma gemm`; here it would be ambiguous
        raise CliError(f"jwmma study has no -m (got -m {args.m_given}): models are --model, the output "
                       f"size is --size MxN (in jwmma gemm, -m is M)")
    try:
        share = parse_share(args.share) if args.share else None
    except ValueError as e:
        raise CliError(str(e)) from None
    if share is None and not args.merge_only:  # a jax.distributed job: before any other JAX call
        init_from_args(args, recoverable=True)  # survivors of a dead peer finish their points
    try:
        return _cmd_study(args, share)
    finally:
        leave()  # process 0 (the coordinator) last


def _cmd_study(args, share) -> int:
    if args.merge_only:
        try:
            st = merge(args.out, figures=not args.no_plots)
        except (ValueError, OSError) as e:
            raise CliError(str(e)) from None
        print(st.table())
        print(f"{len(st.points)} points merged into {args.out}/points.jsonl, points.csv, summary.csv, summary.json")
        return 0
    try:
        ks = parse_ks(args.k) if args.k else list(DEFAULT_KS)
        m, n = parse_size(args.size)
        formats = many(args.format, () if args.builtin else ("fp8",)) + many(args.builtin, ())
        for f in formats:  # every builtin of the sweep must run on --target (CliError names it)
            check_target(resolve_format(f)[1], args.target)
        models = _study_models(args.model, [resolve_format(f, args.target)[1] for f in formats],
                               None if args.quiet else (lambda s: print(s, file=sys.stderr)))
        dists = many(args.dist, ("normal",))
        remedies = many(args.remedy, ("none",))
        if args.seeds < 1:
            raise ValueError(f"--seeds must be >= 1, got {args.seeds}")
        several = share is not None or jax.process_count() > 1
        # several processes: every point runs on this process's devices (--devices counts them)
        gemm_kw = _local_device_kw(args) if several else mesh_from_args(args)
    except ValueError as e:
        raise CliError(str(e)) from None
    say = (lambda *a: None) if args.quiet else (lambda s: print(s, file=sys.stderr))
    t0 = time.perf_counter()
    try:
        st = run(ks, models, dists, formats, remedies, seeds=list(range(args.seed0, args.seed0 + args.seeds)),
                 m=m, n=n, scaling=args.scaling, out=args.out, resume=not args.fresh,
                 progress=not (args.no_progress or args.quiet), figures=not args.no_plots,
                 path=args.path, log=say, gemm_kw=gemm_kw, share=share, merge_timeout=args.merge_timeout,
                 target=args.target)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    if share is None and jax.process_index() != 0:
        return 0  # process 0 prints the merged tables
    if args.json:
        print(json.dumps(st.summary, default=json_default))
    elif not args.quiet:
        print(st.table())
        print(f"{len(st.points)} points ({len(st.summary)} aggregated rows) in {time.perf_counter() - t0:.1f} s; "
              f"rel = |d - ref| / sum|a*b|, bias = mean signed rel, ident = bit-identical to the correctly "
              f"rounded reference (in D's format), ulp = steps of D's format from it; values are means over seeds.")
        if args.out:
            print(f"tables: {args.out}/points.csv, summary.csv, summary.json; rerun the same command to resume.")
    return 0


def add(subparsers) -> None:
    """Register ``jwmma study`` on an argparse subparsers object."""
    p = subparsers.add_parser(
        "study", help="accumulation-error study: sweep K, models, data, formats, remedies",
        description="Sweep GEMM depth K, arithmetic models, data distributions, input formats and "
        "software remedies; measure the error of the emulated sparse GEMM against the exact "
        "product of the same quantised inputs. Points are appended to OUT/points.jsonl as they "
        "finish; rerunning the same command resumes. Lists are comma-separated or repeated.",
    )
    p.add_argument("--k", metavar="LIST", help="GEMM depths: 128,1024 or 128:16384 (powers of two; "
                   "default 128:16384)")
    p.add_argument("-m", dest="m_given", default=None, help=argparse.SUPPRESS)  # refused: see _cmd_study
    p.add_argument("--model", action="append", metavar="LIST",
                   help="models: preset names or e.g. \"FusedGroups(group=32)\" (default exact,cdna3,fma_chain and the builtins' own default models: those that apply to every builtin of the sweep)")
    p.add_argument("--dist", action="append", metavar="LIST",
                   help=f"data distributions: {', '.join(DISTRIBUTIONS)} (default normal)")
    p.add_argument("--format", "-f", action="append", metavar="LIST",
                   help="input formats: fp8 (E4M3), bf8 (E5M2), f16, bf16 (default fp8)")
    p.add_argument("--builtin", action="append", metavar="NAME",
                   help="use this builtin (instead of / besides --format), e.g. swmmac_f32_16x16x32_fp8_fp8_w32")
    p.add_argument("--remedy", "-r", action="append", metavar="LIST",
                   help="none, split_k:S, promote:N (every N builtin steps, f32 master), promote:N:f64 (default none)")
    p.add_argument("--seeds", type=int, default=DEFAULT_SEEDS, help=f"seeds per point ({DEFAULT_SEEDS})")
    p.add_argument("--seed0", type=int, default=0, help="first seed (0)")
    p.add_argument("--size", default=f"{DEFAULT_M}x{DEFAULT_N}", metavar="MxN",
                   help=f"output size per point ({DEFAULT_M}x{DEFAULT_N})")
    p.add_argument("--scaling", choices=SCALINGS, default="auto",
                   help="quantisation scaling: row (A per row, B per column, to the format's max), "
                   "tensor, none; auto = row for 8-bit inputs, none for f16/bf16")
    p.add_argument("--out", "-o", default="study_out", metavar="DIR", help="output directory (study_out)")
    p.add_argument("--fresh", action="store_true", help="discard finished points in DIR instead of resuming")
    p.add_argument("--no-plots", action="store_true", help="do not write PNG figures")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--path", choices=["matrix", "registers"], default="matrix",
                   help="gemm execution path (identical bits; registers is slower)")
    add_target_arg(p, "every builtin of the sweep")
    p.add_argument("--json", action="store_true", help="print the summary rows as JSON")
    p.add_argument("--quiet", "-q", action="store_true", help="print nothing but errors")
    add_device_args(p)  # --devices N|all, --mesh: every GEMM spread over devices
    add_process_args(p)  # --coordinator, --num-processes, --process-id: points split over processes
    p.add_argument("--share", metavar="I/N", default=None,
                   help="compute share I of N of the points without a coordinator (e.g. job-array tasks); "
                   "merge afterwards with --merge-only")
    p.add_argument("--merge-only", action="store_true",
                   help="only merge OUT's point files (every process's part) into the tables")
    p.add_argument("--merge-timeout", type=float, default=None, metavar="S",
                   help="how long process 0 waits for the others before merging what exists (default: "
                   "as long as they live)")
    p.set_defaults(func=cmd_study)
