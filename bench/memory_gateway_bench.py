"""memory-gateway over Cairn: per-call cost at 100 / 1,000 / 10,000 topics, and concurrent writers.

One process per call, as an agent calls the command (interpreter start, imports and store open
included). Each size gets a corpus built in bulk — topic files, MEMORY.md, and the store filled
through the service's own import, with embeddings made — so only the timed calls go through the
command. The peer's figures (issue 18, seed 004's study) are printed beside ours.

    .venv/bin/python bench/memory_gateway_bench.py                 # 100, 1,000, 10,000 topics + writers
    .venv/bin/python bench/memory_gateway_bench.py --quick         # 100 and 1,000 topics, fewer calls
    .venv/bin/python bench/memory_gateway_bench.py --sizes 1000 --no-writers

Writes bench/out/memory_gateway.json.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from cairn.compat.memory_gateway import corpus as layout  # noqa: E402
from cairn.compat.memory_gateway.mirror import KIND_OF, address  # noqa: E402

COMMAND = [str(Path(sys.executable).parent / "memory-gateway")]
WORDS = "merge branch release cache lock retry deploy schema index token review squash rebase test".split()
# The peer's figures from our study of it (issue 18): seconds per call, and refusals of 100 writes.
PEER = {
    ("create", 1000): "1.5 s",
    ("create", 5000): "19 s",
    ("search many", 1000): "15 s",
    ("writers", 4): "16 of 100 refused",
}


def _env(audit: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CAIRN_", "MEMORY_GATEWAY_"))}
    env["MEMORY_GATEWAY_DIR"] = str(audit)
    # An installed package has its bytecode compiled at install time; a development environment that
    # forbids writing it would make every call recompile Cairn's source, which no user pays.
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def build(root: Path, n: int) -> float:
    """A corpus of ``n`` topics, written in bulk; returns the seconds it took (not a measured figure)."""
    import cairn.library

    t0 = time.perf_counter()
    root.mkdir(parents=True)
    lines = {}
    records = []
    for i in range(n):
        type_ = layout.TYPES[i % 4]
        name = f"topic {i:05d}"
        slug = f"{type_}/{layout.normalize(name)}"
        body = (
            f"Fact {i}: {WORDS[i % len(WORDS)]} {WORDS[(i * 7) % len(WORDS)]} then {WORDS[(i * 3) % len(WORDS)]}; "
            f"gateway note uniq{i:05d}kw."
        )
        topic = layout.Topic(slug, type_, name, f"about {name}", body)
        path = root / f"{slug}.md"
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(topic.render())
        lines[slug] = layout.index_line(topic)
        scope, key = address(slug)
        records.append(
            json.dumps(
                {"scope": scope, "key": key, "value": body, "kind": KIND_OF[type_],
                 "trigger": f"about {name}", "url": f"{slug}.md"}
            )
        )  # fmt: skip
    (root / "MEMORY.md").write_text("".join(lines[s] + "\n" for s in sorted(lines)))
    state = root / ".gateway"
    m = cairn.library.open(home=state, db=f"sqlite:///{state / 'cairn.db'}", token="")
    try:
        m.service.import_lines(m.principal, records)
        m.service.drain_embeddings(m.principal)
    finally:
        m.close()
    stamps = {t: {"stamp": os.stat(root / t).st_mtime_ns, "divergent": {}} for t in layout.TYPES}
    (state / "identities.json").write_text(json.dumps(stamps))
    return time.perf_counter() - t0


def call(root: Path, env: dict[str, str], *args: str, body: str = "") -> tuple[float, int, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [*COMMAND, "--corpus", str(root), *args], input=body.encode(), capture_output=True, env=env, check=False
    )
    took = time.perf_counter() - t0
    out = json.loads(proc.stdout) if proc.stdout.strip() else {}
    return took, proc.returncode, out


def measure(root: Path, n: int, env: dict[str, str], reps: int) -> dict[str, dict[str, float]]:
    ops: dict[str, list[float]] = {}

    def timed(op: str, *args: str, body: str = "", check=None) -> None:  # type: ignore[no-untyped-def]
        took, rc, out = call(root, env, *args, body=body)
        if rc != 0:
            raise SystemExit(f"{op} failed at {n}: {out}")
        if check is not None:
            check(out)
        ops.setdefault(op, []).append(took)

    for r in range(reps):
        timed("create", "create", f"bench new {r}", "--type", "project", body=f"a new fact number {r} for the bench")
        timed("read", "read", f"{layout.TYPES[r % 4]}/topic-{(r * 37) % n:05d}")
        i = (r * 53) % n

        def one(out: dict, i: int = i) -> None:
            assert [m["slug"] for m in out["data"]["matches"]] == [f"{layout.TYPES[i % 4]}/topic-{i:05d}"], out

        timed("search one hit", "search", f"uniq{i:05d}kw", check=one)

        def many(out: dict) -> None:
            assert len(out["data"]["matches"]) >= min(n, 50), len(out["data"]["matches"])

        timed("search many hits", "search", "gateway", check=many)
        j = (r * 41 + 1) % n
        timed(
            "supersede",
            "update", "--supersede", "--type", layout.TYPES[j % 4], "--name", f"topic {j:05d}",
            body=f"superseded fact {j} round {r}",
        )  # fmt: skip
    for _ in range(max(1, reps // 2)):
        timed("index", "index")
    return {op: {"median": statistics.median(v), "max": max(v), "n": len(v)} for op, v in ops.items()}


def writers(base: Path, count: int, total: int) -> dict[str, float]:
    """``total`` creates spread over ``count`` concurrent writers on a 100-topic corpus."""
    root = base / f"writers-{count}"
    build(root, 100)
    env = _env(base / "audit")
    results: list[int] = []
    names: list[str] = []
    guard = threading.Lock()

    def writer(w: int) -> None:
        for i in range(w, total, count):
            name = f"writer {w} fact {i}"
            _, rc, _ = call(root, env, "create", name, "--type", "user", body=f"concurrent fact {i} from {w}")
            with guard:
                results.append(rc)
                if rc == 0:
                    names.append(f"user/{layout.normalize(name)}")

    t0 = time.perf_counter()
    threads = [threading.Thread(target=writer, args=(w,)) for w in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    import cairn.library

    state = root / ".gateway"
    m = cairn.library.open(home=state, db=f"sqlite:///{state / 'cairn.db'}", token="")
    try:
        held = set()
        for slug in names:
            scope, key = address(slug)
            try:
                if m.read(scope, key)["lesson"]["status"] == "active":
                    held.add(slug)
            except Exception:  # noqa: BLE001 - a missing lesson is what "lost" counts
                pass
    finally:
        m.close()
    lost = sum(1 for s in names if not (root / f"{s}.md").exists() or s not in held)
    return {"writers": count, "creates": total, "refused": sum(1 for rc in results if rc != 0), "lost": lost,
            "wall_s": round(wall, 1)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default=None, help="comma-separated topic counts (default 100,1000,10000)")
    ap.add_argument("--quick", action="store_true", help="100 and 1,000 topics, 3 calls per verb")
    ap.add_argument("--reps", type=int, default=None, help="calls per verb and size (default 5, quick 3)")
    ap.add_argument("--no-writers", action="store_true", help="skip the concurrent-writer runs")
    ap.add_argument("--writes", type=int, default=100, help="creates per concurrent run (default 100)")
    args = ap.parse_args()
    sizes = [int(s) for s in (args.sizes or ("100,1000" if args.quick else "100,1000,10000")).split(",")]
    reps = args.reps or (3 if args.quick else 5)
    out: dict = {"sizes": {}, "writers": [], "reps": reps, "load_start": os.getloadavg()[0], "cpus": os.cpu_count()}
    with tempfile.TemporaryDirectory(prefix="mg-bench-") as tmp:
        base = Path(tmp)
        env = _env(base / "audit")
        for n in sizes:
            root = base / f"c{n}"
            setup = build(root, n)
            print(f"{n} topics: corpus and store built in {setup:.1f} s (files, import, embeddings)", flush=True)
            out["sizes"][n] = {"setup_s": round(setup, 1), "ops": measure(root, n, env, reps)}
            for op, f in out["sizes"][n]["ops"].items():
                print(f"  {op:18s} median {f['median']:.2f} s  max {f['max']:.2f} s", flush=True)
        if not args.no_writers:
            for count in (4, 8):
                res = writers(base, count, args.writes)
                out["writers"].append(res)
                print(f"{count} writers x {args.writes} creates: {res}", flush=True)
    out["load_end"] = os.getloadavg()[0]
    ops = ["create", "read", "search one hit", "search many hits", "supersede", "index"]
    print("\nseconds per call (median, one process per call)")
    print(f"{'topics':>8} " + " ".join(f"{o:>17}" for o in ops))
    for n, s in out["sizes"].items():
        print(f"{n:>8} " + " ".join(f"{s['ops'][o]['median']:>17.2f}" for o in ops))
    print("peer (issue 18): create 1.5 s at 1,000 and 19 s at 5,000; search many hits 15 s at 1,000; "
          "4 writers: 16 of 100 refused")  # fmt: skip
    print(f"load average {out['load_start']:.1f} -> {out['load_end']:.1f} on {out['cpus']} CPUs")
    dest = ROOT / "bench" / "out"
    dest.mkdir(exist_ok=True)
    (dest / "memory_gateway.json").write_text(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
