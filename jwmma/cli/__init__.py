"""The ``jwmma`` command line (also ``python -m jwmma``): one module per subcommand.

Each command module has ``cmd_<name>(args) -> exit code`` and ``add(subparsers)``, registered in
`build_parser`; add a subcommand by writing such a module and listing it in `COMMANDS`. `main`
takes an argv list, so tests run the CLI in-process.
"""
from __future__ import annotations

import argparse
import os
import sys

from ..version import __version__
from . import demo, devices, gemm, layout, listing, models, processes, study, study_net
from .common import CliError

__all__ = ["main", "build_parser", "CliError", "COMMANDS", "demo", "devices", "gemm", "layout", "listing", "models",
           "processes", "study", "study_net"]

#: the subcommand modules, in the order `jwmma --help` lists them
COMMANDS = (listing, models, layout, demo, study, study_net, gemm)


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of ``jwmma`` with every subcommand of `COMMANDS`."""
    p = argparse.ArgumentParser(
        prog="jwmma",
        description="Bit-exact JAX emulator of AMD sparse matrix-core builtins "
        "(RDNA4 swmmac_*_w32, CDNA4 smfmac_*).",
    )
    p.add_argument("--version", action="version", version=f"jwmma {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for command in COMMANDS:
        command.add(sub)
    return p


def main(argv=None) -> int:
    """Run the ``jwmma`` command.

    Args:
        argv: the arguments (default: sys.argv[1:]).
    Returns:
        The exit code: 0, 2 for a user error (printed as ``jwmma: error: ...``), 1 after a
        broken pipe.
    """
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help(sys.stderr)
        return 2
    try:
        return args.func(args)
    except CliError as e:
        print(f"jwmma: error: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `jwmma layout ... | head`: silence the flush at exit
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
