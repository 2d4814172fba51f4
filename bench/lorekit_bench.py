"""LoreKit over Cairn: its SessionStart hook at 60,000 lessons end to end, beside `cairn context` on the
same store, and the import rate of a 60,000-lesson LoreKit local store.

    .venv/bin/python bench/lorekit_bench.py                    # 60,000 lessons, 10 runs each
    .venv/bin/python bench/lorekit_bench.py --size 6000 --runs 5 --import-size 6000

* **SessionStart**: the context benchmark's 60,000-lesson store (``bench/context_gen.py``, cached;
  the ladder acme/api, feat/retry-backoff, project api holds ~38% of it) copied to a scratch home and
  served by ``cairn serve``. LoreKit's own CLI (``../shared/peers/lorekit-cli``, run by node; skipped
  when absent) runs its ``hook --event SessionStart`` in a git checkout of ``acme/api`` on that
  branch, one process per run with a fresh session, as Claude Code starts it: 4 list calls (one per
  rung, 100 each) and the scope map, over HTTP. Beside it: the same five requests from Python alone
  (the surface's share), and ``cairn context`` in the same checkout (warm: the same ``cairn serve``
  answers its socket), which ranks every eligible lesson of the ladder, not the newest 100 per rung.
* **Import**: a LoreKit local store of ``--import-size`` memory files written in LoreKit's on-disk
  format (front matter of JSON scalars, then the value; scope directories), imported by ``cairn
  import --from lorekit DIR --no-embed`` into a fresh home; then again (idempotent: all unchanged).

Writes bench/out/lorekit.json and prints the table with the change against the previous run.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))
OUT = ROOT / "bench" / "out" / "lorekit.json"
CAIRN = str(Path(sys.executable).parent / "cairn")
WORDS = (
    "retry backoff timeout cursor cache deploy schema index token review rebase migration flaky lock "
    "queue worker tenant budget jitter circuit breaker gateway payload webhook signature fixture"
).split()
SCOPES = [
    ("global", 0.2), ("project::api", 0.1), ("repo::acme/api", 0.2), ("branch::acme/api::feat/retry-backoff", 0.05),
    ("repo::acme/web", 0.2), ("project::platform", 0.1), ("branch::acme/web::main", 0.15),
]  # fmt: skip
FIELDS = [
    "scope", "key", "tags", "source_agent", "trigger", "created", "updated", "archived_at",
    "origin_repo", "origin_branch", "origin_commit", "origin_pr", "expires_at", "seen_count",
]  # fmt: skip


def say(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def ms(values: list[float]) -> dict[str, float]:
    s = sorted(values)
    return {
        "p50_ms": round(statistics.median(s) * 1000, 1),
        "p95_ms": round(s[min(len(s) - 1, int(round(0.95 * (len(s) - 1))))] * 1000, 1),
        "n": len(s),
    }


def peer_dir() -> Path | None:
    for base in (
        ROOT,
        Path(
            subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--path-format=absolute", "--git-common-dir"],
                capture_output=True,
                text=True,
            ).stdout.strip()
        ).parent,
    ):
        cli = base.parent / "shared" / "peers" / "lorekit-cli" / "bin" / "lorekit.mjs"
        if cli.exists():
            return cli.parent.parent
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cairn_env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("CAIRN_")}
    env.update(CAIRN_HOME=str(home), CAIRN_SERVE_AUTO_START="0")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed package has its bytecode; no user recompiles
    return env


def checkout(work: Path) -> Path:
    """A git checkout LoreKit and Cairn both read as repo acme/api, branch feat/retry-backoff, project api."""
    d = work / "api"
    d.mkdir()
    for cmd in (
        ["init", "-q"],
        ["remote", "add", "origin", "https://github.com/acme/api.git"],
        ["checkout", "-q", "-b", "feat/retry-backoff"],
    ):
        subprocess.run(["git", "-C", str(d), *cmd], check=True)
    return d


def session_start(size: int, runs: int) -> dict[str, Any]:
    import context_gen

    say(f"store of {size:,} lessons (bench/context_gen.py; cached after the first build)")
    meta = context_gen.build_store(size)
    work = Path(tempfile.mkdtemp(prefix="lorekit-bench-"))
    server = None
    try:
        home = work / "cairn"
        home.mkdir()
        shutil.copyfile(context_gen.store_home(size) / "cairn.db", home / "cairn.db")
        env = cairn_env(home)
        made = subprocess.run(
            [CAIRN, "--json", "token", "create", "--perm", "read", "--lorekit"],
            env={**env, "CAIRN_NO_DAEMON": "1"},
            capture_output=True,
            text=True,
            check=True,
        )
        token = json.loads(made.stdout)["data"]["token"]
        port = free_port()
        server = subprocess.Popen(
            [CAIRN, "serve", "--port", str(port), "--no-sweep"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=(work / "serve.log").open("w"),
        )
        base = f"http://127.0.0.1:{port}/lorekit/functions/v1"
        for _ in range(600):
            try:
                urllib.request.urlopen(base + "/health", timeout=1).read()
                break
            except OSError:
                time.sleep(0.2)
        repo = checkout(work)
        out: dict[str, Any] = {"lessons": meta.get("lessons", size), "ladder_active": meta.get("ladder_active")}

        def get(path: str) -> Any:
            req = urllib.request.Request(base + path, headers={"Authorization": f"Bearer {token}"})
            with urllib.request.urlopen(req, timeout=30) as r:
                return json.loads(r.read())

        rungs = ["project::api", "branch::acme/api::feat/retry-backoff", "repo::acme/api", "global"]
        get("/memories/scopes")  # warm the server once, as any long-running server is
        times, scope_map = [], []
        for _ in range(runs):
            t0 = time.perf_counter()
            for s in rungs:
                get(f"/memories?scope={urllib.parse.quote(s)}&limit=100")
            t1 = time.perf_counter()
            get("/memories/scopes")
            scope_map.append(time.perf_counter() - t1)
            times.append(time.perf_counter() - t0)
        out["surface_5_requests"] = ms(times)
        out["scope_map"] = ms(scope_map)  # the one request that aggregates the whole store

        ctx_times, header = [], ""
        for _ in range(runs):
            t0 = time.perf_counter()
            r = subprocess.run([CAIRN, "context"], cwd=repo, env=env, capture_output=True, text=True)
            ctx_times.append(time.perf_counter() - t0)
            header = next((ln for ln in r.stdout.splitlines() if ln.startswith("Cairn:")), r.stderr[-200:])
        out["cairn_context"] = {**ms(ctx_times), "header": header, "chars": len(r.stdout)}

        peer = peer_dir()
        if peer is None or shutil.which("node") is None:
            out["lorekit_session_start"] = {"skipped": "no LoreKit CLI or node"}
            return out
        lk_home = work / "home"
        lk_env = {
            **os.environ,
            "HOME": str(lk_home),
            "LOREKIT_HOME": str(lk_home / ".lorekit"),
            "LOREKIT_TELEMETRY": "0",
            "DO_NOT_TRACK": "1",
            "LOREKIT_MODE": "remote",
            "LOREKIT_MCP_URL": base + "/mcp",
            "LOREKIT_TOKEN": token,
            "CLAUDE_PLUGIN_DATA": str(work / "plugin-data"),
        }
        lk_home.mkdir()
        node0 = []
        for _ in range(3):
            t0 = time.perf_counter()
            subprocess.run(["node", "-e", "0"], check=True)
            node0.append(time.perf_counter() - t0)
        hook_times, text = [], ""
        for i in range(runs):
            payload = json.dumps(
                {"hook_event_name": "SessionStart", "session_id": f"bench-{i}-{time.time()}", "cwd": str(repo)}
            )
            t0 = time.perf_counter()
            r = subprocess.run(
                [
                    "node",
                    str(peer / "bin" / "lorekit.mjs"),
                    "hook",
                    "--adapter",
                    "claude",
                    "--event",
                    "SessionStart",
                    "--dir",
                    str(repo),
                ],
                input=payload,
                cwd=repo,
                env=lk_env,
                capture_output=True,
                text=True,
            )
            hook_times.append(time.perf_counter() - t0)
            text = json.loads(r.stdout)["hookSpecificOutput"]["additionalContext"] if r.stdout.strip() else r.stderr
        out["lorekit_session_start"] = {
            **ms(hook_times),
            "header": text.splitlines()[0] if text else "",
            "chars": len(text),
            "node_startup_ms": round(min(node0) * 1000, 1),
        }
        return out
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        shutil.rmtree(work, ignore_errors=True)


def scope_dir(root: Path, scope: str) -> Path | None:
    """Where LoreKit's local store keeps a scope's files (None: a scope kind it has no folder for)."""
    parts = scope.split("::")
    if parts == ["global"]:
        return root / "global"
    if parts[0] == "project" and len(parts) == 2:
        return root / "project" / parts[1]
    if parts[0] == "repo" and len(parts) == 2:
        return root.joinpath("repo", *parts[1].split("/"))
    if parts[0] == "branch" and len(parts) == 3:
        return root.joinpath("branch", *parts[1].split("/"), *parts[2].split("/"))
    return None


def write_memory(d: Path, meta: dict[str, Any], value: str) -> None:
    """One memory file in LoreKit's format (``src/store/format.mjs``): front matter of JSON scalars, then the value."""
    d.mkdir(parents=True, exist_ok=True)
    fm = "\n".join(f"{k}: {json.dumps(meta.get(k))}" for k in FIELDS)
    slug = re.sub(r"[^a-z0-9]+", "-", str(meta["key"]).lower()).strip("-")[:80]
    (d / f"{slug}.md").write_text(f"---\n{fm}\n---\n{value}\n", encoding="utf-8")


def write_store(root: Path, n: int) -> None:
    """``n`` memory files in LoreKit's local layout and format (``src/store/format.mjs``)."""
    rnd = random.Random(19)
    names, weights = zip(*SCOPES, strict=True)
    for i in range(n):
        scope = rnd.choices(names, weights)[0]
        d = scope_dir(root, scope)
        assert d is not None
        words = rnd.sample(WORDS, 6)
        key = f"{words[0]}-{words[1]}-{i}"
        day = 1 + i % 28
        meta = {
            "scope": scope,
            "key": key,
            "tags": rnd.sample(WORDS, rnd.randint(0, 3)),
            "source_agent": rnd.choice(["claude", "codex", "cursor", None]),
            "trigger": rnd.choice([None, "tool-failure"]),
            "created": f"2026-0{1 + i % 9}-{day:02d}T10:00:00.000Z",
            "updated": f"2026-0{1 + i % 9}-{day:02d}T12:00:00.000Z",
            "archived_at": "2026-10-01T00:00:00.000Z" if i % 25 == 0 else None,
            "origin_repo": "acme/api" if i % 3 == 0 else None,
            "origin_branch": None,
            "origin_commit": None,
            "origin_pr": (i % 900) + 1 if i % 7 == 0 else None,
            "expires_at": "2099-01-01T00:00:00.000Z" if i % 30 == 0 else None,
            "seen_count": 1 + i % 5,
        }
        value = f"Lesson {i}: when {' '.join(words)} acts up, check the {words[2]} before the {words[3]}."
        write_memory(d, meta, value)


def import_rate(n: int) -> dict[str, Any]:
    work = Path(tempfile.mkdtemp(prefix="lorekit-import-"))
    try:
        store = work / "dot-lorekit"
        t0 = time.perf_counter()
        write_store(store, n)
        say(f"wrote {n:,} LoreKit memory files in {time.perf_counter() - t0:.1f} s")
        home = work / "cairn"
        home.mkdir()
        env = {**cairn_env(home), "CAIRN_NO_DAEMON": "1"}
        out: dict[str, Any] = {"files": n}
        for run in ("first", "again"):
            t0 = time.perf_counter()
            r = subprocess.run(
                [CAIRN, "--json", "import", "--from", "lorekit", str(store), "--no-embed"],
                env=env,
                capture_output=True,
                text=True,
            )
            took = time.perf_counter() - t0
            data = json.loads(r.stdout)["data"] if r.returncode == 0 else {"error": r.stdout[-500:] + r.stderr[-500:]}
            out[run] = {
                "seconds": round(took, 1),
                "per_s": round(n / took),
                "created": data.get("created"),
                "unchanged": data.get("unchanged"),
                "refused": len(data.get("refused") or []),
                "skipped": data.get("skipped"),
                "error": data.get("error"),
            }
            say(f"import ({run}): {took:.1f} s")
        out["db_mb"] = round((home / "cairn.db").stat().st_size / 1e6, 1)
        return out
    finally:
        shutil.rmtree(work, ignore_errors=True)


def delta(now: Any, then: Any) -> str:
    if not isinstance(now, int | float) or not isinstance(then, int | float) or not then:
        return ""
    return f" ({(now - then) / then:+.0%})"


def report(r: dict[str, Any], prev: dict[str, Any] | None) -> str:
    def at(d: Any, *path: str) -> Any:
        for p in path:
            d = d.get(p) if isinstance(d, dict) else None
        return d

    rows = [("what", "p50", "p95", "answer")]
    ss = r.get("session_start", {})
    for name, label in (
        ("lorekit_session_start", "LoreKit SessionStart hook (node, 5 requests)"),
        ("surface_5_requests", "  the same 5 requests from Python"),
        ("scope_map", "  of which GET /memories/scopes"),
        ("cairn_context", "cairn context (warm daemon)"),
    ):
        m = ss.get(name) or {}
        if "skipped" in m:
            rows.append((label, "skipped", "", m["skipped"]))
            continue
        p50, p95 = m.get("p50_ms"), m.get("p95_ms")
        rows.append(
            (
                label,
                f"{p50} ms{delta(p50, at(prev, 'session_start', name, 'p50_ms'))}",
                f"{p95} ms",
                (m.get("header") or "")[:70],
            )
        )
    imp = r.get("import", {})
    for run in ("first", "again"):
        m = imp.get(run) or {}
        rows.append(
            (
                f"import {imp.get('files', 0):,} files ({run})",
                f"{m.get('seconds')} s",
                f"{m.get('per_s')}/s{delta(m.get('per_s'), at(prev, 'import', run, 'per_s'))}",
                f"created {m.get('created')}, unchanged {m.get('unchanged')}, refused {m.get('refused')}",
            )
        )
    widths = [max(len(str(row[i])) for row in rows) for i in range(4)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(row, widths, strict=True)) for row in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--size", type=int, default=60_000, help="lessons in the served store (a context_gen size)")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--import-size", type=int, default=60_000)
    ap.add_argument("--skip", choices=("session-start", "import"), action="append", default=[])
    ap.add_argument("--out", type=Path, default=OUT, help="the JSON file (the previous run is read from it)")
    args = ap.parse_args(argv)
    out_file = args.out
    prev = json.loads(out_file.read_text()) if out_file.exists() else None
    result: dict[str, Any] = {
        "at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "load_start": os.getloadavg()[0],
    }
    result["commit"] = subprocess.run(
        ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    if "session-start" not in args.skip:
        result["session_start"] = session_start(args.size, args.runs)
    if "import" not in args.skip:
        result["import"] = import_rate(args.import_size)
    result["load_end"] = os.getloadavg()[0]
    out_file.parent.mkdir(parents=True, exist_ok=True)
    out_file.write_text(json.dumps(result, indent=1))
    print(report(result, prev))
    print(f"load {result['load_start']:.1f} -> {result['load_end']:.1f}; {out_file}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
