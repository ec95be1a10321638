"""``python -m jwmma ...``: the ``jwmma`` command line."""
import sys

from .cli import main

sys.exit(main())
