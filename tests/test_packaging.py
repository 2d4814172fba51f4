"""Packaging: the lock files agree with pyproject.toml, and a built wheel installs a working ``cairn``.

The lock checks read files only. The install tests build the distribution from a copy of the sources
(so the checkout gets no ``build/``), install it with ``uv tool install`` into a temporary tool
directory, constrained to ``requirements.lock`` (uv's cache makes a repeat install take seconds; the
first one on a machine downloads the locked wheels), and run the installed ``cairn`` in a temporary
home — the path a person takes with ``uv tool install .`` / ``pipx install .``, with no clone-and-make.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tomllib
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[1]
RUNTIME_LOCK = ROOT / "requirements.lock"
DEV_LOCK = ROOT / "requirements-dev.lock"
PACKAGE = ROOT / "src" / "cairn"


# ----------------------------------------------------------------------------------------- lock files


@dataclass
class Locked:
    version: str
    hashes: list[str] = field(default_factory=list)


def parse_lock(text: str) -> dict[str, Locked]:
    """``{canonical name: Locked}`` from a ``uv pip compile --generate-hashes`` file; refuses any non-exact pin."""
    out: dict[str, Locked] = {}
    current: Locked | None = None
    for raw in text.splitlines():
        line = raw.strip().removesuffix("\\").strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--hash="):
            assert current is not None, f"a hash before any requirement: {raw!r}"
            current.hashes.append(line.removeprefix("--hash="))
            continue
        req = Requirement(line)
        pins = [s for s in req.specifier if s.operator == "=="]
        assert len(pins) == 1 and len(req.specifier) == 1, f"not an exact pin in the lock: {raw!r}"
        current = out[canonicalize_name(req.name)] = Locked(pins[0].version)
    return out


def lock_problems(requirements: list[str], lock: dict[str, Locked]) -> list[str]:
    """Every way ``lock`` fails ``requirements`` (pyproject's ranges): a missing package or an out-of-range pin."""
    problems = []
    for spec in requirements:
        req = Requirement(spec)
        locked = lock.get(canonicalize_name(req.name))
        if locked is None:
            problems.append(f"{req.name} is in pyproject.toml but not in the lock")
        elif not req.specifier.contains(locked.version, prereleases=True):
            problems.append(f"{req.name}=={locked.version} in the lock is outside pyproject's {req.specifier}")
    return problems


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


FIX = "run `make lock` (then `make setup`) so the lock files match pyproject.toml"


def test_runtime_lock_satisfies_every_runtime_range() -> None:
    project = _project()
    for lock_file in (RUNTIME_LOCK, DEV_LOCK):
        problems = lock_problems(project["dependencies"], parse_lock(lock_file.read_text(encoding="utf-8")))
        assert not problems, f"{lock_file.name}: {problems}; {FIX}"


def test_dev_lock_satisfies_every_dev_range() -> None:
    dev = _project()["optional-dependencies"]["dev"]
    problems = lock_problems(dev, parse_lock(DEV_LOCK.read_text(encoding="utf-8")))
    assert not problems, f"{DEV_LOCK.name}: {problems}; {FIX}"


def test_the_two_locks_agree_and_pin_every_package_with_hashes() -> None:
    runtime = parse_lock(RUNTIME_LOCK.read_text(encoding="utf-8"))
    dev = parse_lock(DEV_LOCK.read_text(encoding="utf-8"))
    assert runtime and set(runtime) <= set(dev), f"in requirements.lock only: {sorted(set(runtime) - set(dev))}"
    differ = {
        name: (runtime[name].version, dev[name].version)
        for name in runtime
        if runtime[name].version != dev[name].version
    }
    assert not differ, f"the locks pin these differently: {differ}; {FIX}"
    # Hashes put `pip install -r` into hash-checking mode: a tampered or swapped file is refused.
    unhashed = [name for name, locked in dev.items() if not locked.hashes]
    assert not unhashed, f"locked without a hash: {unhashed}; {FIX}"
    assert all(re.fullmatch(r"sha256:[0-9a-f]{64}", h) for locked in dev.values() for h in locked.hashes)


def test_make_setup_installs_from_the_lock() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert "pip install -q -r requirements-dev.lock" in makefile
    assert "pip install -q -e . --no-deps" in makefile  # Cairn itself never re-resolves the dependencies
    assert "\nlock:" in makefile


def test_lock_problems_reports_a_stale_lock() -> None:
    """The checker above can fail: a pin outside its range, a dependency the lock lacks, a loose pin."""
    lock = parse_lock("numpy==2.4.6 \\\n    --hash=sha256:" + "0" * 64 + "\nrich==16.0.0\n")
    problems = lock_problems(["numpy>=2.4.6,<3", "rich>=15.0.0,<16", "regex>=2025.1"], lock)
    assert problems == [
        "rich==16.0.0 in the lock is outside pyproject's <16,>=15.0.0",
        "regex is in pyproject.toml but not in the lock",
    ]
    assert lock_problems(["numpy>=2.4.6,<3"], lock) == []
    with pytest.raises(AssertionError, match="not an exact pin"):
        parse_lock("numpy>=2\n")


def test_distribution_name_and_command() -> None:
    """The distribution has a name of its own on PyPI; the import package and the command stay ``cairn``."""
    project = _project()
    assert project["name"] == "cairn-lessons"
    assert project["scripts"] == {
        "cairn": "cairn.cli.main:entry",  # no cyclic GC while importing, one BLAS thread (cli/main.py: entry)
        "memory-gateway": "cairn.compat.memory_gateway.cli:main",  # the peer's contract (docs/memory-gateway.md)
    }
    assert "version" in project.get("dynamic", [])  # cairn.__version__ is the one definition


# ------------------------------------------------------------------------------------ build & install


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _uv_env(tmp: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("UV_", "VIRTUAL_ENV", "CAIRN_"))}
    env.update(
        {
            "UV_TOOL_DIR": str(tmp / "tools"),
            "UV_TOOL_BIN_DIR": str(tmp / "bin"),
            "UV_PYTHON_DOWNLOADS": "never",  # the machine's Python 3.11, never a download
            "UV_NO_CONFIG": "1",
        }
    )
    return env


def _python() -> str:
    """The interpreter behind this venv: a tool environment is a venv of its own on the same Python."""
    return getattr(sys, "_base_executable", None) or sys.executable


def _run(cmd: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, **kwargs)
    assert proc.returncode == 0, f"{cmd} exited {proc.returncode}\nstdout: {proc.stdout}\nstderr: {proc.stderr}"
    return proc


@pytest.fixture(scope="module")
def source_copy(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """What a checkout holds for the build: pyproject.toml, README.md and src/ (without bytecode)."""
    root = tmp_path_factory.mktemp("checkout")
    shutil.copy2(ROOT / "pyproject.toml", root)
    shutil.copy2(ROOT / "README.md", root)
    shutil.copytree(PACKAGE, root / "src" / "cairn", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


@pytest.fixture(scope="module")
def wheel(source_copy: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([_uv(), "build", "-q", "--python", _python(), "--out-dir", str(out), str(source_copy)], env=_uv_env(out))
    (built,) = out.glob("cairn_lessons-*-py3-none-any.whl")
    assert list(out.glob("cairn_lessons-*.tar.gz")), "the sdist was not built"
    return built


def test_wheel_holds_every_file_of_the_package(wheel: Path) -> None:
    """Package data (migrations, templates, static files, the tokenizer, py.typed) ships in the wheel."""
    with zipfile.ZipFile(wheel) as zf:
        names = set(zf.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        assert "cairn = cairn.cli.main:entry" in zf.read(entry_points).decode()
    expected = {
        "cairn/" + p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }
    for must in ("cairn/py.typed", "cairn/web/templates/base.html", "cairn/web/static/app.css"):
        assert must in expected
    assert any(n.startswith("cairn/store/migrations/versions/") for n in expected)
    assert any(n.startswith("cairn/search/data/") for n in expected)
    missing = sorted(expected - names)
    assert not missing, f"not in the wheel: {missing}"
    assert not [n for n in names if n.startswith("tests/") or "__pycache__" in n]


def _install(target: str, tmp: Path) -> Path:
    """``uv tool install TARGET`` with the locked versions; the installed ``cairn``."""
    _run(
        [_uv(), "tool", "install", "-q", "--python", _python(), "--constraints", str(RUNTIME_LOCK), target],
        env=_uv_env(tmp),
    )
    cairn = tmp / "bin" / "cairn"
    assert cairn.is_file()
    return cairn


def _cairn(cairn: Path, tmp: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """The installed command in a temporary home, outside any checkout, with no daemon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "VIRTUAL_ENV", "PYTHON"))}
    env.update({"HOME": str(tmp / "user"), "CAIRN_HOME": str(tmp / "home"), "CAIRN_NO_DAEMON": "1"})
    (tmp / "user").mkdir(exist_ok=True)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if Path(p) != Path(sys.executable).parent
    )
    proc = _run([str(cairn), *args], env=env, cwd=tmp / "user")
    assert "Traceback" not in proc.stderr
    return proc


@pytest.mark.slow
def test_built_wheel_installs_a_working_cairn(wheel: Path, tmp_path: Path) -> None:
    cairn = _install(str(wheel), tmp_path)
    tool_python = next((tmp_path / "tools").glob("cairn-lessons/bin/python"))
    where = _run([str(tool_python), "-c", "import cairn; print(cairn.__file__)"]).stdout
    assert str(tmp_path / "tools") in where and str(ROOT) not in where  # the installed copy, not this checkout

    repo = ("--repo", "acme/widget")
    _cairn(
        cairn, tmp_path, "write", "repo::acme/widget", "docker-cache", "Rebuild with --no-cache after lockfile changes"
    )
    read = _cairn(cairn, tmp_path, "--json", "read", "repo::acme/widget", "docker-cache")
    assert json.loads(read.stdout)["data"]["lesson"]["value"] == "Rebuild with --no-cache after lockfile changes"
    found = json.loads(_cairn(cairn, tmp_path, "--json", "search", "stale docker cache", *repo).stdout)["data"]
    assert [hit["key"] for hit in found["results"]] == ["docker-cache"]
    assert found["mode"] == "hybrid" and found["results"][0]["similarity"] > 0  # the packaged model embeds
    block = _cairn(cairn, tmp_path, "context", *repo, "--branch", "main").stdout
    assert "docker-cache" in block and "Rebuild with --no-cache" in block
    assert (tmp_path / "home" / "cairn.db").is_file()


@pytest.mark.slow
def test_checkout_installs_a_working_cairn(source_copy: Path, tmp_path: Path) -> None:
    """``uv tool install .`` from a checkout builds and installs the same thing."""
    cairn = _install(str(source_copy), tmp_path)
    _cairn(cairn, tmp_path, "write", "global", "typecheck-first", "Run the typecheck before you claim done.")
    listed = json.loads(_cairn(cairn, tmp_path, "--json", "list", "global").stdout)["data"]
    assert [lesson["key"] for lesson in listed["lessons"]] == ["typecheck-first"]
