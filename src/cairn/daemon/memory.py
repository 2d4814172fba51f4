"""Hand freed heap back to the system after the daemon's big one-off work.

The daemon's first start on a store can migrate it and build the ranking index from every row: hundreds
of MB of short-lived arrays and rows. glibc's malloc keeps freed chunks in its arenas (one per thread
that allocated) and returns only the top of each heap, so without a trim the process stays at that peak
for its whole life although Python and numpy freed it. ``malloc_trim(0)`` returns every whole free page
of every arena; it takes milliseconds, so it runs after the warm-up and after background rounds that
did work, never per request.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools

__all__ = ["trim_heap"]


@functools.cache
def _malloc_trim() -> object | None:
    """glibc's ``malloc_trim``, or None (musl, macOS, Windows: nothing to do there)."""
    name = ctypes.util.find_library("c")
    if not name:
        return None
    try:
        fn = ctypes.CDLL(name).malloc_trim
    except (OSError, AttributeError):
        return None
    fn.argtypes = [ctypes.c_size_t]
    fn.restype = ctypes.c_int
    return fn


def trim_heap() -> bool:
    """Return free heap pages to the system where the C library can; True when it released some."""
    fn = _malloc_trim()
    return bool(fn(0)) if fn is not None else False
