"""Thin ``index``, ``search`` and ``ask`` commands; ``vault2okf/cli.py`` mounts them on the console command.

Each command checks its arguments, calls one library function and prints the result. Library errors
(``RetrieverError``) are turned into ``Error: <message>`` by the composition root; usage errors (a bad option
value) are raised here as ``typer.BadParameter``, before any model loads.
"""

from __future__ import annotations

import functools
import inspect
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import typer

from retriever.answer.base import Answer, Backend
from retriever.rankers import RankerName
from retriever.retrieve import DEFAULT_SPEC, Budget, Mode, Retriever, SearchSpec, Seeds

BUNDLE = typer.Argument(..., help="A bundle written by `vault2okf convert`.")
QUESTION = typer.Argument(..., help="The question.")
CHROMA_URL = typer.Option(None, "--chroma-url", help="A Chroma server (http://host:port) instead of the bundle's.")
# The answer options of every command that answers (`ask`, `chat`): one definition each.
LLM = typer.Option(Backend.LLAMA, "--llm", help="llama (local Gemma GGUF) or bedrock (AWS Converse).")
MODEL = typer.Option(None, "--model", help="GGUF path for llama; model ID for bedrock.")
REGION = typer.Option(None, "--region", help="AWS region for bedrock (else AWS_REGION).")
PROFILE = typer.Option(None, "--profile", help="AWS profile for bedrock (else AWS_PROFILE).")
GPU_LAYERS = typer.Option(0, "--gpu-layers", help="Layers to offload (llama.cpp built with Vulkan; -1 = all).")
N_CTX = typer.Option(8192, "--n-ctx", min=256, help="llama.cpp context window in tokens.")
ANSWER_TOKENS = typer.Option(512, "--answer-tokens", min=1, help="Most tokens in the answer.")
D = DEFAULT_SPEC  # every default below is the default search's (retriever/retrieve.py)
SEARCH_OPTIONS = (  # name, type, option: one definition for every command that searches
    ("mode", Mode, typer.Option(D.mode, "--mode", help="vector | graph (k=5 seeds + hop) | union (vector + hop).")),
    ("k", int, typer.Option(D.k, "--k", min=1, help="Chunks from vector search (graph mode always seeds from 5).")),
    ("max_notes", int, typer.Option(D.budget.notes, "--max-notes", min=1, help="Most notes of context.")),
    ("max_tokens", int, typer.Option(D.budget.tokens, "--max-tokens", min=1, help="Most tokens of context.")),
    ("match_vector", int, typer.Option(D.budget.match or 0, "--match-vector", min=0,
        help="Cap the hop at what vector search at this k spends on the question (0: no such cap).")),
    ("ranker", RankerName, typer.Option(D.ranker, "--ranker", help="How the hop ranks neighbours.")),
    ("seeds", Seeds, typer.Option(D.seeds, "--seeds", help="Vector stage: dense, or hybrid (dense + BM25).")),
    ("dedup", bool, typer.Option(D.dedup, "--dedup/--no-dedup", help="Vector stage takes k notes, not k chunks.")),
    ("sessions", bool, typer.Option(
        D.sessions, "--sessions/--no-sessions", help="Offer the previous/next session of a retrieved session.")),
    ("mentions", bool, typer.Option(
        D.mentions, "--mentions/--no-mentions", help="Offer the sessions that name or link a retrieved note.")),
    ("named", bool, typer.Option(D.named, "--named/--no-named", help="Offer the notes the question names.")),
)  # fmt: skip


def search_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the search options; they reach it as one ``spec: SearchSpec`` keyword argument."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != "spec"]
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [inspect.Parameter(name, keyword, default=opt, annotation=t) for name, t, opt in SEARCH_OPTIONS]
    arguments = [p for p in own if isinstance(p.default, typer.models.ArgumentInfo)]
    params = [*arguments, *added, *(p for p in own if p not in arguments)]

    @functools.wraps(command)
    def with_spec(**values: Any) -> None:
        options = {name: values.pop(name) for name, _, _ in SEARCH_OPTIONS}
        budget = Budget(options.pop("max_notes"), options.pop("max_tokens"), options.pop("match_vector") or None)
        command(**values, spec=SearchSpec(**options, budget=budget))

    with_spec.__signature__ = inspect.Signature([p.replace(kind=keyword) for p in params])  # type: ignore[attr-defined]
    with_spec.__annotations__ = {p.name: p.annotation for p in params}
    return with_spec


def index_cmd(
    bundle: Path = BUNDLE,
    embedder: str = typer.Option("bge-m3", "--embedder", help="bge-m3 (default), minilm, or a model folder."),
    chroma_url: str | None = CHROMA_URL,
    chroma_path: Path | None = typer.Option(
        None, "--chroma-path", help="Persistent Chroma folder (default in bundle)."
    ),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Show a progress bar while embedding."),
    device: str = typer.Option("cpu", "--device", help="torch device for the embedder: cpu, cuda, cuda:1, mps."),
) -> None:
    """Chunk and embed BUNDLE into Chroma; only new or changed chunks are embedded."""
    from retriever.index import index_bundle

    result = index_bundle(
        bundle, embedder_name=embedder, chroma_path=chroma_path, chroma_url=chroma_url, progress=progress,
        device=device,
    )  # fmt: skip
    typer.echo(
        f"{result.notes} notes, {result.chunks} chunks in {result.collection} ({result.embedder}): "
        f"{result.added} embedded, {result.removed} removed, {result.unchanged} unchanged, {result.seconds:.1f}s"
    )


@search_options
def search_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Print hits as JSON."),
    *,
    spec: SearchSpec,
) -> None:
    """Retrieve the notes for QUESTION: each with score, via (vector | hop) and tokens."""
    from retriever.ask import hit_json

    _check_question(question)
    retriever = Retriever.open(bundle, chroma_url=chroma_url)
    retriever.prepare(spec)
    retrieval = retriever.search(question, spec)
    if as_json:
        payload = {"question": question, "mode": retrieval.mode, "k": spec.k, "ranker": retrieval.ranker,
                   "notes": retrieval.notes, "tokens": retrieval.tokens, "timings_ms": retrieval.timings,
                   "hits": [hit_json(h) for h in retrieval.hits]}  # fmt: skip
        typer.echo(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    for rank, hit in enumerate(retrieval.hits, start=1):
        typer.echo(f"{rank:>3}. {hit.score:7.3f}  {hit.via:<6} {hit.tokens:>5} tok  {hit.vault_path}")
    typer.echo(f"{retrieval.notes} notes, {retrieval.tokens} tokens, {retrieval.timings.get('retrieve_ms', 0):.1f} ms")


@search_options
def ask_cmd(
    bundle: Path = BUNDLE,
    question: str = QUESTION,
    llm: Backend = LLM,
    model: str | None = MODEL,
    region: str | None = REGION,
    profile: str | None = PROFILE,
    gpu_layers: int = GPU_LAYERS,
    n_ctx: int = N_CTX,
    answer_tokens: int = ANSWER_TOKENS,
    chroma_url: str | None = CHROMA_URL,
    as_json: bool = typer.Option(False, "--json", help="Answer, citations, retrieved notes, timings as JSON."),
    agent: bool = typer.Option(
        False, "--agent", help="Let the model call the bundle's tools (search, read_note, neighbours, sql, schema)."
    ),
    steps: int = typer.Option(5, "--steps", min=0, help="With --agent: most tool calls before it must answer."),
    prefetch: bool = typer.Option(
        False, "--prefetch", help="With --agent: start from the search of the question, as if the model called it."
    ),
    *,
    spec: SearchSpec,
) -> None:
    """Answer QUESTION from the notes, citing them; says 'not found in the vault' when they do not hold it."""
    from retriever.answer.base import check_answerer, get_answerer
    from retriever.ask import ask

    _check_question(question)
    if prefetch and not agent:
        raise typer.BadParameter("--prefetch is for the agent loop: add --agent", param_hint="'--prefetch'")
    options = _answer_options(llm, region, profile, gpu_layers, n_ctx, answer_tokens)
    check_answerer(llm, model=model)  # a missing GGUF or model ID fails here, before any model loads
    retriever = Retriever.open(bundle, chroma_url=chroma_url)
    retriever.prepare(spec)
    if agent:  # retriever/agent.py: the model calls the tool layer, then answers from what it returned
        from retriever.agent import ask_agent

        ask_agent(bundle, question, retriever, spec, llm=llm, model=model, options=options, steps=steps,
                  prefetch=prefetch, as_json=as_json)  # fmt: skip
        return
    answerer = get_answerer(llm, model=model, **options)
    notice = getattr(answerer, "notice", None)
    if notice:
        typer.echo(f"note: {notice}", err=True)
    stream = None if as_json else _print_token
    concepts = retriever.graph.concepts
    result = ask(question, lambda q: retriever.search(q, spec), answerer, on_token=stream, concepts=concepts)
    if as_json:
        typer.echo(json.dumps(result.to_json(), indent=2, ensure_ascii=False))
        return
    typer.echo("")
    for line in render_sources(result.answer):
        typer.echo(line)
    for hit in result.retrieval.hits:
        typer.echo(f"  [{hit.via}] {hit.title} ({hit.doc_path})", err=True)


def render_sources(answer: Answer) -> list[str]:
    """What follows the streamed answer text: the "Sources" list, or why there is none."""
    if answer.not_found:
        return []
    if not answer.citations:
        return ["", "(unsupported: this answer cites no note of its context — do not rely on it)"]
    lines = ["", "Sources:"]
    for number, c in enumerate(answer.citations, start=1):
        anchor = f"#{c.heading}" if c.heading else ""
        lines.append(f"  [{number}] {c.label} — {c.path}{anchor}")
    return lines


def _check_question(question: str) -> None:
    if not question.strip():
        raise typer.BadParameter("the question is empty: ask something", param_hint="'QUESTION'")


def _print_token(token: str) -> None:
    sys.stdout.write(token)
    sys.stdout.flush()


def _answer_options(
    llm: str, region: str | None, profile: str | None, gpu_layers: int, n_ctx: int, tokens: int
) -> dict[str, Any]:
    if llm == "bedrock":
        return {"region": region, "profile": profile, "max_tokens": tokens}
    from retriever.embed import verbose  # `vault2okf --verbose`: llama.cpp's log lines too

    return {"n_gpu_layers": gpu_layers, "n_ctx": n_ctx, "max_tokens": tokens, "verbose": verbose()}
