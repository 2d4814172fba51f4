"""GitHub webhooks: registering a repository, and a delivery becoming a candidate lesson.

Rules that live here (and nowhere in a surface):

* registrations are an admin's, per tenant (``--org`` names an org the caller administers);
  every add, rotate and remove is audited with a fingerprint of the secret, never the secret;
* a delivery is checked in the order of ``webhooks/github.py``: headers, HMAC over the raw body
  against the registrations of the repository the payload URL names (the current secret, and the
  previous one during its grace period), the payload's own repository, the event gate, the filter;
  an unknown repository and a wrong signature are one answer, and take the same work;
* a processed ``X-GitHub-Delivery`` id is remembered in the transaction that acted on it, so a
  redelivery answers "duplicate" and changes nothing, and a delivery that failed is not remembered;
* a finding is written through the one write path (``Lessons.write_in``): tombstones, limits,
  recurrence and the audit apply as to any write; it lands as a candidate in ``repo::owner/name``,
  with its provenance beside it. An outside author's lesson is never promoted by recurrence
  (``lessons.py`` asks :func:`outside`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from sqlalchemy import delete, insert, select, update
from sqlalchemy.engine import Connection

from cairn.core import roles
from cairn.core.jsonin import loads
from cairn.core.principal import ADMIN, READ, WRITE, Principal
from cairn.core.scope import validate_scope
from cairn.core.timeparse import format_time, utcnow
from cairn.errors import CairnError
from cairn.runtime.settings import Settings
from cairn.service import audit
from cairn.service.records import fetch
from cairn.service.tx import read_tx, write_tx
from cairn.store.engine import Store
from cairn.store.schema import tenants, webhook_deliveries, webhook_provenance, webhooks
from cairn.webhooks import github as gh

if TYPE_CHECKING:  # lessons imports this module (provenance, outside): no cycle at run time
    from cairn.service.lessons import Lessons
    from cairn.service.orgs import Orgs

AdminTx = Callable[[Connection, Principal], dict[str, Any]]

log = logging.getLogger("cairn.webhooks")

DEFAULT_GRACE = timedelta(hours=24)
MAX_GRACE = timedelta(days=7)
# GitHub lets a person redeliver a delivery of the last few days; ids older than this are forgotten.
DELIVERY_MEMORY = timedelta(days=7)
SECRET_PREFIX = "cwh_"  # noqa: S105 - a prefix, not a secret
# One message for an unknown repository and a wrong signature: no oracle for which repositories exist.
NOT_VERIFIED = "the delivery's signature does not verify for a repository registered here"
# Compared with when the repository has no registration, so both answers take the same work.
_DUMMY_SECRET = SECRET_PREFIX + "0" * 43
LANDED = ("created", "recurred", "promoted", "updated")


def outside(conn: Connection, tenant_id: str, lesson_id: int) -> bool:
    """Did an author outside the repository write this webhook lesson? (Never promoted by recurrence.)"""
    return bool(
        conn.execute(
            select(webhook_provenance.c.outside).where(
                webhook_provenance.c.tenant_id == tenant_id, webhook_provenance.c.lesson_id == lesson_id
            )
        ).scalar()
    )


def provenance(conn: Connection, tenant_id: str, lesson_id: int) -> dict[str, Any] | None:
    """Who wrote a webhook lesson's comment, and where (a lesson read shows it)."""
    row = (
        conn.execute(
            select(webhook_provenance).where(
                webhook_provenance.c.tenant_id == tenant_id, webhook_provenance.c.lesson_id == lesson_id
            )
        )
        .mappings()
        .first()
    )
    if row is None:
        return None
    keys = ("login", "association", "outside", "url", "pr", "path", "line")
    return {k: bool(row[k]) if k == "outside" else row[k] for k in keys}


def provenance_labels(conn: Connection, tenant_id: str, lesson_ids: list[int]) -> dict[int, str]:
    """``from @login on PR #12`` (``outside author, …`` for outsiders) per webhook lesson id."""
    if not lesson_ids:
        return {}
    rows = conn.execute(
        select(
            webhook_provenance.c.lesson_id,
            webhook_provenance.c.login,
            webhook_provenance.c.pr,
            webhook_provenance.c.outside,
        ).where(webhook_provenance.c.tenant_id == tenant_id, webhook_provenance.c.lesson_id.in_(lesson_ids))
    ).all()
    return {r.lesson_id: gh.provenance_label(r.login, r.pr, bool(r.outside)) for r in rows}


def labels_by_address(conn: Connection, tenant_id: str, addresses: list[tuple[str, str]]) -> dict[tuple[str, str], str]:
    """:func:`provenance_labels` for lessons named by (scope, key) (recall's hits carry no id)."""
    from cairn.store.schema import lessons

    out: dict[tuple[str, str], str] = {}
    for scope, key in addresses:
        row = conn.execute(
            select(webhook_provenance.c.login, webhook_provenance.c.pr, webhook_provenance.c.outside)
            .join(lessons, lessons.c.id == webhook_provenance.c.lesson_id)
            .where(lessons.c.tenant_id == tenant_id, lessons.c.scope == scope, lessons.c.key == key)
        ).first()
        if row is not None:
            out[(scope, key)] = gh.provenance_label(row.login, row.pr, bool(row.outside))
    return out


def _fingerprint(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()[:12]


def _new_secret() -> str:
    return SECRET_PREFIX + secrets.token_urlsafe(32)


def _repo(raw: str) -> str:
    """``OWNER/NAME`` as the scope ``repo::owner/name`` spells it, or INVALID_INPUT with the form."""
    try:
        return gh.check_repo(raw if "/" in (raw or "") else "")
    except gh.Refused:
        raise CairnError(
            "INVALID_INPUT", f"{raw!r} is not a GitHub repository; give OWNER/REPO, e.g. acme/widget"
        ) from None


def _public(row: dict[str, Any], now: Any) -> dict[str, Any]:
    counts = json.loads(row["counts"] or "{}")
    grace = row["previous_until"] if row["previous_secret"] and row["previous_until"] else None
    return {
        "repo": row["repo"],
        "scope": f"repo::{row['repo']}",
        "path": f"{gh.PAYLOAD_PATH}?repo={row['repo']}",
        "created_at": format_time(row["created_at"]),
        "created_by": row["created_by"],
        "rotated_at": format_time(row["rotated_at"]) if row["rotated_at"] else None,
        "previous_secret_valid_until": format_time(grace) if grace and grace > now else None,
        "last_delivery_at": format_time(row["last_delivery_at"]) if row["last_delivery_at"] else None,
        "counts": {k: counts[k] for k in sorted(counts)},
    }


@dataclass(eq=False, repr=False)
class Webhooks:
    """Webhook registrations (an account's or an org's admins) and the deliveries that land as lessons."""

    store: Store
    settings: Settings
    orgs: Orgs
    lessons: Lessons

    # -- management (admins) -------------------------------------------------------------------
    def _admin_tx(
        self, principal: Principal, org: str | None, what: str, fn: AdminTx, *, write: bool = True
    ) -> dict[str, Any]:
        """Run ``fn(conn, acting)`` in the caller's tenant, or in ``org`` for its admins."""
        if org:

            def in_org(conn: Connection, tenant: str, role: str | None) -> dict[str, Any]:
                roles.require_role(role, roles.ADMIN_ROLE, what)
                return fn(conn, principal.with_tenant(tenant, principal.permissions))

            return self.orgs.in_org(principal, org, what, in_org, write=write, level=ADMIN)
        principal.require(ADMIN)
        if write:
            return write_tx(self.store, principal, fn)
        return read_tx(self.store, principal, lambda conn: fn(conn, principal))

    def webhook_add(self, principal: Principal, repo: str, *, org: str | None = None) -> dict[str, Any]:
        """Register ``repo``; the secret is in this answer only."""
        name = _repo(repo)
        scope = validate_scope(f"repo::{name}")
        principal.require(ADMIN, scope)
        secret = _new_secret()

        def tx(conn: Connection, p: Principal) -> dict[str, Any]:
            row = conn.execute(
                select(webhooks.c.id).where(webhooks.c.tenant_id == p.tenant_id, webhooks.c.repo == name)
            ).first()
            if row is not None:
                raise CairnError(
                    "CONFLICT",
                    f"{name} is already registered here; `cairn webhook rotate {name}` makes a new secret",
                )
            now = utcnow()
            conn.execute(
                insert(webhooks).values(
                    tenant_id=p.tenant_id, repo=name, secret=secret, counts="{}", created_at=now, created_by=p.actor
                )
            )
            audit.record(conn, p, "webhook.add", scope=scope, detail={"repo": name, "secret": _fingerprint(secret)})
            out = _public(self._row(conn, p, name), now)
            return {**out, "secret": secret, "tenant": p.tenant_id}

        return self._admin_tx(principal, org, "registering a webhook", tx)

    def webhook_rotate(
        self, principal: Principal, repo: str, *, org: str | None = None, grace: timedelta | None = None
    ) -> dict[str, Any]:
        """A new secret; the old one keeps verifying for ``grace`` (default 24 h), then never again."""
        name = _repo(repo)
        scope = validate_scope(f"repo::{name}")
        principal.require(ADMIN, scope)
        grace = DEFAULT_GRACE if grace is None else grace
        if not timedelta(0) <= grace <= MAX_GRACE:
            raise CairnError("INVALID_INPUT", "grace must be between 0 and 7 days (e.g. 24h)")
        secret = _new_secret()

        def tx(conn: Connection, p: Principal) -> dict[str, Any]:
            old = self._row(conn, p, name)
            now = utcnow()
            conn.execute(
                update(webhooks)
                .where(webhooks.c.id == old["id"], webhooks.c.tenant_id == p.tenant_id)
                .values(secret=secret, previous_secret=old["secret"], previous_until=now + grace, rotated_at=now)
            )
            detail = {
                "repo": name,
                "secret": _fingerprint(secret),
                "previous": _fingerprint(old["secret"]),
                "grace_seconds": int(grace.total_seconds()),
            }
            audit.record(conn, p, "webhook.rotate", scope=scope, detail=detail)
            return {**_public(self._row(conn, p, name), now), "secret": secret, "tenant": p.tenant_id}

        return self._admin_tx(principal, org, "rotating a webhook secret", tx)

    def webhook_remove(self, principal: Principal, repo: str, *, org: str | None = None) -> dict[str, Any]:
        """Unregister ``repo``: its deliveries are refused from now on; its lessons stay."""
        name = _repo(repo)
        scope = validate_scope(f"repo::{name}")
        principal.require(ADMIN, scope)

        def tx(conn: Connection, p: Principal) -> dict[str, Any]:
            row = self._row(conn, p, name)
            conn.execute(
                delete(webhook_deliveries).where(
                    webhook_deliveries.c.tenant_id == p.tenant_id, webhook_deliveries.c.webhook_id == row["id"]
                )
            )
            conn.execute(delete(webhooks).where(webhooks.c.tenant_id == p.tenant_id, webhooks.c.id == row["id"]))
            audit.record(conn, p, "webhook.remove", scope=scope, detail={"repo": name})
            return {"repo": name, "removed": True, "tenant": p.tenant_id}

        return self._admin_tx(principal, org, "removing a webhook", tx)

    def webhook_list(self, principal: Principal, *, org: str | None = None) -> dict[str, Any]:
        """The tenant's registrations with what was done with their deliveries (never a secret)."""

        def tx(conn: Connection, p: Principal) -> dict[str, Any]:
            now = utcnow()
            rows = conn.execute(
                select(webhooks).where(webhooks.c.tenant_id == p.tenant_id).order_by(webhooks.c.repo)
            ).mappings()
            return {
                "tenant": p.tenant_id,
                "webhooks": [_public(dict(r), now) for r in rows if p.can_see(f"repo::{r['repo']}")],
            }

        return self._admin_tx(principal, org, "listing webhooks", tx, write=False)

    @staticmethod
    def _row(conn: Connection, p: Principal, name: str) -> dict[str, Any]:
        row = (
            conn.execute(select(webhooks).where(webhooks.c.tenant_id == p.tenant_id, webhooks.c.repo == name))
            .mappings()
            .first()
        )
        if row is None:
            raise CairnError("NOT_FOUND", f"{name} is not registered here (cairn webhook add {name})")
        return dict(row)

    # -- deliveries ----------------------------------------------------------------------------
    def webhook_deliver(
        self,
        *,
        repo: str | None,
        event: str | None,
        delivery: str | None,
        signature: str | None,
        body: bytes,
        content_type: str | None = None,
    ) -> dict[str, Any]:
        """Verify, gate, filter and land one delivery; UNAUTHENTICATED when it does not verify."""
        try:
            given = gh.parse_signature(signature)  # before any HMAC: a malformed header costs nothing
            event_name = gh.check_event(event)
            delivery_id = gh.check_delivery(delivery)
            name = gh.check_repo(repo)
        except gh.Refused as exc:
            raise CairnError("UNAUTHENTICATED", f"refused: {exc.reason}") from None

        def registrations(conn: Connection) -> list[dict[str, Any]]:
            rows = conn.execute(select(webhooks).where(webhooks.c.repo == name).order_by(webhooks.c.id)).mappings()
            return [dict(r) for r in rows]

        now = utcnow()
        regs = self.store.run(registrations, write=False, webhook=name)
        keys = [(r, r["secret"]) for r in regs]
        keys += [(r, r["previous_secret"]) for r in regs if r["previous_secret"] and (r["previous_until"] or now) > now]
        match = None
        for reg, secret in keys or [(None, _DUMMY_SECRET)]:
            if gh.matches(secret, body, given) and reg is not None and match is None:
                match = reg
        if match is None:
            raise CairnError("UNAUTHENTICATED", NOT_VERIFIED)
        payload = _payload(body, content_type)
        if gh.repository(payload) != name:
            # Signed by this repository's secret but about another one: the same answer as a bad signature.
            raise CairnError("UNAUTHENTICATED", NOT_VERIFIED)
        decision = gh.gate(event_name, payload)
        tenant = match["tenant_id"]
        landed: dict[str, Any] = self.store.run(
            lambda conn: self._land(conn, match, name, event_name, delivery_id, decision),
            write=True,
            tenant=tenant,
            actor="webhook",
        )
        return landed

    def _land(
        self, conn: Connection, reg: dict[str, Any], name: str, event: str, delivery: str, decision: gh.Gate
    ) -> dict[str, Any]:
        tenant = reg["tenant_id"]
        now = utcnow()
        alive = conn.execute(select(tenants.c.deleted_at).where(tenants.c.id == tenant)).first()
        current = conn.execute(
            select(webhooks.c.counts).where(webhooks.c.tenant_id == tenant, webhooks.c.id == reg["id"])
        ).first()
        if alive is None or alive[0] is not None or current is None:
            raise CairnError("UNAUTHENTICATED", NOT_VERIFIED)  # removed or its org deleted since the check
        seen = conn.execute(
            select(webhook_deliveries.c.outcome).where(
                webhook_deliveries.c.tenant_id == tenant,
                webhook_deliveries.c.webhook_id == reg["id"],
                webhook_deliveries.c.delivery == delivery,
            )
        ).first()
        if seen is not None:
            return {"delivery": delivery, "outcome": "duplicate", "first_outcome": seen[0]}
        out: dict[str, Any] = {"delivery": delivery, "event": event}
        if decision.outcome != "finding" or decision.finding is None:
            outcome = decision.outcome  # ping | ignored
            if outcome == "ignored":
                out["ignored"] = "event or action not taken"
        else:
            f = decision.finding
            reason = gh.drop_reason(f)
            if reason is None:
                outcome, landed = self._write_finding(conn, tenant, name, reg["id"], delivery, f, now)
                out.update(landed)
            else:
                outcome = f"dropped.{reason}"
        out["outcome"] = outcome
        counts = json.loads(current[0] or "{}")
        counts[outcome] = counts.get(outcome, 0) + 1
        conn.execute(
            update(webhooks)
            .where(webhooks.c.tenant_id == tenant, webhooks.c.id == reg["id"])
            .values(counts=json.dumps(counts, sort_keys=True), last_delivery_at=now)
        )
        conn.execute(
            insert(webhook_deliveries).values(
                webhook_id=reg["id"], delivery=delivery, tenant_id=tenant, received_at=now, outcome=outcome
            )
        )
        conn.execute(
            delete(webhook_deliveries).where(
                webhook_deliveries.c.tenant_id == tenant,
                webhook_deliveries.c.webhook_id == reg["id"],
                webhook_deliveries.c.received_at < now - DELIVERY_MEMORY,
            )
        )
        return out

    def _write_finding(
        self, conn: Connection, tenant: str, name: str, webhook_id: int, delivery: str, f: gh.Finding, now: Any
    ) -> tuple[str, dict[str, Any]]:
        """The finding through the one write path, as a candidate in ``repo::name``, with its provenance."""
        from cairn.service.write_input import make_write

        author = Principal(
            tenant_id=tenant,
            actor=f"github:{f.login}",
            # One session per person: the same finding from several people (or resolved by another)
            # counts as that many sightings toward promotion; outsiders' never promote (lessons.py).
            session=f"github:{f.login}",
            permissions=frozenset({READ, WRITE}),
        )
        scope = f"repo::{name}"
        try:
            inp = make_write(
                author, scope, gh.finding_key(f), f.body, origin="webhook", author=f.login, url=f.url, tags=["github"]
            )
        except CairnError:
            return "dropped.invalid", {}  # e.g. over the 64 KiB lesson limit
        inp = replace(inp, outside=f.outside)
        try:
            result = self.lessons.write_in(conn, author, inp)
        except CairnError as exc:
            if exc.code == "TOMBSTONED":
                return "tombstoned", {}
            raise  # a limit, a busy store: 5xx, and GitHub retries
        lesson = result["lesson"]
        row = fetch(conn, author, lesson["scope"], lesson["key"])
        if (
            row is not None
            and not conn.execute(
                select(webhook_provenance.c.lesson_id).where(
                    webhook_provenance.c.tenant_id == tenant, webhook_provenance.c.lesson_id == row["id"]
                )
            ).first()
        ):
            conn.execute(
                insert(webhook_provenance).values(
                    lesson_id=row["id"],
                    tenant_id=tenant,
                    webhook_id=webhook_id,
                    delivery=delivery,
                    login=f.login,
                    association=f.association,
                    outside=f.outside,
                    url=f.url,
                    pr=f.pr,
                    path=f.path,
                    line=f.line,
                    created_at=now,
                )
            )
        action = result["action"]
        return (action if action in LANDED else "landed"), {
            "action": action,
            "scope": lesson["scope"],
            "key": lesson["key"],
            "trust": lesson["trust"],
            "outside": f.outside,
            "resolved_thread": f.resolved,
        }


def _payload(body: bytes, content_type: str | None) -> Any:
    """The JSON payload: the body itself, or the ``payload`` field of a form-encoded delivery
    (GitHub's default content type)."""
    kind = (content_type or "").split(";")[0].strip().lower()
    if kind == "application/x-www-form-urlencoded":
        try:
            fields = parse_qs(body.decode("utf-8"), max_num_fields=10)
        except (UnicodeDecodeError, ValueError):
            raise CairnError("INVALID_INPUT", "the form-encoded delivery is not readable") from None
        values = fields.get("payload") or [""]
        return loads(values[0], "the delivery's payload")
    return loads(body, "the delivery's payload")
