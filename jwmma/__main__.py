"""``python -m jwmma ...``: the ``jwmma`` command line."""
import sys

from .cli import entry

sys.exit(entry())
