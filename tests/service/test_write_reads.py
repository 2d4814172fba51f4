"""A write's tenant look-ups read at once (``service/write_reads.py``) answer exactly what each
check reads for itself: the live tombstone match, the limit overrides and the paraphrase stamp, on
both databases, for matches by hash, identity and address, lifted tombstones and other tenants."""

from __future__ import annotations

from cairn.core.content import content_hash, content_identity
from cairn.core.principal import Principal
from cairn.service import audit, indexing, limits, paraphrase, tombstones, write_reads
from cairn.service.api import Cairn
from cairn.store.engine import Store
from tests.conftest import human
from tests.contract import refused

SCOPE = "repo::acme/widget"
OTHER = "repo::acme/other"


def _separate(svc: Cairn, me: Principal, scope: str, key: str, value: str) -> tuple[object, object, object]:
    """What the three checks read on their own, in one read transaction."""

    def ask(conn):  # type: ignore[no-untyped-def]
        params = {
            "tenant": me.tenant_id,
            "hash": content_hash(value),
            "identity": content_identity(value),
            "scope": scope,
            "key": key,
        }
        hit = conn.execute(tombstones._LIVE_MATCH, params).mappings().first()
        lim, _ = limits.effective(conn, svc.settings, me.tenant_id)
        stamp = tuple(
            conn.execute(paraphrase._STAMP, {"tenant": me.tenant_id, "model": indexing.configured_model()}).one()
        )
        return (hit["id"] if hit else None), lim, stamp

    return svc.store.run(ask, write=False, tenant=me.tenant_id)


def _together(svc: Cairn, me: Principal, scope: str, key: str, value: str) -> tuple[object, object, object]:
    def ask(conn):  # type: ignore[no-untyped-def]
        row = write_reads.read(conn, me, scope, key, content_hash(value), content_identity(value))
        lim, _ = limits.effective(conn, svc.settings, me.tenant_id, row)
        return row["tombstone"], lim, tuple(write_reads.stamp(row))

    return svc.store.run(ask, write=False, tenant=me.tenant_id)


def test_the_combined_read_answers_as_each_check_reads(svc: Cairn, me: Principal, store: Store) -> None:
    svc.write(me, SCOPE, "forgotten", "The staging key lives in Vault at ops/staging.")
    svc.write(me, SCOPE, "lifted", "Deploys go out on Tuesdays only.")
    svc.write(me, SCOPE, "kept", "Run the linter before pushing.")
    boss = human(me)
    svc.forget(boss, SCOPE, "forgotten", "moved")
    lifted = svc.forget(boss, SCOPE, "lifted", "wrong")
    svc.unforget(boss, lifted["tombstone_id"], "it was right after all")
    cases = [
        (SCOPE, "forgotten", "Anything else at the forgotten address."),  # address match
        (OTHER, "elsewhere", "the staging key lives in vault at ops/staging"),  # content, another scope
        (OTHER, "look-alike", "The staging kеy lives in Vault at ops/staging."),  # identity (Cyrillic e)
        (SCOPE, "lifted", "Deploys go out on Tuesdays only."),  # lifted: no match
        (SCOPE, "new", "Something nobody forgot."),  # no match
    ]
    expected = [True, True, True, False, False]
    for (scope, key, value), match in zip(cases, expected, strict=True):
        alone, together = _separate(svc, me, scope, key, value), _together(svc, me, scope, key, value)
        assert together == alone
        assert (together[0] is not None) is match, (scope, key, value)
    # And the writes: refused where a tombstone matched, written where none did.
    for (scope, key, value), match in zip(cases, expected, strict=True):
        if match:
            refused("TOMBSTONED", svc.write, me, scope, key, value)
        else:
            assert svc.write(me, scope, key, value)["action"] in ("created", "updated", "recurred")


def test_limit_overrides_read_together_are_the_tenants_own(svc: Cairn, me: Principal, store: Store) -> None:
    before = _together(svc, me, SCOPE, "k", "v")
    assert before == _separate(svc, me, SCOPE, "k", "v")
    svc.limits_set(me, me.tenant_id, max_value_bytes=64, writes_per_minute=1000)
    after = _together(svc, me, SCOPE, "k", "v")
    assert after == _separate(svc, me, SCOPE, "k", "v")
    assert (after[1].max_value_bytes, after[1].writes_per_minute) == (64, 1000)
    refused("LIMIT", svc.write, me, SCOPE, "long", "x" * 65)
    assert svc.write(me, SCOPE, "short", "A short lesson.")["action"] == "created"


def test_the_audit_head_read_together_is_the_chains_head_and_the_chain_holds(svc: Cairn, me: Principal) -> None:
    def head(conn):  # type: ignore[no-untyped-def]
        alone = conn.execute(audit._LAST, {"tenant": me.tenant_id}).first()
        together = write_reads.audit_head(write_reads.read(conn, me, SCOPE, "k", "h", "i"))
        return (tuple(alone) if alone else (None, None)), together

    alone, together = svc.store.run(head, write=False, tenant=me.tenant_id)
    assert alone == together == (None, None)  # an empty chain
    for i in range(4):
        svc.write(me, SCOPE, f"k{i % 2}", f"Lesson wording number {i}.")  # creates, then edits
    svc.write(me, SCOPE, "k0", "Lesson wording number 2.")  # a recurrence
    alone, together = svc.store.run(head, write=False, tenant=me.tenant_id)
    assert alone == together and together[0] == 5
    verified = svc.audit_verify(me)
    assert verified["ok"] and verified["checked"] == 5


def test_the_write_look_ups_carry_their_limits_in_the_statement() -> None:
    # A bound LIMIT makes SQLite re-prepare the statement at every execution (its planner reads the
    # value); the write's look-ups say LIMIT 1 in their text on both databases.
    from sqlalchemy.dialects import postgresql, sqlite

    from cairn.service.lessons import _ADDRESS_OR_TWIN

    for statement in (_ADDRESS_OR_TWIN, write_reads._WRITE_READS, audit._LAST, tombstones._LIVE_MATCH):
        for dialect in (sqlite.dialect(), postgresql.dialect()):
            text = " ".join(str(statement.compile(dialect=dialect)).split())
            assert "LIMIT 1" in text and "LIMIT ?" not in text and "LIMIT %(" not in text, text
