"""Calls with a keyword the function does not take: a TypeError that names every unknown
keyword, suggests the parameter meant where one is close (``A`` -> ``a``) and lists the
function's parameters, raised before anything else is looked at. (Binding a builtin's
generated signature first reports the *missing* HIP arguments, so
``smfmac_f32_16x16x64_f16(A=..., B=..., C=..., idx=...)`` used to say "missing a required
argument: 'a'"; Python's own message names one unknown keyword and no parameters.)

No dependencies: every layer of the package uses it (the public functions are decorated
with `strict_keywords` where they are defined; the builtins call `check_keywords`).
"""
from __future__ import annotations

import difflib
import functools
import inspect

__all__ = ["strict_keywords", "forwarding_keywords", "check_keywords", "plain_signature"]


def plain_signature(sig: inspect.Signature) -> inspect.Signature:
    """``sig`` without annotations: ``(name, a_comp, *, check=False, target=None)``."""
    return sig.replace(parameters=[p.replace(annotation=inspect.Parameter.empty) for p in sig.parameters.values()],
                       return_annotation=inspect.Signature.empty)


def _keyword_names(sig: inspect.Signature):
    """The names a call may give as keywords, or None when the function takes ``**kwargs``."""
    if any(p.kind is p.VAR_KEYWORD for p in sig.parameters.values()):
        return None
    return tuple(n for n, p in sig.parameters.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY))


def _suggestion(word: str, names) -> str | None:
    same_case = [n for n in names if n.lower() == word.lower()]
    if same_case:
        return same_case[0]
    close = difflib.get_close_matches(word, names, n=1, cutoff=0.7)
    return close[0] if close else None


def check_keywords(name: str, sig: inspect.Signature, kwargs, accepted=None) -> None:
    """Raise TypeError if ``kwargs`` holds a keyword that ``sig`` does not accept.

    Args:
        name: the function's name for the message; sig: its signature; kwargs: the call's
            keyword arguments (a mapping or the names); accepted: the keyword names (None:
            read from ``sig``).
    Returns:
        None; TypeError naming each unknown keyword (with the parameter probably meant) and
        the signature.
    """
    if accepted is None:
        accepted = _keyword_names(sig)
        if accepted is None:
            return
    unknown = [k for k in kwargs if k not in accepted]
    if not unknown:
        return
    parts = []
    for k in unknown:
        meant = _suggestion(k, accepted)
        parts.append(f"{k!r} (did you mean {meant!r}?)" if meant else repr(k))
    s = "s" if len(unknown) > 1 else ""
    raise TypeError(f"{name}() got unexpected keyword argument{s} {', '.join(parts)}; "
                    f"its parameters: {name}{plain_signature(sig)}")


def strict_keywords(fn, sig: inspect.Signature | None = None):
    """``fn`` with unknown keywords reported by `check_keywords` (a function taking
    ``**kwargs`` is returned as it is, unless ``sig`` says what they may be).

    Args:
        fn: a function; sig: the signature to check against (None: ``fn``'s own).
    Returns:
        A wrapper with ``fn``'s name and doc and the signature checked against.
    """
    sig = inspect.signature(fn) if sig is None else sig
    accepted = _keyword_names(sig)
    if accepted is None:
        return fn
    accepted_set = frozenset(accepted)

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        if kwargs and not accepted_set.issuperset(kwargs):
            check_keywords(fn.__name__, sig, kwargs, accepted)
        return fn(*args, **kwargs)

    wrapper.__signature__ = sig
    return wrapper


def forwarding_keywords(target, passed=()):
    """A decorator for a function whose ``**kwargs`` go on to ``target``: its unknown
    keywords are checked against its own parameters plus ``target``'s keyword-only ones (less
    ``passed``, which it sets itself), and that is its signature.

    Args:
        target: the function the keywords go to; passed: keywords of ``target`` that the
            decorated function gives itself.
    Returns:
        The decorator.
    """
    def decorate(fn):
        own = inspect.signature(fn)
        params = [p for p in own.parameters.values() if p.kind is not p.VAR_KEYWORD]
        taken = {p.name for p in params} | set(passed)
        extra = [p for p in inspect.signature(target).parameters.values()
                 if p.kind is p.KEYWORD_ONLY and p.name not in taken]
        return strict_keywords(fn, own.replace(parameters=params + extra))

    return decorate
