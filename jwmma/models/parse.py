"""Models as text: ``parse_model`` reads what the command line and the builtins accept
('cdna3', 'FusedGroups(group=32, product_rounding="nearest")'), ``model_label`` writes the
stable text of a model back (the two are inverses), ``split_list`` splits a comma-separated
list of them.
"""
from __future__ import annotations

import ast
import dataclasses

from .exact import CDNA1, Exact
from .fma_chain import FMAChain
from .fused import CDNA3, FusedGroups
from .fused_dot_add import FusedDotAdd
from .gfx11 import Gfx11Dot2
from .gfx12 import Gfx12Dot4
from .integer import IntegerDot
from .nvidia import NvidiaTensorCore
from .pairwise import CDNA2, PairwiseTree
from .scaled import BlockScaled

__all__ = ["MODEL_CLASSES", "parse_model", "model_label", "split_list"]

#: the model classes a model text may construct
MODEL_CLASSES = {c.__name__: c for c in (Exact, CDNA1, FMAChain, FusedGroups, CDNA3, PairwiseTree, CDNA2, Gfx11Dot2,
                                               Gfx12Dot4, IntegerDot, FusedDotAdd, NvidiaTensorCore, BlockScaled)}


def parse_model(text: str):
    """A model from text.

    Args:
        text: a preset name ('cdna3'), returned as it is, or a class of `MODEL_CLASSES`
            called with literal keyword arguments, e.g. 'FusedGroups(group=32)'.
    Returns:
        The name (str) or the model object; ValueError for anything else (no code runs).
    """
    text = text.strip()
    if "(" not in text:
        return text
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError:
        raise ValueError(f"cannot parse model {text!r}") from None
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in MODEL_CLASSES):
        raise ValueError(f"model {text!r}: expected a preset name or one of {', '.join(sorted(MODEL_CLASSES))}(...)")
    if node.args or any(kw.arg is None for kw in node.keywords):
        raise ValueError(f"model {text!r}: give the fields as keywords, e.g. FusedGroups(group=32)")
    seen = [kw.arg for kw in node.keywords]
    twice = sorted({k for k in seen if seen.count(k) > 1})
    if twice:  # ast keeps both; a dict would silently keep the last
        raise ValueError(f"model {text!r}: field {twice[0]!r} is given twice")
    try:
        kwargs = {kw.arg: ast.literal_eval(kw.value) for kw in node.keywords}
    except ValueError:
        raise ValueError(f"model {text!r}: field values must be literals") from None
    cls = MODEL_CLASSES[node.func.id]
    fields = [f.name for f in dataclasses.fields(cls)] if dataclasses.is_dataclass(cls) else []
    unknown = [k for k in kwargs if fields and k not in fields]
    if unknown:
        raise ValueError(f"model {text!r}: {cls.__name__} has no field {unknown[0]!r}; its fields: {', '.join(fields)}")
    try:
        return cls(**kwargs)
    except (TypeError, ValueError) as e:
        raise ValueError(f"model {text!r}: {e}") from None


def model_label(model) -> str:
    """Stable text for a model: the preset name, or ClassName(non-default fields).

    Args:
        model: a preset name or a model object.
    Returns:
        Text that `parse_model` turns back into an equal model.
    """
    if isinstance(model, str):
        return model
    if dataclasses.is_dataclass(model):
        parts = []
        for f in dataclasses.fields(model):
            v = getattr(model, f.name)
            if f.default is not dataclasses.MISSING and v == f.default:
                continue
            parts.append(f"{f.name}={v!r}")
        return f"{type(model).__name__}({', '.join(parts)})"
    return repr(model)


def split_list(text) -> list[str]:
    """'a,b(x=1,y=2),c' -> ['a', 'b(x=1,y=2)', 'c'] (commas inside parentheses kept).

    Args:
        text: a comma-separated list.
    Returns:
        The stripped, non-empty items.
    """
    out, depth, cur = [], 0, ""
    for ch in str(text):
        if ch == "," and depth == 0:
            out.append(cur)
            cur = ""
            continue
        depth += (ch == "(") - (ch == ")")
        cur += ch
    out.append(cur)
    return [x.strip() for x in out if x.strip()]
