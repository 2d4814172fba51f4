"""A remote client applies the service's argument rules itself where it must (it names the purge
sweep it sends), from the same definition: it refuses alike, with the same code and message, and
before any request (the server it points at does not exist)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest

from cairn.errors import CairnError
from cairn.runtime.remote import RemoteCairn
from cairn.service.api import Cairn

CASES: list[dict[str, Any]] = [
    {},  # neither sweep
    {"expired": True, "archived": True},  # both
    {"expired": True, "older_than": timedelta(days=30)},  # a retention for the sweep that has none
]


def _refusal(fn: Any, **kwargs: Any) -> tuple[str, str]:
    with pytest.raises(CairnError) as info:
        fn(None, **kwargs)
    return info.value.code, info.value.message


@pytest.mark.parametrize("kwargs", CASES, ids=["neither", "both", "older-than-on-expired"])
def test_remote_purge_refuses_as_the_service_does(svc: Cairn, me: Any, kwargs: dict[str, Any]) -> None:
    remote = RemoteCairn("http://127.0.0.1:9", "cairn_not-a-real-token")  # port 9: nothing listens
    local_code, local_message = _refusal(lambda _p, **kw: svc.purge(me, **kw), **kwargs)
    assert _refusal(remote.purge, **kwargs) == (local_code, local_message)
    assert local_code == "INVALID_INPUT"
