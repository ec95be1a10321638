"""Which hypothesis profile the edge suite runs under (set by conftest.py before the test
modules are imported): WIDE is True for ``--hypothesis-profile=slow``, which also widens the
builtins, shapes and models the property tests draw from.

NO_EMPTY (environment JWMMA_EDGES_NO_EMPTY=1) leaves the zero-size shapes out of the property
draws: a diagnostic for fixing one class of defect at a time (zero-size operands fail
nearly every property until item 5 is fixed and would hide the rest). Never set it in CI."""
import os

WIDE = False
NO_EMPTY = os.environ.get("JWMMA_EDGES_NO_EMPTY") == "1"


def sizes(options):
    """``options`` (shapes, or ints used as dimensions) without the zero-size ones when
    NO_EMPTY is set."""
    if not NO_EMPTY:
        return list(options)
    def empty(o):
        return o == 0 if isinstance(o, int) else 0 in tuple(o)
    return [o for o in options if not empty(o)]
