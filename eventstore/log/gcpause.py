"""Building a large result with Python's cyclic garbage collector paused.

Parsing a long session makes hundreds of thousands of dicts and lists, none of them in a
reference cycle; the collector still walks them over and over while they are made (each
older generation's pass takes longer as the result grows), which made a read's cost per
event grow with the session. :func:`paused` turns the collector off while such a result is
built and back on after, so the cost per event stays flat. It nests and is shared by threads
(the collector is one per process): the last one out turns it back on, and only when it was
on before the first one came in.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_depth = 0
_resume = False  # whether the collector was on when the outermost pause began


@contextmanager
def paused() -> Iterator[None]:
    """Turn the cyclic collector off for the ``with`` block (nothing it builds may be garbage
    in a cycle: what cycles it leaves are collected on the next pass after it)."""
    global _depth, _resume
    with _lock:
        if _depth == 0:
            _resume = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _resume:
                gc.enable()
