"""Small helpers shared by the edge tests (how to call things; no arithmetic, no references).

Public jwmma API only: top-level names of API.md, ``jwmma.kernel.*``, ``jwmma.models``,
``jwmma.study`` and ``jwmma.cli.main``.
"""
from __future__ import annotations

import contextlib
import io
import re
import traceback

import jax
import pytest

import jwmma

#: how a clean CLI refusal starts: ours ("jwmma: error:") or argparse's ("jwmma gemm: error:")
CLI_ERROR = re.compile(r"^jwmma(?: \w+)?: error: ", re.M)


def call_builtin(name, a, b, c, idx, *, a_signed=True, b_signed=True, clamp=False, cbsz=None, abid=None, **kw):
    """Call builtin ``name`` with its HIP argument order."""
    fn = getattr(jwmma, name)
    spec = jwmma.BUILTINS[name]
    if spec.arch == "gfx950":
        extra = () if cbsz is None else (cbsz, 0 if abid is None else abid)
        return fn(a, b, c, idx, *extra, **kw)
    if spec.a_type in ("iu8", "iu4"):
        return fn(a_signed, a, b_signed, b, c, idx, clamp, **kw)
    return fn(a, b, c, idx, **kw)


def run_cli(argv):
    """Run ``jwmma argv`` in-process: (exit code, stdout, stderr, uncaught exception or None).
    argparse's own refusals (SystemExit(2)) count as exit code 2."""
    from jwmma import cli

    out, err = io.StringIO(), io.StringIO()
    exc = None
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            rc = cli.main(list(argv))
        except SystemExit as e:  # argparse
            rc = e.code if isinstance(e.code, int) else 2
        except Exception as e:  # noqa: BLE001 - a traceback is exactly what we look for
            exc = e
            rc = None
            traceback.print_exc(file=err)
    return rc, out.getvalue(), err.getvalue(), exc


def assert_clean_cli_error(argv, option, *more):
    """``jwmma argv`` must refuse with exit code 2, a ``jwmma...: error:`` line naming
    ``option`` (and the strings in ``more``), and no traceback."""
    rc, out, err, exc = run_cli(argv)
    assert exc is None, f"jwmma {' '.join(argv)} raised {type(exc).__name__}: {exc}\n{err[-2000:]}"
    assert "Traceback" not in err, err[-2000:]
    assert rc == 2, f"exit code {rc}; stderr: {err[-1500:]}; stdout: {out[-500:]}"
    m = CLI_ERROR.search(err)
    assert m, f"no 'jwmma: error:' line in stderr: {err[-1500:]}"
    line = err[m.start():].splitlines()[0]
    assert option in line, f"the error does not name {option}: {line!r}"
    for s in more:
        assert s in line, f"the error does not mention {s!r}: {line!r}"
    return line


def assert_jit_reports(fn, args, pattern, *, forbid=()):
    """A failed jwmma check inside jit (DECISIONS.md, "checks inside jit"):

    1. a user's plain ``jax.jit``: the computation must fail when it runs and the exception text
       must carry jwmma's own message (``pattern``), not an internal variable name (``forbid``).
       JAX cannot raise a Python ValueError out of a running compiled computation, so the
       JaxRuntimeError that wraps a host-callback failure is accepted here;
    2. ``jwmma.checked(fn)`` (the proposed API: ``fn`` jit-compiled with jwmma's checks
       functionalised through ``jax.experimental.checkify``) must raise a ValueError carrying
       that message.
    """
    with pytest.raises(Exception) as info:
        jax.block_until_ready(jax.jit(fn)(*args))
    text = str(info.value)
    assert re.search(pattern, text), f"jwmma's message /{pattern}/ not in: {text[-1500:]}"
    for word in forbid:
        assert not re.search(word, text), f"the message names {word!r}: {text[-1500:]}"
    assert hasattr(jwmma, "checked"), "jwmma.checked(fn) (checks inside jit surface as ValueError) is missing"
    with pytest.raises(ValueError, match=pattern) as info:
        jax.block_until_ready(jwmma.checked(fn)(*args))
    for word in forbid:
        assert not re.search(word, str(info.value)), str(info.value)
