"""Thin ``index``, ``search`` and ``ask`` commands; ``vault2okf/cli.py`` mounts them on the console command."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import typer

from retriever.errors import RetrieverError
from retriever.rankers import RANKERS
from retriever.retrieve import DEFAULT_RANKER, Budget, Mode, Retriever, Seeds

BUNDLE = typer.Argument(..., help="A bundle written by `vault2okf convert`.")
MODE = typer.Option(Mode.UNION, "--mode", help="vector | graph (k=5 seeds + hop) | union (vector at k + hop).")
K = typer.Option(10, "--k", min=1, help="Chunks from vector search (graph mode always seeds from 5).")
MAX_NOTES = typer.Option(15, "--max-notes", min=1, help="Context budget: most notes (caps the hop).")
MAX_TOKENS = typer.Option(6000, "--max-tokens", min=1, help="Context budget: most tokens (caps the hop).")
RANKER = typer.Option(DEFAULT_RANKER, "--ranker", help=f"How the hop ranks neighbours: {', '.join(RANKERS)}.")
SEEDS = typer.Option(Seeds.DENSE, "--seeds", help="Vector stage: dense, or hybrid (dense + BM25, fused).")
SESSIONS = typer.Option(
    True, "--sessions/--no-sessions", help="Offer the previous/next session of a retrieved session to the hop."
)
CHROMA_URL = typer.Option(None, "--chroma-url", help="A Chroma server (http://host:port) instead of the bundle's.")


def index_cmd(
    bundle: Path = BUNDLE,
    embedder: str = typer.Option("bge-m3", "--embedder", help="bge-m3 (default), minilm, or a model folder."),
    chroma_url: str | None = CHROMA_URL,
    chroma_path: Path | None = typer.Option(
        None, "--chroma-path", help="Persistent Chroma folder (default in bundle)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar while embedding."),
) -> None:
    """Chunk and embed BUNDLE into Chroma; only new or changed chunks are embedded."""
    from retriever.index import index_bundle

    try:
        result = index_bundle(
            bundle, embedder_name=embedder, chroma_path=chroma_path, chroma_url=chroma_url, progress=progress
        )
    except RetrieverError as exc:
        raise typer.BadParameter(str(exc)) from None
    typer.echo(
        f"{result.notes} notes, {result.chunks} chunks in {result.collection} ({result.embedder}): "
        f"{result.added} embedded, {result.removed} removed, {result.unchanged} unchanged, {result.seconds:.1f}s"
    )


def search_cmd(
    bundle: Path = BUNDLE,
    question: str = typer.Argument(..., help="The question."),
    mode: Mode = MODE,
    k: int = K,
    max_notes: int = MAX_NOTES,
    max_tokens: int = MAX_TOKENS,
    ranker: str = RANKER,
    seeds: Seeds = SEEDS,
    sessions: bool = SESSIONS,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON."),
) -> None:
    """Retrieve the notes for QUESTION: each with score, via (vector | hop) and tokens."""
    from retriever.ask import hit_json

    budget = Budget(max_notes, max_tokens)
    retriever = _retriever(bundle, chroma_url)
    retriever.prepare(ranker, seeds)
    retrieval = retriever.search(question, mode, k, budget, ranker, seeds, adjacent_sessions=sessions)
    if as_json:
        payload = {"question": question, "mode": retrieval.mode, "k": k, "ranker": retrieval.ranker,
                   "notes": retrieval.notes, "tokens": retrieval.tokens, "timings_ms": retrieval.timings,
                   "hits": [hit_json(h) for h in retrieval.hits]}  # fmt: skip
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for rank, hit in enumerate(retrieval.hits, start=1):
        typer.echo(f"{rank:>3}. {hit.score:7.3f}  {hit.via:<6} {hit.tokens:>5} tok  {hit.vault_path}")
    typer.echo(f"{retrieval.notes} notes, {retrieval.tokens} tokens, {retrieval.timings.get('retrieve_ms', 0):.1f} ms")


def ask_cmd(
    bundle: Path = BUNDLE,
    question: str = typer.Argument(..., help="The question."),
    mode: Mode = MODE,
    k: int = K,
    max_notes: int = MAX_NOTES,
    max_tokens: int = MAX_TOKENS,
    ranker: str = RANKER,
    seeds: Seeds = SEEDS,
    sessions: bool = SESSIONS,
    llm: str = typer.Option("llama", "--llm", help="llama (local Gemma GGUF) or bedrock (AWS Converse)."),
    model: str | None = typer.Option(None, "--model", help="GGUF path for llama; model ID for bedrock."),
    region: str | None = typer.Option(None, "--region", help="AWS region for bedrock (else AWS_REGION)."),
    profile: str | None = typer.Option(None, "--profile", help="AWS profile for bedrock (else AWS_PROFILE)."),
    gpu_layers: int = typer.Option(
        0, "--gpu-layers", help="Layers to offload (llama.cpp built with Vulkan; -1 = all)."
    ),
    answer_tokens: int = typer.Option(512, "--answer-tokens", min=1, help="Most tokens in the answer."),
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Answer, citations, retrieved notes, timings as JSON."),
) -> None:
    """Answer QUESTION from the notes, citing them; says 'not found in the vault' when they do not hold it."""
    from retriever.answer.base import get_answerer
    from retriever.ask import ask

    retriever = _retriever(bundle, chroma_url)
    retriever.prepare(ranker, seeds)
    try:
        answerer = get_answerer(llm, model=model, **_answer_options(llm, region, profile, gpu_layers, answer_tokens))
        notice = getattr(answerer, "notice", None)
        if notice:
            typer.echo(f"note: {notice}", err=True)
        stream = None if as_json else _print_token
        budget = Budget(max_notes, max_tokens)
        result = ask(
            question, lambda q: retriever.search(q, mode, k, budget, ranker, seeds, adjacent_sessions=sessions),
            answerer, on_token=stream,
        )  # fmt: skip
    except RetrieverError as exc:
        raise typer.BadParameter(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo("")
    for hit in result.retrieval.hits:
        typer.echo(f"  [{hit.via}] {hit.title} ({hit.doc_path})", err=True)


def _print_token(token: str) -> None:
    sys.stdout.write(token)
    sys.stdout.flush()


def _answer_options(llm: str, region: str | None, profile: str | None, gpu_layers: int, tokens: int) -> dict:
    if llm == "bedrock":
        return {"region": region, "profile": profile, "max_tokens": tokens}
    return {"n_gpu_layers": gpu_layers, "max_tokens": tokens}


def _retriever(bundle: Path, chroma_url: str | None) -> Retriever:
    try:
        return Retriever.open(bundle, chroma_url=chroma_url)
    except RetrieverError as exc:
        raise typer.BadParameter(str(exc)) from None
