"""Declared constraints on the fields of the models (and their `Context`), checked once when
a model is made: a wrong type or value raises at construction, naming the class, the field,
what it takes and what it got, instead of surfacing later as a wrong bit, a trace error or a
model text that does not read back.

A model class declares one rule per dataclass field: with the field itself (`declare`: type,
rule and default on one line; a field several classes share is a function that returns its
declaration) or in its ``FIELDS`` mapping. `check_fields` (called by
`jwmma.models.base.Model.__post_init__`) applies them and refuses a field that has no rule, so
a new field cannot go unchecked. Cross-field rules (``sum_bits >= frac_bits``) stay in the
model's own ``__post_init__``, after these.

Types are exact: a bool field takes True/False (numpy bools too), not 0/1 or 'no'; an int
field takes an int (numpy integers too), not a bool, not 2.0. numpy scalars are stored as
the Python value they equal, so a model's text (`jwmma.models.model_label`) and hash are
those of the same model made from Python values.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

__all__ = ["Bool", "Int", "Choice", "Text", "Instance", "TupleOf", "declare", "check_fields"]

#: the key of a field's rule in its dataclass metadata (`declare`)
_RULE = "jwmma.models.rule"


def _got(value) -> str:
    return f"got {value!r} ({type(value).__name__})"


@dataclass(frozen=True, kw_only=True)
class Rule:
    """One field's constraint: ``check(value, where)`` returns the value to store (numpy
    scalars as Python values) or raises TypeError (wrong type) / ValueError (wrong value)."""

    optional: bool = False  # None is allowed (the model then chooses per formats)

    def expects(self) -> str:
        raise NotImplementedError

    def _none(self) -> str:
        return " or None" if self.optional else ""

    def check(self, value, where: str):
        if value is None:
            if self.optional:
                return None
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}")
        return self.convert(value, where)

    def convert(self, value, where: str):
        raise NotImplementedError


@dataclass(frozen=True, kw_only=True)
class Bool(Rule):
    def expects(self) -> str:
        return "True, False or None" if self.optional else "True or False"

    def convert(self, value, where):
        if isinstance(value, (bool, np.bool_)):
            return bool(value)
        hint = ""
        if isinstance(value, (int, np.integer)) and int(value) in (0, 1):
            hint = f"; use {bool(value)}"
        elif isinstance(value, str) and value.lower() in ("true", "false", "yes", "no", "on", "off"):
            hint = f"; use {value.lower() in ('true', 'yes', 'on')} (a bool, not text)"
        raise TypeError(f"{where} must be {self.expects()}, {_got(value)}{hint}")


@dataclass(frozen=True, kw_only=True)
class Int(Rule):
    lo: int | None = None
    hi: int | None = None

    def expects(self) -> str:
        if self.lo is not None and self.hi is not None:
            rng = f" in [{self.lo}, {self.hi}]"
        elif self.lo is not None:
            rng = f" >= {self.lo}"
        elif self.hi is not None:
            rng = f" <= {self.hi}"
        else:
            rng = ""
        return f"an int{rng}{self._none()}"

    def convert(self, value, where):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            hint = ""
            if isinstance(value, (float, np.floating)) and float(value).is_integer():
                hint = f"; use {int(value)}"
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}{hint}")
        v = int(value)
        if (self.lo is not None and v < self.lo) or (self.hi is not None and v > self.hi):
            raise ValueError(f"{where} must be {self.expects()}, got {v}")
        return v


@dataclass(frozen=True, kw_only=True)
class Choice(Rule):
    values: tuple = ()

    def expects(self) -> str:
        return f"one of {', '.join(map(repr, self.values))}{self._none()}"

    def convert(self, value, where):
        if not isinstance(value, str):
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}")
        if value not in self.values:
            raise ValueError(f"{where} must be {self.expects()}, got {value!r}")
        return str(value)


@dataclass(frozen=True, kw_only=True)
class Text(Rule):
    """Any str (free-form labels such as an architecture name)."""

    def expects(self) -> str:
        return f"a str{self._none()}"

    def convert(self, value, where):
        if not isinstance(value, str):
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}")
        return str(value)


@dataclass(frozen=True, kw_only=True)
class Instance(Rule):
    """An instance of ``cls`` (a nested value such as a number format)."""

    cls: type = object

    def expects(self) -> str:
        return f"a {self.cls.__module__}.{self.cls.__qualname__}{self._none()}"

    def convert(self, value, where):
        if not isinstance(value, self.cls):
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}")
        return value


@dataclass(frozen=True, kw_only=True)
class TupleOf(Rule):
    """A tuple (a list is refused: fields must stay hashable) whose items follow ``item``."""

    item: Rule = Rule()

    def expects(self) -> str:
        return f"a tuple (each item {self.item.expects()}){self._none()}"

    def convert(self, value, where):
        if not isinstance(value, tuple):
            hint = f"; use tuple({value!r})" if isinstance(value, (list, range, np.ndarray)) else ""
            raise TypeError(f"{where} must be {self.expects()}, {_got(value)}{hint}")
        return tuple(self.item.check(v, f"{where}[{i}]") for i, v in enumerate(value))


def declare(rule: Rule, *, default) -> dataclasses.Field:
    """A model field declared once: the rule `check_fields` applies, with the field's default.

    Args:
        rule: the field's `Rule`; default: its default value (immutable: models are hashable).
    Returns:
        The ``dataclasses.Field`` to assign in the class body, e.g.
        ``frac_bits: int = declare(Int(lo=1, hi=40), default=24)``.
    """
    return dataclasses.field(default=default, metadata={_RULE: rule})


def check_fields(obj) -> None:
    """Check every dataclass field of ``obj`` against its rule and store
    the converted values (numpy scalars -> Python values; frozen dataclasses allowed).

    Args:
        obj: a dataclass instance each of whose fields has a `Rule`: declared with the field
            (`declare`) or in its class's ``FIELDS`` mapping.
    Returns:
        None; TypeError/ValueError naming ``Class.field``, the expected and the actual value.
    """
    cls = type(obj)
    fields = dataclasses.fields(obj)
    rules = {**getattr(cls, "FIELDS", {}), **{f.name: f.metadata[_RULE] for f in fields if _RULE in f.metadata}}
    names = [f.name for f in fields]
    missing = [n for n in names if n not in rules]
    if missing:  # a programming error in jwmma, not a user's: every field declares its rule
        raise TypeError(f"{cls.__name__} declares no FIELDS rule for {', '.join(missing)}")
    for name in names:
        value = getattr(obj, name)
        new = rules[name].check(value, f"{cls.__name__}.{name}")
        if new is not value:
            object.__setattr__(obj, name, new)
