"""The service facade: every surface calls these methods with a principal.

The operations live in small services, each with its dependencies given when it is made
(``Services``): lessons, lifecycle, tombstones, review, graph, browse, scopes, context, search,
embeddings, export, transfer (import), purge, ledger, status, webhooks, conversations, sync, and the
accounts split into auth, orgs, tokens and limits. ``Cairn`` composes them and names each operation
once (``cairn.write(...)``, ``cairn.search(...)``): a facade method *is* its service's method, with
the same signature and docstring. Each operation opens its own transaction (``service/tx.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar

from cairn.runtime.settings import Settings
from cairn.service import rank_cache
from cairn.service.auth import Auth
from cairn.service.browse import Browse
from cairn.service.consolidation import Consolidation
from cairn.service.context import Context
from cairn.service.conversations import Conversations
from cairn.service.embeddings import Embeddings
from cairn.service.export import Export
from cairn.service.graph import Graph
from cairn.service.ledger import Ledger
from cairn.service.lessons import Lessons
from cairn.service.lifecycle import Lifecycle
from cairn.service.orgs import Orgs
from cairn.service.purge import Purge
from cairn.service.rank_indexes import RankIndexes
from cairn.service.review import Review
from cairn.service.scopes import Scopes
from cairn.service.search import Search
from cairn.service.status import Status
from cairn.service.sync import SyncService
from cairn.service.tenant_limits import TenantLimits
from cairn.service.tokens import Tokens
from cairn.service.tombstones import Tombstones
from cairn.service.transfer import Transfer
from cairn.service.webhooks import Webhooks
from cairn.store.engine import Store

if TYPE_CHECKING:
    from cairn.service.rank_index import RankIndex

P = ParamSpec("P")
R = TypeVar("R")


@dataclass(frozen=True)
class Caches:
    """What a process keeps warm across requests, shared by every facade over the same store."""

    ranks: RankIndexes
    query_vectors: dict[tuple[str, str], bytes]


@dataclass(frozen=True)
class Services:
    """The composed services; each is given exactly what it depends on."""

    auth: Auth
    orgs: Orgs
    tokens: Tokens
    limits: TenantLimits
    lessons: Lessons
    lifecycle: Lifecycle
    tombstones: Tombstones
    review: Review
    graph: Graph
    browse: Browse
    scopes: Scopes
    context: Context
    embeddings: Embeddings
    search: Search
    export: Export
    transfer: Transfer
    purge: Purge
    ledger: Ledger
    status: Status
    webhooks: Webhooks
    conversations: Conversations
    consolidation: Consolidation
    sync: SyncService

    @classmethod
    def compose(
        cls, facade: Cairn, store: Store, settings: Settings, caches: Caches, auth: Auth | None = None
    ) -> Services:
        """Every service over ``store``; the gateway's conversations read through the facade they serve."""
        lessons = Lessons(store, settings)
        orgs = Orgs(store)
        tombstones = Tombstones(store)
        embeddings = Embeddings(store)
        ranks = caches.ranks
        return cls(
            auth=auth or Auth(store),
            orgs=orgs,
            tokens=Tokens(store),
            limits=TenantLimits(store, settings),
            lessons=lessons,
            lifecycle=Lifecycle(store, lessons),
            tombstones=tombstones,
            review=Review(store, tombstones),
            graph=Graph(store),
            browse=Browse(store),
            scopes=Scopes(store),
            context=Context(store, settings, caches.ranks, caches.query_vectors),
            embeddings=embeddings,
            search=Search(store, embeddings, caches.ranks),
            export=Export(store),
            transfer=Transfer(store, settings, lessons),
            purge=Purge(store, settings),
            ledger=Ledger(store),
            status=Status(store),
            webhooks=Webhooks(store, settings, orgs, lessons),
            conversations=Conversations(facade),
            consolidation=Consolidation(store, settings, lessons, embeddings, ranks),
            sync=SyncService(store),
        )


class _Op(Generic[P, R]):
    """A facade method that is the named service's method: ``Cairn.write`` is ``Lessons.write``.

    On an instance it returns the service's bound method (so the signature, the docstring and the
    type are the service's own); on the class, the service's function (for introspection).
    """

    def __init__(self, service: str, method: Callable[Concatenate[Any, P], R]) -> None:
        self.service = service
        self.method = method
        self.__doc__ = method.__doc__
        self.__wrapped__ = method

    def __get__(self, obj: Cairn | None, owner: type | None = None) -> Callable[P, R]:
        if obj is None:
            return self.method  # type: ignore[return-value]  # the unbound function, self first
        bound: Callable[P, R] = getattr(getattr(obj.services, self.service), self.method.__name__)
        return bound


class Cairn:
    def __init__(
        self, store: Store, settings: Settings | None = None, *, caches: Caches | None = None, auth: Auth | None = None
    ) -> None:
        self.store = store
        self.settings = settings or Settings()
        self.caches = caches or Caches(RankIndexes(rank_cache.cache_dir(store.url)), {})
        self.services = Services.compose(self, store, self.settings, self.caches, auth)

    def with_settings(self, settings: Settings) -> Cairn:
        """The same store, caches and tenants seen, under other settings (another repository's ``.cairn.toml``)."""
        return Cairn(self.store, settings, caches=self.caches, auth=self.services.auth)

    def _rank_index(self, tenant_id: str) -> RankIndex:
        """The tenant's warm ranking index (tests look at it)."""
        return self.caches.ranks.get(tenant_id)

    @property
    def _rank_indexes(self) -> dict[str, RankIndex]:
        """The tenants whose ranking index is kept, least recently used first."""
        return self.caches.ranks.cache

    # -- accounts ------------------------------------------------------------------------------
    resolve_token = _Op("auth", Auth.resolve_token)
    whoami = _Op("auth", Auth.whoami)
    create_user = _Op("auth", Auth.create_user)
    ensure_tenant = _Op("auth", Auth.ensure_tenant)
    org_create = _Op("orgs", Orgs.org_create)
    org_list = _Op("orgs", Orgs.org_list)
    org_rename = _Op("orgs", Orgs.org_rename)
    org_delete = _Op("orgs", Orgs.org_delete)
    org_invite = _Op("orgs", Orgs.org_invite)
    org_invites = _Op("orgs", Orgs.org_invites)
    org_accept = _Op("orgs", Orgs.org_accept)
    org_revoke_invite = _Op("orgs", Orgs.org_revoke_invite)
    org_members = _Op("orgs", Orgs.org_members)
    member_role = _Op("orgs", Orgs.member_role)
    member_remove = _Op("orgs", Orgs.member_remove)
    org_leave = _Op("orgs", Orgs.org_leave)
    org_bind = _Op("orgs", Orgs.org_bind)
    org_unbind = _Op("orgs", Orgs.org_unbind)
    org_bindings = _Op("orgs", Orgs.org_bindings)
    token_create = _Op("tokens", Tokens.token_create)
    token_list = _Op("tokens", Tokens.token_list)
    token_revoke = _Op("tokens", Tokens.token_revoke)
    limits_show = _Op("limits", TenantLimits.limits_show)
    limits_set = _Op("limits", TenantLimits.limits_set)

    # -- lessons -------------------------------------------------------------------------------
    write = _Op("lessons", Lessons.write)
    write_many = _Op("lessons", Lessons.write_many)
    read = _Op("lessons", Lessons.read)
    list = _Op("lessons", Lessons.list)
    history = _Op("lessons", Lessons.history)
    diff = _Op("lessons", Lessons.diff)
    archive = _Op("lifecycle", Lifecycle.archive)
    restore = _Op("lifecycle", Lifecycle.restore)
    feedback = _Op("lifecycle", Lifecycle.feedback)
    supersede = _Op("lifecycle", Lifecycle.supersede)
    forget = _Op("tombstones", Tombstones.forget)
    unforget = _Op("tombstones", Tombstones.unforget)
    tombstones = _Op("tombstones", Tombstones.tombstones)
    review_queue = _Op("review", Review.review_queue)
    verify = _Op("review", Review.verify)
    reject = _Op("review", Review.reject)
    link = _Op("graph", Graph.link)
    neighborhood = _Op("graph", Graph.neighborhood)
    expired = _Op("browse", Browse.expired)
    lesson_detail = _Op("browse", Browse.lesson_detail)
    scopes = _Op("scopes", Scopes.scopes)

    # -- reading for a session -----------------------------------------------------------------
    context = _Op("context", Context.context)
    search = _Op("search", Search.search)
    recall = _Op("search", Search.recall)
    drain_embeddings = _Op("embeddings", Embeddings.drain_embeddings)
    reindex = _Op("embeddings", Embeddings.reindex)

    # -- the store -----------------------------------------------------------------------------
    export = _Op("export", Export.export)
    import_lines = _Op("transfer", Transfer.import_lines)
    purge = _Op("purge", Purge.purge)
    erase_forgotten = _Op("purge", Purge.erase_forgotten)
    audit = _Op("ledger", Ledger.audit)
    audit_verify = _Op("ledger", Ledger.audit_verify)
    status = _Op("status", Status.status)

    # -- webhooks ------------------------------------------------------------------------------
    webhook_add = _Op("webhooks", Webhooks.webhook_add)
    webhook_rotate = _Op("webhooks", Webhooks.webhook_rotate)
    webhook_remove = _Op("webhooks", Webhooks.webhook_remove)
    webhook_list = _Op("webhooks", Webhooks.webhook_list)
    webhook_deliver = _Op("webhooks", Webhooks.webhook_deliver)

    # -- the gateway's conversations -----------------------------------------------------------
    conversation_list = _Op("conversations", Conversations.list)
    conversation_show = _Op("conversations", Conversations.show)
    conversation_forget = _Op("conversations", Conversations.forget)

    # -- consolidation (docs/consolidation.md) --------------------------------------------------
    consolidate_preview = _Op("consolidation", Consolidation.consolidate_preview)
    consolidate_plan = _Op("consolidation", Consolidation.consolidate_plan)
    consolidate_apply = _Op("consolidation", Consolidation.consolidate_apply)
    consolidate_resume = _Op("consolidation", Consolidation.consolidate_resume)
    consolidate_drop = _Op("consolidation", Consolidation.consolidate_drop)
    consolidate_undo = _Op("consolidation", Consolidation.consolidate_undo)
    consolidate_scheduled = _Op("consolidation", Consolidation.consolidate_scheduled)
    consolidate_runs = _Op("consolidation", Consolidation.consolidate_runs)
    consolidate_show = _Op("consolidation", Consolidation.consolidate_show)
    # -- sync between stores (docs/sync.md) ----------------------------------------------------
    sync_store_id = _Op("sync", SyncService.store_id)
    sync_feed = _Op("sync", SyncService.feed)
    sync_apply = _Op("sync", SyncService.apply)
    sync_peer_state = _Op("sync", SyncService.peer_state)
    sync_record_pushed = _Op("sync", SyncService.record_pushed)
