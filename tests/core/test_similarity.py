"""The merge, contradiction and tombstone-paraphrase rules on fixed texts and cosines."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.core import similarity as sim
from cairn.core.similarity import (
    disagreement,
    is_contradiction,
    is_near_duplicate,
    is_tombstone_paraphrase,
    lexical_overlap,
)

HIGH = 0.97  # above every threshold: what decides is the text rule


def test_thresholds_are_ordered_cosines() -> None:
    for value in (sim.MERGE_COSINE, sim.CONTRADICTION_COSINE, sim.PARAPHRASE_COSINE):
        assert 0.0 < value < 1.0
    assert 0.0 <= sim.MERGE_OVERLAP <= 1.0


def test_rephrased_lesson_is_a_near_duplicate() -> None:
    a = "Run pytest with -s to see print output; it captures stdout by default."
    b = "pytest captures stdout by default, so print output only shows with -s."
    assert is_near_duplicate(a, b, HIGH)
    assert not is_contradiction(a, b, HIGH)


def test_below_the_merge_cosine_is_not_a_duplicate_even_with_the_same_words() -> None:
    a = "Set fetch-depth: 0 on actions/checkout to get tags in CI."
    assert not is_near_duplicate(a, a, sim.MERGE_COSINE - 0.01)
    assert is_near_duplicate(a, a, sim.MERGE_COSINE)


def test_shared_topic_with_little_shared_wording_is_not_merged() -> None:
    a = "Postgres: too many clients means the pool is oversized; put PgBouncer in front."
    b = "Connection refused on 5432 inside compose: use the service name db, not localhost."
    assert lexical_overlap(a, b) < sim.MERGE_OVERLAP
    assert not is_near_duplicate(a, b, HIGH)


@pytest.mark.parametrize(
    ("a", "b", "kind"),
    [
        ("Use uv to install dependencies in CI.", "Never use uv to install dependencies in CI.", "negation"),
        ("Do commit the lockfile.", "Don't commit the lockfile.", "negation"),
        ("Enable WAL mode for the SQLite database.", "Disable WAL mode for the SQLite database.", "antonym"),
        ("Always pin the base image by digest.", "Never pin the base image by digest.", "negation"),
        ("Use psycopg instead of asyncpg here.", "Use asyncpg instead of psycopg here.", "preference"),
        ("Run migrations before deploying the app.", "Run migrations after deploying the app.", "order"),
        ("Set statement_timeout to 30s for the app role.", "Set statement_timeout to 60s for the app role.", "number"),
        ("Build with Node 18 in CI.", "Build with Node 20 in CI.", "number"),
        # File names keep their dots inside one clause; -ing forms meet their verb (tagging / tag).
        (
            "Bump the version in Cargo.toml before tagging.",
            "Tag the release before bumping the version in Cargo.toml.",
            "order",
        ),
        # Sides made only of symbols still count.
        (
            "In shell scripts use [[ ]] rather than [ ] for tests.",
            "In shell scripts use [ ] rather than [[ ]] for tests.",
            "preference",
        ),
    ],
)
def test_disagreeing_pairs_never_merge_and_are_flagged(a: str, b: str, kind: str) -> None:
    found = disagreement(a, b)
    assert found is not None and found.kind == kind
    assert disagreement(b, a) is not None  # symmetric
    assert not is_near_duplicate(a, b, HIGH)
    assert is_contradiction(a, b, HIGH)
    assert not is_contradiction(a, b, sim.CONTRADICTION_COSINE - 0.01)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        # The same order said both ways round.
        ("Run migrations before deploying the app.", "Deploy the app only after migrations ran."),
        ("Before deploying the app, run migrations.", "Run migrations before deploying the app."),
        # A negation in both, around different words: the same prohibition rephrased.
        ("Don't run pip as root; use a venv.", "Run pip inside a venv, not as root."),
        # A word both negated and asserted in one text is ambiguous, not a flip.
        (
            "The build fails because PYTHONPATH is not set. Set it in the workflow.",
            "Set PYTHONPATH in the workflow, otherwise the build fails.",
        ),
        # "Don't forget to" asks for the thing.
        ("Don't forget to run alembic upgrade head after pulling.", "After pulling, run alembic upgrade head."),
        # A negated antonym agrees with the other word.
        ("Pin urllib3 below 2: botocore breaks with it.", "Keep urllib3 below 2, botocore doesn't work with it."),
        # Each negates what the other asserts: two wordings of one prohibition, not a flip.
        (
            "Marco is leaving; don't assign him the migration project.",
            "Don't give Marco the migration project, not public yet.",
        ),
    ],
)
def test_agreeing_rephrasings_are_not_disagreements(a: str, b: str) -> None:
    assert disagreement(a, b) is None
    assert not is_contradiction(a, b, HIGH)


def test_unrelated_texts_are_never_flagged_whatever_the_words() -> None:
    a = "Enable WAL mode for SQLite."
    b = "Disable WAL mode for SQLite."
    assert not is_contradiction(a, b, 0.2)


def test_paraphrase_of_forgotten_content_is_held() -> None:
    forgotten = "The staging database password is in the ops vault under pg-staging."
    write = "You can find the pg-staging DB password in the ops vault."
    assert is_tombstone_paraphrase(write, forgotten, HIGH)
    assert not is_tombstone_paraphrase(write, forgotten, sim.PARAPHRASE_COSINE - 0.01)


def test_negated_version_of_forgotten_content_is_not_held() -> None:
    forgotten = "Use --force when pushing to the release branch."
    write = "Never use --force when pushing to the release branch."
    assert not is_tombstone_paraphrase(write, forgotten, HIGH)
    assert not is_tombstone_paraphrase(forgotten, write, HIGH)


def test_forgotten_content_with_a_number_changed_is_still_held() -> None:
    forgotten = "The staging replica listens on port 6432 with the shared ops password."
    write = "The staging replica listens on port 6433 with the shared ops password."
    assert disagreement(write, forgotten) is not None  # the number rule sees it ...
    assert is_tombstone_paraphrase(write, forgotten, HIGH)  # ... and the tombstone check ignores it


def test_dates_and_identifiers_are_not_numbers_that_disagree() -> None:
    a = "reviewer loop (run 22968): regenerate the lockfile with the pinned tool version. See #4411, INC-301."
    b = "reviewer loop (run 13683): regenerate the lockfile with the pinned tool version. See #5120, INC-977."
    assert disagreement(a, b) is None
    assert (
        disagreement("On 2024-04-03 at 10:15 the cache expired.", "On 2024-08-14 at 09:00 the cache expired.") is None
    )
    assert is_near_duplicate(a, b, HIGH)
    # A short number after such a word is a setting, not an identifier.
    found = disagreement("Gunicorn: run 4 workers per pod.", "Gunicorn: run 2 workers per pod.")
    assert found is not None and found.kind == "number"


def test_lexical_overlap_bounds() -> None:
    assert lexical_overlap("", "anything") == 0.0
    assert lexical_overlap("Docker build cache", "docker BUILD caches") == 1.0
    assert 0.0 < lexical_overlap("docker build cache fills disk", "docker build is slow") < 1.0


def test_reason_reads_as_a_line() -> None:
    found = disagreement("Enable WAL mode.", "Disable WAL mode.")
    assert found is not None
    assert str(found) == "antonym: enable / disable"


def test_tokens_and_negated() -> None:
    assert sim.tokens("Don’t run `pip` as ROOT!") == ["don't", "run", "pip", "as", "root"]
    assert sim.negated("Never use uv.")
    assert not sim.negated("Use uv.")
    assert not sim.negated("Not without a lock file.")  # two negations cancel
    assert min(sim.MERGE_COSINE, sim.CONTRADICTION_COSINE) == sim.MIN_COSINE


@pytest.mark.parametrize(
    ("a", "b", "cosine"),
    [
        ("Run pytest with -s to see print output.", "pytest captures stdout; pass -s to see print output.", 0.97),
        ("Use uv to install dependencies in CI.", "Never use uv to install dependencies in CI.", 0.97),
        ("Use uv to install dependencies in CI.", "Never use uv to install dependencies in CI.", 0.70),
        ("Enable WAL mode for SQLite.", "Disable WAL mode for SQLite.", 0.75),
        ("Docker build cache filled the disk.", "Postgres pool sizing for the workers.", 0.99),
    ],
)
def test_judge_agrees_with_the_two_rules(a: str, b: str, cosine: float) -> None:
    expected = (
        "duplicate" if is_near_duplicate(a, b, cosine) else "contradiction" if is_contradiction(a, b, cosine) else None
    )
    assert sim.judge(a, b, cosine) == expected


# -- the labelled pair sets and the committed calibration (evals/similarity/) -------------------------

EVALS = Path(__file__).resolve().parents[2] / "evals"
PAIR_SETS = {
    "merge_pairs.jsonl": ({"duplicate", "negation", "antonym", "number", "preference", "order", "same_topic",
                           "unrelated"}, ("a", "b")),
    "tombstone_pairs.jsonl": ({"paraphrase", "negated", "related", "unrelated"}, ("forgotten", "candidate")),
}  # fmt: skip


@pytest.mark.parametrize("name", sorted(PAIR_SETS))
def test_pair_sets_are_well_formed(name: str) -> None:
    labels, (first, second) = PAIR_SETS[name]
    rows = [json.loads(line) for line in (EVALS / "similarity" / name).read_text().splitlines() if line.strip()]
    assert len(rows) >= 150
    assert len({r["id"] for r in rows}) == len(rows)
    seen: dict[str, int] = {}
    for r in rows:
        assert r["label"] in labels and r[first].strip() and r[second].strip() and r[first] != r[second]
        # dev and test alternate within each label, in authoring order
        assert r["split"] == ("dev", "test")[seen.get(r["label"], 0) % 2], r["id"]
        seen[r["label"]] = seen.get(r["label"], 0) + 1
    # Written for this set: no text is one of the retrieval sets' lessons.
    retrieval = {
        json.loads(line)["value"]
        for path in (EVALS / "data" / "lessons.jsonl", EVALS / "data2" / "lessons.jsonl")
        for line in path.read_text().splitlines()
        if line.strip()
    }
    assert not retrieval & {r[k] for r in rows for k in (first, second)}


def test_shipped_thresholds_are_the_committed_calibration() -> None:
    fitted = json.loads((EVALS / "similarity" / "calibration.json").read_text())["fitted"]
    assert fitted == {name: getattr(sim, name) for name in fitted}
    assert set(fitted) == {"MERGE_COSINE", "MERGE_OVERLAP", "CONTRADICTION_COSINE", "PARAPHRASE_COSINE"}
