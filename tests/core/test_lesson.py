"""The lesson defined once: every surface's schema takes its enums and its page cap from ``core.lesson``,
the service accepts exactly those values, and anything else is refused with the stable code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.core import lesson as L
from cairn.core.principal import LEVELS, TOKEN_STYLES, Principal
from cairn.core.roles import ROLES
from cairn.errors import CairnError
from cairn.fields import TAG_PATTERN
from cairn.service.api import Cairn
from cairn.service.catalog import OPERATIONS, input_model
from tests.conftest import run_cli


def _schema_of(op_name: str, field: str) -> dict[str, Any]:
    op = next(o for o in OPERATIONS if o.name == op_name)
    schema = input_model(op).model_json_schema()
    prop = schema["properties"][field]
    if "$ref" in prop:  # an enum pydantic moved into $defs
        prop = schema["$defs"][prop["$ref"].rsplit("/", 1)[1]]
    options = prop.get("anyOf")
    return next(o for o in options if o.get("type") != "null") if options else prop


@pytest.mark.parametrize(
    ("op_name", "field", "values"),
    [
        ("write", "kind", L.KINDS),
        ("list", "trust", L.TRUST_FILTERS),
        ("search", "mode", L.MODES),
        ("feedback", "outcome", L.OUTCOMES),
        ("link", "rel", L.USER_RELS),
        ("purge", "sweep", L.SWEEPS),
        ("conversation_forget", "candidates", L.CANDIDATE_FATES),
        ("org_invite", "role", ROLES),
        ("member_role", "role", ROLES),
        ("token_create", "perm", LEVELS),
        ("token_create", "style", TOKEN_STYLES),
    ],
)
def test_every_surface_schema_offers_exactly_cores_enum(op_name: str, field: str, values: tuple[str, ...]) -> None:
    """HTTP routes, MCP tools and the remote client are derived from these input models."""
    assert tuple(_schema_of(op_name, field)["enum"]) == values


def test_every_listing_pages_at_the_one_cap() -> None:
    capped = {
        op.name: input_model(op).model_json_schema()["properties"]["limit"]["maximum"]
        for op in OPERATIONS
        if {"limit", "cursor"} <= set(input_model(op).model_fields)  # a paged listing
    }
    assert capped and set(capped.values()) == {L.MAX_PAGE}, capped


def test_the_tag_and_value_limits_are_cores() -> None:
    from pydantic import TypeAdapter

    from cairn.fields import Tag, Value

    assert TypeAdapter(Tag).json_schema()["maxLength"] == L.MAX_TAG_CHARS
    assert TypeAdapter(Value).json_schema()["maxLength"] == L.MAX_VALUE_BYTES
    assert TAG_PATTERN.endswith(f"{{0,{L.MAX_TAG_CHARS - 1}}}\\s*$")


def test_the_enums_hold_what_the_service_writes() -> None:
    assert L.DEFAULT_KIND in L.KINDS and L.DEFAULT_MODE in L.MODES
    assert set(L.TRUST_FILTERS) < set(L.TRUSTS) and "rejected" not in L.TRUST_FILTERS
    assert L.SUPERSEDES in L.RELS and L.SUPERSEDES not in L.USER_RELS
    assert set(L.OUTCOME_COUNTERS) == set(L.OUTCOMES)
    assert set(L.VERSION_STATE) <= set(L.STATE_FIELDS) | {"archived"}


def test_the_service_takes_every_kind_and_refuses_any_other(svc: Cairn, me: Principal) -> None:
    for n, kind in enumerate(L.KINDS):
        assert svc.write(me, "global", f"kind-{n}", f"A {kind} lesson.", kind=kind)["lesson"]["kind"] == kind
    with pytest.raises(CairnError) as bad:
        svc.write(me, "global", "kind-bad", "Not a kind.", kind="opinion")
    assert bad.value.code == "INVALID_INPUT" and "opinion" in bad.value.message
    assert "kind-bad" not in json.dumps(svc.list(me, "global"))  # nothing was written


def test_the_service_pages_up_to_the_cap_and_no_further(svc: Cairn, me: Principal) -> None:
    assert svc.list(me, limit=L.MAX_PAGE)["next_cursor"] is None
    for call in (lambda: svc.list(me, limit=L.MAX_PAGE + 1), lambda: svc.audit(me, limit=L.MAX_PAGE + 1)):
        with pytest.raises(CairnError) as over:
            call()
        assert over.value.code == "INVALID_INPUT" and str(L.MAX_PAGE) in over.value.message


def test_the_cli_refuses_a_kind_and_a_page_outside_core(cairn_home: Path) -> None:
    kind = run_cli(cairn_home, "--json", "write", "global", "k", "A lesson.", "--kind", "opinion")
    assert kind.returncode == 1 and json.loads(kind.stdout)["reason"]["code"] == "INVALID_INPUT"
    page = run_cli(cairn_home, "--json", "list", "--limit", str(L.MAX_PAGE + 1))
    assert page.returncode == 1 and json.loads(page.stdout)["reason"]["code"] == "INVALID_INPUT"
    assert str(L.MAX_PAGE) in json.loads(page.stdout)["reason"]["message"]
