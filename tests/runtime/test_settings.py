"""Settings layers and validation: defaults → ``$CAIRN_HOME/config.toml`` → the repository's ``.cairn.toml`` →
``CAIRN_*`` environment → per-call flags; every value range-checked, every unknown key refused with the
nearest known one, and every value able to say where it came from."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.core.principal import Principal
from cairn.errors import CairnError
from cairn.runtime import settings as S
from cairn.runtime.settings import SPECS, Settings, load, repo_config
from cairn.service.api import Cairn


@pytest.fixture(autouse=True)
def _no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """A developer's shell must not change what these tests see."""
    for spec in SPECS:
        monkeypatch.delenv(spec.env, raising=False)
    for name in S._LEGACY_ENV.values():
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    """A home, and a checkout (a ``.git`` directory is all ``find_root`` needs) with a subdirectory."""
    home = tmp_path / "home"
    home.mkdir()
    repo = tmp_path / "work" / "api"
    (repo / ".git").mkdir(parents=True)
    sub = repo / "src" / "deep"
    sub.mkdir(parents=True)
    return {"home": home, "repo": repo, "sub": sub, "above": tmp_path / "work"}


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_and_their_source(layout: dict[str, Path]) -> None:
    """With no file and no environment every value is its default, and says so."""
    cfg = load(layout["home"], layout["sub"])
    assert (cfg.max_chars, cfg.loop_cap, cfg.half_life_days, cfg.candidate_factor) == (3000, 1, 14.0, 0.8)
    assert all(row["source"] == "default" for row in cfg.effective())
    assert [row["key"] for row in cfg.effective()] == [s.dotted for s in SPECS]
    assert {row["env"] for row in cfg.effective()} >= {"CAIRN_CONTEXT_MAX_CHARS", "CAIRN_CONTEXT_WEIGHTS_RECENCY"}


def test_repo_file_overrides_the_home_file(layout: dict[str, Path]) -> None:
    """``.cairn.toml`` (the nearest, up to the checkout's root) beats ``config.toml``; keys it leaves out keep
    the home file's values."""
    home_file = write(layout["home"] / "config.toml", "[context]\nmax_chars = 1500\nloop_cap = 3\n")
    repo_file = write(layout["repo"] / ".cairn.toml", "[context]\nmax_chars = 900\n")
    cfg = load(layout["home"], layout["sub"])
    assert (cfg.max_chars, cfg.source("max_chars")) == (900, str(repo_file))
    assert (cfg.loop_cap, cfg.source("loop_cap")) == (3, str(home_file))
    nearer = write(layout["sub"] / ".cairn.toml", "[context]\nmax_chars = 800\n")
    assert load(layout["home"], layout["sub"]).source("max_chars") == str(nearer)
    assert load(layout["home"], layout["repo"]).max_chars == 900
    assert load(layout["home"], None).max_chars == 1500


def test_a_file_above_the_checkout_root_does_not_apply(layout: dict[str, Path]) -> None:
    """The walk stops at the repository root: a ``.cairn.toml`` in a parent directory is another project's."""
    write(layout["above"] / ".cairn.toml", "[context]\nmax_chars = 400\n")
    assert repo_config(layout["sub"]) is None
    assert load(layout["home"], layout["sub"]).max_chars == 3000
    assert repo_config(layout["above"]) == layout["above"] / ".cairn.toml"  # there it is the cwd's own file


def test_environment_overrides_files_and_flags_override_everything(
    layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CAIRN_CONTEXT_MAX_CHARS`` beats both files; a flag (``with_overrides``) beats the environment."""
    write(layout["home"] / "config.toml", "[context]\nmax_chars = 1500\n")
    write(layout["repo"] / ".cairn.toml", "[context]\nmax_chars = 900\n")
    monkeypatch.setenv("CAIRN_CONTEXT_MAX_CHARS", "1200")
    monkeypatch.setenv("CAIRN_CONTEXT_WEIGHTS_OUTCOME", "2.5")
    cfg = load(layout["home"], layout["sub"])
    assert (cfg.max_chars, cfg.source("max_chars")) == (1200, "$CAIRN_CONTEXT_MAX_CHARS")
    assert (cfg.weight_outcome, cfg.source("weight_outcome")) == (2.5, "$CAIRN_CONTEXT_WEIGHTS_OUTCOME")
    flagged = cfg.with_overrides(max_chars=700, loop_cap=None)
    assert (flagged.max_chars, flagged.source("max_chars")) == (700, "command line")
    assert flagged.loop_cap == cfg.loop_cap and flagged.source("loop_cap") == "default"
    assert cfg.with_overrides(max_chars=None) is cfg
    monkeypatch.setenv("CAIRN_CONTEXT_MAX_CHARS", "")
    assert load(layout["home"], layout["sub"]).max_chars == 900  # an empty variable is unset


def test_legacy_environment_names_still_work_and_the_new_name_wins(
    layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``CAIRN_PROMOTION_THRESHOLD`` from before the sections existed is read; the sectioned name wins."""
    monkeypatch.setenv("CAIRN_PROMOTION_THRESHOLD", "5")
    cfg = load(layout["home"])
    assert (cfg.promotion_threshold, cfg.source("promotion_threshold")) == (5, "$CAIRN_PROMOTION_THRESHOLD")
    monkeypatch.setenv("CAIRN_TRUST_PROMOTION_THRESHOLD", "7")
    assert load(layout["home"]).promotion_threshold == 7


@pytest.mark.parametrize(
    ("toml", "near"),
    [
        ("[context]\nmax_char = 900\n", "did you mean context.max_chars?"),
        ("max_chars = 900\n", "did you mean context.max_chars?"),
        ("[context.weights]\nrecncy = 2\n", "did you mean context.weights.recency?"),
        ("[context]\nloopcap = 2\n", "did you mean context.loop_cap?"),
        ("[zzz]\nqqq = 1\n", "known keys: context.max_chars"),
    ],
)
def test_an_unknown_key_is_refused_with_the_nearest_known_one(layout: dict[str, Path], toml: str, near: str) -> None:
    """A typo is a SETUP error naming the file and the key it probably meant, never silently ignored."""
    path = write(layout["repo"] / ".cairn.toml", toml)
    with pytest.raises(CairnError) as info:
        load(layout["home"], layout["sub"])
    assert info.value.code == "SETUP"
    assert near in info.value.message and str(path) in info.value.message


@pytest.mark.parametrize(
    ("toml", "needle"),
    [
        ("[context]\nmax_chars = 50\n", "context.max_chars must be between 200 and 20000, got 50"),
        ("[context]\nmax_chars = 20001\n", "between 200 and 20000"),
        ("[context]\nloop_cap = -1\n", "context.loop_cap must be between 0 and 100"),
        ("[context]\nmax_chars = 900.5\n", "context.max_chars must be a whole number"),
        ("[context]\nmax_chars = true\n", "context.max_chars must be a number"),
        ('[context]\nmax_chars = "lots"\n', "context.max_chars must be a whole number"),
        ("[context]\ncandidate_factor = 1.5\n", "context.candidate_factor must be between 0 and 1, got 1.5"),
        ("[context]\nmax_chars = \n", "is not valid TOML"),
    ],
)
def test_a_bad_value_is_refused_naming_the_file(layout: dict[str, Path], toml: str, needle: str) -> None:
    """Out of range, the wrong type, or not TOML at all: SETUP, with the range and the file's path."""
    path = write(layout["home"] / "config.toml", toml)
    with pytest.raises(CairnError) as info:
        load(layout["home"], layout["sub"])
    assert info.value.code == "SETUP"
    assert needle in info.value.message and str(path) in info.value.message


def test_a_switch_reads_a_toml_boolean_as_0_or_1(layout: dict[str, Path]) -> None:
    """``auto_apply = true`` (how the setting is usually written) is 1, ``false`` is 0; a boolean for a
    setting that is not a 0/1 switch stays refused (the parametrized case above)."""
    write(layout["home"] / "config.toml", "[consolidate]\nauto_apply = true\n[serve]\nauto_start = false\n")
    cfg = load(layout["home"])
    assert (cfg.consolidate_auto_apply, cfg.auto_start) == (1, 0)
    assert type(cfg.consolidate_auto_apply) is int


def test_whole_floats_and_ints_are_accepted_where_they_fit(layout: dict[str, Path]) -> None:
    """``max_chars = 900.0`` is 900; an int is fine for a float setting."""
    write(layout["home"] / "config.toml", "[context]\nmax_chars = 900.0\nhalf_life_days = 7\n")
    cfg = load(layout["home"])
    assert (cfg.max_chars, type(cfg.max_chars), cfg.half_life_days) == (900, int, 7.0)


def test_bad_environment_values_name_the_variable(layout: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An environment value out of range or of the wrong type is refused, naming ``$CAIRN_...``."""
    for raw, needle in (("99999", "between 200 and 20000"), ("abc", "must be a whole number")):
        monkeypatch.setenv("CAIRN_CONTEXT_MAX_CHARS", raw)
        with pytest.raises(CairnError) as info:
            load(layout["home"])
        assert info.value.code == "SETUP"
        assert needle in info.value.message and "$CAIRN_CONTEXT_MAX_CHARS" in info.value.message


def test_flag_overrides_are_validated_as_invalid_input() -> None:
    """A flag out of range is the caller's mistake (INVALID_INPUT, exit 1), not a setup error."""
    for values, needle in (({"max_chars": 199}, "between 200 and 20000"), ({"loop_cap": 101}, "between 0 and 100")):
        with pytest.raises(CairnError) as info:
            Settings().with_overrides(**values)
        assert info.value.code == "INVALID_INPUT" and needle in info.value.message


def test_all_weights_zero_is_refused(layout: dict[str, Path]) -> None:
    """A score with no positive weight ranks nothing: refused at load."""
    write(
        layout["home"] / "config.toml",
        "[context.weights]\nrecency = 0\nsalience = 0\nrelevance = 0\noutcome = 0\n",
    )
    with pytest.raises(CairnError) as info:
        load(layout["home"])
    assert info.value.code == "SETUP" and "weights" in info.value.message


def test_the_service_uses_given_settings_and_flags_override_them(svc: Cairn, me: Principal) -> None:
    """``context(settings=...)`` (a repository's file, as the daemon passes it) replaces the service's own
    settings for that call, and a flag overrides both."""
    svc.write(me, "global", "one", "A lesson")
    assert svc.context(me)["budget"] == 3000
    repo_cfg = Settings(max_chars=900, loop_cap=4, candidate_factor=0.5)
    data = svc.context(me, settings=repo_cfg)
    assert (data["budget"], data["loop_cap"]) == (900, 4)
    assert data["lessons"][0]["score"] == pytest.approx((1.0 + 0.0 + 0.5) / 3 * 0.5, abs=1e-3)
    assert svc.context(me, settings=repo_cfg, max_chars=700)["budget"] == 700
    assert Cairn(svc.store, Settings(max_chars=1100)).context(me)["budget"] == 1100
