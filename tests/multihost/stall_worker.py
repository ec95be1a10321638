"""``python -m stall_worker STALL_ID <jwmma arguments>``: the jwmma command line, except that
the worker started with ``--process-id STALL_ID`` hangs for good right after it has recorded
its first finished point.

Why: a test that kills a worker "mid-sweep" must know the worker cannot finish its share
between writing its first point and the kill (on a loaded 2-core CI runner the remaining
points of a small sweep take milliseconds, so a polled kill sometimes came too late and
the peer counted as finished). Hanging at a known place makes the kill deterministic; only
the test's worker is patched, jwmma itself has no test hook.
"""
import sys
import time

from jwmma.cli import main
from jwmma.study import store

stall_id, args = sys.argv[1], sys.argv[2:]
ids = [args[i + 1] for i, a in enumerate(args[:-1]) if a == "--process-id"]
if ids == [stall_id]:
    _add = store.PointStore.add

    def add_then_hang(self, rows):
        _add(self, rows)
        if self.added:  # the first point is on disk (fsync'ed): now wait for SIGKILL
            sys.stdout.flush()
            time.sleep(3600)

    store.PointStore.add = add_then_hang
sys.exit(main(args))
