"""The question encoder: an ONNX export of the index's embedder, run by onnxruntime and tokenizers alone.

`vault2okf index` writes it to ``BUNDLE/.vault2okf/encoder/`` (`retriever.export`): ``model.onnx`` (the network up
to its last hidden state), ``tokenizer.json`` and ``encoder.json`` (`EncoderSettings`: pooling, normalisation,
max length and the fingerprint of the weights it was exported from). `question_embedder` gives the Retriever an
embedder whose questions go through it: a search never imports torch, transformers or FlagEmbedding (about 6 s on
two cores; onnxruntime and tokenizers take 0.2 s), and gets the vector FlagEmbedding would give (cosine >= 0.9999
on every golden question, bench/onnx_parity.py). Documents are still FlagEmbedding's: `embed_documents` loads it.

A missing or stale encoder falls back to FlagEmbedding with a notice saying how to rebuild it; so does a damaged
one (any file that does not load, or a probe question that does not come out as a vector of the recorded size).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from retriever.embed import SMALL_MODEL, Embedder, embedder_fingerprint, get_embedder, physical_cores
from vault2okf.protocol import state_dir

if TYPE_CHECKING:
    from vault2okf.protocol.index_info import IndexInfo

ENCODER_VERSION = 1  # bump when the export's format or content changes: older exports are then stale
MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
SETTINGS_FILE = "encoder.json"


class Precision(StrEnum):
    FP32 = "fp32"  # the export as traced: the vectors FlagEmbedding gives
    INT8 = "int8"  # its weights quantised by onnxruntime's dynamic quantisation (`retriever.export.quantize`)


INT8_MODEL_FILE = "model.int8.onnx"


class Pooling(StrEnum):
    CLS = "cls"  # BGE-M3: the first token's hidden state
    MEAN = "mean"  # sentence-transformers models such as MiniLM: the mean over the question's tokens


@dataclass(frozen=True)
class EncoderSettings:
    """What encoder.json records: how to turn the network's hidden states into the embedder's vector."""

    embedder: str  # Embedder.name
    embedder_spec: str
    fingerprint: str  # embed.embedder_fingerprint of the weights it was exported from
    pooling: Pooling
    normalize: bool
    max_length: int  # tokens, special tokens included, as FlagEmbedding truncates
    dim: int
    parameters: int
    precision: Precision = Precision.FP32
    version: int = ENCODER_VERSION
    fused: bool = False  # model.onnx is onnxruntime's transformer fusion of the export (`retriever.export.fuse`)

    @property
    def model_file(self) -> str:
        return INT8_MODEL_FILE if self.precision is Precision.INT8 else MODEL_FILE

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @classmethod
    def read(cls, path: Path) -> EncoderSettings:
        data = json.loads(path.read_text(encoding="utf-8"))
        precision = Precision(data.get("precision", Precision.FP32))
        return cls(**{**data, "pooling": Pooling(data["pooling"]), "precision": precision})


def encoder_dir(bundle_dir: Path | str) -> Path:
    return state_dir(bundle_dir) / "encoder"


def read_settings(folder: Path) -> EncoderSettings | None:
    """The settings of the encoder in ``folder``; None when there are none or they are unreadable."""
    try:
        return EncoderSettings.read(folder / SETTINGS_FILE)
    except (OSError, ValueError, TypeError, KeyError):
        return None


def is_current(
    settings: EncoderSettings | None,
    embedder: str,
    spec: str,
    fingerprint: str | None,
    precision: Precision | None = None,
) -> bool:
    """Whether an encoder with ``settings`` was exported from this embedder's weights by this code (at
    ``precision``, when one is asked for). A fingerprint of None (the weights are not on this machine) leaves the
    recorded one unchecked: the encoder needs no weights."""
    if settings is None or (settings.embedder, settings.embedder_spec) != (embedder, spec):
        return False
    if precision is not None and settings.precision is not precision:
        return False
    return settings.version == ENCODER_VERSION and fingerprint in (None, settings.fingerprint)


class OnnxEncoder:
    """Texts through the exported network; vectors come back float32 and L2-normalised (when the embedder's are).

    ``threads``: onnxruntime's intra-op threads; by default one for a small model (a question through MiniLM is a
    few ms) and a core each for a large one. `index` asks for a core each to embed its documents in batches."""

    def __init__(self, folder: Path, settings: EncoderSettings, *, threads: int | None = None) -> None:
        import onnxruntime
        from tokenizers import Tokenizer

        self.settings = settings
        self.tokenizer = Tokenizer.from_file(str(folder / TOKENIZER_FILE))
        self.tokenizer.enable_truncation(settings.max_length)
        self.tokenizer.no_padding()  # a batch is padded to its longest text here (`embed_ids`)
        pad_token = next((t for t in ("<pad>", "[PAD]") if self.tokenizer.token_to_id(t) is not None), None)
        self.pad_id = (self.tokenizer.token_to_id(pad_token) if pad_token else None) or 0
        options = onnxruntime.SessionOptions()
        if threads is None:
            threads = 1 if settings.parameters < SMALL_MODEL else physical_cores()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        options.log_severity_level = 3  # errors only
        if threads > 1:  # spinning threads cost a busy machine more than they save
            options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        self.session = onnxruntime.InferenceSession(
            str(folder / settings.model_file), options, providers=["CPUExecutionProvider"]
        )

    def embed(self, text: str) -> np.ndarray:
        return self.embed_batch([text])[0]

    def embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        """One padded batch (padded to its longest text, as FlagEmbedding pads); a row per text, in order."""
        return self.embed_ids(self.token_ids(texts))

    def token_ids(self, texts: Sequence[str]) -> list[list[int]]:
        """Each text's token ids, special tokens included, truncated to the encoder's length; not padded."""
        clean = [t if isinstance(t, str) and t.strip() else " " for t in texts]  # as FlagEmbedder gives FlagEmbedding
        return [e.ids for e in self.tokenizer.encode_batch(clean)]

    def embed_ids(self, rows: Sequence[Sequence[int]]) -> np.ndarray:
        """The vectors of texts given as token ids (`token_ids`), run as one batch padded to its longest."""
        longest = max(len(row) for row in rows)
        ids = np.full((len(rows), longest), self.pad_id, dtype=np.int64)
        mask = np.zeros((len(rows), longest), dtype=np.int64)
        for i, row in enumerate(rows):
            ids[i, : len(row)] = row
            mask[i, : len(row)] = 1
        hidden = self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        if self.settings.pooling is Pooling.CLS:
            vectors = hidden[:, 0]
        else:
            vectors = (hidden * mask[:, :, None]).sum(axis=1) / np.maximum(mask.sum(axis=1, keepdims=True), 1)
        vectors = np.asarray(vectors, dtype=np.float32)
        if not self.settings.normalize:
            return vectors
        return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)


BATCH_TOKENS = 256  # padded tokens a text, on average, in the largest batch `OnnxEmbedder` makes


def token_batches(lengths: Sequence[int], most: int, budget: int) -> list[list[int]]:
    """Indexes of ``lengths`` in batches: in order of length (stable), each at most ``most`` long and at most
    ``budget`` padded tokens (its count times its longest); a text longer than the budget is a batch alone."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in np.argsort(lengths, kind="stable").tolist():
        if current and (len(current) >= most or (len(current) + 1) * lengths[i] > budget):
            batches.append(current)
            current = []
        current.append(i)
    return batches + ([current] if current else [])


@dataclass
class OnnxEmbedder:
    """The index's embedder run wholly by onnxruntime: documents in batches of like token counts, questions one by
    one. What `index` embeds with on a CPU when the export is current (`retriever.export.index_embedder`)."""

    name: str
    spec: str
    encoder: OnnxEncoder
    batch_size: int = 32
    dim: int = field(init=False)

    def __post_init__(self) -> None:
        self.dim = self.encoder.settings.dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        """Rows in input order. The texts are tokenised once and batched in order of token count (not of
        characters: on thellade's chunks at 32 a batch, 1.005x the real tokens padded instead of 1.09x), at most
        ``batch_size`` texts and ``batch_size * BATCH_TOKENS`` padded tokens a batch (long texts: fewer a batch, so
        a batch's attention stays the size of a batch of ordinary ones)."""
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        ids = self.encoder.token_ids(texts)
        for rows in token_batches([len(row) for row in ids], self.batch_size, self.batch_size * BATCH_TOKENS):
            out[rows] = self.encoder.embed_ids([ids[i] for i in rows])
        return out

    def token_counts(self, texts: Sequence[str]) -> list[int]:
        """Each text's tokens, as `embed_documents` runs it: `ChunkStore.sync` orders the chunks by them."""
        return [len(row) for row in self.encoder.token_ids(texts)]

    def embed_query(self, text: str) -> np.ndarray:
        return self.encoder.embed(text)


@dataclass
class QuestionEmbedder:
    """The index's embedder with questions through its ONNX export; documents (rare at search time: the context
    rankers' cache) through FlagEmbedding, loaded on first use."""

    name: str
    spec: str
    encoder: OnnxEncoder
    device: str = "cpu"
    dim: int = field(init=False)
    batch_size: int = 32

    def __post_init__(self) -> None:
        self.dim = self.encoder.settings.dim

    def embed_query(self, text: str) -> np.ndarray:
        return self.encoder.embed(text)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self.documents.embed_documents(texts)

    @cached_property
    def documents(self) -> Embedder:
        return get_embedder(self.spec, device=self.device)


def load_encoder(
    bundle_dir: Path | str,
    embedder: str,
    spec: str,
    *,
    precision: Precision | None = None,
    threads: int | None = None,
) -> tuple[OnnxEncoder | None, str | None]:
    """The bundle's question encoder for this embedder (at ``precision`` when one is asked for), or None and why
    not (a notice saying how to rebuild it)."""
    folder = encoder_dir(bundle_dir)
    fallback = _fallback(bundle_dir)
    unusable = _unusable(folder, embedder, spec, precision)
    if unusable:
        return None, f"{unusable}: {fallback}"
    key = _loaded_key(folder, threads)
    if key in _LOADED:  # the same files, already loaded and probed in this process (`watch --index`, `index`)
        _LOADED[key] = _LOADED.pop(key)
        return _LOADED[key], None
    try:
        settings = read_settings(folder)
        if settings is None:
            raise ValueError(f"{SETTINGS_FILE} is unreadable")
        encoder = OnnxEncoder(folder, settings, threads=threads)
        probe = encoder.embed("dimension probe")
        if probe.shape != (settings.dim,) or not np.isfinite(probe).all():
            raise ValueError(f"a probe question came out as shape {probe.shape}, not ({settings.dim},)")
    except Exception as error:  # onnxruntime's and tokenizers' errors have no common base: any failure is damage
        reason = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        return None, f"the question encoder in {folder} is damaged ({reason}): {fallback}"
    if key is not None:
        _LOADED[key] = encoder
        while len(_LOADED) > LOADED_KEPT:
            _LOADED.pop(next(iter(_LOADED)))
    return encoder, None


# Encoders this process loaded, by the identity of their files (path, inode, size, mtime of each) and threads: an
# index run after each edit (`watch --index`) and `index`'s own checks open the export once, not three times an edit
# (0.6 s of a one-edit index on nova-regna). A new export is new files (written aside, then renamed in), so a new
# key. Two kept, least recently used first out: a BGE-M3 session is 2 GB.
LOADED_KEPT = 2
_LOADED: dict[tuple[object, ...], OnnxEncoder] = {}


def _loaded_key(folder: Path, threads: int | None) -> tuple[object, ...] | None:
    try:
        files = sorted(p for p in folder.iterdir() if p.is_file())
        stats = tuple((p.name, st.st_ino, st.st_size, st.st_mtime_ns) for p in files for st in (p.stat(),))
    except OSError:
        return None
    return (str(folder.resolve()), threads, stats)


def encoder_notice(bundle_dir: Path | str) -> str | None:
    """What to say of an indexed bundle whose question encoder is missing or stale, without loading it (a damaged
    one is found when it loads); None for a bundle with no index, or a current encoder."""
    from vault2okf.protocol import BundleError
    from vault2okf.protocol.index_info import read

    try:
        info = read(bundle_dir)
    except BundleError:
        return None
    unusable = _unusable(encoder_dir(bundle_dir), info.embedder, info.embedder_spec)
    return f"{unusable}: {_fallback(bundle_dir)}" if unusable else None


def _unusable(folder: Path, embedder: str, spec: str, precision: Precision | None = None) -> str | None:
    if not (folder / SETTINGS_FILE).is_file():
        return f"no question encoder in {folder}"
    settings = read_settings(folder)
    if settings is not None and not is_current(settings, embedder, spec, embedder_fingerprint(spec), precision):
        return f"the question encoder in {folder} is stale"
    return None


def _fallback(bundle_dir: Path | str) -> str:
    return f"questions are embedded with FlagEmbedding; run `vault2okf index {bundle_dir}` to rebuild it"


def load_index_encoder(bundle_dir: Path | str) -> tuple[IndexInfo, tuple[OnnxEncoder | None, str | None]]:
    """The index the bundle records, and `load_encoder` for its embedder (``Retriever.open`` runs it in a thread)."""
    from retriever.errors import RetrieverError
    from vault2okf.protocol.index_info import read

    info = read(bundle_dir, error=RetrieverError)
    return info, load_encoder(bundle_dir, info.embedder, info.embedder_spec)


def question_embedder(
    bundle_dir: Path | str,
    info: IndexInfo,
    *,
    device: str = "cpu",
    loaded: tuple[OnnxEncoder | None, str | None] | None = None,
) -> tuple[Embedder, str | None]:
    """The embedder a search of this index embeds its questions with, and a notice when it is not the ONNX one;
    ``loaded``: what `load_encoder` gave for this index, when it already ran."""
    if device != "cpu":  # the export runs on onnxruntime's CPU provider; an accelerator is FlagEmbedding's
        return get_embedder(info.embedder_spec, device=device), None
    encoder, notice = loaded or load_encoder(bundle_dir, info.embedder, info.embedder_spec)
    if encoder is None:
        return get_embedder(info.embedder_spec, device=device), notice
    return QuestionEmbedder(info.embedder, info.embedder_spec, encoder, device), None
