"""Operations whose input fields do not map one-to-one onto the facade's arguments.

Each takes the facade, the caller and the validated input values (field -> value); the parsing of
a duration for purge lives here; a lesson's TTL string is parsed by the service (``make_write``).
"""

from __future__ import annotations

from typing import Any


def write(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return svc.write(p, values.pop("scope"), values.pop("key"), values.pop("value"), **values)


def supersede(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    old_scope, old_key = values.pop("old_scope", None), values.pop("old_key", None)
    target = (old_scope, old_key) if old_scope and old_key else None
    return svc.supersede(p, values.pop("scope"), values.pop("key"), values.pop("value"), supersedes=target, **values)


def purge(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    from cairn.core.timeparse import parse_duration

    raw = values.get("older_than")
    older = parse_duration(raw, code="INVALID_INPUT") if raw else None
    sweep = values["sweep"]
    return svc.purge(p, expired=sweep == "expired", archived=sweep == "archived", older_than=older)


def audit_verify(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return svc.audit_verify(p, full=not values.get("fast", False))


def export(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return svc.export(p, active_only=values.get("active", False), scope=values.get("scope"))


def webhook_rotate(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    from datetime import timedelta

    from cairn.core.timeparse import parse_duration

    raw = values.get("grace")
    grace = None
    if raw is not None:
        grace = timedelta(0) if str(raw).strip() in ("0", "0s") else parse_duration(raw, code="INVALID_INPUT")
    return svc.webhook_rotate(p, values["repo"], org=values.get("org"), grace=grace)


def _plain(value: Any) -> Any:
    """A model the sync service answers with, as the JSON data every surface sends."""
    dump = getattr(value, "model_dump", None)
    return dump(mode="json") if dump is not None else value


def sync_store_id(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return {"store_id": svc.sync_store_id(p)}


def sync_feed(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return _plain(svc.sync_feed(p, **values))


def sync_apply(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    from cairn.core.sync import SyncBatch

    return _plain(svc.sync_apply(p, SyncBatch(**values)))


def sync_peer_state(svc: Any, p: Any, values: dict[str, Any]) -> Any:
    return _plain(svc.sync_peer_state(p, values["store_id"]))
