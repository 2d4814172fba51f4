"""The service facade: every surface calls these methods with a principal.

The operations live in small services, each with its dependencies given when it is made
(``Services``): lessons, lifecycle, tombstones, review, graph, browse, scopes, context, search,
embeddings, export, transfer (import), purge, ledger, status, webhooks, conversations, sync, and the
accounts split into auth, orgs, tokens and limits. ``Cairn`` composes them and names each operation
once (``cairn.write(...)``, ``cairn.search(...)``): a facade method *is* its service's method, with
the same signature and docstring. Each operation opens its own transaction (``service/tx.py``).
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.runtime.settings import Settings
from cairn.service import rank_cache
from cairn.service.rank_indexes import RankIndexes
from cairn.store.engine import Store

if TYPE_CHECKING:
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
    from cairn.service.rank_index import RankIndex
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


@dataclass(frozen=True)
class Caches:
    """What a process keeps warm across requests, shared by every facade over the same store."""

    ranks: RankIndexes
    query_vectors: dict[tuple[str, str], bytes]


# Each service's class by its name on ``Services``: module and class, imported when first used, so a
# process that runs one operation (a hook's context block) imports that operation's modules only.
SERVICE_CLASSES: dict[str, tuple[str, str]] = {
    "auth": ("cairn.service.auth", "Auth"),
    "orgs": ("cairn.service.orgs", "Orgs"),
    "tokens": ("cairn.service.tokens", "Tokens"),
    "limits": ("cairn.service.tenant_limits", "TenantLimits"),
    "lessons": ("cairn.service.lessons", "Lessons"),
    "lifecycle": ("cairn.service.lifecycle", "Lifecycle"),
    "tombstones": ("cairn.service.tombstones", "Tombstones"),
    "review": ("cairn.service.review", "Review"),
    "graph": ("cairn.service.graph", "Graph"),
    "browse": ("cairn.service.browse", "Browse"),
    "scopes": ("cairn.service.scopes", "Scopes"),
    "context": ("cairn.service.context", "Context"),
    "embeddings": ("cairn.service.embeddings", "Embeddings"),
    "search": ("cairn.service.search", "Search"),
    "export": ("cairn.service.export", "Export"),
    "transfer": ("cairn.service.transfer", "Transfer"),
    "purge": ("cairn.service.purge", "Purge"),
    "ledger": ("cairn.service.ledger", "Ledger"),
    "status": ("cairn.service.status", "Status"),
    "webhooks": ("cairn.service.webhooks", "Webhooks"),
    "conversations": ("cairn.service.conversations", "Conversations"),
    "consolidation": ("cairn.service.consolidation", "Consolidation"),
    "sync": ("cairn.service.sync", "SyncService"),
}


def service_class(name: str) -> Any:
    """The class of the service ``name`` (a key of ``SERVICE_CLASSES``), importing its module."""
    module, cls = SERVICE_CLASSES[name]
    return getattr(importlib.import_module(module), cls)


class _service:  # noqa: N801 - used as a decorator, like ``property``
    """A service made on first use and kept: the first caller makes it under the facade's lock (the
    daemon's threads may ask at once; every caller gets the one instance), later ones read it from
    the instance's ``__dict__`` without the lock."""

    def __init__(self, make: Callable[[Services], Any]) -> None:
        self.make = make
        self.__doc__ = make.__doc__

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, obj: Services | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        with obj._lock:
            made = obj.__dict__.get(self.name)
            if made is None:
                made = obj.__dict__[self.name] = self.make(obj)
        return made


class Services:
    """The composed services; each is given exactly what it depends on.

    Each is made on first use (and then kept): building all of them would import every service's
    module, most of a cold one-command process's own start. Two services depending on a third get
    the same instance, as when they were all made at once.
    """

    def __init__(
        self, facade: Cairn, store: Store, settings: Settings, caches: Caches, auth: Auth | None = None
    ) -> None:
        self._facade = facade
        self._store = store
        self._settings = settings
        self._caches = caches
        self._lock = threading.RLock()  # re-entered: a service's dependencies are made inside its own making
        if auth is not None:
            self.__dict__["auth"] = auth  # a facade over other settings shares its tenants seen

    @classmethod
    def compose(
        cls, facade: Cairn, store: Store, settings: Settings, caches: Caches, auth: Auth | None = None
    ) -> Services:
        """Every service over ``store``; the gateway's conversations read through the facade they serve."""
        return cls(facade, store, settings, caches, auth)

    def _make(self, name: str, *deps: Any) -> Any:
        return service_class(name)(*deps)

    @_service
    def auth(self) -> Auth:
        return self._make("auth", self._store)

    @_service
    def orgs(self) -> Orgs:
        return self._make("orgs", self._store)

    @_service
    def tokens(self) -> Tokens:
        return self._make("tokens", self._store)

    @_service
    def limits(self) -> TenantLimits:
        return self._make("limits", self._store, self._settings)

    @_service
    def lessons(self) -> Lessons:
        return self._make("lessons", self._store, self._settings)

    @_service
    def lifecycle(self) -> Lifecycle:
        return self._make("lifecycle", self._store, self.lessons)

    @_service
    def tombstones(self) -> Tombstones:
        return self._make("tombstones", self._store)

    @_service
    def review(self) -> Review:
        return self._make("review", self._store, self.tombstones)

    @_service
    def graph(self) -> Graph:
        return self._make("graph", self._store)

    @_service
    def browse(self) -> Browse:
        return self._make("browse", self._store)

    @_service
    def scopes(self) -> Scopes:
        return self._make("scopes", self._store)

    @_service
    def context(self) -> Context:
        return self._make("context", self._store, self._settings, self._caches.ranks, self._caches.query_vectors)

    @_service
    def embeddings(self) -> Embeddings:
        return self._make("embeddings", self._store)

    @_service
    def search(self) -> Search:
        return self._make("search", self._store, self.embeddings, self._caches.ranks)

    @_service
    def export(self) -> Export:
        return self._make("export", self._store)

    @_service
    def transfer(self) -> Transfer:
        return self._make("transfer", self._store, self._settings, self.lessons)

    @_service
    def purge(self) -> Purge:
        return self._make("purge", self._store, self._settings)

    @_service
    def ledger(self) -> Ledger:
        return self._make("ledger", self._store)

    @_service
    def status(self) -> Status:
        return self._make("status", self._store)

    @_service
    def webhooks(self) -> Webhooks:
        return self._make("webhooks", self._store, self._settings, self.orgs, self.lessons)

    @_service
    def conversations(self) -> Conversations:
        return self._make("conversations", self._facade)

    @_service
    def consolidation(self) -> Consolidation:
        return self._make(
            "consolidation", self._store, self._settings, self.lessons, self.embeddings, self._caches.ranks
        )

    @_service
    def sync(self) -> SyncService:
        return self._make("sync", self._store)


class _Op:
    """A facade method that is the named service's method: ``Cairn.write`` is ``Lessons.write``.

    On an instance it returns the service's bound method (so the signature, the docstring and the
    type are the service's own); on the class, the service's function (for introspection). The
    service's module is imported when the operation is first looked up, not when the facade is.
    """

    def __init__(self, service: str, method: str) -> None:
        self.service = service
        self.name = method

    @property
    def method(self) -> Any:
        """The service's function (its class's attribute), self first."""
        return getattr(service_class(self.service), self.name)

    @property
    def __wrapped__(self) -> Any:  # what ``inspect.signature`` and ``functools`` follow
        return self.method

    def __get__(self, obj: Cairn | None, owner: type | None = None) -> Any:
        if obj is None:
            return self.method
        return getattr(getattr(obj.services, self.service), self.name)


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
    resolve_token = _Op("auth", "resolve_token")
    whoami = _Op("auth", "whoami")
    create_user = _Op("auth", "create_user")
    ensure_tenant = _Op("auth", "ensure_tenant")
    org_create = _Op("orgs", "org_create")
    org_list = _Op("orgs", "org_list")
    org_rename = _Op("orgs", "org_rename")
    org_delete = _Op("orgs", "org_delete")
    org_invite = _Op("orgs", "org_invite")
    org_invites = _Op("orgs", "org_invites")
    org_accept = _Op("orgs", "org_accept")
    org_revoke_invite = _Op("orgs", "org_revoke_invite")
    org_members = _Op("orgs", "org_members")
    member_role = _Op("orgs", "member_role")
    member_remove = _Op("orgs", "member_remove")
    org_leave = _Op("orgs", "org_leave")
    org_bind = _Op("orgs", "org_bind")
    org_unbind = _Op("orgs", "org_unbind")
    org_bindings = _Op("orgs", "org_bindings")
    token_create = _Op("tokens", "token_create")
    token_list = _Op("tokens", "token_list")
    token_revoke = _Op("tokens", "token_revoke")
    limits_show = _Op("limits", "limits_show")
    limits_set = _Op("limits", "limits_set")

    # -- lessons -------------------------------------------------------------------------------
    write = _Op("lessons", "write")
    write_many = _Op("lessons", "write_many")
    read = _Op("lessons", "read")
    list = _Op("lessons", "list")
    history = _Op("lessons", "history")
    diff = _Op("lessons", "diff")
    archive = _Op("lifecycle", "archive")
    restore = _Op("lifecycle", "restore")
    feedback = _Op("lifecycle", "feedback")
    supersede = _Op("lifecycle", "supersede")
    forget = _Op("tombstones", "forget")
    unforget = _Op("tombstones", "unforget")
    tombstones = _Op("tombstones", "tombstones")
    review_queue = _Op("review", "review_queue")
    verify = _Op("review", "verify")
    reject = _Op("review", "reject")
    link = _Op("graph", "link")
    neighborhood = _Op("graph", "neighborhood")
    expired = _Op("browse", "expired")
    lesson_detail = _Op("browse", "lesson_detail")
    scopes = _Op("scopes", "scopes")

    # -- reading for a session -----------------------------------------------------------------
    context = _Op("context", "context")
    search = _Op("search", "search")
    recall = _Op("search", "recall")
    drain_embeddings = _Op("embeddings", "drain_embeddings")
    drain_slice = _Op("embeddings", "drain_slice")
    pending_embeddings = _Op("embeddings", "pending_embeddings")
    drain_alongside = _Op("embeddings", "drain_alongside")
    reindex = _Op("embeddings", "reindex")

    # -- the store -----------------------------------------------------------------------------
    export = _Op("export", "export")
    import_lines = _Op("transfer", "import_lines")
    purge = _Op("purge", "purge")
    erase_forgotten = _Op("purge", "erase_forgotten")
    audit = _Op("ledger", "audit")
    audit_verify = _Op("ledger", "audit_verify")
    status = _Op("status", "status")

    # -- webhooks ------------------------------------------------------------------------------
    webhook_add = _Op("webhooks", "webhook_add")
    webhook_rotate = _Op("webhooks", "webhook_rotate")
    webhook_remove = _Op("webhooks", "webhook_remove")
    webhook_list = _Op("webhooks", "webhook_list")
    webhook_deliver = _Op("webhooks", "webhook_deliver")

    # -- the gateway's conversations -----------------------------------------------------------
    conversation_list = _Op("conversations", "list")
    conversation_show = _Op("conversations", "show")
    conversation_forget = _Op("conversations", "forget")

    # -- consolidation (docs/consolidation.md) --------------------------------------------------
    consolidate_preview = _Op("consolidation", "consolidate_preview")
    consolidate_plan = _Op("consolidation", "consolidate_plan")
    consolidate_apply = _Op("consolidation", "consolidate_apply")
    consolidate_resume = _Op("consolidation", "consolidate_resume")
    consolidate_drop = _Op("consolidation", "consolidate_drop")
    consolidate_undo = _Op("consolidation", "consolidate_undo")
    consolidate_scheduled = _Op("consolidation", "consolidate_scheduled")
    consolidate_runs = _Op("consolidation", "consolidate_runs")
    consolidate_show = _Op("consolidation", "consolidate_show")
    # -- sync between stores (docs/sync.md) ----------------------------------------------------
    sync_store_id = _Op("sync", "store_id")
    sync_feed = _Op("sync", "feed")
    sync_apply = _Op("sync", "apply")
    sync_peer_state = _Op("sync", "peer_state")
    sync_record_pushed = _Op("sync", "record_pushed")
