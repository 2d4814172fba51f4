"""The HTTP API: one endpoint per service operation, bearer tokens, problem+json errors.

A surface only: every endpoint parses its input (pydantic models carry the sizes and enums), calls
one service method with the principal its token resolves to, and returns the service's answer.
No rule lives here (DESIGN §4): permissions, scopes, tenancy and limits are the service's.

Stage 1 of issue 6: lessons (write, read, list, history, archive, restore, forget, feedback),
search, recall, context and the audit log. Addresses travel as query parameters or body fields,
not path segments: a scope contains ``::`` and ``/``.
"""

from __future__ import annotations

import contextlib
from typing import Annotated, Any, Literal

from fastapi import Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, RedirectResponse, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, ValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from cairn.api import openapi, responses
from cairn.api.guard import MAX_IMPORT_BYTES, NDJSON, BodyLimit, HostGuard
from cairn.api.problems import MEDIA_TYPE, from_error, problem
from cairn.api.routing import BoundedJsonRoute
from cairn.core.cursor import CURSOR_PATTERN, MAX_CURSOR
from cairn.core.principal import Principal
from cairn.core.roles import NAME_RE
from cairn.core.scope import SCOPE_REGEX
from cairn.errors import CairnError, invalid_input
from cairn.fields import NO_NUL, TAG_PATTERN, Branch, Duration, Key, Project, Repo, Scope, Tag, Value
from cairn.service.api import Cairn


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class WriteBody(Strict):
    scope: Scope
    key: Key
    value: Value
    tags: list[Tag] = Field(default_factory=list, max_length=32)
    kind: Literal["lesson", "fact", "preference", "reference"] = "lesson"
    source_agent: Annotated[str, Field(max_length=500, json_schema_extra=NO_NUL)] | None = None
    trigger: Annotated[str, Field(max_length=500, json_schema_extra=NO_NUL)] | None = None
    ttl: Duration | None = None
    valid_from: AwareDatetime | None = Field(None, description="When it became true in the world (ISO 8601)")
    valid_to: AwareDatetime | None = Field(None, description="When it stopped being true (ISO 8601)")


class AddressBody(Strict):
    scope: Scope
    key: Key


class ForgetBody(AddressBody):
    reason: Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=NO_NUL)]


class FeedbackBody(AddressBody):
    outcome: Literal["helped", "not-helped"]


class SearchBody(Strict):
    query: Annotated[str, Field(min_length=1, max_length=4000)]
    scopes: list[Scope] | None = None
    repo: Repo | None = None
    branch: Branch | None = None
    project: Project | None = None
    tag: Tag | None = None
    trust: Literal["candidate", "verified"] | None = None
    limit: Annotated[int, Field(ge=1, le=100)] = 10
    mode: Literal["hybrid", "fts", "vector"] = "hybrid"


class RecallBody(Strict):
    text: Annotated[str, Field(min_length=1, max_length=65536)]
    scopes: list[Scope] | None = Field(None, max_length=32)
    repo: Repo | None = None
    branch: Branch | None = None
    project: Project | None = None


class ContextBody(Strict):
    repo: Repo | None = None
    branch: Branch | None = None
    project: Project | None = None
    task: Annotated[str, Field(max_length=4000)] | None = None
    max_chars: Annotated[int, Field(ge=200, le=20000)] | None = None
    loop_cap: Annotated[int, Field(ge=0, le=100)] | None = None


BEARER = HTTPBearer(auto_error=False, description="A Cairn token: `cairn token create` (or `cairn user create`)")


def _principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(BEARER)],
    x_cairn_session: Annotated[str | None, Header(max_length=200)] = None,
) -> Principal:
    """The request's principal, from its bearer token; nothing else in the request names a tenant."""
    secret = credentials.credentials.strip() if credentials else ""
    if not secret:
        raise CairnError("UNAUTHENTICATED", "send Authorization: Bearer <token> (create one: cairn token create)")
    return request.app.state.svc.resolve_token(secret, session=x_cairn_session or None)


ORG_PATTERN = NAME_RE.pattern  # shown and enforced: the same rule as check_name's
OrgName = Annotated[str, Path(min_length=1, max_length=39, pattern=ORG_PATTERN)]
# Query parameters: the same rules as the body fields in cairn.fields, as FastAPI's Query wants them.
OptionalCursor = Annotated[
    str | None,
    Query(
        min_length=1,
        max_length=MAX_CURSOR,
        pattern=CURSOR_PATTERN,
        description="next_cursor of the previous page; omit for the first page",
    ),
]
UserName = Annotated[str, Path(min_length=1, max_length=39, pattern=ORG_PATTERN)]
# A scope in a query: the same field as in a body (the pattern shown, validate_scope the check).
_SCOPE_QUERY = Query(
    min_length=1, max_length=300, json_schema_extra={"pattern": SCOPE_REGEX}, examples=["repo::acme/widget"]
)
ScopeQuery = Annotated[str, _SCOPE_QUERY]
OptionalScopeQuery = Annotated[str | None, _SCOPE_QUERY]
KeyQuery = Annotated[str, Query(min_length=1, max_length=200)]
OptionalKeyQuery = Annotated[str | None, Query(min_length=1, max_length=200)]

# Module level: with postponed annotations FastAPI resolves this name in the module's globals.
Caller = Annotated[Principal, Depends(_principal)]


class SupersedeBody(WriteBody):
    old_scope: Scope | None = None
    old_key: Key | None = None


class LinkBody(AddressBody):
    other_scope: Scope
    other_key: Key
    rel: Literal["related", "contradicts", "derived_from"]


class UnforgetBody(Strict):
    tombstone_id: Annotated[int, Field(ge=1, le=2**62)]
    reason: Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=NO_NUL)]


class ImportBody(Strict):
    lines: list[Annotated[str, Field(max_length=200_000)]] = Field(max_length=10_000)


class TokenBody(Strict):
    perm: Literal["read", "write", "admin"] = "read"
    scope_patterns: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=32)
    org: Annotated[str, Field(max_length=39, pattern=ORG_PATTERN)] | None = None
    expires: Annotated[str, Field(max_length=20, examples=["90d", "never"])] = "90d"
    name: Annotated[str, Field(max_length=100)] | None = None
    style: Literal["cairn", "lorekit"] = Field(
        "cairn", description="lorekit: spelled lk_rw_…/lk_ro_… for LoreKit's CLI"
    )


class OrgBody(Strict):
    org: Annotated[str, Field(min_length=1, max_length=39, pattern=ORG_PATTERN)]
    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class InviteBody(Strict):
    role: Literal["viewer", "member", "admin", "owner"] = "member"
    expires: Annotated[str, Field(max_length=20)] = "7d"


class CodeBody(Strict):
    code: Annotated[str, Field(min_length=1, max_length=200)]


class RoleBody(Strict):
    role: Literal["viewer", "member", "admin", "owner"]


class PatternBody(Strict):
    pattern: Annotated[str, Field(min_length=1, max_length=300)]


class PurgeBody(Strict):
    sweep: Literal["expired", "archived"]
    older_than: Duration | None = None


class RenameBody(Strict):
    name: Annotated[str, Field(min_length=1, max_length=200)]


def create_app(
    svc: Cairn,
    *,
    mcp: bool = True,
    allowed_hosts: list[str] | tuple[str, ...] | None = (),
    gateway: Any = None,
) -> FastAPI:
    """The API, with the MCP server mounted at ``/mcp`` (streamable HTTP, the same bearer tokens).

    ``allowed_hosts``: the names besides the loopback ones that ``Host``/``Origin`` may carry (see
    ``guard.HostGuard``); ``None`` turns the check off (a server exposed without ``--allow-host``).
    ``gateway``: a ``cairn.gateway.app.Gateway`` whose routes (``/v1/chat/completions``,
    ``/v1/messages``, ``/v1/models``) are served beside the API (``cairn serve`` with ``gateway.upstream``).
    """
    mounted = _mcp_app(svc) if mcp else None

    @contextlib.asynccontextmanager
    async def lifespan(_app: FastAPI):  # type: ignore[no-untyped-def]
        try:
            if mounted is None:
                yield
                return
            async with mounted[0].session_manager.run():  # a mounted app's own lifespan never runs
                yield
        finally:
            if gateway is not None:
                await gateway.close()

    app = FastAPI(
        title="Cairn",
        version="1",
        description="A versioned, audited memory store for coding agents. Bearer tokens: `cairn token create`.",
        lifespan=lifespan,
        generate_unique_id_function=openapi.operation_id,
    )
    openapi.install(app)
    app.router.route_class = BoundedJsonRoute
    app.state.svc = svc
    from cairn.web import create_web  # the dashboard; jinja loads only when the API is built

    app.mount("/ui", create_web(svc))
    from cairn.compat.lorekit.rest import PREFIX, create_lorekit_app  # LoreKit's remote protocol

    app.mount(PREFIX, create_lorekit_app(svc))
    if mounted is not None:
        app.mount("/mcp", mounted[1])
    if gateway is not None:
        from cairn.gateway.app import router

        app.include_router(router(gateway))

    @app.exception_handler(CairnError)
    async def _cairn_error(_request: Request, exc: CairnError) -> JSONResponse:
        status, body = from_error(exc)
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, exc: RequestValidationError) -> JSONResponse:
        status, body = from_error(invalid_input(list(exc.errors())))
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        # Routing's own refusals (no such path, wrong method) in the same problem+json as the rest.
        headers = dict(exc.headers or {})
        if exc.status_code == 405:
            allow = _methods_at(request)
            headers["Allow"] = ", ".join(allow)
            status, body = problem(
                "INVALID_INPUT", f"{request.method} is not allowed here; use {' or '.join(allow)}", status=405
            )
        elif exc.status_code == 404:
            status, body = problem("NOT_FOUND", "no such endpoint (the API is under /v1, its schema at /docs)")
        else:
            status, body = problem("INVALID_INPUT", str(exc.detail), status=exc.status_code)
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE, headers=headers)

    @app.exception_handler(Exception)
    async def _unexpected(_request: Request, exc: Exception) -> JSONResponse:
        # Never a traceback to the caller; the server's log has the exception's type.
        status, body = problem("INTERNAL", f"unexpected {type(exc).__name__}; the server log has the details")
        return JSONResponse(body, status_code=status, media_type=MEDIA_TYPE)

    # The last added runs first: the Host check refuses before the body limit reads anything.
    app.add_middleware(BodyLimit)
    app.add_middleware(HostGuard, allowed=None if allowed_hosts is None else list(allowed_hosts))

    @app.get("/", include_in_schema=False)
    def root() -> RedirectResponse:
        """A person who opens the server's address lands on the dashboard."""
        return RedirectResponse("/ui/", status_code=307)

    @app.get("/v1/health", tags=["meta"], response_model=responses.Health)
    def health() -> dict[str, str]:
        """Liveness: answers without a token and touches no tenant data."""
        return {"status": "ok"}

    @app.post("/v1/lessons", tags=["lessons"], response_model=responses.Written)
    def write(body: WriteBody, p: Caller) -> dict[str, Any]:
        """Create a lesson, edit it (a new version), or count a recurrence of the same content."""
        from cairn.core.timeparse import parse_ttl

        opts = body.model_dump(exclude={"scope", "key", "value", "ttl"})
        return svc.write(p, body.scope, body.key, body.value, ttl=parse_ttl(body.ttl) if body.ttl else None, **opts)

    @app.get("/v1/lesson", tags=["lessons"], response_model=responses.OneLesson)
    def read(
        p: Caller,
        scope: ScopeQuery,
        key: KeyQuery,
        as_of: AwareDatetime | None = None,
        valid_at: AwareDatetime | None = None,
    ) -> dict[str, Any]:
        """One lesson by address; ``as_of`` reads what Cairn held then, ``valid_at`` what was true then."""
        return svc.read(p, scope, key, as_of=as_of, valid_at=valid_at)

    @app.get("/v1/lessons", tags=["lessons"], response_model=responses.LessonPage)
    def list_lessons(
        p: Caller,
        scope: OptionalScopeQuery = None,
        tag: Annotated[str | None, Query(max_length=64, json_schema_extra={"pattern": TAG_PATTERN})] = None,
        trust: Literal["candidate", "verified"] | None = None,
        archived: bool = False,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: OptionalCursor = None,
    ) -> dict[str, Any]:
        """Active lessons (or archived ones), newest first; ``next_cursor`` fetches the next page."""
        return svc.list(p, scope, tag=tag, trust=trust, archived=archived, limit=limit, cursor=cursor)

    @app.get("/v1/lesson/history", tags=["lessons"], response_model=responses.History)
    def history(p: Caller, scope: ScopeQuery, key: KeyQuery) -> dict[str, Any]:
        """Every version of a lesson, with the record-time interval each was current."""
        return svc.history(p, scope, key)

    @app.post("/v1/lesson/archive", tags=["lessons"], response_model=responses.Changed)
    def archive(body: AddressBody, p: Caller) -> dict[str, Any]:
        return svc.archive(p, body.scope, body.key)

    @app.post("/v1/lesson/restore", tags=["lessons"], response_model=responses.Changed)
    def restore(body: AddressBody, p: Caller) -> dict[str, Any]:
        return svc.restore(p, body.scope, body.key)

    @app.post("/v1/lesson/forget", tags=["lessons"], response_model=responses.Forgotten)
    def forget(body: ForgetBody, p: Caller) -> dict[str, Any]:
        """Reject a lesson and tombstone its content: the same text is refused under any key."""
        return svc.forget(p, body.scope, body.key, body.reason)

    @app.post("/v1/lesson/feedback", tags=["lessons"], response_model=responses.FeedbackGiven)
    def feedback(body: FeedbackBody, p: Caller) -> dict[str, Any]:
        return svc.feedback(p, body.scope, body.key, body.outcome)

    @app.post("/v1/search", tags=["retrieval"], response_model=responses.SearchResults)
    def search(body: SearchBody, p: Caller) -> dict[str, Any]:
        return svc.search(p, body.query, **body.model_dump(exclude={"query"}))

    @app.post("/v1/recall", tags=["retrieval"], response_model=responses.Recalled)
    def recall(body: RecallBody, p: Caller) -> dict[str, Any]:
        """At most a few lessons that fit an error text, or none when nothing clears the relevance floor."""
        return svc.recall(p, body.text, scopes=body.scopes, repo=body.repo, branch=body.branch, project=body.project)

    @app.post("/v1/context", tags=["retrieval"], response_model=responses.Context)
    def context(body: ContextBody, p: Caller) -> dict[str, Any]:
        """The session-start block for a repo/branch/task, within a character budget."""
        return svc.context(p, **body.model_dump())

    @app.get("/v1/audit", tags=["audit"], response_model=responses.AuditPage)
    def audit(
        p: Caller,
        scope: OptionalScopeQuery = None,
        key: OptionalKeyQuery = None,
        since: AwareDatetime | None = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 200,
        cursor: OptionalCursor = None,
    ) -> dict[str, Any]:
        """The newest entries, oldest first within a page; ``next_cursor`` pages back in time."""
        return svc.audit(p, scope=scope, key=key, since=since, limit=limit, cursor=cursor)

    @app.get("/v1/audit/verify", tags=["audit"], response_model=responses.AuditVerified)
    def audit_verify(p: Caller, fast: bool = False) -> dict[str, Any]:
        """Re-hash the tenant's audit chain and check every lesson, version and tombstone row against
        it (``fast``: the chain only); a mismatch is 409 ``AUDIT_BROKEN`` naming the first one."""
        return svc.audit_verify(p, full=not fast)

    @app.post("/v1/purge", tags=["lessons"], response_model=responses.Purged)
    def purge(body: PurgeBody, p: Caller) -> dict[str, Any]:
        """Hard-erase expired lessons, or archived ones past retention (admin); the audit keeps hashes only."""
        from cairn.core.timeparse import parse_duration

        older = parse_duration(body.older_than, code="INVALID_INPUT") if body.older_than else None
        return svc.purge(p, expired=body.sweep == "expired", archived=body.sweep == "archived", older_than=older)

    # -- more lesson operations ----------------------------------------------------------------
    @app.post("/v1/lesson/supersede", tags=["lessons"], response_model=responses.Superseded)
    def supersede(body: SupersedeBody, p: Caller) -> dict[str, Any]:
        """Write a lesson that replaces another (named, or found by key); the old one is retired and linked."""
        from cairn.core.timeparse import parse_ttl

        target = (body.old_scope, body.old_key) if body.old_scope and body.old_key else None
        opts = body.model_dump(exclude={"scope", "key", "value", "ttl", "old_scope", "old_key"})
        ttl = parse_ttl(body.ttl) if body.ttl else None
        return svc.supersede(p, body.scope, body.key, body.value, supersedes=target, ttl=ttl, **opts)

    @app.get("/v1/lesson/diff", tags=["lessons"], response_model=responses.Diff)
    def diff(
        p: Caller,
        scope: ScopeQuery,
        key: KeyQuery,
        v1: Annotated[int, Query(ge=1)],
        v2: Annotated[int, Query(ge=1)],
    ) -> dict[str, Any]:
        return svc.diff(p, scope, key, v1, v2)

    @app.post("/v1/lesson/link", tags=["graph"], response_model=responses.Linked)
    def link(body: LinkBody, p: Caller) -> dict[str, Any]:
        return svc.link(p, body.scope, body.key, body.other_scope, body.other_key, body.rel)

    @app.get("/v1/lesson/neighborhood", tags=["graph"], response_model=responses.Neighborhood)
    def neighborhood(
        p: Caller,
        scope: ScopeQuery,
        key: KeyQuery,
        depth: Annotated[int, Query(ge=1, le=3)] = 1,
        budget: Annotated[int, Query(ge=100, le=20000)] = 2000,
    ) -> dict[str, Any]:
        return svc.neighborhood(p, scope, key, depth=depth, budget=budget)

    @app.get("/v1/tombstones", tags=["lessons"], response_model=responses.TombstonePage)
    def tombstones(
        p: Caller,
        include_lifted: bool = False,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: OptionalCursor = None,
    ) -> dict[str, Any]:
        return svc.tombstones(p, include_lifted=include_lifted, limit=limit, cursor=cursor)

    @app.post("/v1/tombstones/lift", tags=["lessons"], response_model=responses.Lifted)
    def unforget(body: UnforgetBody, p: Caller) -> dict[str, Any]:
        """The one audited way back from a forget (admin)."""
        return svc.unforget(p, body.tombstone_id, body.reason)

    @app.get("/v1/review", tags=["review"], response_model=responses.ReviewQueue)
    def review(
        p: Caller,
        scope: OptionalScopeQuery = None,
        limit: Annotated[int, Query(ge=1, le=500)] = 100,
        cursor: OptionalCursor = None,
    ) -> dict[str, Any]:
        """Candidates awaiting review, oldest first."""
        return svc.review_queue(p, scope=scope, limit=limit, cursor=cursor)

    @app.post("/v1/review/verify", tags=["review"], response_model=responses.Changed)
    def review_verify(body: AddressBody, p: Caller) -> dict[str, Any]:
        return svc.verify(p, body.scope, body.key)

    @app.post("/v1/review/reject", tags=["review"], response_model=responses.Forgotten)
    def review_reject(body: ForgetBody, p: Caller) -> dict[str, Any]:
        return svc.reject(p, body.scope, body.key, body.reason)

    @app.get(
        "/v1/export",
        tags=["transfer"],
        response_model=responses.Exported,
        responses={200: {"content": {NDJSON: {"schema": {"type": "string"}}}, "description": "JSON or NDJSON"}},
    )
    def export(
        request: Request,
        p: Caller,
        active: bool = False,
        scope: OptionalScopeQuery = None,
    ) -> Any:
        """The lossless JSONL export (the whole tenant needs an unrestricted admin token).

        ``Accept: application/x-ndjson`` streams it line by line (what ``cairn --url … export``
        uses); otherwise the answer is ``{"lines": [...]}``.
        """
        lines = svc.export(p, active_only=active, scope=scope)  # refusals happen here, before streaming
        if NDJSON in (request.headers.get("accept") or ""):
            return StreamingResponse((line + "\n" for line in lines), media_type=NDJSON)
        return {"lines": list(lines)}

    @app.post(
        "/v1/import",
        tags=["transfer"],
        response_model=responses.Imported,
        openapi_extra={
            "requestBody": {
                "required": True,
                "content": {
                    "application/json": {"schema": ImportBody.model_json_schema()},
                    NDJSON: {"schema": {"type": "string", "maxLength": MAX_IMPORT_BYTES}},
                },
            }
        },
    )
    async def import_(
        request: Request,
        p: Caller,
        restore: Annotated[
            bool,
            Query(
                description="An admin's exact restore (trust, authors, counters, times, history), audited as "
                "such; without it lessons land as candidates by the caller, the file's claims kept as claims"
            ),
        ] = False,
    ) -> dict[str, Any]:
        """Import JSONL (an export, or plain {scope, key, value} records); idempotent.

        As ``application/json`` ``{"lines": [...]}`` up to 256 KiB, or the file itself as
        ``application/x-ndjson`` up to 64 MiB; either way every line is checked before any is written.
        """
        import anyio

        if (request.headers.get("content-type") or "").split(";")[0].strip() == NDJSON:
            try:
                lines = (await request.body()).decode("utf-8").splitlines()
            except UnicodeDecodeError:
                raise CairnError("INVALID_INPUT", "the NDJSON body is not UTF-8 text") from None
        else:
            try:
                lines = ImportBody.model_validate(await request.json()).lines
            except ValidationError as exc:
                raise RequestValidationError(exc.errors()) from None
        return await anyio.to_thread.run_sync(lambda: svc.import_lines(p, lines, restore=restore))

    # -- tokens, orgs, limits -------------------------------------------------------------------
    @app.post("/v1/tokens", tags=["accounts"], response_model=responses.NewToken)
    def token_create(body: TokenBody, p: Caller) -> dict[str, Any]:
        """A new token; the secret is in this response only (``token``) and stored as a hash."""
        return svc.token_create(p, **body.model_dump())

    @app.get("/v1/tokens", tags=["accounts"], response_model=responses.TokenPage)
    def token_list(
        p: Caller,
        org: Annotated[str | None, Query(max_length=39, pattern=ORG_PATTERN)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
        cursor: OptionalCursor = None,
    ) -> dict[str, Any]:
        return svc.token_list(p, org, limit=limit, cursor=cursor)

    @app.post("/v1/tokens/{token_id}/revoke", tags=["accounts"], response_model=responses.TokenRevoked)
    def token_revoke(token_id: Annotated[int, Path(ge=1, le=2**62)], p: Caller) -> dict[str, Any]:
        return svc.token_revoke(p, token_id)

    @app.post("/v1/orgs", tags=["orgs"], response_model=responses.OrgCreated)
    def org_create(body: OrgBody, p: Caller) -> dict[str, Any]:
        return svc.org_create(p, body.org, body.name)

    @app.get("/v1/orgs", tags=["orgs"], response_model=responses.Orgs)
    def org_list(p: Caller) -> dict[str, Any]:
        return svc.org_list(p)

    @app.post("/v1/orgs/{org}/rename", tags=["orgs"], response_model=responses.OrgRenamed)
    def org_rename(org: OrgName, body: RenameBody, p: Caller) -> dict[str, Any]:
        return svc.org_rename(p, org, body.name)

    @app.delete("/v1/orgs/{org}", tags=["orgs"], response_model=responses.OrgDeleted)
    def org_delete(
        org: OrgName, p: Caller, confirm: Annotated[str | None, Query(max_length=64)] = None
    ) -> dict[str, Any]:
        return svc.org_delete(p, org, confirm)

    @app.post("/v1/orgs/{org}/invites", tags=["orgs"], response_model=responses.NewInvite)
    def org_invite(org: OrgName, body: InviteBody, p: Caller) -> dict[str, Any]:
        return svc.org_invite(p, org, body.role, body.expires)

    @app.get("/v1/orgs/{org}/invites", tags=["orgs"], response_model=responses.Invites)
    def org_invites(org: OrgName, p: Caller) -> dict[str, Any]:
        return svc.org_invites(p, org)

    @app.post("/v1/orgs/{org}/invites/{invite_id}/revoke", tags=["orgs"], response_model=responses.InviteRevoked)
    def org_revoke_invite(org: OrgName, invite_id: Annotated[int, Path(ge=1, le=2**62)], p: Caller) -> dict[str, Any]:
        return svc.org_revoke_invite(p, org, invite_id)

    @app.post("/v1/invites/accept", tags=["orgs"], response_model=responses.Joined)
    def org_accept(body: CodeBody, p: Caller) -> dict[str, Any]:
        return svc.org_accept(p, body.code)

    @app.get("/v1/orgs/{org}/members", tags=["orgs"], response_model=responses.MemberPage)
    def org_members(
        org: OrgName, p: Caller, limit: Annotated[int, Query(ge=1, le=1000)] = 100, cursor: OptionalCursor = None
    ) -> dict[str, Any]:
        return svc.org_members(p, org, limit=limit, cursor=cursor)

    @app.post("/v1/orgs/{org}/members/{user}/role", tags=["orgs"], response_model=responses.RoleChanged)
    def member_role(org: OrgName, user: UserName, body: RoleBody, p: Caller) -> dict[str, Any]:
        return svc.member_role(p, org, user, body.role)

    @app.delete("/v1/orgs/{org}/members/{user}", tags=["orgs"], response_model=responses.MemberRemoved)
    def member_remove(org: OrgName, user: UserName, p: Caller) -> dict[str, Any]:
        return svc.member_remove(p, org, user)

    @app.post("/v1/orgs/{org}/leave", tags=["orgs"], response_model=responses.Left)
    def org_leave(org: OrgName, p: Caller) -> dict[str, Any]:
        return svc.org_leave(p, org)

    @app.get("/v1/orgs/{org}/bindings", tags=["orgs"], response_model=responses.Bindings)
    def org_bindings(org: OrgName, p: Caller) -> dict[str, Any]:
        return svc.org_bindings(p, org)

    @app.post("/v1/orgs/{org}/bindings", tags=["orgs"], response_model=responses.Binding)
    def org_bind(org: OrgName, body: PatternBody, p: Caller) -> dict[str, Any]:
        return svc.org_bind(p, org, body.pattern)

    @app.post("/v1/orgs/{org}/bindings/remove", tags=["orgs"], response_model=responses.Binding)
    def org_unbind(org: OrgName, body: PatternBody, p: Caller) -> dict[str, Any]:
        return svc.org_unbind(p, org, body.pattern)

    @app.get("/v1/scopes", tags=["lessons"], response_model=responses.Scopes)
    def scopes(p: Caller) -> dict[str, Any]:
        """The scopes this token's store holds lessons in, with counts (active, verified, archived)."""
        return svc.scopes(p)

    @app.get("/v1/whoami", tags=["accounts"], response_model=responses.WhoAmI)
    def whoami(p: Caller) -> dict[str, Any]:
        """The token's account, store, effective permission and scope limits."""
        return svc.whoami(p)

    @app.get("/v1/limits", tags=["accounts"], response_model=responses.Limits)
    def limits(p: Caller) -> dict[str, Any]:
        return svc.limits_show(p)

    return app


def _methods_at(request: Request) -> list[str]:
    """Every method some route serves at this path (Starlette's 405 names only the first route's)."""
    from starlette.routing import Match

    methods: set[str] = set()
    for route in request.app.router.routes:
        match, _ = route.matches({**request.scope, "method": "GET"})
        if match != Match.NONE and getattr(route, "methods", None):
            methods |= set(route.methods)
    return sorted(methods)


def _mcp_app(svc: Cairn) -> tuple[Any, Any]:
    """The MCP server as an ASGI app: the SDK verifies the bearer token (401 otherwise) through
    ``resolve_token``; each tool call resolves it again, so revocation takes effect mid-session."""
    import anyio
    from mcp.server.auth.middleware.auth_context import get_access_token
    from mcp.server.auth.provider import AccessToken
    from mcp.server.auth.settings import AuthSettings
    from mcp.server.transport_security import TransportSecuritySettings

    from cairn.mcp.server import build

    class Tokens:
        async def verify_token(self, token: str) -> AccessToken | None:
            try:
                p = await anyio.to_thread.run_sync(svc.resolve_token, token)
            except CairnError:
                return None
            return AccessToken(token=token, client_id=p.user_id or "", scopes=["cairn"])

    def caller() -> Principal:
        access = get_access_token()
        if access is None:
            raise CairnError("UNAUTHENTICATED", "no bearer token on this request")
        return svc.resolve_token(access.token)

    auth = {
        "token_verifier": Tokens(),
        # The SDK requires an issuer URL; Cairn is its own token issuer and publishes no OAuth metadata.
        "auth": AuthSettings(issuer_url="http://127.0.0.1", resource_server_url=None, required_scopes=["cairn"]),
    }
    server = build(svc, caller, auth=auth)
    asgi = server.streamable_http_app(
        streamable_http_path="/",
        stateless_http=True,
        json_response=True,
        # The app's HostGuard checks Host and Origin for every path, /mcp included: one allowlist.
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )
    return server, asgi
