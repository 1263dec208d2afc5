"""How long a first `index` of a bundle would take with its embedder on this machine (`vault2okf doctor --bundle`).

The bundle is chunked as `index` chunks it, and a sample of its chunks (spread over the whole bundle) is embedded
as `index` embeds them on a CPU: through the ONNX export, onnxruntime, a thread per physical core. With the
bundle's own current export that is a measurement of the embedder itself. Otherwise MiniLM (offline, always here)
is measured, through an export written to a temporary folder, and for BGE-M3 its time per chunk is multiplied by
what the BGE-M3-size stand-in cost beside MiniLM on the same chunks in bench/embedder_cost.py
(`BGE_M3_PER_MINILM`): an estimate, said as one.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from retriever.embed import DEFAULT_EMBEDDER, embedder_fingerprint, embedder_name, get_embedder, physical_cores
from retriever.encoder import OnnxEmbedder, load_encoder
from retriever.errors import RetrieverError

# Time per chunk of the BGE-M3-size stand-in over MiniLM's, each through the fp32 graph `index` writes for it
# (fused at BGE-M3's size, as traced for MiniLM) on thellade chunks in one run on a quiet machine
# (reports/bench-embedder-cost.txt: 23.75 against 0.75 chunks/s, load 1.7-1.8, on groups of chunks of like length):
# 28x the weights per token, and BGE-M3 reads up to 1,024 tokens where MiniLM stops at 256. On a busy machine (load
# 4-5) the ratio measured 21 (6.70 against 0.32): a first index is mostly run on a machine doing little else.
BGE_M3_PER_MINILM = 32.0
SAMPLE = 24


@dataclass(frozen=True)
class IndexEstimate:
    embedder: str  # the embedder spec estimated for
    chunks: int  # what a first index of the bundle embeds
    sample: int  # chunks embedded to measure
    rate: float  # chunks per second, measured (or scaled: ``basis`` says which)
    basis: str

    @property
    def seconds(self) -> float:
        return self.chunks / self.rate if self.rate > 0 else float("inf")


def estimate_index(bundle_dir: Path | str, spec: str | None = None, sample: int = SAMPLE) -> IndexEstimate:
    """Chunk the bundle and time ``sample`` of its chunks through the embedder (see the module's text)."""
    from retriever.index import chunk_concepts, load_concepts, read_index_info

    if spec is None:
        try:
            spec = read_index_info(bundle_dir).embedder_spec
        except RetrieverError:
            spec = DEFAULT_EMBEDDER
    chunks = chunk_concepts(load_concepts(bundle_dir))
    if not chunks:
        return IndexEstimate(spec, 0, 0, float("inf"), "no chunks to embed")
    step = max(1, len(chunks) // sample)
    texts = [c.text for c in chunks[::step][:sample]]
    name = embedder_name(spec)
    encoder, _ = load_encoder(bundle_dir, name, spec, threads=physical_cores())
    if encoder is not None:
        rate = _rate(OnnxEmbedder(name, spec, encoder), texts)
        return IndexEstimate(spec, len(chunks), len(texts), rate, f"measured with the bundle's {name} encoder")
    rate = _rate(_minilm_onnx(), texts)
    if spec == "minilm":
        return IndexEstimate(spec, len(chunks), len(texts), rate, "measured with MiniLM through onnxruntime")
    return IndexEstimate(
        spec, len(chunks), len(texts), rate / BGE_M3_PER_MINILM,
        f"MiniLM measured through onnxruntime, {BGE_M3_PER_MINILM:g}x its time per chunk for a BGE-M3-size "
        "encoder (reports/bench-embedder-cost.txt)",
    )  # fmt: skip


def _minilm_onnx() -> OnnxEmbedder:
    from retriever.export import export_encoder

    with tempfile.TemporaryDirectory(prefix="vault2okf-estimate-") as tmp:
        export_encoder(tmp, get_embedder("minilm"), embedder_fingerprint("minilm") or "")
        encoder, notice = load_encoder(tmp, "minilm", "minilm", threads=physical_cores())
        if encoder is None:
            raise RetrieverError(f"could not measure MiniLM: {notice}")
        return OnnxEmbedder("minilm", "minilm", encoder, batch_size=16)


def _rate(embedder: OnnxEmbedder, texts: list[str]) -> float:
    embedder.embed_documents(texts[:2])  # first calls pay one-off allocations
    started = time.perf_counter()
    embedder.embed_documents(texts)
    return len(texts) / max(time.perf_counter() - started, 1e-9)


def describe(estimate: IndexEstimate) -> str:
    """One line for doctor: the chunks, the time, and what the rate rests on."""
    if not estimate.chunks:
        return "no chunks to embed"
    hours = estimate.seconds / 3600
    took = f"{hours:.1f} h" if hours >= 1 else f"{estimate.seconds / 60:.0f} min"
    return (
        f"a first index with {estimate.embedder}: {estimate.chunks:,} chunks at {estimate.rate:.2f} chunks/s, "
        f"about {took} on this machine now ({estimate.basis}, over {estimate.sample} chunks)"
    )
