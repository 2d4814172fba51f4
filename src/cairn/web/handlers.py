"""What every router's handler uses: query and form values read with a bound, the page's cursor, the
service call off the event loop, where to go after a POST, and a refusal as a page shows it."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import FormData

from cairn.errors import CairnError

if TYPE_CHECKING:
    from cairn.web.deps import View


async def call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """A service call off the event loop (the service is synchronous)."""
    return await run_in_threadpool(fn, *args, **kwargs)


def next_url(view: View, form: Mapping[str, Any], default: str) -> str:
    """Where to go after a POST: the form's ``next`` if it is a path of this app, else ``default``."""
    raw = form.get("next")
    target = raw if isinstance(raw, str) else ""
    base = view.base + "/"
    if (
        target.startswith(base)
        and not target.startswith("//")
        and not any(c in target for c in "\\\r\n\t")
        and len(target) < 2000
    ):
        return target
    return view.url(default)


def arg(view: View, name: str, limit: int = 300) -> str | None:
    value = view.request.query_params.get(name)
    if value is None:
        return None
    value = value.strip()
    if len(value) > limit:
        raise CairnError("INVALID_INPUT", f"{name} is longer than {limit} characters")
    return value or None


def field_(form: FormData, name: str, limit: int = 2000) -> str:
    value = form.get(name)
    text = value.strip() if isinstance(value, str) else ""
    if len(text) > limit:
        raise CairnError("INVALID_INPUT", f"{name} is longer than {limit} characters")
    return text


def int_arg(raw: str | None, name: str) -> int | None:
    if raw is None or raw == "":
        return None
    if not raw.isdigit() or len(raw) > 18:
        raise CairnError("INVALID_INPUT", f"{name} must be a positive whole number")
    return int(raw)


def cursor_arg(view: View) -> str | None:
    """The page's cursor: opaque, from the previous page's ``next_cursor``, bounded like every argument."""
    return arg(view, "cursor", 600)


def paging(kwargs: dict[str, Any], cursor: str | None) -> dict[str, Any]:
    """Pass ``cursor`` only when the page was asked for one (lists without paging still work)."""
    if cursor:
        kwargs["cursor"] = cursor
    return kwargs


def paged(view: View, kwargs: dict[str, Any]) -> dict[str, Any]:
    """``kwargs`` with the page's cursor, for a list read at once (no other refusal to show first)."""
    return paging(kwargs, cursor_arg(view))


def refusal(exc: CairnError) -> dict[str, str]:
    """A refusal as a page shows it above its (empty) content."""
    return {"code": exc.code, "message": exc.message}
