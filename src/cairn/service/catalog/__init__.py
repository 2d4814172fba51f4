"""The catalogue of operations: every service operation a surface serves, declared once.

Each :class:`Operation` names the facade method it runs, its input and output models, the
permission it needs, whether it writes, and where each surface serves it: the HTTP route (method,
path), the MCP tool, the remote client's method. The surfaces are derived from this table:

* ``api/operations.py`` registers one route per operation with an HTTP binding (path fields from
  the path, the rest as query parameters for GET/DELETE or one JSON body otherwise);
* ``mcp/tools.py`` registers one tool per operation with an MCP binding, its arguments the input
  model's fields (or the subset the binding names);
* ``runtime/remote.py`` (the HTTP client) gets one method per operation, with the facade's
  signature, mapping a call to the route's request.

This module is standard library only (named tuples, not dataclasses, which import ``inspect``):
the remote client reads it on the hooks' cold path. The models are named here and live in
``inputs.py`` (what a caller sends) and ``outputs.py`` / ``account_outputs.py`` (what the service
answers); :func:`input_model` / :func:`output_model` load them when a surface is built.

Adding an operation: write the service method, declare it below (and its input model in
``inputs.py``, its answer in ``outputs.py`` when new), and add a CLI command if people type it.
``tests/service/test_catalog.py`` proves every declared operation is reachable where it is bound.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, Literal, NamedTuple

from cairn.core.principal import Level

# What the caller's credential must carry. read/write/admin: the token's permission (cumulative);
# "account": any unrestricted credential of the account (its own tokens, invites it accepts).
Permission = Literal[Level, "account"]  # nested: the token levels are core's own


NONE: Mapping[str, Any] = MappingProxyType({})


class Http(NamedTuple):
    """The route: ``{name}`` segments of ``path`` are input fields; the others travel as query
    parameters (GET, DELETE) or one JSON body (POST). ``custom``: the route is hand-written
    (``api/app.py``: streaming, a raw body) and only declared here."""

    method: Literal["GET", "POST", "DELETE"]
    path: str
    operation_id: str
    tag: str
    custom: bool = False

    @property
    def path_fields(self) -> tuple[str, ...]:
        return tuple(re.findall(r"{(\w+)}", self.path))


class Tool(NamedTuple):
    """The MCP tool: its name, what the agent reads, the store hints, the input fields it exposes
    (all when ``fields`` is None) and the defaults it gives them where an agent wants fewer rows."""

    name: str
    description: str
    destructive: bool = False
    idempotent: bool = False
    fields: tuple[str, ...] | None = None
    defaults: Mapping[str, Any] = NONE


class Operation(NamedTuple):
    name: str  # the facade method (``Cairn.<name>``)
    permission: Permission
    writes: bool
    input: str  # a model in ``catalog.inputs``
    output: str  # a model in ``catalog.outputs``
    doc: str = ""  # what the operation does, for people (the OpenAPI description)
    args: tuple[str, ...] = ()  # input fields the facade takes positionally, in its order
    rename: Mapping[str, str] = NONE  # input field -> the facade's keyword
    call: str | None = None  # a function in ``catalog.calls`` when the fields do not map one-to-one
    http: Http | None = None
    mcp: Tool | None = None
    remote: bool = True  # the remote client derives a method (False: written by hand there)

    def invoke(self, svc: Any, principal: Any, values: dict[str, Any]) -> Any:
        """Run the operation with validated input ``values`` (input field -> value)."""
        if self.call is not None:
            from cairn.service.catalog import calls

            fn: Callable[..., Any] = getattr(calls, self.call)
            return fn(svc, principal, dict(values))
        rest = dict(values)
        args = [rest.pop(name) for name in self.args if name in rest]
        kwargs = {self.rename.get(k, k): v for k, v in rest.items()}
        return getattr(svc, self.name)(principal, *args, **kwargs)


def input_model(op: Operation) -> Any:
    from cairn.service.catalog import inputs

    return getattr(inputs, op.input)


def output_model(op: Operation) -> Any:
    from cairn.service.catalog import account_outputs, outputs

    return getattr(outputs, op.output, None) or getattr(account_outputs, op.output)


ADDRESS = ("scope", "key")
_L, _R, _G, _T, _A, _O, _V = "lessons", "retrieval", "graph", "transfer", "accounts", "orgs", "review"
_C = "conversations"
_K = "consolidation"
_W = "webhooks"
_S = "sync"

OPERATIONS: tuple[Operation, ...] = (
    # -- lessons ----------------------------------------------------------------------------------
    Operation(
        "write", "write", True, "WriteBody", "Written", args=("scope", "key", "value"), call="write",
        doc="Create a lesson, edit it (a new version), or count a recurrence of the same content.",
        http=Http("POST", "/v1/lessons", "writeLesson", _L),
        mcp=Tool(
            "write",
            "Save a lesson (or edit the one at this scope+key; the same content again counts a recurrence).",
            fields=("scope", "key", "value", "tags", "kind", "trigger"),
        ),
    ),
    Operation(
        "read", "read", False, "ReadQuery", "OneLesson", args=ADDRESS,
        doc="One lesson by address; ``as_of`` reads what Cairn held then, ``valid_at`` what was true then.",
        http=Http("GET", "/v1/lesson", "readLesson", _L),
        mcp=Tool("read", "Read one lesson by scope and key.", fields=ADDRESS),
    ),
    Operation(
        "list", "read", False, "ListQuery", "LessonPage", args=("scope",),
        doc="Active lessons (or archived ones), newest first; ``next_cursor`` fetches the next page.",
        http=Http("GET", "/v1/lessons", "listLessons", _L),
        mcp=Tool(
            "list_lessons",
            "List active lessons, newest first, optionally of one scope or tag; pass next_cursor as "
            "cursor for the next page.",
            fields=("scope", "tag", "limit", "cursor"),
            defaults={"limit": 50},
        ),
    ),
    Operation(
        "history", "read", False, "AddressQuery", "History", args=ADDRESS,
        doc="Every version of a lesson, with the record-time interval each was current.",
        http=Http("GET", "/v1/lesson/history", "lessonHistory", _L),
        mcp=Tool("history", "Every version of a lesson, oldest first."),
    ),
    Operation(
        "diff", "read", False, "DiffQuery", "Diff", args=(*ADDRESS, "v1", "v2"),
        doc="What changed between two versions of a lesson.",
        http=Http("GET", "/v1/lesson/diff", "diffLessonVersions", _L),
    ),
    Operation(
        "archive", "write", True, "AddressBody", "Changed", args=ADDRESS,
        doc="Hide a lesson from reads (reversible with restore).",
        http=Http("POST", "/v1/lesson/archive", "archiveLesson", _L),
        mcp=Tool(
            "archive", "Hide a lesson that no longer applies (reversible with restore).", True, True
        ),
    ),
    Operation(
        "restore", "write", True, "AddressBody", "Changed", args=ADDRESS,
        doc="Bring back an archived lesson.",
        http=Http("POST", "/v1/lesson/restore", "restoreLesson", _L),
        mcp=Tool("restore", "Bring back an archived lesson.", False, True),
    ),
    Operation(
        "forget", "write", True, "ForgetBody", "Forgotten", args=(*ADDRESS, "reason"),
        doc="Reject a lesson and tombstone its content: the same text is refused under any key.",
        http=Http("POST", "/v1/lesson/forget", "forgetLesson", _L),
        mcp=Tool(
            "forget", "Reject a wrong lesson for good: its content is refused under any key from now on.", True, True
        ),
    ),
    Operation(
        "feedback", "write", True, "FeedbackBody", "FeedbackGiven", args=(*ADDRESS, "outcome"),
        doc="Say whether a lesson helped; outcomes shape its ranking.",
        http=Http("POST", "/v1/lesson/feedback", "lessonFeedback", _L),
        mcp=Tool("feedback", "Say whether a lesson helped; outcomes shape its ranking.", False, False),
    ),
    Operation(
        "supersede", "write", True, "SupersedeBody", "Superseded", call="supersede", remote=False,
        doc="Write a lesson that replaces another (named, or found by key); the old one is retired and linked.",
        http=Http("POST", "/v1/lesson/supersede", "supersedeLesson", _L),
        mcp=Tool(
            "supersede", "Replace a lesson with a better one; the old one is retired and linked.", True, False,
            fields=("scope", "key", "value", "old_scope", "old_key"),
        ),
    ),
    Operation(
        "purge", "admin", True, "PurgeBody", "Purged", call="purge", remote=False,
        doc="Hard-erase expired lessons, or archived ones past retention (admin); the audit keeps hashes only.",
        http=Http("POST", "/v1/purge", "purgeLessons", _L),
    ),
    Operation(
        "tombstones", "read", False, "TombstonesQuery", "TombstonePage",
        doc="Forgotten content (tombstones), newest first.",
        http=Http("GET", "/v1/tombstones", "listTombstones", _L),
    ),
    Operation(
        "unforget", "admin", True, "UnforgetBody", "Lifted", args=("tombstone_id", "reason"),
        doc="The one audited way back from a forget (admin).",
        http=Http("POST", "/v1/tombstones/lift", "liftTombstone", _L),
    ),
    Operation(
        "scopes", "read", False, "Nothing", "Scopes",
        doc="The scopes this token's store holds lessons in, with counts (active, verified, archived).",
        http=Http("GET", "/v1/scopes", "listScopes", _L),
        mcp=Tool(
            "scopes", "The scopes that already hold lessons, with counts: reuse one before inventing a new scope."
        ),
    ),
    # -- retrieval --------------------------------------------------------------------------------
    Operation(
        "search", "read", False, "SearchBody", "SearchResults", args=("query",),
        doc="Lessons by meaning and words, ranked.",
        http=Http("POST", "/v1/search", "searchLessons", _R),
        mcp=Tool(
            "search",
            "Search lessons by meaning and words; give repo/branch to search their scope ladder.",
            fields=("query", "repo", "branch", "limit", "mode"),
        ),
    ),
    Operation(
        "recall", "read", False, "RecallBody", "Recalled", args=("text",),
        doc="At most a few lessons that fit an error text, or none when nothing clears the relevance floor.",
        http=Http("POST", "/v1/recall", "recallLessons", _R),
        mcp=Tool(
            "recall",
            "Given an error message or failing output, return at most 3 lessons that fit it, or none.",
            fields=("text", "repo", "branch"),
        ),
    ),
    Operation(
        "context", "read", False, "ContextBody", "Context", remote=False,
        doc="The session-start block for a repo/branch/task, within a character budget.",
        http=Http("POST", "/v1/context", "getContext", _R),
        mcp=Tool(
            "context",
            "The lessons that matter for this repo/branch/task, as one block within a character budget.",
            fields=("repo", "branch", "task", "max_chars"),
        ),
    ),
    # -- graph ------------------------------------------------------------------------------------
    Operation(
        "link", "write", True, "LinkBody", "Linked", args=(*ADDRESS, "other_scope", "other_key", "rel"),
        doc="Link two lessons: related, contradicts, or derived_from.",
        http=Http("POST", "/v1/lesson/link", "linkLessons", _G),
        mcp=Tool("link", "Link two lessons: related, contradicts, or derived_from.", False, True),
    ),
    Operation(
        "neighborhood", "read", False, "NeighborhoodQuery", "Neighborhood", args=ADDRESS,
        doc="A lesson and the lessons linked to it, within a character budget.",
        http=Http("GET", "/v1/lesson/neighborhood", "lessonNeighborhood", _G),
        mcp=Tool(
            "neighborhood",
            "A lesson and the lessons linked to it, within a character budget.",
            fields=(*ADDRESS, "depth"),
        ),
    ),
    # -- review -----------------------------------------------------------------------------------
    Operation(
        "review_queue", "read", False, "ReviewQuery", "ReviewQueue",
        doc="Candidates awaiting review, oldest first.",
        http=Http("GET", "/v1/review", "listReviewQueue", _V),
        mcp=Tool(
            "review",
            "Candidate lessons awaiting a person's review, oldest first (next_cursor continues).",
            defaults={"limit": 50},
        ),
    ),
    Operation(
        "verify", "write", True, "AddressBody", "Changed", args=ADDRESS,
        doc="Mark a candidate lesson verified.",
        http=Http("POST", "/v1/review/verify", "verifyLesson", _V),
    ),
    Operation(
        "reject", "write", True, "ForgetBody", "Forgotten", args=(*ADDRESS, "reason"),
        doc="Reject a candidate: forget it, with the reason.",
        http=Http("POST", "/v1/review/reject", "rejectLesson", _V),
    ),
    # -- audit ------------------------------------------------------------------------------------
    Operation(
        "audit", "read", False, "AuditQuery", "AuditPage",
        doc="The newest entries, oldest first within a page; ``next_cursor`` pages back in time.",
        http=Http("GET", "/v1/audit", "listAuditEntries", "audit"),
    ),
    Operation(
        "audit_verify", "admin", False, "AuditVerifyQuery", "AuditVerified", call="audit_verify", remote=False,
        doc="Re-hash the tenant's audit chain and check every lesson, version and tombstone row against it "
        "(``fast``: the chain only); a mismatch is 409 ``AUDIT_BROKEN`` naming the first one.",
        http=Http("GET", "/v1/audit/verify", "verifyAudit", "audit"),
    ),
    # -- transfer (hand-written routes: a stream out, a raw file in) --------------------------------
    Operation(
        "export", "read", False, "ExportQuery", "Exported", call="export", remote=False,
        http=Http("GET", "/v1/export", "exportLessons", _T, custom=True),
    ),
    Operation(
        "import_lines", "write", True, "ImportBody", "Imported", args=("lines",), remote=False,
        http=Http("POST", "/v1/import", "importLessons", _T, custom=True),
    ),
    # -- accounts ---------------------------------------------------------------------------------
    Operation(
        "whoami", "read", False, "Nothing", "WhoAmI",
        doc="The token's account, store, effective permission and scope limits.",
        http=Http("GET", "/v1/whoami", "whoami", _A),
    ),
    Operation(
        "limits_show", "read", False, "Nothing", "Limits", remote=False,
        doc="The store's limits and where each comes from.",
        http=Http("GET", "/v1/limits", "getLimits", _A),
    ),
    Operation(
        "token_create", "admin", True, "TokenBody", "NewToken",
        doc="A new token; the secret is in this response only (``token``) and stored as a hash.",
        http=Http("POST", "/v1/tokens", "createToken", _A),
    ),
    Operation(
        "token_list", "account", False, "TokenListQuery", "TokenPage", args=("org",),
        doc="Your own tokens; with ``org``, every token of the org (its admins and owners).",
        http=Http("GET", "/v1/tokens", "listTokens", _A),
    ),
    Operation(
        "token_revoke", "account", True, "TokenRevoke", "TokenRevoked", args=("token_id",),
        doc="Revoke a token: it stops working at once.",
        http=Http("POST", "/v1/tokens/{token_id}/revoke", "revokeToken", _A),
    ),
    # -- orgs -------------------------------------------------------------------------------------
    Operation(
        "org_create", "admin", True, "OrgBody", "OrgCreated", args=("org", "name"),
        doc="A new org, with you as its owner.",
        http=Http("POST", "/v1/orgs", "createOrg", _O),
    ),
    Operation(
        "org_list", "account", False, "Nothing", "Orgs",
        doc="The orgs you belong to, with your role in each.",
        http=Http("GET", "/v1/orgs", "listOrgs", _O),
    ),
    Operation(
        "org_rename", "admin", True, "OrgRename", "OrgRenamed", args=("org", "name"),
        http=Http("POST", "/v1/orgs/{org}/rename", "renameOrg", _O),
    ),
    Operation(
        "org_delete", "admin", True, "OrgDelete", "OrgDeleted", args=("org", "confirm"),
        doc="Delete an org and erase its lessons (its owner; ``confirm`` repeats its name).",
        http=Http("DELETE", "/v1/orgs/{org}", "deleteOrg", _O),
    ),
    Operation(
        "org_invite", "admin", True, "OrgInvite", "NewInvite", args=("org", "role", "expires"),
        doc="An invite code for the org; the code is in this response only.",
        http=Http("POST", "/v1/orgs/{org}/invites", "createInvite", _O),
    ),
    Operation(
        "org_invites", "account", False, "InOrg", "Invites", args=("org",),
        http=Http("GET", "/v1/orgs/{org}/invites", "listInvites", _O),
    ),
    Operation(
        "org_revoke_invite", "admin", True, "InviteRevoke", "InviteRevoked", args=("org", "invite_id"),
        http=Http("POST", "/v1/orgs/{org}/invites/{invite_id}/revoke", "revokeInvite", _O),
    ),
    Operation(
        "org_accept", "admin", True, "CodeBody", "Joined", args=("code",),
        doc="Join an org with an invite code.",
        http=Http("POST", "/v1/invites/accept", "acceptInvite", _O),
    ),
    Operation(
        "org_members", "account", False, "MembersQuery", "MemberPage", args=("org",),
        http=Http("GET", "/v1/orgs/{org}/members", "listMembers", _O),
    ),
    Operation(
        "member_role", "admin", True, "MemberRole", "RoleChanged", args=("org", "user", "role"),
        http=Http("POST", "/v1/orgs/{org}/members/{user}/role", "setMemberRole", _O),
    ),
    Operation(
        "member_remove", "admin", True, "MemberAddress", "MemberRemoved", args=("org", "user"),
        http=Http("DELETE", "/v1/orgs/{org}/members/{user}", "removeMember", _O),
    ),
    Operation(
        "org_leave", "admin", True, "InOrg", "Left", args=("org",),
        http=Http("POST", "/v1/orgs/{org}/leave", "leaveOrg", _O),
    ),
    Operation(
        "org_bindings", "account", False, "InOrg", "Bindings", args=("org",),
        http=Http("GET", "/v1/orgs/{org}/bindings", "listBindings", _O),
    ),
    Operation(
        "org_bind", "admin", True, "OrgPattern", "Binding", args=("org", "pattern"),
        doc="Bind a scope pattern to the org: its members' writes there land in the org's store.",
        http=Http("POST", "/v1/orgs/{org}/bindings", "addBinding", _O),
    ),
    Operation(
        "org_unbind", "admin", True, "OrgPattern", "Binding", args=("org", "pattern"),
        http=Http("POST", "/v1/orgs/{org}/bindings/remove", "removeBinding", _O),
    ),
    # -- gateway conversations ----------------------------------------------------------------------
    Operation(
        "conversation_list", "read", False, "ConversationsQuery", "ConversationList",
        doc="The gateway's recorded conversations, most recently active first.",
        http=Http("GET", "/v1/conversations", "listConversations", _C),
    ),
    Operation(
        "conversation_show", "read", False, "ConversationRef", "ConversationShown", args=("conversation_id",),
        doc="One conversation's kept messages, turn by turn, and the candidate lessons drawn from it.",
        http=Http("GET", "/v1/conversations/{conversation_id}", "showConversation", _C),
    ),
    Operation(
        "conversation_forget", "write", True, "ConversationForgetBody", "ConversationsForgotten",
        rename=MappingProxyType({"all": "everything"}),
        doc="Forget a conversation, one turn or one message (or ``all``): the text is erased, tombstones "
        "at that granularity and on the content keep it from coming back, candidates drawn only from it "
        "are archived or purged.",
        http=Http("POST", "/v1/conversations/forget", "forgetConversation", _C),
    ),
    # -- consolidation (docs/consolidation.md) -------------------------------------------------------
    Operation(
        "consolidate_preview", "read", False, "ConsolidateBody", "ConsolidationPlan",
        doc="The plan consolidation would make now (merge, promote, flag-contradiction, archive-stale), "
        "each action with its lessons and reason; nothing is stored.",
        http=Http("POST", "/v1/consolidation/preview", "previewConsolidation", _K),
        mcp=Tool("consolidate_preview", "What consolidation would change now and why (stores nothing).",
                 idempotent=True),
    ),
    Operation(
        "consolidate_plan", "write", True, "ConsolidateBody", "ConsolidationPlan",
        doc="Plan a consolidation run and store it: its actions wait for a person to apply or drop them.",
        http=Http("POST", "/v1/consolidation/plan", "planConsolidation", _K),
        mcp=Tool("consolidate_plan", "Store a consolidation plan for a person to review (changes no lesson)."),
    ),
    Operation(
        "consolidate_apply", "write", True, "ConsolidateApplyBody", "ConsolidationPlan",
        doc="Apply a stored run's planned actions (or those at ``positions``); without ``run_id``, plan now and "
        "apply. Each action is its own transaction, guarded by the versions it read and the deletion epoch.",
        http=Http("POST", "/v1/consolidation/apply", "applyConsolidation", _K),
        mcp=Tool("consolidate_apply", "Apply a consolidation plan: merges, promotions, flags and archives, "
                 "each audited and undoable.", destructive=True),
    ),
    Operation(
        "consolidate_resume", "write", True, "ResumeBody", "ConsolidationPlan",
        doc="Finish the newest run whose apply was interrupted; no action is applied twice.",
        http=Http("POST", "/v1/consolidation/resume", "resumeConsolidation", _K),
    ),
    Operation(
        "consolidate_drop", "write", True, "RunDropBody", "ConsolidationPlan",
        doc="Drop planned actions of a run (all, or those at ``positions``): they never apply.",
        http=Http("POST", "/v1/consolidation/runs/{run_id}/drop", "dropConsolidationActions", _K),
    ),
    Operation(
        "consolidate_undo", "write", True, "RunUndoBody", "ConsolidationUndone",
        doc="Reverse what a run applied (restore what it archived, reverse its supersessions), each change "
        "a new audited version; lessons changed since are left and named.",
        http=Http("POST", "/v1/consolidation/runs/{run_id}/undo", "undoConsolidation", _K),
        mcp=Tool("consolidate_undo", "Undo a consolidation run.", destructive=True),
    ),
    Operation(
        "consolidate_runs", "read", False, "RunsQuery", "ConsolidationRuns",
        doc="Consolidation runs, newest first, with how many actions are in each status.",
        http=Http("GET", "/v1/consolidation/runs", "listConsolidationRuns", _K),
        mcp=Tool("consolidate_runs", "Consolidation runs, newest first.", idempotent=True),
    ),
    Operation(
        "consolidate_show", "read", False, "RunRef", "ConsolidationPlan",
        doc="One consolidation run: every action with its lessons, the versions it read and wrote, its reason.",
        http=Http("GET", "/v1/consolidation/runs/{run_id}", "showConsolidationRun", _K),
        mcp=Tool("consolidate_show", "One consolidation run with every action and its reason.", idempotent=True),
    ),
    # -- webhooks (docs/webhooks.md) ---------------------------------------------------------------
    Operation(
        "webhook_add", "admin", True, "WebhookBody", "WebhookSecret", args=("repo",),
        doc="Register a GitHub repository: its deliveries land as candidate lessons in repo::owner/name. "
        "The secret is in this response only.",
        http=Http("POST", "/v1/webhooks", "addWebhook", _W),
    ),
    Operation(
        "webhook_list", "admin", False, "WebhookListQuery", "Webhooks",
        doc="The registered repositories with what was done with their deliveries (never a secret).",
        http=Http("GET", "/v1/webhooks", "listWebhooks", _W),
    ),
    Operation(
        "webhook_rotate", "admin", True, "WebhookRotate", "WebhookSecret", args=("repo",), call="webhook_rotate",
        doc="A new secret (in this response only); the previous one keeps verifying for ``grace``.",
        http=Http("POST", "/v1/webhooks/rotate", "rotateWebhookSecret", _W),
    ),
    Operation(
        "webhook_remove", "admin", True, "WebhookBody", "WebhookRemoved", args=("repo",),
        doc="Unregister a repository: its deliveries are refused from now on; its lessons stay.",
        http=Http("POST", "/v1/webhooks/remove", "removeWebhook", _W),
    ),
    # -- sync between stores (docs/sync.md) -------------------------------------------------------
    Operation(
        "sync_store_id", "read", False, "Nothing", "SyncStore", call="sync_store_id",
        doc="This store's id for sync (a peer records its cursors and chain head under it).",
        http=Http("GET", "/v1/sync/store", "getSyncStore", _S),
    ),
    Operation(
        "sync_feed", "read", False, "SyncFeedQuery", "SyncBatch", call="sync_feed",
        doc="A page of this store's change feed after ``since`` (the token's tenant and scopes only).",
        http=Http("GET", "/v1/sync/feed", "getSyncFeed", _S),
    ),
    Operation(
        "sync_apply", "write", True, "SyncBatch", "ApplyResult", call="sync_apply", remote=False,
        doc="Apply a page of another store's feed in one transaction: idempotent by event uid, "
        "conflicts kept and put in review, tombstones and purges win; records the peer's cursor and chain head.",
        http=Http("POST", "/v1/sync/apply", "applySyncBatch", _S),
    ),
    Operation(
        "sync_peer_state", "read", False, "SyncPeerQuery", "PeerState", args=("store_id",), call="sync_peer_state",
        doc="What this store knows of a peer: its cursors both ways, its last chain head, the last exchange.",
        http=Http("GET", "/v1/sync/peer", "getSyncPeer", _S),
    ),
)  # fmt: skip

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}


def operation(name: str) -> Operation:
    return BY_NAME[name]
