"""The ``jwmma`` command line (also ``python -m jwmma``): one module per subcommand.

`entry` is the installed command: `main` with JAX's persistent compilation cache on
(`jwmma.cli.cache`; ``--no-cache`` turns it off).

Each command module has ``cmd_<name>(args) -> exit code`` and ``add(subparsers)``, registered in
`build_parser`; add a subcommand by writing such a module and listing it in `COMMANDS`. `main`
takes an argv list, so tests run the CLI in-process.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..version import __version__
from . import cache, demo, devices, gemm, layout, listing, models, processes, study, study_net
from .common import CliError

__all__ = ["main", "entry", "build_parser", "CliError", "COMMANDS", "cache", "demo", "devices", "gemm", "layout", "listing", "models",
           "processes", "study", "study_net"]

#: the subcommand modules, in the order `jwmma --help` lists them
COMMANDS = (listing, models, layout, demo, study, study_net, gemm)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``jwmma`` with every subcommand of `COMMANDS`."""
    p = argparse.ArgumentParser(
        prog="jwmma",
        description="Bit-exact JAX emulator of AMD's matrix-core builtins: sparse and dense, "
        "RDNA4 WMMA/SWMMAC and CDNA3/CDNA4 MFMA/SMFMAC (MX-scaled FP8/FP6/FP4 included).",
        epilog=f"Compiled programs are kept in JAX's persistent compilation cache in "
        f"$XDG_CACHE_HOME/jwmma (default ~/.cache/jwmma; here {cache.cache_dir()}), so that a second "
        f"run starts fast; --no-cache (before or after COMMAND) compiles afresh and writes nothing there.",
    )
    p.add_argument("--version", action="version", version=f"jwmma {__version__}")
    p.add_argument("--no-cache", action="store_true", help=_NO_CACHE_HELP)
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    for sp in sub.choices.values():  # also after the subcommand; SUPPRESS keeps one given before it
        sp.add_argument("--no-cache", action="store_true", default=argparse.SUPPRESS, help=_NO_CACHE_HELP)
    return p


_NO_CACHE_HELP = "do not use the persistent compilation cache ($XDG_CACHE_HOME/jwmma, default ~/.cache/jwmma)"


def entry() -> int:
    """The installed ``jwmma`` command (and ``python -m jwmma``): `main` with the persistent
    compilation cache on unless ``--no-cache`` is given."""
    return main(cache_programs=True)


def main(argv=None, *, cache_programs: bool = False) -> int:
    """Run the ``jwmma`` command.

    Args:
        argv: the arguments (default: sys.argv[1:]).
        cache_programs: keep compiled programs in JAX's persistent compilation cache
            (`jwmma.cli.cache.cache_dir`) unless the arguments say ``--no-cache``; False (the
            default, for in-process use) leaves JAX's configuration alone.
    Returns:
        The exit code: 0, 2 for a user error (printed as ``jwmma: error: ...``), 1 after a
        broken pipe.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    if cache_programs and not args.no_cache:
        cache.enable()
    try:
        return args.func(args)
    except CliError as e:
        print(f"jwmma: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `jwmma layout ... | head`: silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
