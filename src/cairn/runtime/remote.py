"""A remote Cairn behind its HTTP API, with the service's own method signatures.

``cairn --url URL …`` (or ``CAIRN_URL``) and ``cairn mcp --url`` hand the command tree and the MCP
tools a ``RemoteCairn`` in place of the in-process ``Cairn``: every command calls the same method
with the same arguments and renders the same answer, so a command behaves identically whichever
side of the network the store is on. The server decides everything (tenancy, permissions, limits,
the principal: it is the bearer token's, ``CAIRN_TOKEN``); this class only maps a call to a request
and a problem+json refusal back to the ``CairnError`` with the same code. The routes are the
catalogue's (``service/catalog``): a method is derived from each declared operation, so a new one
reaches the remote client without being written here.

Standard library only (``urllib``): hooks call ``context``/``recall`` through here on every
session start, and a remote answer must not first pay for importing an HTTP stack. ``urllib.request``
(it pulls in http.client and email) loads only when a request is made, never on the local path.
"""

from __future__ import annotations

import json
import os
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from cairn.errors import CODES, CairnError
from cairn.service.catalog import OPERATIONS, Operation, operation

if TYPE_CHECKING:
    import urllib.error

URL_ENV = "CAIRN_URL"
TIMEOUT = float(os.environ.get("CAIRN_HTTP_TIMEOUT") or 120)
NOT_REMOTE = (
    "runs where the database is, not over HTTP: run it on the server's host (with its --db URL), "
    "or drop --url / CAIRN_URL"
)


API_PREFIX = "/v1"  # where the HTTP API's routes live under a server's address


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
    base = url.rstrip("/")
    if parsed.path.rstrip("/").endswith(API_PREFIX):
        # The routes are under /v1 of the server's address: a URL copied from a route or /docs
        # would ask /v1/v1/... and get a bare NOT_FOUND.
        corrected = base[: -len(API_PREFIX)]
        raise CairnError(
            "INVALID_INPUT",
            f"--url is the server's address, without {API_PREFIX}: {corrected} (got {url!r})",
            {"corrected": corrected},
        )
    return base


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
        self.sent = self.received = 0  # body bytes each way (what `cairn sync` reports it moved)
        if session:
            self.headers["X-Cairn-Session"] = session

    def call(self, method: str, path: str, **request: Any) -> Any:
        """The server's JSON answer (``request``: as for ``open``)."""
        import http.client

        with self.open(method, path, **request) as resp:
            try:
                body = resp.read()
            except (OSError, http.client.HTTPException) as err:  # the connection dropped mid-answer
                raise self._unreachable(err) from None
            self.received += len(body)
            return json.loads(body)

    def _unreachable(self, err: BaseException) -> CairnError:
        reason = getattr(err, "reason", None) or type(err).__name__
        message = f"cannot reach Cairn at {self.url}: {reason} (is `cairn serve` running there?)"
        return CairnError("UNREACHABLE", message, {"url": self.url})

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
        import http.client
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
            self.sent += len(data)
        try:
            return urllib.request.urlopen(req, timeout=TIMEOUT)  # noqa: S310 - the scheme was checked
        except urllib.error.HTTPError as err:
            raise _refusal(err, self.url) from None
        except TimeoutError:
            raise CairnError(
                "UNREACHABLE", f"Cairn at {self.url} did not answer within {TIMEOUT:.0f}s", {"url": self.url}
            ) from None
        except (OSError, http.client.HTTPException) as err:  # URLError, a reset, a dropped connection
            raise self._unreachable(err) from None


# What a proxy in front of Cairn answers when Cairn behind it is down or slow: offline, try later.
PROXY_UNAVAILABLE = (502, 503, 504)


def _refusal(err: urllib.error.HTTPError, url: str) -> CairnError:
    """A Cairn refusal (problem+json with a stable code) as the same error here. An answer without
    one is not Cairn's: a proxy whose Cairn is down is ``UNREACHABLE`` (retry later), another
    server's 4xx is a ``--url`` that points at something else (``INVALID_INPUT``)."""
    try:
        problem = json.loads(err.read() or b"{}")
    except ValueError:
        problem = {}
    code = problem.get("code") if isinstance(problem, dict) else None
    if code not in CODES:
        answered = f"{url} answered HTTP {err.code} {err.reason}"
        if err.code in PROXY_UNAVAILABLE:
            message = f"{answered}: Cairn behind it did not answer; try again later"
            return CairnError("UNREACHABLE", message, {"url": url})
        if 400 <= err.code < 500:
            return CairnError(
                "INVALID_INPUT",
                f"{answered}, not as a Cairn server: --url is the address `cairn serve` listens on "
                "(e.g. http://127.0.0.1:8321, without /v1)",
                {"url": url},
            )
        return CairnError("INTERNAL", answered)
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


def _path(name: str) -> str:
    """The route of a catalogue operation (the hand-written methods below call it by name)."""
    http = operation(name).http
    assert http is not None
    return http.path


class RemoteCairn:
    """The ``Cairn`` facade over HTTP. The ``principal`` argument is ignored: the token is the caller.

    Most methods are derived from the catalogue (:func:`_derived`, installed below the class); the
    ones written here do more than place arguments in a request: name supersede's target, turn
    purge's flags into its sweep or verify's ``full`` into ``fast``, leave the caller's settings out
    of ``context``, stream the export, send the import file, or refuse what only the server's host may do.
    """

    def __init__(self, url: str, token: str | None, session: str | None = None) -> None:
        self.http = Http(url, token, session)

    def request(self, op: Operation, fields: dict[str, Any]) -> Any:
        """``op``'s request with ``fields`` (input field -> value) placed where its route takes them."""
        assert op.http is not None
        path = op.http.path
        for name in op.http.path_fields:
            path = path.replace("{" + name + "}", _seg(str(fields.pop(name))))
        if op.http.method == "POST":
            return self.http.call("POST", path, body=_body(**fields))
        return self.http.call(op.http.method, path, query=fields)

    # -- lessons -----------------------------------------------------------------------------------
    def supersede(
        self, _p: Any, scope: str, key: str, value: str, *, supersedes: tuple[str, str] | None = None, **opts: Any
    ) -> dict[str, Any]:
        old = {"old_scope": supersedes[0], "old_key": supersedes[1]} if supersedes else {}
        return self.http.call("POST", _path("supersede"), body=_body(scope=scope, key=key, value=value, **old, **opts))

    def purge(
        self, _p: Any, *, expired: bool = False, archived: bool = False, older_than: timedelta | None = None
    ) -> dict[str, Any]:
        from cairn.core.sweeps import choose_sweep

        sweep = choose_sweep(expired=expired, archived=archived, older_than=older_than is not None)
        body = _body(sweep=sweep, older_than=older_than)
        return self.http.call("POST", _path("purge"), body=body)

    # -- retrieval ---------------------------------------------------------------------------------
    def context(self, _p: Any, **opts: Any) -> dict[str, Any]:
        opts.pop("settings", None)  # the server's settings rank its store
        return self.http.call("POST", _path("context"), body=_body(**opts))

    # -- audit, transfer ---------------------------------------------------------------------------
    def audit_verify(self, _p: Any, *, full: bool = True) -> dict[str, Any]:
        return self.http.call("GET", _path("audit_verify"), query={"fast": True} if not full else None)

    def export(self, _p: Any, *, active_only: bool = False, scope: str | None = None) -> Iterator[str]:
        """The server's JSONL, streamed line by line (opened now, so a refusal comes before any output)."""
        resp = self.http.open(
            "GET", _path("export"), query={"active": active_only, "scope": scope}, accept="application/x-ndjson"
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
        result = self.http.call(
            "POST", _path("import_lines"), query=query, raw=payload, content_type="application/x-ndjson"
        )
        if progress:
            progress(result["records"], result["records"])
        return result

    def reindex(self, _p: Any, **_kw: Any) -> dict[str, Any]:
        raise CairnError("INVALID_INPUT", f"reindex {NOT_REMOTE}")

    # -- sync --------------------------------------------------------------------------------------
    def sync_apply(self, _p: Any, batch: Any) -> dict[str, Any]:
        """One batch of another store's feed (its model, or the JSON a feed answered with)."""
        data = batch.model_dump(mode="json") if hasattr(batch, "model_dump") else batch
        return self.http.call("POST", _path("sync_apply"), body=data)

    # -- accounts ----------------------------------------------------------------------------------
    def create_user(self, _p: Any, _name: str) -> dict[str, Any]:
        raise CairnError("FORBIDDEN", f"creating an account is the operator's, and {NOT_REMOTE}")

    def limits_show(self, _p: Any, tenant: str | None = None) -> dict[str, Any]:
        if tenant:
            raise CairnError("FORBIDDEN", f"another tenant's limits are the operator's, and that {NOT_REMOTE}")
        return self.http.call("GET", _path("limits_show"))

    def limits_set(self, _p: Any, *_a: Any, **_kw: Any) -> dict[str, Any]:
        raise CairnError("FORBIDDEN", f"setting limits is the operator's, and {NOT_REMOTE}")


def _seg(part: str) -> str:
    """A path segment: an org or user name is escaped, so no name can reach another route."""
    return urllib.parse.quote(part, safe="")


def _derived(op: Operation) -> Callable[..., Any]:
    """A facade method for ``op``: positional arguments are its declared ``args``, keywords its
    input fields (or the facade's names for them, ``op.rename``)."""
    wire = {param: name for name, param in op.rename.items()}

    def method(self: RemoteCairn, _p: Any, *args: Any, **kwargs: Any) -> Any:
        fields = dict(zip(op.args, args, strict=False))
        fields.update({wire.get(k, k): v for k, v in kwargs.items()})
        return self.request(op, fields)

    method.__name__ = method.__qualname__ = op.name
    method.__doc__ = op.doc or None
    return method


for _op in OPERATIONS:
    if _op.remote and _op.http is not None:
        setattr(RemoteCairn, _op.name, _derived(_op))
