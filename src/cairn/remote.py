"""A remote Cairn behind its HTTP API, with the service's own method signatures.

``cairn --url URL …`` (or ``CAIRN_URL``) and ``cairn mcp --url`` hand the command tree and the MCP
tools a ``RemoteCairn`` in place of the in-process ``Cairn``: every command calls the same method
with the same arguments and renders the same answer, so a command behaves identically whichever
side of the network the store is on. The server decides everything (tenancy, permissions, limits,
the principal: it is the bearer token's, ``CAIRN_TOKEN``); this class only maps a call to a request
and a problem+json refusal back to the ``CairnError`` with the same code.

Standard library only (``urllib``): hooks call ``context``/``recall`` through here on every
session start, and a remote answer must not first pay for importing an HTTP stack. ``urllib.request``
(~50 ms: http.client, email) loads only when a request is made, never on the local path.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cairn.errors import CODES, CairnError

if TYPE_CHECKING:
    import urllib.error

URL_ENV = "CAIRN_URL"
TIMEOUT = float(os.environ.get("CAIRN_HTTP_TIMEOUT") or 120)
# The API's own page caps (src/cairn/api/app.py): a larger ``limit`` is gathered page by page.
PAGE_CAP = {"lessons": 500, "candidates": 500, "entries": 1000, "tombstones": 1000, "tokens": 1000, "members": 1000}
NOT_REMOTE = (
    "runs where the database is, not over HTTP: run it on the server's host (with its --db URL), "
    "or drop --url / CAIRN_URL"
)


def configured_url(flag: str | None) -> str | None:
    """``--url``, else ``CAIRN_URL``, else None (the local store)."""
    url = (flag or "").strip() or os.environ.get(URL_ENV, "").strip()
    if not url:
        return None
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise CairnError(
            "INVALID_INPUT",
            f"--url must be the server's address, e.g. http://127.0.0.1:8321 (got {url!r})",
            {"corrected": f"http://{url}" if "://" not in url else None},
        )
    return url.rstrip("/")


class Http:
    """One Cairn server and one bearer token; each call is one request."""

    def __init__(self, url: str, token: str | None, session: str | None = None) -> None:
        if not token:
            raise CairnError(
                "UNAUTHENTICATED",
                f"a remote Cairn ({url}) needs a token: export CAIRN_TOKEN=… (create one there: cairn token create)",
            )
        self.url = url
        self.headers = {"Authorization": f"Bearer {token}", "User-Agent": "cairn-cli"}
        if session:
            self.headers["X-Cairn-Session"] = session

    def call(self, method: str, path: str, **request: Any) -> Any:
        """The server's JSON answer (``request``: as for ``open``)."""
        with self.open(method, path, **request) as resp:
            return json.loads(resp.read())

    def open(
        self,
        method: str,
        path: str,
        *,
        query: dict[str, Any] | None = None,
        body: Any = None,
        raw: bytes | None = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> Any:
        """The open response (read it, or iterate its lines); a refusal raises the server's code."""
        import urllib.error
        import urllib.request

        target = self.url + path
        params = [(k, _param(v)) for k, v in (query or {}).items() if v is not None]
        if params:
            target += "?" + urllib.parse.urlencode(params)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {**self.headers, "Accept": accept}
        req = urllib.request.Request(target, data=data, method=method, headers=headers)  # noqa: S310 - http(s) only
        if data is not None:
            req.add_header("Content-Type", content_type)
        try:
            return urllib.request.urlopen(req, timeout=TIMEOUT)  # noqa: S310 - the scheme was checked
        except urllib.error.HTTPError as err:
            raise _refusal(err) from None
        except urllib.error.URLError as err:
            raise CairnError(
                "SETUP", f"cannot reach Cairn at {self.url}: {err.reason} (is `cairn serve` running there?)"
            ) from None
        except TimeoutError:
            raise CairnError("SETUP", f"Cairn at {self.url} did not answer within {TIMEOUT:.0f}s") from None


def _refusal(err: urllib.error.HTTPError) -> CairnError:
    try:
        problem = json.loads(err.read() or b"{}")
    except ValueError:
        problem = {}
    code = problem.get("code") if isinstance(problem, dict) else None
    if code not in CODES:
        code = "INTERNAL"
        message = f"the server answered HTTP {err.code} {err.reason}"
        return CairnError(code, message)
    return CairnError(code, str(problem.get("detail") or code), problem.get("data") or None)


def _param(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, datetime):
        from cairn.core.timeparse import format_time

        return format_time(value)
    return str(value)


def _json_value(value: Any) -> Any:
    if isinstance(value, datetime):
        return _param(value)
    if isinstance(value, timedelta):
        from cairn.core.timeparse import format_duration

        return format_duration(value)
    return value


def _body(**fields: Any) -> dict[str, Any]:
    """A request body without the unset fields (the server's defaults apply, as in process)."""
    return {k: _json_value(v) for k, v in fields.items() if v is not None}


class RemoteCairn:
    """The ``Cairn`` facade over HTTP. The ``principal`` argument is ignored: the token is the caller."""

    def __init__(self, url: str, token: str | None, session: str | None = None) -> None:
        self.http = Http(url, token, session)

    # -- lessons -----------------------------------------------------------------------------------
    def write(self, _p: Any, scope: str, key: str, value: str, **opts: Any) -> dict[str, Any]:
        return self.http.call("POST", "/v1/lessons", body=_body(scope=scope, key=key, value=value, **opts))

    def supersede(
        self, _p: Any, scope: str, key: str, value: str, *, supersedes: tuple[str, str] | None = None, **opts: Any
    ) -> dict[str, Any]:
        old = {"old_scope": supersedes[0], "old_key": supersedes[1]} if supersedes else {}
        return self.http.call(
            "POST", "/v1/lesson/supersede", body=_body(scope=scope, key=key, value=value, **old, **opts)
        )

    def read(
        self, _p: Any, scope: str, key: str, *, as_of: datetime | None = None, valid_at: datetime | None = None
    ) -> dict[str, Any]:
        return self.http.call(
            "GET", "/v1/lesson", query={"scope": scope, "key": key, "as_of": as_of, "valid_at": valid_at}
        )

    def list(self, _p: Any, scope: str | None = None, *, limit: int = 100, **filters: Any) -> dict[str, Any]:
        out = self._gather("/v1/lessons", "lessons", limit, {"scope": scope, **filters})
        out["truncated"] = out["next_cursor"] is not None
        return out

    def history(self, _p: Any, scope: str, key: str) -> dict[str, Any]:
        return self.http.call("GET", "/v1/lesson/history", query={"scope": scope, "key": key})

    def diff(self, _p: Any, scope: str, key: str, v1: int, v2: int) -> dict[str, Any]:
        return self.http.call("GET", "/v1/lesson/diff", query={"scope": scope, "key": key, "v1": v1, "v2": v2})

    def archive(self, _p: Any, scope: str, key: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/lesson/archive", body={"scope": scope, "key": key})

    def restore(self, _p: Any, scope: str, key: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/lesson/restore", body={"scope": scope, "key": key})

    def forget(self, _p: Any, scope: str, key: str, reason: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/lesson/forget", body={"scope": scope, "key": key, "reason": reason})

    def reject(self, _p: Any, scope: str, key: str, reason: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/review/reject", body={"scope": scope, "key": key, "reason": reason})

    def verify(self, _p: Any, scope: str, key: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/review/verify", body={"scope": scope, "key": key})

    def feedback(self, _p: Any, scope: str, key: str, outcome: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/lesson/feedback", body={"scope": scope, "key": key, "outcome": outcome})

    def unforget(self, _p: Any, tombstone_id: int, reason: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/tombstones/lift", body={"tombstone_id": tombstone_id, "reason": reason})

    def tombstones(self, _p: Any, *, include_lifted: bool = False, limit: int = 1000, cursor: str | None = None):  # type: ignore[no-untyped-def]
        return self._gather("/v1/tombstones", "tombstones", limit, {"include_lifted": include_lifted, "cursor": cursor})

    def review_queue(self, _p: Any, *, scope: str | None = None, limit: int = 100, cursor: str | None = None):  # type: ignore[no-untyped-def]
        return self._gather("/v1/review", "candidates", limit, {"scope": scope, "cursor": cursor})

    def link(self, _p: Any, scope: str, key: str, scope2: str, key2: str, rel: str) -> dict[str, Any]:
        body = {"scope": scope, "key": key, "other_scope": scope2, "other_key": key2, "rel": rel}
        return self.http.call("POST", "/v1/lesson/link", body=body)

    def neighborhood(self, _p: Any, scope: str, key: str, *, depth: int = 1, budget: int = 2000) -> dict[str, Any]:
        query = {"scope": scope, "key": key, "depth": depth, "budget": budget}
        return self.http.call("GET", "/v1/lesson/neighborhood", query=query)

    def purge(
        self, _p: Any, *, expired: bool = False, archived: bool = False, older_than: timedelta | None = None
    ) -> dict[str, Any]:
        if expired == archived:
            raise CairnError("INVALID_INPUT", "purge takes exactly one of --expired or --archived")
        body = _body(sweep="expired" if expired else "archived", older_than=older_than)
        return self.http.call("POST", "/v1/purge", body=body)

    def scopes(self, _p: Any) -> dict[str, Any]:
        return self.http.call("GET", "/v1/scopes")

    # -- retrieval ---------------------------------------------------------------------------------
    def search(self, _p: Any, query: str, **opts: Any) -> dict[str, Any]:
        return self.http.call("POST", "/v1/search", body=_body(query=query, **opts))

    def recall(self, _p: Any, text: str, **opts: Any) -> dict[str, Any]:
        return self.http.call("POST", "/v1/recall", body=_body(text=text, **opts))

    def context(self, _p: Any, **opts: Any) -> dict[str, Any]:
        opts.pop("settings", None)  # the server's settings rank its store
        return self.http.call("POST", "/v1/context", body=_body(**opts))

    # -- audit, transfer ---------------------------------------------------------------------------
    def audit(self, _p: Any, *, limit: int = 200, **filters: Any) -> dict[str, Any]:
        out = self._gather("/v1/audit", "entries", limit, filters)
        out["entries"].sort(key=lambda e: e["seq"])  # pages go back in time; the service answers oldest first
        return out

    def audit_verify(self, _p: Any, *, full: bool = True) -> dict[str, Any]:
        return self.http.call("GET", "/v1/audit/verify" + ("" if full else "?fast=true"))

    def export(self, _p: Any, *, active_only: bool = False, scope: str | None = None) -> Iterator[str]:
        """The server's JSONL, streamed line by line (opened now, so a refusal comes before any output)."""
        resp = self.http.open(
            "GET", "/v1/export", query={"active": active_only, "scope": scope}, accept="application/x-ndjson"
        )

        def lines() -> Iterator[str]:
            with resp:
                for raw in resp:
                    line = raw.decode("utf-8").rstrip("\n")
                    if line:
                        yield line

        return lines()

    def import_lines(
        self,
        _p: Any,
        lines: Iterable[str],
        *,
        restore: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> dict[str, Any]:
        """One request with the whole file as NDJSON: the server imports it exactly as a local import."""
        payload = "".join(line + "\n" for line in lines).encode("utf-8")
        query = {"restore": True} if restore else None
        result = self.http.call("POST", "/v1/import", query=query, raw=payload, content_type="application/x-ndjson")
        if progress:
            progress(result["records"], result["records"])
        return result

    def reindex(self, _p: Any, **_kw: Any) -> dict[str, Any]:
        raise CairnError("INVALID_INPUT", f"reindex {NOT_REMOTE}")

    # -- accounts ----------------------------------------------------------------------------------
    def whoami(self, _p: Any) -> dict[str, Any]:
        return self.http.call("GET", "/v1/whoami")

    def create_user(self, _p: Any, _name: str) -> dict[str, Any]:
        raise CairnError("FORBIDDEN", f"creating an account is the operator's, and {NOT_REMOTE}")

    def token_create(self, _p: Any, **opts: Any) -> dict[str, Any]:
        return self.http.call("POST", "/v1/tokens", body=_body(**opts))

    def token_list(self, _p: Any, org: str | None = None, *, limit: int = 1000, cursor: str | None = None):  # type: ignore[no-untyped-def]
        return self._gather("/v1/tokens", "tokens", limit, {"org": org, "cursor": cursor})

    def token_revoke(self, _p: Any, token_id: int) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/tokens/{int(token_id)}/revoke")

    def limits_show(self, _p: Any, tenant: str | None = None) -> dict[str, Any]:
        if tenant:
            raise CairnError("FORBIDDEN", f"another tenant's limits are the operator's, and that {NOT_REMOTE}")
        return self.http.call("GET", "/v1/limits")

    def limits_set(self, _p: Any, *_a: Any, **_kw: Any) -> dict[str, Any]:
        raise CairnError("FORBIDDEN", f"setting limits is the operator's, and {NOT_REMOTE}")

    def org_create(self, _p: Any, org: str, name: str | None = None) -> dict[str, Any]:
        return self.http.call("POST", "/v1/orgs", body=_body(org=org, name=name))

    def org_list(self, _p: Any) -> dict[str, Any]:
        return self.http.call("GET", "/v1/orgs")

    def org_rename(self, _p: Any, org: str, name: str) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/rename", body={"name": name})

    def org_delete(self, _p: Any, org: str, confirm: str | None) -> dict[str, Any]:
        return self.http.call("DELETE", f"/v1/orgs/{_seg(org)}", query={"confirm": confirm})

    def org_invite(self, _p: Any, org: str, role: str, expires: str | None) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/invites", body=_body(role=role, expires=expires))

    def org_invites(self, _p: Any, org: str) -> dict[str, Any]:
        return self.http.call("GET", f"/v1/orgs/{_seg(org)}/invites")

    def org_revoke_invite(self, _p: Any, org: str, invite_id: int) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/invites/{int(invite_id)}/revoke")

    def org_accept(self, _p: Any, code: str) -> dict[str, Any]:
        return self.http.call("POST", "/v1/invites/accept", body={"code": code})

    def org_members(self, _p: Any, org: str, *, limit: int = 1000, cursor: str | None = None) -> dict[str, Any]:
        out = self._gather(f"/v1/orgs/{_seg(org)}/members", "members", limit, {"cursor": cursor})
        return out

    def member_role(self, _p: Any, org: str, user: str, role: str) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/members/{_seg(user)}/role", body={"role": role})

    def member_remove(self, _p: Any, org: str, user: str) -> dict[str, Any]:
        return self.http.call("DELETE", f"/v1/orgs/{_seg(org)}/members/{_seg(user)}")

    def org_leave(self, _p: Any, org: str) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/leave")

    def org_bind(self, _p: Any, org: str, pattern: str) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/bindings", body={"pattern": pattern})

    def org_unbind(self, _p: Any, org: str, pattern: str) -> dict[str, Any]:
        return self.http.call("POST", f"/v1/orgs/{_seg(org)}/bindings/remove", body={"pattern": pattern})

    def org_bindings(self, _p: Any, org: str) -> dict[str, Any]:
        return self.http.call("GET", f"/v1/orgs/{_seg(org)}/bindings")

    # -- paging ------------------------------------------------------------------------------------
    def _gather(self, path: str, field: str, limit: int, query: dict[str, Any]) -> dict[str, Any]:
        """Up to ``limit`` rows, in pages of at most the API's cap, as one answer with its next cursor.

        The local service answers a ``--limit`` up to 10,000 in one call; the API caps a page lower,
        so a larger limit is the same rows fetched page by page with the server's cursors.
        """
        if not 1 <= limit <= 100_000:
            raise CairnError("INVALID_INPUT", f"limit must be between 1 and 100000, got {limit}")
        rows: list[Any] = []
        out: dict[str, Any] = {}
        cursor = query.pop("cursor", None)
        while True:
            want = min(limit - len(rows), PAGE_CAP[field])
            out = self.http.call("GET", path, query={**query, "limit": want, "cursor": cursor})
            rows.extend(out[field])
            cursor = out.get("next_cursor")
            if cursor is None or len(rows) >= limit:
                break
        out[field] = rows
        out["next_cursor"] = cursor
        return out


def _seg(part: str) -> str:
    """A path segment: an org or user name is escaped, so no name can reach another route."""
    return urllib.parse.quote(part, safe="")
