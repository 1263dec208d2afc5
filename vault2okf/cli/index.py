"""``vault2okf index BUNDLE``: chunk and embed a bundle into Chroma."""

from __future__ import annotations

from pathlib import Path

import typer

from vault2okf.cli.options import BUNDLE, CHROMA_URL
from vault2okf.cli.render import notes


def index_cmd(
    bundle: Path = BUNDLE,
    embedder: str = typer.Option("bge-m3", "--embedder", help="bge-m3 (default), minilm, or a model folder."),
    chroma_url: str | None = CHROMA_URL,
    chroma_path: Path | None = typer.Option(
        None, "--chroma-path", help="Persistent Chroma folder (default in bundle)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar while embedding."),
    device: str = typer.Option("cpu", "--device", help="torch device for the embedder: cpu, cuda, cuda:1, mps."),
    precision: str = typer.Option(
        "fp32", "--precision", help="fp32, or int8: a quantised encoder (faster on a CPU, vectors ~0.99 cosine)."
    ),
) -> None:
    """Chunk and embed BUNDLE into Chroma; only new or changed chunks are embedded. On a CPU documents go through
    the ONNX export of the embedder (onnxruntime); on --device cuda through torch."""
    if precision not in ("fp32", "int8"):
        raise typer.BadParameter(f"{precision!r} is not fp32 or int8", param_hint="--precision")
    from retriever.encoder import Precision
    from retriever.index import index_bundle

    result = index_bundle(
        bundle, embedder_name=embedder, chroma_path=chroma_path, chroma_url=chroma_url, progress=progress,
        device=device, precision=Precision(precision),
    )  # fmt: skip
    typer.echo(
        f"{result.notes} notes, {result.chunks} chunks in {result.collection} ({result.embedder}): "
        f"{result.added} embedded, {result.removed} removed, {result.unchanged} unchanged, {result.seconds:.1f}s"
    )
    notes(result.notices)
