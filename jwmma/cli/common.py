"""What the command modules share: the user-error exception and lookups that raise it."""
from __future__ import annotations

from ..isa.table import BuiltinSpec, lookup
from ..models.parse import parse_model, split_list

__all__ = ["CliError", "spec_of", "models_of", "many"]


class CliError(Exception):
    """A user error: printed as ``jwmma: error: ...`` with exit code 2."""


def spec_of(name: str) -> BuiltinSpec:
    """The table row of a builtin named on the command line (CliError if unknown)."""
    try:
        return lookup(name)
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None


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
