"""Forget, the tombstone check inside every write, unforget, and the review queue."""

from __future__ import annotations

import json

from cairn.service.api import Cairn
from tests.conftest import human
from tests.contract import audit_rows, refused, rows, snapshot

SCOPE = "repo::acme/widget"
TEXT = "Disable the flaky retry plugin with --no-retry."
REASON = "wrong: the plugin is required for the integration suite"


def forget_one(svc: Cairn, me, key: str = "k", text: str = TEXT) -> int:
    svc.write(me, SCOPE, key, text)
    out = svc.forget(me, SCOPE, key, REASON)
    return out["tombstone_id"]


def test_forget_rejects_and_returns_the_tombstone(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", TEXT)
    out = svc.forget(me, SCOPE, "k", REASON)
    assert isinstance(out["tombstone_id"], int)
    assert out["already"] is False
    tomb = rows(store, "SELECT * FROM tombstones WHERE id = :i", i=out["tombstone_id"])[0]
    assert (tomb["scope"], tomb["key"], tomb["reason"], tomb["lifted_at"]) == (SCOPE, "k", REASON, None)
    lesson = rows(store, "SELECT trust, content_hash FROM lessons")[0]
    assert lesson["trust"] == "rejected"
    assert tomb["content_hash"] == lesson["content_hash"]
    # The rejected lesson is gone from every read.
    refused("NOT_FOUND", svc.read, me, SCOPE, "k")
    assert svc.list(me, SCOPE)["lessons"] == []
    assert audit_rows(store)[-1]["action"] == "forget"


def test_forget_requires_a_reason_and_an_existing_lesson(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", TEXT)
    snap = snapshot(store)
    refused("INVALID_INPUT", svc.forget, me, SCOPE, "k", "  ")
    refused("NOT_FOUND", svc.forget, me, SCOPE, "nope", REASON)
    assert snapshot(store) == snap


def test_forget_twice_returns_the_same_live_tombstone(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    again = svc.forget(me, SCOPE, "k", "again")
    assert again == {"tombstone_id": tid, "already": True, "scope": SCOPE, "key": "k"}
    assert len(rows(store, "SELECT * FROM tombstones")) == 1


def test_rewrite_is_refused_under_any_key_scope_or_spelling(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    snap = snapshot(store)
    attempts = [
        (SCOPE, "another-key", TEXT),
        ("repo::acme/other", "k2", TEXT),
        ("global", "k3", TEXT),
        ("branch::acme/widget::Main", "k4", TEXT),
        (SCOPE, "k5", "DISABLE the flaky retry plugin with no retry"),
        (SCOPE, "k6", "  disable   the flaky-retry plugin, with --no-retry!!!  "),
        (SCOPE, "k7", "Disable\tthe\nflaky retry plugin with (no-retry)."),
    ]
    for scope, key, value in attempts:
        err = refused("TOMBSTONED", svc.write, me, scope, key, value)
        assert err.data["tombstone_id"] == tid
        assert err.data["reason"] == REASON
        assert str(tid) in err.message
        assert REASON in err.message
        assert err.data["matched"] == "content"
    assert snapshot(store) == snap


def test_rewrite_by_a_person_is_refused_too(svc: Cairn, me) -> None:
    forget_one(svc, me)
    refused("TOMBSTONED", svc.write, human(me), "global", "x", TEXT)


def test_address_match_is_refused_whatever_the_content(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    snap = snapshot(store)
    err = refused("TOMBSTONED", svc.write, me, SCOPE, "K", "Completely different advice.")
    assert err.data["tombstone_id"] == tid
    assert err.data["matched"] == "address"
    assert snapshot(store) == snap


def test_tombstones_belong_to_the_tenant(svc: Cairn, me) -> None:
    from cairn.core.principal import Principal

    forget_one(svc, me)
    other = Principal("other", "someone-else")
    svc.ensure_tenant(other)
    assert svc.write(other, SCOPE, "k", TEXT)["action"] == "created"


def test_unforget_lifts_the_tombstone_and_is_audited(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    n = len(audit_rows(store))
    out = svc.unforget(me, tid, "it was right after all")
    assert out == {"tombstone_id": tid, "lifted": True, "reason": "it was right after all"}
    audit = audit_rows(store)
    assert len(audit) == n + 1
    assert audit[-1]["action"] == "unforget"
    assert json.loads(audit[-1]["detail"]) == {"reason": "it was right after all", "tombstone_id": tid}
    tomb = rows(store, "SELECT * FROM tombstones WHERE id = :i", i=tid)[0]
    assert tomb["lifted_at"] is not None and tomb["lift_reason"] == "it was right after all"
    assert tomb["lifted_by"] == "agent-a"
    # The content and the address are writable again.
    assert svc.write(me, "global", "new-key", TEXT)["action"] == "created"
    back = svc.write(me, SCOPE, "k", "A replacement at the old address.")
    assert back["action"] == "updated"
    assert back["lesson"]["trust"] == "candidate"
    assert svc.read(me, SCOPE, "k")["lesson"]["value"] == "A replacement at the old address."
    assert svc.tombstones(me)["tombstones"] == []
    assert [t["id"] for t in svc.tombstones(me, include_lifted=True)["tombstones"]] == [tid]


def test_unforget_twice_is_a_conflict_and_changes_nothing(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    svc.unforget(me, tid, "first lift")
    snap = snapshot(store)
    err = refused("CONFLICT", svc.unforget, me, tid, "second lift")
    assert "already lifted" in err.message
    assert snapshot(store) == snap
    assert [r["action"] for r in audit_rows(store)].count("unforget") == 1


def test_unforget_needs_a_reason_and_a_real_tombstone(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    snap = snapshot(store)
    refused("INVALID_INPUT", svc.unforget, me, tid, "")
    refused("NOT_FOUND", svc.unforget, me, tid + 100, "why")
    assert snapshot(store) == snap


def test_unforget_needs_admin(svc: Cairn, me, store) -> None:
    from cairn.core.principal import READ, WRITE, Principal

    tid = forget_one(svc, me)
    writer = Principal("local", "writer", permissions=frozenset({READ, WRITE}))
    snap = snapshot(store)
    refused("FORBIDDEN", svc.unforget, writer, tid, "let me")
    assert snapshot(store) == snap


def test_a_second_forget_after_a_lift_makes_a_new_tombstone(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    svc.unforget(me, tid, "lifted")
    again = svc.forget(me, SCOPE, "k", "wrong again")
    assert again["tombstone_id"] != tid
    assert again["already"] is False
    refused("TOMBSTONED", svc.write, me, "global", "x", TEXT)


def test_forget_a_lesson_that_matches_another_lessons_content(svc: Cairn, me) -> None:
    """The content tombstone covers the same text stored in another scope: new writes are refused."""
    svc.write(me, "repo::acme/other", "k", TEXT)
    forget_one(svc, me)
    refused("TOMBSTONED", svc.write, me, "repo::acme/other", "k", TEXT)


# -- review -------------------------------------------------------------------------------------


def test_review_queue_lists_active_candidates_only(svc: Cairn, me) -> None:
    svc.write(me, SCOPE, "cand", "an unverified lesson")
    svc.write(human(me), SCOPE, "ver", "a verified lesson")
    svc.write(me, SCOPE, "arch", "an archived candidate")
    svc.archive(me, SCOPE, "arch")
    svc.write(me, SCOPE, "rej", "a rejected candidate")
    svc.forget(me, SCOPE, "rej", "no")
    queue = svc.review_queue(me)["candidates"]
    assert [c["key"] for c in queue] == ["cand"]
    assert queue[0]["trust"] == "candidate"


def test_review_verify_verifies_and_is_audited(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", TEXT)
    out = svc.verify(human(me), SCOPE, "k")
    assert out["changed"] is True
    assert out["lesson"]["trust"] == "verified"
    assert svc.read(me, SCOPE, "k")["lesson"]["trust"] == "verified"
    assert svc.review_queue(me)["candidates"] == []
    last = audit_rows(store)[-1]
    assert (last["action"], last["version_before"], last["version_after"]) == ("verify", 1, 2)
    # Verifying again changes nothing.
    snap = snapshot(store)
    assert svc.verify(human(me), SCOPE, "k")["changed"] is False
    assert snapshot(store) == snap


def test_review_verify_refuses_a_rejected_lesson(svc: Cairn, me, store) -> None:
    forget_one(svc, me)
    snap = snapshot(store)
    refused("NOT_FOUND", svc.verify, human(me), SCOPE, "k")
    assert snapshot(store) == snap


def test_review_reject_is_forget(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "k", TEXT)
    out = svc.reject(human(me), SCOPE, "k", REASON)
    assert out["already"] is False
    tomb = rows(store, "SELECT * FROM tombstones")
    assert [t["id"] for t in tomb] == [out["tombstone_id"]]
    assert tomb[0]["reason"] == REASON
    assert rows(store, "SELECT trust FROM lessons")[0]["trust"] == "rejected"
    err = refused("TOMBSTONED", svc.write, me, "global", "again", TEXT)
    assert err.data["tombstone_id"] == out["tombstone_id"]
    assert svc.review_queue(me)["candidates"] == []


# -- the wider content identity, and every way back to active ---------------------------------------


LOOK_ALIKES = [
    "Dіsable the flaky retry plugin with --no-retry.",  # Cyrillic і
    "Disable thе flаky retry plugin with --nо-retry.",  # Cyrillic е а о
    "Dısable the flaky retry plugın wıth --no-retry.",  # dotless i
    "Dísáble thé flàky rétry plügin wîth --nö-rétry.",  # accents
    "Dis\u034fable the flaky retry plugin with --no-retry.",  # combining grapheme joiner
    "Disable\ufe0f the flaky retry plugin with --no-retry.",  # variation selector
    "Disable the \u3164flaky retry plugin with --no-retry.",  # Hangul filler
    "Disable the flaky retry plugin with --no-retry.\U000e0100",  # variation selector supplement
]


def test_look_alikes_invisibles_and_accents_of_forgotten_content_are_refused(svc: Cairn, me, store) -> None:
    tid = forget_one(svc, me)
    snap = snapshot(store)
    for n, variant in enumerate(LOOK_ALIKES):
        err = refused("TOMBSTONED", svc.write, me, "repo::acme/other", f"v{n}", variant)
        assert (err.data["tombstone_id"], err.data["matched"]) == (tid, "content")
    assert snapshot(store) == snap


def test_different_words_are_not_refused(svc: Cairn, me) -> None:
    forget_one(svc, me)
    for n, text in enumerate(
        [
            "Enable the flaky retry plugin with --retry.",
            "Disable the flaky cache plugin with --no-cache.",
            "Keep the retry plugin; it is required.",
        ]
    ):
        assert svc.write(me, "repo::acme/other", f"ok{n}", text)["action"] == "created"


def test_the_stored_text_keeps_its_look_alikes(svc: Cairn, me, store) -> None:
    """Only the comparison folds: what is written is stored and read back exactly."""
    text = "Rеad thе Cyrillic е, kеep it."
    svc.write(me, SCOPE, "cyr", text)
    assert svc.read(me, SCOPE, "cyr")["lesson"]["value"] == text
    assert rows(store, "SELECT value FROM lessons WHERE key = 'cyr'")[0]["value"] == text


def test_the_tombstone_records_the_identity(svc: Cairn, me, store) -> None:
    from cairn.core.content import content_identity

    tid = forget_one(svc, me)
    tomb = rows(store, "SELECT identity, content_hash FROM tombstones WHERE id = :i", i=tid)[0]
    assert tomb["identity"] == content_identity(TEXT)
    forget = [r for r in audit_rows(store) if r["action"] == "forget"][-1]
    assert json.loads(forget["detail"])["identity"] == tomb["identity"]  # the ledger vouches for it


def test_restoring_an_archived_twin_of_forgotten_content_is_refused(svc: Cairn, me, store) -> None:
    # The same text (a look-alike of it, even) sits archived elsewhere when the original is forgotten.
    svc.write(me, "repo::acme/other", "twin", LOOK_ALIKES[0])
    svc.archive(me, "repo::acme/other", "twin")
    tid = forget_one(svc, me)
    snap = snapshot(store)
    err = refused("TOMBSTONED", svc.restore, me, "repo::acme/other", "twin")
    assert err.data["tombstone_id"] == tid
    refused("TOMBSTONED", svc.restore, human(me), "repo::acme/other", "twin")
    assert snapshot(store) == snap
    # Lifting the tombstone is the one way back, and then restore works.
    svc.unforget(me, tid, "it was right")
    assert svc.restore(me, "repo::acme/other", "twin")["changed"] is True


def test_verifying_a_candidate_twin_of_forgotten_content_is_refused(svc: Cairn, me, store) -> None:
    svc.write(me, "repo::acme/other", "twin", LOOK_ALIKES[3])  # an agent's candidate
    tid = forget_one(svc, me)
    snap = snapshot(store)
    err = refused("TOMBSTONED", svc.verify, human(me), "repo::acme/other", "twin")
    assert err.data["tombstone_id"] == tid
    assert snapshot(store) == snap


def test_superseding_with_forgotten_content_is_refused(svc: Cairn, me, store) -> None:
    svc.write(me, SCOPE, "old", "Retry the plugin three times.")
    forget_one(svc, me)
    snap = snapshot(store)
    refused("TOMBSTONED", svc.supersede, me, SCOPE, "new", LOOK_ALIKES[1], supersedes=(SCOPE, "old"))
    assert snapshot(store) == snap


def test_importing_forgotten_content_is_refused_on_every_record_kind(svc: Cairn, me, store) -> None:
    forget_one(svc, me)
    plain = [json.dumps({"scope": "repo::acme/other", "key": f"p{n}", "value": v}) for n, v in enumerate(LOOK_ALIKES)]
    snap = snapshot(store)
    out = svc.import_lines(me, plain)
    assert out["created"] == 0
    assert {r["code"] for r in out["refused"]} == {"TOMBSTONED"}
    assert len(out["refused"]) == len(LOOK_ALIKES)
    assert snapshot(store) == snap


def test_a_tombstone_without_an_identity_still_refuses_by_hash(svc: Cairn, me, store) -> None:
    """A tombstone whose text was gone when identities were computed matches as it always did."""
    from tests.contract import raw

    tid = forget_one(svc, me)
    with raw(store, write=True) as conn:
        conn.exec_driver_sql("UPDATE tombstones SET identity = NULL")
    refused("TOMBSTONED", svc.write, me, "global", "again", TEXT.upper())
    assert svc.write(me, "global", "cyr", LOOK_ALIKES[0])["action"] == "created"  # only the wide form misses
    assert tid


def test_random_default_ignorables_never_carry_forgotten_content_past_the_check(svc: Cairn, me, store) -> None:
    """Property: forgotten text with any default-ignorables inserted anywhere is refused, on both databases."""
    import sys

    import regex
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    ignorable = regex.compile(r"\p{Default_Ignorable_Code_Point}")
    pool = [chr(cp) for cp in range(sys.maxunicode + 1) if ignorable.match(chr(cp))]
    tid = forget_one(svc, me)
    snap = snapshot(store)

    @settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(st.lists(st.tuples(st.integers(0, len(TEXT)), st.sampled_from(pool)), min_size=1, max_size=8))
    def attempt(insertions: list[tuple[int, str]]) -> None:
        text = TEXT
        for pos, ch in sorted(insertions, reverse=True):
            text = text[:pos] + ch + text[pos:]
        err = refused("TOMBSTONED", svc.write, me, "repo::acme/other", "sneaky", text)
        assert err.data["tombstone_id"] == tid

    attempt()
    assert snapshot(store) == snap
