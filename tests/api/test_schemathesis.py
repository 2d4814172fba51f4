"""schemathesis over every operation of the OpenAPI schema, against the real server (bounded).

Checks every response (schemathesis' default checks): no 5xx, a documented status code, a body and
content type that match the schema, schema-invalid requests refused. One check is left out:
"schema-valid data must be accepted" -- a schema cannot say that a lesson must exist to be read, that
forgotten content is refused, or that a token needs a role; those are 4xx by design, each with a code.
Examples per operation are bounded so the run stays short.
(The pytest plugin's fixture loader does not run under this pytest; operations are driven here.)
"""

from __future__ import annotations

import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.specs.openapi.checks import positive_data_acceptance

from tests.api.conftest import Api

EXAMPLES = 10


def test_every_operation_conforms(api: Api) -> None:
    schema = schemathesis.openapi.from_url(api.http.base + "/openapi.json")
    headers = {"Authorization": f"Bearer {api.alice}"}
    failures: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 40  # every endpoint is in the schema

    for op in operations:

        @given(case=op.as_strategy())
        @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
        def run(case) -> None:  # type: ignore[no-untyped-def]
            case.call_and_validate(base_url=api.http.base, headers=headers, excluded_checks=[positive_data_acceptance])

        try:
            run()
        except BaseException as exc:  # noqa: BLE001 - collected, reported together below
            failures[f"{op.method.upper()} {op.path}"] = str(exc)[:1500]
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
