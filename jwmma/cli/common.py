"""What the command modules share: the user-error exception and lookups that raise it."""
from __future__ import annotations

from ..isa.table import BUILTINS, BuiltinSpec, lookup
from ..models.parse import parse_model, split_list

__all__ = ["CliError", "spec_of", "models_of", "many", "add_target_arg", "all_targets", "check_target"]


class CliError(Exception):
    """A user error: printed as ``jwmma: error: ...`` with exit code 2."""


def spec_of(name: str, target: str | None = None) -> BuiltinSpec:
    """The table row of a builtin named on the command line, as decoded on ``target`` (the
    ``--target`` option; None: the row's default). CliError for an unknown name, and for a
    target the row does not list (naming --target, the row's targets and the value given)."""
    try:
        spec = lookup(name)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    return check_target(spec, target)


def check_target(spec: BuiltinSpec, target: str | None) -> BuiltinSpec:
    """``spec`` as decoded on ``target`` (None: unchanged); CliError naming --target, the
    targets of the row (`BuiltinSpec.targets`) and the value otherwise."""
    if target is None:
        return spec
    if target not in spec.targets:
        one = "its only target is" if len(spec.targets) == 1 else "its targets are"
        hint = (f"; `jwmma list --target {target}` lists the builtins that run on {target}"
                if target in all_targets() else "")
        raise CliError(f"--target {target!r} is not a target of {spec.name}: {one} "
                       f"{', '.join(spec.targets)} (omit --target for {spec.target}){hint}")
    return lookup(spec.name, target)


def all_targets() -> list[str]:
    """Every chip some row of the table runs on, in table order."""
    return list(dict.fromkeys(t for s in BUILTINS.values() for t in s.targets))


def add_target_arg(p, what: str = "the builtin") -> None:
    """Register ``--target CHIP`` on an argparse parser (validated against each row's targets
    by `check_target`, so that a wrong value names the row's own targets)."""
    p.add_argument("--target", metavar="CHIP", default=None,
                   help=f"the chip {what} runs on, for builtins with several: the CDNA3 SMFMAC run on "
                   "gfx942 (default: FNUZ fp8/bf8) or gfx950 (OCP fp8/bf8); any other builtin takes only "
                   "its own (jwmma list shows them)")


def many(values, default) -> list[str]:
    """A repeatable, comma-separated option -> one list (``default`` when not given)."""
    if not values:
        return list(default)
    out = []
    for v in values:
        out.extend(split_list(v))
    return out


def models_of(values) -> list:
    """Model options (repeatable, comma-separated) -> preset names and model objects."""
    return [parse_model(x) for x in many(values, ())]
