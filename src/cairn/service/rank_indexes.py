"""The ranking indexes a process keeps, one per recently served tenant.

Apart from ``service/rank_index.py`` because that module holds the numpy arrays: every ``Cairn``
holds this container, and a command that never ranks (``cairn write``, ``read``, ``list``,
full-text search) should not import numpy to build it. The index itself is created, and numpy
imported, on a tenant's first ``get``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path

    from cairn.service.rank_index import RankIndex


def max_rank_indexes() -> int:
    """How many tenants' indexes a process keeps (``CAIRN_RANK_INDEXES``, default 64)."""
    raw = os.environ.get("CAIRN_RANK_INDEXES", "").strip()
    return max(1, int(raw)) if raw.isdigit() else 64


class RankIndexes:
    """The ranking indexes of the most recently served tenants, shared by context and search.

    A server answers many tenants; each index holds every active lesson's features (~100 bytes a
    lesson plus its vector codes), so they are bounded in number (``max_rank_indexes``), least
    recently used first out. An evicted tenant's next use reloads its index from the store and is as
    correct as before.
    """

    def __init__(self, persist: Path | None = None) -> None:
        self.cache: OrderedDict[str, RankIndex] = OrderedDict()
        self.persist = persist  # where indexes are kept between processes (``rank_cache.cache_dir``)
        self._lock = threading.Lock()

    def get(self, tenant_id: str) -> RankIndex:
        """The tenant's index (made empty on first use; ``RankIndex.refresh`` loads it)."""
        from cairn.service.rank_index import RankIndex

        with self._lock:
            idx = self.cache.get(tenant_id)
            if idx is None:
                idx = self.cache[tenant_id] = RankIndex(tenant_id, persist=self.persist)
            self.cache.move_to_end(tenant_id)
            while len(self.cache) > max_rank_indexes():
                self.cache.popitem(last=False)
        return idx
