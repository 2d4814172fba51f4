"""What a caller sends to each operation: one model per operation's input, for every surface.

The HTTP API takes a model's fields from the route's path, its query string or its JSON body (see
``catalog.Http``), the MCP tool takes them as arguments, and the OpenAPI document and the tools'
schemas show their sizes, enums and patterns. A body refuses unknown fields (``Strict``); a query
string ignores parameters it does not know (``Params``), as HTTP servers do.

The field types are ``cairn.fields``'; the rules behind them stay the service's (a scope is
checked by ``validate_scope``, which answers with the corrected form).
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from cairn.core.consolidation import MAX_STALE_DAYS
from cairn.core.lesson import (
    MAX_PAGE,
    MAX_QUERY_CHARS,
    MAX_SEARCH_RESULTS,
    MAX_TASK_CHARS,
    CandidateFate,
    Kind,
    Mode,
    Outcome,
    Rel,
    Sweep,
    TrustFilter,
)
from cairn.core.principal import Level, TokenStyle
from cairn.core.roles import NAME_RE, Role
from cairn.core.sync import DEFAULT_BATCH, MAX_BATCH, STORE_ID_PATTERN, SyncBatch
from cairn.fields import NO_NUL, Branch, Cursor, Duration, Key, Project, Repo, Scope, Tag, Value

__all__ = ["SyncBatch"]  # an input model of the catalogue's, defined with the sync service's models
ORG_PATTERN = NAME_RE.pattern  # shown and enforced: the same rule as check_name's
Org = Annotated[str, Field(min_length=1, max_length=39, pattern=ORG_PATTERN)]
User = Annotated[str, Field(min_length=1, max_length=39, pattern=ORG_PATTERN)]
RowId = Annotated[int, Field(ge=1, le=2**62)]
Reason = Annotated[str, Field(min_length=1, max_length=2000, json_schema_extra=NO_NUL)]
Note = Annotated[str, Field(max_length=500, json_schema_extra=NO_NUL)]
# The enums are core's (``core/lesson.py``, ``core/roles.py``, ``core/principal.py``), never re-typed here.
Trust = TrustFilter
# One page of any listing, the same on every surface and in the service.
PageLimit = Annotated[int, Field(ge=1, le=MAX_PAGE)]


class Strict(BaseModel):
    """A JSON body: an unknown field is refused (a typo must not pass silently)."""

    model_config = ConfigDict(extra="forbid")


class Params(BaseModel):
    """Query and path parameters."""


class Nothing(Params):
    """An operation that takes no input besides the caller."""


# -- lessons ----------------------------------------------------------------------------------------
class AddressQuery(Params):
    scope: Scope
    key: Key


class ReadQuery(AddressQuery):
    as_of: AwareDatetime | None = Field(None, description="what Cairn held at this time (ISO 8601)")
    valid_at: AwareDatetime | None = Field(None, description="what was true in the world at this time (ISO 8601)")


class DiffQuery(AddressQuery):
    v1: Annotated[int, Field(ge=1)]
    v2: Annotated[int, Field(ge=1)]


class ListQuery(Params):
    scope: Scope | None = None
    tag: Tag | None = None
    trust: Trust | None = None
    archived: bool = False
    limit: PageLimit = 100
    cursor: Cursor | None = None


class WriteBody(Strict):
    scope: Scope
    key: Key
    value: Value
    tags: list[Tag] = Field(default_factory=list, max_length=32)
    kind: Kind = "lesson"
    source_agent: Note | None = None
    trigger: Note | None = Field(None, description="what prompted it, e.g. the error")
    ttl: Duration | None = None
    valid_from: AwareDatetime | None = Field(None, description="When it became true in the world (ISO 8601)")
    valid_to: AwareDatetime | None = Field(None, description="When it stopped being true (ISO 8601)")


class SupersedeBody(WriteBody):
    old_scope: Scope | None = None
    old_key: Key | None = None


class AddressBody(Strict):
    scope: Scope
    key: Key


class ForgetBody(AddressBody):
    reason: Reason


class FeedbackBody(AddressBody):
    outcome: Outcome


class PurgeBody(Strict):
    sweep: Sweep
    older_than: Duration | None = None


class TombstonesQuery(Params):
    include_lifted: bool = False
    limit: PageLimit = 100
    cursor: Cursor | None = None


class UnforgetBody(Strict):
    tombstone_id: RowId
    reason: Reason


# -- retrieval --------------------------------------------------------------------------------------
class SearchBody(Strict):
    query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS)]
    scopes: list[Scope] | None = None
    repo: Repo | None = None
    branch: Branch | None = None
    project: Project | None = None
    tag: Tag | None = None
    trust: Trust | None = None
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_RESULTS)] = 10
    mode: Mode = "hybrid"


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
    task: Annotated[str, Field(max_length=MAX_TASK_CHARS)] | None = None
    max_chars: Annotated[int, Field(ge=200, le=20000)] | None = None
    loop_cap: Annotated[int, Field(ge=0, le=100)] | None = None


# -- graph, review ----------------------------------------------------------------------------------
class LinkBody(AddressBody):
    other_scope: Scope
    other_key: Key
    rel: Rel


class NeighborhoodQuery(AddressQuery):
    depth: Annotated[int, Field(ge=1, le=3)] = 1
    budget: Annotated[int, Field(ge=100, le=20000)] = 2000


class ReviewQuery(Params):
    scope: Scope | None = None
    limit: PageLimit = 100
    cursor: Cursor | None = None


# -- audit, transfer --------------------------------------------------------------------------------
class AuditQuery(Params):
    scope: Scope | None = None
    key: Key | None = None
    since: AwareDatetime | None = None
    limit: PageLimit = 200
    cursor: Cursor | None = None


class AuditVerifyQuery(Params):
    fast: bool = False


class ExportQuery(Params):
    active: bool = False
    scope: Scope | None = None


class ImportBody(Strict):
    lines: list[Annotated[str, Field(max_length=200_000)]] = Field(max_length=10_000)


# -- tokens -----------------------------------------------------------------------------------------
class TokenBody(Strict):
    perm: Level = "read"
    scope_patterns: list[Annotated[str, Field(max_length=300)]] = Field(default_factory=list, max_length=32)
    org: Annotated[str, Field(max_length=39, pattern=ORG_PATTERN)] | None = None
    expires: Annotated[str, Field(max_length=20, examples=["90d", "never"])] = "90d"
    name: Annotated[str, Field(max_length=100)] | None = None
    style: TokenStyle = Field("cairn", description="lorekit: spelled lk_rw_…/lk_ro_… for LoreKit's CLI")


class TokenListQuery(Params):
    org: Annotated[str, Field(max_length=39, pattern=ORG_PATTERN)] | None = None
    limit: PageLimit = 100
    cursor: Cursor | None = None


class TokenRevoke(Params):
    token_id: RowId


# -- orgs -------------------------------------------------------------------------------------------
class OrgBody(Strict):
    org: Org
    name: Annotated[str, Field(min_length=1, max_length=200)] | None = None


class InOrg(Params):
    org: Org


class OrgRename(InOrg):
    name: Annotated[str, Field(min_length=1, max_length=200)]


class OrgDelete(InOrg):
    confirm: Annotated[str, Field(max_length=64)] | None = None


class OrgInvite(InOrg):
    role: Role = "member"
    expires: Annotated[str, Field(max_length=20)] = "7d"


class InviteRevoke(InOrg):
    invite_id: RowId


class CodeBody(Strict):
    code: Annotated[str, Field(min_length=1, max_length=200)]


class MembersQuery(InOrg):
    limit: PageLimit = 100
    cursor: Cursor | None = None


class MemberAddress(InOrg):
    user: User


class MemberRole(MemberAddress):
    role: Role


class OrgPattern(InOrg):
    pattern: Annotated[str, Field(min_length=1, max_length=300)]


# -- gateway conversations --------------------------------------------------------------------------
class ConversationsQuery(Params):
    limit: PageLimit = 100


class ConversationRef(Params):
    conversation_id: RowId


class ConversationForgetBody(Strict):
    conversation_id: RowId | None = None
    turn: Annotated[int, Field(ge=1, le=2**31)] | None = None
    message: RowId | None = None
    all: bool = False
    candidates: CandidateFate = "archive"


# -- webhooks ---------------------------------------------------------------------------------------
GitHubRepo = Annotated[
    str,
    Field(min_length=3, max_length=140, pattern=r"^[A-Za-z0-9][A-Za-z0-9-]{0,38}/[A-Za-z0-9._-]{1,100}$",
          examples=["acme/widget"], description="OWNER/REPO on GitHub"),
]  # fmt: skip
OptionalOrg = Annotated[str, Field(max_length=39, pattern=ORG_PATTERN)] | None


class WebhookBody(Strict):
    repo: GitHubRepo
    org: OptionalOrg = Field(None, description="register in this org (its admins) instead of your own store")


class WebhookRotate(WebhookBody):
    grace: Annotated[str, Field(max_length=20, examples=["24h", "0s"])] | None = Field(
        None, description="how long the previous secret keeps verifying (default 24h, at most 7d)"
    )


class WebhookListQuery(Params):
    org: OptionalOrg = None


# -- consolidation (docs/consolidation.md) ----------------------------------------------------------
StaleDays = Annotated[int, Field(ge=1, le=MAX_STALE_DAYS, description="days before a one-off candidate is stale")]
Positions = Annotated[list[Annotated[int, Field(ge=1, le=2**31)]], Field(min_length=1, max_length=10_000)]


class ConsolidateBody(Strict):
    scopes: list[Scope] | None = Field(
        None, max_length=64, description="only these scopes (a repo:: scope includes its branches); all when absent"
    )
    stale_days: StaleDays | None = None


class ConsolidateApplyBody(ConsolidateBody):
    run_id: RowId | None = Field(None, description="a stored run to apply; absent: plan now and apply the plan")
    positions: Positions | None = Field(None, description="only the actions at these positions of the run")


class ResumeBody(Strict):
    """Resume takes nothing: the newest interrupted run is the one."""


class RunRef(Params):
    run_id: RowId


class RunDropBody(Strict):
    run_id: RowId
    positions: Positions | None = Field(None, description="the planned actions to drop; all when absent")


class RunUndoBody(Strict):
    run_id: RowId


class RunsQuery(Params):
    limit: PageLimit = 20


# -- sync (docs/sync.md) ----------------------------------------------------------------------------
# An apply's body is the feed's page as the sync service defines it (``core/sync.py: SyncBatch``,
# unknown fields refused); its bytes are capped by the API (``api/guard.py: MAX_SYNC_BYTES``).
StoreId = Annotated[str, Field(pattern=STORE_ID_PATTERN, description="a store's sync id (32 hex)")]


class SyncFeedQuery(Params):
    since: Annotated[int, Field(ge=0, le=2**62, description="the cursor the previous page answered")] = 0
    limit: Annotated[int, Field(ge=1, le=MAX_BATCH)] = DEFAULT_BATCH
    exclude_origin: StoreId | None = Field(None, description="leave out events that came from this store")


class SyncPeerQuery(Params):
    store_id: StoreId
