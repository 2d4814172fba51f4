"""schemathesis over every operation of the OpenAPI schema, against a real `cairn serve` (bounded).

Every built-in check is on, positive data acceptance included: no 5xx, only documented status codes,
bodies and content types that match the schema, schema-invalid requests refused, schema-valid ones
accepted (a 401/403/404/409/429 still counts as accepted: a schema cannot say that a lesson must exist
or that forgotten content is refused), the token honoured, wrong methods answered 405. Positive and
negative examples per operation are bounded so the run stays within a couple of minutes.
(The pytest plugin's fixture loader does not run under this pytest; operations are driven here.)
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from hypothesis.errors import Unsatisfiable
from schemathesis import GenerationMode

from tests.conftest import run_cli

pytestmark = pytest.mark.slow  # scheduled first (tests/conftest.py)

EXAMPLES = 6  # per operation and generation mode
# 413 is how the server refuses a body or value over its size: a refusal of invalid data, and for a
# valid-looking value over 64 KiB of UTF-8 the one rule JSON Schema cannot state (maxLength counts
# characters, the limit is in bytes).
CONFIG = {
    "checks": {
        "negative_data_rejection": {
            "expected-statuses": ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429"]
        },
        "positive_data_acceptance": {"expected-statuses": ["2xx", "3xx", "401", "403", "404", "409", "413", "429"]},
    }
}


# Rules the schema cannot state, so schema-valid data meets them by chance (docs/KNOWN_ISSUES.md):
# a key needs a letter or digit in any script (JSON Schema patterns have no \p{L}); a scope may not
# hold "..", a branch's "//", a trailing "/" or ".", a ".lock" component (no look-ahead); a duration
# has a range; a cursor is opaque (one the list did not return is refused); the audit filter takes a
# scope with its key; a lesson cannot be linked to itself; an import line must be a record.
# Every other rejection of valid data, and every other check's failure, fails the test.
# The scope, key and duration rules can meet any operation that takes one; INVALID_INPUT only where
# its rule lives: a made-up cursor, the audit filter's pair, a self-link, an import line.
ANYWHERE = {"INVALID_KEY", "INVALID_SCOPE", "INVALID_TTL"}
INVALID_INPUT_AT = {"/v1/audit", "/v1/lesson/link", "/v1/import"}


def _only_unexpressible(path: str, report: str) -> bool:
    """True when every failure in ``report`` is a schema-valid request refused by a rule listed above."""
    if set(re.findall(r"- (ST\d+)", report)) != {"ST202"}:
        return False
    codes = set(re.findall(r'"code": ?"([A-Z_]+)"', report))
    details = re.findall(r'"code": ?"INVALID_INPUT".*?"detail": ?"([^"]*)', report)
    cursor_only = bool(details) and all(d.startswith("cursor is not a cursor") for d in details)
    invalid_input_ok = path in INVALID_INPUT_AT or cursor_only
    return bool(codes) and codes <= ANYWHERE | ({"INVALID_INPUT"} if invalid_input_ok else set())


def _env() -> dict[str, str]:
    env = {**os.environ, "CAIRN_EMBED_MODEL": "hash-test-64"}
    env.pop("CAIRN_NO_DAEMON", None)
    env.pop("CAIRN_URL", None)
    return env


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, admin token) of a `cairn serve` subprocess on a free loopback port."""
    home = tmp_path_factory.mktemp("serve")
    made = run_cli(home, "--json", "user", "create", "fuzz", env={"CAIRN_EMBED_MODEL": "hash-test-64"})
    token = json.loads(made.stdout)["data"]["token"]
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [sys.executable, "-m", "cairn.cli.main", "--home", str(home), "serve", "--no-warm", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=_env(), cwd=home,
    )  # fmt: skip
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.stderr.read() if proc.stderr else ""
            try:
                with urllib.request.urlopen(base + "/v1/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            assert time.monotonic() < deadline, "cairn serve did not answer within 90 s"
            time.sleep(0.2)
        yield base, token
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()


def test_every_operation_conforms_with_all_checks(served: tuple[str, str], tmp_path: Path) -> None:
    base, token = served
    from schemathesis.config import SchemathesisConfig

    schema = schemathesis.openapi.from_url(base + "/openapi.json", config=SchemathesisConfig.from_dict(CONFIG))
    headers = {"Authorization": f"Bearer {token}"}
    failures: dict[str, str] = {}
    residual: dict[str, str] = {}
    operations = [result.ok() for result in schema.get_all_operations()]
    assert len(operations) >= 45  # every endpoint is in the schema
    examples = 0

    for op in operations:
        for mode in (GenerationMode.POSITIVE, GenerationMode.NEGATIVE):

            @given(case=op.as_strategy(generation_mode=mode))
            @settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
            def run(case) -> None:  # type: ignore[no-untyped-def]
                nonlocal examples
                examples += 1
                case.call_and_validate(base_url=base, headers=headers)

            try:
                run()
            except Unsatisfiable:
                continue  # no invalid request exists (an operation without parameters)
            except BaseException as exc:  # noqa: BLE001 - collected, reported together below
                text = str(exc)
                label = f"{op.method.upper()} {op.path} ({mode.value})"
                (residual if _only_unexpressible(op.path, text) else failures)[label] = text[:1500]
    from schemathesis.checks import CHECKS

    report = {
        "operations": len(operations),
        "checks": len(CHECKS.get_all_names()),
        "examples": examples,
        "failures": len(failures),
        "schema-valid refused by an unexpressible rule": sorted(residual),
    }
    (tmp_path / "schemathesis.json").write_text(json.dumps(report))
    if os.environ.get("CAIRN_SCHEMATHESIS_SHOW"):
        for label, text in residual.items():
            print(label, sorted(set(re.findall(r'"detail": ?"([^"]{0,90})', text))))
    print(f"schemathesis: {report}")
    assert not failures, "\n\n".join(f"{k}:\n{v}" for k, v in failures.items())
