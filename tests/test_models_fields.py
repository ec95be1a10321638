"""Every field of every model class refuses a value of the wrong type, naming the class and the
field, the expectation and the value; valid values (defaults, the presets' values, None where
the field is optional, numpy scalars of the right kind) construct.

The classes are found by walking ``jwmma.models`` (every dataclass deriving `Model`, and the
`Context` models are given), so a new model is covered without editing this file. What a
field takes is read from its annotation (``int | None``, ``bool``, ``str``...), not from the
rules the package declares.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import pkgutil
import re
import types
import typing

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import jwmma.models
from jwmma.models import PRESETS, model_label, parse_model
from jwmma.models.base import Context, Model
from jwmma.numerics.formats import BF16, F16, F32, FP8, FloatFormat


def _classes():
    found = {}
    for info in pkgutil.iter_modules(jwmma.models.__path__, "jwmma.models."):
        mod = importlib.import_module(info.name)
        for _, obj in inspect.getmembers(mod, inspect.isclass):
            if dataclasses.is_dataclass(obj) and obj.__module__ == mod.__name__ and (
                    issubclass(obj, Model) or obj is Context):
                found[obj.__name__] = obj
    return [found[k] for k in sorted(found)]


CLASSES = _classes()
FIELDS = [(cls, f.name) for cls in CLASSES for f in dataclasses.fields(cls)]


def test_the_walk_finds_the_models():
    names = {c.__name__ for c in CLASSES}
    assert {"Exact", "FMAChain", "FusedGroups", "CDNA3", "Gfx12Dot4", "IntegerDot", "FusedDotAdd",
            "NvidiaTensorCore", "Context"} <= names, names
    for _, float_model, int_model, in ((k, *v[:2]) for k, v in PRESETS.items()):
        for m in (float_model, int_model):
            assert m is None or type(m) in CLASSES, type(m)


def _kind(cls, name):
    """(base type, optional) of a field from its annotation."""
    hint = typing.get_type_hints(cls)[name]
    args = typing.get_args(hint) if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union \
        else (hint,)
    optional = type(None) in args
    base = [a for a in args if a is not type(None)]
    assert len(base) == 1, (cls, name, hint)
    return typing.get_origin(base[0]) or base[0], optional


def _minimal(cls):
    """Keyword arguments that make ``cls`` (fields without a default get valid values)."""
    return {"a": F16, "b": F16, "c": F32} if cls is Context else {}


def _valid_values(cls, name):
    """Values a field certainly takes: its default, what the presets hold, None where optional,
    True/False for bools."""
    f = next(f for f in dataclasses.fields(cls) if f.name == name)
    base, optional = _kind(cls, name)
    out = []
    if f.default is not dataclasses.MISSING:
        out.append(f.default)
    for float_model, int_model, _ in PRESETS.values():
        for m in (float_model, int_model):
            if type(m) is cls:
                out.append(getattr(m, name))
    if optional:
        out.append(None)
    if base is bool:
        out += [True, False]
    if cls is Context and base is FloatFormat:
        out += [F16, BF16, FP8, F32]
    if cls is Context and name == "arch":
        out += ["gfx12", "gfx950"]
    if cls is Context and name == "chain_order":
        out += [(0, 1, 2, 3), ()]
    return list(dict.fromkeys(out))


def _wrong_values(base, optional):
    """Values of another type than the annotation says (never valid for the field)."""
    anything = [st.lists(st.integers(), max_size=2), st.dictionaries(st.text(max_size=2), st.integers(), max_size=1),
                st.binary(max_size=3), st.just(object())]
    if not optional:
        anything.append(st.none())
    if base is bool:  # 0/1 and 'no' are not bools
        anything += [st.integers(), st.text(max_size=5), st.floats(allow_nan=False)]
    elif base is int:  # a bool, 2.0 or '8' is not an int
        anything += [st.booleans(), st.floats(), st.text(max_size=5), st.just(np.float32(2.0))]
    elif base is str:
        anything += [st.integers(), st.booleans(), st.floats(allow_nan=False)]
    elif base is tuple:
        anything += [st.lists(st.integers(0, 3), min_size=1, max_size=4), st.text(min_size=1, max_size=4),
                     st.integers(), st.tuples(st.one_of(st.floats(), st.text(max_size=2), st.booleans()))]
    else:  # a nested value (a number format)
        anything += [st.integers(), st.text(max_size=5), st.booleans()]
    return st.one_of(anything)


@pytest.mark.parametrize("cls,name", FIELDS, ids=[f"{c.__name__}.{n}" for c, n in FIELDS])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_wrong_type_names_the_field(cls, name, data):
    base, optional = _kind(cls, name)
    value = data.draw(_wrong_values(base, optional), label=name)
    with pytest.raises((TypeError, ValueError)) as err:
        cls(**{**_minimal(cls), name: value})
    text = str(err.value)
    if isinstance(value, tuple):  # a tuple of the wrong items: the message names the item
        assert re.search(rf"{cls.__name__}\.{name}\[0\] must be", text), text
        assert repr(value[0]) in text, text
        return
    assert f"{cls.__name__}.{name} must be" in text, text
    assert repr(value) in text, text
    if cls in jwmma.models.parse.MODEL_CLASSES.values() and _literal(value):
        with pytest.raises(ValueError, match=re.escape(f"{cls.__name__}.{name} must be")):
            parse_model(f"{cls.__name__}({name}={value!r})")


def _literal(value):
    """Whether a model text can spell ``value`` (object(), NaN, Inf and numpy scalars cannot)."""
    try:
        return ast.literal_eval(repr(value)) == value
    except (ValueError, SyntaxError):
        return False


@pytest.mark.parametrize("cls,name", [(c, n) for c, n in FIELDS if _kind(c, n)[0] is str],
                         ids=[f"{c.__name__}.{n}" for c, n in FIELDS if _kind(c, n)[0] is str])
@settings(max_examples=25, deadline=None)
@given(word=st.text(max_size=6))
def test_unknown_choice_names_the_field(cls, name, word):
    if cls is Context:  # Context.arch is a free label
        return
    value = f"{word}?"  # no choice of any model holds '?'
    with pytest.raises(ValueError) as err:
        cls(**{**_minimal(cls), name: value})
    text = str(err.value)
    assert f"{cls.__name__}.{name} must be one of" in text and repr(value) in text, text
    default = next(f.default for f in dataclasses.fields(cls) if f.name == name)
    assert repr(default) in text, text  # the choices are listed


def _valid_models():
    strategies = []
    for cls in CLASSES:
        per_field = {f.name: st.sampled_from(_valid_values(cls, f.name)) for f in dataclasses.fields(cls)}
        strategies.append(st.fixed_dictionaries(per_field).map(lambda kw, cls=cls: (cls, kw)))
    return st.one_of(strategies)


def _as_numpy(v):
    if isinstance(v, bool):
        return np.bool_(v)
    if isinstance(v, int):
        return np.int64(v)
    return v


@settings(max_examples=200, deadline=None)
@given(case=_valid_models())
def test_valid_values_construct(case):
    cls, kw = case
    m = cls(**kw)
    for k, v in kw.items():
        assert getattr(m, k) == v and type(getattr(m, k)) is type(v), (k, v)
    # numpy scalars of the right kind are stored as the Python values: same model, same text
    n = cls(**{k: _as_numpy(v) for k, v in kw.items()})
    assert n == m and hash(n) == hash(m)
    for k in kw:
        assert type(getattr(n, k)) is type(getattr(m, k)), k
    if issubclass(cls, Model):
        assert model_label(n) == model_label(m)
        if cls in jwmma.models.parse.MODEL_CLASSES.values():
            assert parse_model(model_label(m)) == m


def test_every_preset_constructs_again_from_its_fields():
    for name, (float_model, int_model, _) in PRESETS.items():
        for m in (float_model, int_model):
            if m is None:
                continue
            again = type(m)(**{f.name: getattr(m, f.name) for f in dataclasses.fields(m)})
            assert again == m, name
            assert parse_model(model_label(m)) == m or model_label(m) == name


def test_issue_examples():
    for make, field in ((lambda: jwmma.models.CDNA3(two_stage="no"), "CDNA3.two_stage"),
                        (lambda: jwmma.models.FusedGroups(product_rounding=None), "FusedGroups.product_rounding"),
                        (lambda: jwmma.models.Gfx12Dot4(step=2.5), "Gfx12Dot4.step")):
        with pytest.raises(TypeError, match=re.escape(field)):
            make()
    with pytest.raises(ValueError, match=r"CDNA3\.two_stage must be True, False or None, got 'no'"):
        parse_model("CDNA3(two_stage='no')")
    with pytest.raises(ValueError, match=r"Gfx12Dot4\.step must be an int in \[1, 64\], got 2\.0.*use 2"):
        parse_model("Gfx12Dot4(step=2.0)")


def test_parse_refuses_repeated_and_starred_fields():
    with pytest.raises(ValueError, match="'group' is given twice"):
        parse_model("CDNA3(group=8, group=16)")
    with pytest.raises(ValueError, match="keywords"):
        parse_model("CDNA3(**{'group': 8})")


def test_cross_field_rules_still_apply():
    with pytest.raises(ValueError, match=r"sum_bits.*frac_bits=30"):
        jwmma.models.FusedGroups(frac_bits=30, sum_bits=24)
    with pytest.raises(ValueError, match="overflows"):
        jwmma.models.FusedDotAdd(group=2**20, frac_bits=40)


def test_a_model_field_without_a_rule_is_refused():
    @dataclasses.dataclass(frozen=True)
    class Sloppy(Model):
        width: int = 3

    with pytest.raises(TypeError, match="Sloppy declares no FIELDS rule for width"):
        Sloppy()


@pytest.mark.parametrize("cls,bad,meant", [("CDNA3", "grup", "group"), ("Exact", "grp", None),
                                           ("Gfx12Dot4", "stepp", "step")])
def test_unknown_keyword_names_the_field_and_the_fields(cls, bad, meant):
    """A misspelt field gets the model's own error (class, the field, every valid field and
    the closest), not Python's bare "unexpected keyword argument"."""
    import dataclasses

    model_cls = getattr(jwmma.models, cls)
    with pytest.raises(TypeError) as e:
        model_cls(**{bad: 8})
    text = str(e.value)
    assert f"{cls} has no field {bad!r}" in text
    for f in dataclasses.fields(model_cls):
        assert f.name in text
    if meant:
        assert f"did you mean {meant!r}" in text
