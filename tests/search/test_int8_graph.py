"""cairn.search.int8_graph: the in-memory rewrite of the packaged graph to integer compute, and its cache."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import numpy as np
import pytest

from cairn.search import embed as E
from cairn.search.int8_graph import GraphRewriteError, token_int8


@pytest.fixture(scope="module")
def source() -> bytes:
    return Path(E._model_file()).read_bytes()


def test_rewrite_is_deterministic(source: bytes) -> None:
    a, b = token_int8(source), token_int8(bytes(source))
    assert a == b
    # Pinned: the cached graph is named for the source and GRAPH_VERSION only, so a change in what the
    # rewrite writes must bump GRAPH_VERSION (and this hash) or old caches would be read as new.
    assert hashlib.sha256(a).hexdigest() == "d2ebf8c5e9ef428b7a7d2a4958aa59d9d8c73413826a9dc90ca121f5d66bcba5"
    assert E.GRAPH_VERSION == 3


def test_rewrite_runs_and_keeps_the_weights(source: bytes) -> None:
    ort = pytest.importorskip("onnxruntime")
    graph = token_int8(source)
    session = ort.InferenceSession(graph, providers=["CPUExecutionProvider"])
    emb = E.MiniLMEmbedder(session, E._load_tokenizer())
    ref = E.MiniLMEmbedder(ort.InferenceSession(source, providers=["CPUExecutionProvider"]), E._load_tokenizer())
    texts = ["ModuleNotFoundError: No module named 'yaml'", "use squash merge for release branches"]
    cos = (emb.embed(texts) * ref.embed(texts)).sum(axis=1)
    assert np.all(cos > 0.98)
    # Every weight MatMul became integer; the float dequantization in front of them is gone.
    assert graph.count(b"MatMulIntegerToFloat") == 36
    # Quantized once per tensor: the query, key and value projections of a layer share one (6 layers x 4).
    assert graph.count(b"QuantizeLinear") == 24
    # The export's GELU is one onnxruntime Gelu per layer; the NaN guard after each Softmax is gone.
    assert (graph.count(b"Gelu"), graph.count(b"Erf"), graph.count(b"IsNaN")) == (6, 0, 0)
    assert source.count(b"Erf") > 0 and source.count(b"IsNaN") > 0
    assert len(graph) - len(source) < 100_000  # the int8 weights are reused, not copied or widened


def test_refuses_what_it_was_not_written_for(source: bytes) -> None:
    with pytest.raises(GraphRewriteError):
        token_int8(b"")
    with pytest.raises(GraphRewriteError):
        token_int8(b"\x0a\x05abc")  # a model with no graph field
    with pytest.raises(GraphRewriteError):  # twice: its own names are there, no dequantized MatMul is left
        token_int8(token_int8(source))
    with pytest.raises(GraphRewriteError):
        token_int8(source[: len(source) // 2])  # truncated


def test_cached_beside_the_model(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    shutil.copyfile(E._model_file(), model)
    first = E._integer_graph(str(model))
    assert isinstance(first, str) and Path(first).parent == tmp_path
    assert Path(first).read_bytes() == token_int8(model.read_bytes())
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["model.onnx", Path(first).name])  # no temp left
    mtime = Path(first).stat().st_mtime_ns
    assert E._integer_graph(str(model)) == first and Path(first).stat().st_mtime_ns == mtime  # read, not rewritten


def test_earlier_versions_cache_removed_newer_kept(tmp_path: Path) -> None:
    model = tmp_path / "model.onnx"
    shutil.copyfile(E._model_file(), model)
    tag = E.MODEL_SHA256[:12]
    older = tmp_path / f"model.cairn-tokq{E.GRAPH_VERSION - 1}-{tag}.onnx"
    newer = tmp_path / f"model.cairn-tokq{E.GRAPH_VERSION + 1}-{tag}.onnx"
    other = tmp_path / "model.cairn-tokq1-000000000000.onnx"  # another source's cache: not ours to judge
    for p in (older, newer, other):
        p.write_bytes(b"stale")
    current = E._integer_graph(str(model))
    assert isinstance(current, str)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["model.onnx", Path(current).name, newer.name, other.name]
    )
