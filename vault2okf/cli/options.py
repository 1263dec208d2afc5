"""The options more than one command takes, each declared once.

Plain arguments and options are values (``BUNDLE``, ``VAULT`` ...). The search, answer and agent options are
decorators: ``@search_options`` gives a command the search options, which reach it as one ``spec: SearchSpec``
keyword argument; ``@answer_options`` does the same for the answerer (``answer: AnswerSpec``, each flag taken by
the backend that owns it, with that backend's defaults); ``@agent_options`` for the agent loop (``agent:
AgentSpec | None``, None without ``--agent``). ``ask``, ``chat`` and ``eval`` share them. The retriever is
imported only when a decorator is applied, so ``convert`` and ``links`` do not load it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import typer
from typer.core import TyperCommand

# The help section of the search options most people never need: switches and rankers the blind selection tried.
EXPERIMENTS = "Retrieval experiments (see docs/search.md)"
VAULT = typer.Argument(..., help="The Obsidian vault folder (read only, never modified).")
CONFIG = typer.Option(None, "--config", help="A vault2okf.toml (default: VAULT/vault2okf.toml).")
FORCE = typer.Option(False, "--force", help="Replace a bundle holding files vault2okf did not write.")
BUNDLE = typer.Argument(..., help="A bundle written by `vault2okf convert`.")
NO_SERVER = typer.Option(
    False, "--no-server", help="Run in this process even when a `vault2okf serve` holds the bundle."
)
QUESTION = typer.Argument(..., help="The question.")
CHROMA_URL = typer.Option(None, "--chroma-url", help="A Chroma server (http://host:port) instead of the bundle's.")
CONTEXT_TOKENS = typer.Option(
    None, "--context-tokens", min=0,
    help="llama: most tokens of the retrieved notes the local model reads, best-ranked first (0: all; default "
    "the answerer's). The retrieval budget (--max-tokens) is unchanged.")  # fmt: skip

Option = tuple[str, Any, Any]  # parameter name, type, typer.Option


class PanelledCommand(TyperCommand):
    """A command whose ``--help`` lists its options by their ``rich_help_panel``, in plain click text: first the
    options of no panel ("Options"), then each panel in the order its first option comes. Typer draws panels only
    with rich formatting, which also boxes every error; this app keeps plain output (one line ``Error: ...``)."""

    def format_options(self, ctx: Any, formatter: Any) -> None:  # typer's own copy of click's types
        arguments, panels = [], dict[str, list[tuple[str, str]]]({"Options": []})
        for param in self.get_params(ctx):
            record = param.get_help_record(ctx)
            if record is None:
                continue
            if param.param_type_name == "argument":
                arguments.append(record)
            else:
                panels.setdefault(getattr(param, "rich_help_panel", None) or "Options", []).append(record)
        for title, records in (("Arguments", arguments), *panels.items()):
            if records:
                with formatter.section(title):
                    formatter.write_dl(records)


def search_options(command: Callable[..., None]) -> Callable[..., None]:
    """Give ``command`` the search options; they reach it as one ``spec: SearchSpec`` keyword argument."""
    from retriever.errors import RetrieverError
    from retriever.filters import NoteFilter
    from retriever.spec import DEFAULT_SPEC as D  # every default is the default search's
    from retriever.spec import Budget, Mode, RankerName, SearchSpec, Seeds

    options: Sequence[Option] = (
        ("k", int, typer.Option(D.k, "--k", min=1, help="Chunks from vector search (graph mode always seeds from 5).")),
        ("mode", Mode, typer.Option(D.mode, "--mode", help="vector | graph (k=5 seeds + hop) | union (vector + hop).")),
        ("max_notes", int, typer.Option(D.budget.notes, "--max-notes", min=1, help="Most notes of context.")),
        ("max_tokens", int, typer.Option(D.budget.tokens, "--max-tokens", min=1, help="Most tokens of context.")),
        ("types", list[str] | None, typer.Option(None, "--type", metavar="TYPE",
            help="Only notes of this type (any case); repeat for any of several. Filters combine: any value of one, "
            "all of them together.")),
        ("tags", list[str] | None, typer.Option(None, "--tag", metavar="TAG",
            help="Only notes with this tag or one nested under it (#project: project/alpha too); repeatable.")),
        ("folders", list[str] | None, typer.Option(None, "--folder", metavar="FOLDER",
            help="Only notes in this vault folder or below it (Sessions: Sessions/2024/x.md); repeatable.")),
        ("since", datetime | None, typer.Option(None, "--since", formats=["%Y-%m-%d"], metavar="YYYY-MM-DD",
            help="Only notes dated on or after YYYY-MM-DD: the frontmatter date (date, created ...), else the "
            "session date, else the file's modified time; a note with none is left out.")),
        ("until", datetime | None, typer.Option(None, "--until", formats=["%Y-%m-%d"], metavar="YYYY-MM-DD",
            help="Only notes dated on or before YYYY-MM-DD (the same date as --since).")),
        # The experiments: switches and rankers that lost (or set) the blind selection, listed apart in --help.
        ("match_vector", int, typer.Option(D.budget.match or 0, "--match-vector", min=0, rich_help_panel=EXPERIMENTS,
            help="Cap the hop at what vector search at this k spends on the question (0: no such cap).")),
        ("ranker", RankerName, typer.Option(D.ranker, "--ranker", rich_help_panel=EXPERIMENTS,
            help="How the hop ranks neighbours; lex-dense-pr, lex-dense-comm, lex-dense-hub-comm add the bundle's "
            "PageRank or a same-community bonus (lost the blind selection).")),
        ("seeds", Seeds, typer.Option(D.seeds, "--seeds", rich_help_panel=EXPERIMENTS,
            help="Vector stage: dense, or hybrid (dense + BM25).")),
        ("dedup", bool, typer.Option(D.dedup, "--dedup/--no-dedup", rich_help_panel=EXPERIMENTS,
            help="Vector stage takes k notes, not k chunks.")),
        ("sessions", bool, typer.Option(D.sessions, "--sessions/--no-sessions", rich_help_panel=EXPERIMENTS,
            help="Offer the previous/next session of a retrieved session.")),
        ("mentions", bool, typer.Option(D.mentions, "--mentions/--no-mentions", rich_help_panel=EXPERIMENTS,
            help="Offer the sessions that name or link a retrieved note.")),
        ("named", bool, typer.Option(D.named, "--named/--no-named", rich_help_panel=EXPERIMENTS,
            help="Offer the notes the question names.")),
        ("threads", bool, typer.Option(D.threads, "--threads/--no-threads", rich_help_panel=EXPERIMENTS,
            help="First offer the sessions of a retrieved session's series that share the question's rare terms.")),
        ("phrases", bool, typer.Option(D.phrases, "--phrases/--no-phrases", rich_help_panel=EXPERIMENTS,
            help="BM25 scores the question's adjacent words as phrases too.")),
        ("runs", bool, typer.Option(D.runs, "--runs/--no-runs", rich_help_panel=EXPERIMENTS,
            help="First offer the sessions between two retrieved sessions of a series that name what both name.")),
        ("mention_edges", bool, typer.Option(D.mention_edges, "--mention-edges/--no-mention-edges",
            rich_help_panel=EXPERIMENTS, help="A note naming another without a link is a hop edge (below links).")),
        ("entities", bool, typer.Option(D.entities, "--entities/--no-entities", rich_help_panel=EXPERIMENTS,
            help="Search the question's names and quoted phrases on their own too, fused (hybrid seeds).")),
        ("entity_rank", bool, typer.Option(D.entity_rank, "--entity-rank/--no-entity-rank",
            rich_help_panel=EXPERIMENTS, help="The hop ranks first the notes naming what the question names.")),
        ("scale_seeds", bool, typer.Option(D.scale_seeds, "--scale-seeds/--no-scale-seeds",
            rich_help_panel=EXPERIMENTS, help="With --match-vector K: k*K/15 seeds, kept to vector@K's tokens.")),
        ("twins", bool, typer.Option(D.twins, "--twins/--no-twins", rich_help_panel=EXPERIMENTS,
            help="With --runs: two adjacent retrieved sessions are a run too (their tellings in another series).")),
        ("passage", int, typer.Option(D.passage, "--passage", min=0, rich_help_panel=EXPERIMENTS,
            help="A hop note hands over at most N tokens of its best chunk: the lines best covering the question's "
            "words and the seeds' names (0: the whole chunk).")),
        ("seed_passage", int, typer.Option(D.seed_passage, "--seed-passage", min=0, rich_help_panel=EXPERIMENTS,
            help="The same for the vector stage's notes: at most N tokens each (0: their whole chunks).")),
        ("passage_sessions", bool, typer.Option(D.passage_sessions, "--passage-sessions/--no-passage-sessions",
            rich_help_panel=EXPERIMENTS, help="--passage and --seed-passage cut session notes only.")),
    )  # fmt: skip

    def spec(values: dict[str, Any]) -> SearchSpec:
        budget = Budget(values.pop("max_notes"), values.pop("max_tokens"), values.pop("match_vector") or None)
        types, tags, folders = (tuple(values.pop(key) or ()) for key in ("types", "tags", "folders"))
        since, until = (d.date() if d else None for d in (values.pop("since"), values.pop("until")))
        try:
            filters = NoteFilter(types, tags, folders, since, until)
        except RetrieverError as e:
            raise typer.BadParameter(str(e)) from None  # an empty value, --since after --until
        return SearchSpec(**values, budget=budget, filters=filters)

    return with_options(command, "spec", options, spec)


def answer_options(command: Callable[..., None] | None = None, *, answer_tokens: int | None = None) -> Any:
    """Give ``command`` the answer options (``ask``, ``chat``, ``eval``); they reach it as one ``answer:
    AnswerSpec``. ``answer_tokens`` changes that option's default (``eval`` answers many questions: shorter)."""
    if command is None:
        return functools.partial(answer_options, answer_tokens=answer_tokens)
    from retriever.answer.backends import AnswerSpec, Backend
    from retriever.answer.bedrock import BedrockOptions
    from retriever.answer.llama import ContextMode, LlamaOptions

    llama, bedrock = LlamaOptions(), BedrockOptions()  # every default is the backend's own
    options: Sequence[Option] = (
        ("llm", Backend | None, typer.Option(
            None, "--llm", show_default=False,
            help="llama (local Gemma GGUF), bedrock (AWS Converse) or extract (no model: quotes). Default: llama "
            "when a local model is configured (--model, VAULT2OKF_GGUF, the config file, the recommended Gemma in "
            "the Hugging Face cache; `vault2okf --download ask` fetches it), else extract (`vault2okf doctor` says "
            "which).")),
        ("model", str | None, typer.Option(None, "--model", help="GGUF path for llama; model ID for bedrock.")),
        ("region", str | None, typer.Option(
            bedrock.region, "--region", help="AWS region for bedrock (else AWS_REGION).")),
        ("profile", str | None, typer.Option(
            bedrock.profile, "--profile", help="AWS profile for bedrock (else AWS_PROFILE).")),
        ("gpu_layers", int, typer.Option(
            llama.gpu_layers, "--gpu-layers", help="Layers to offload (llama.cpp built with Vulkan; -1 = all).")),
        ("n_ctx", int, typer.Option(llama.n_ctx, "--n-ctx", min=256, help="llama.cpp context window in tokens.")),
        ("answer_tokens", int, typer.Option(
            answer_tokens or llama.answer_tokens, "--answer-tokens", min=1, help="Most tokens in the answer.")),
        ("context_tokens", int | None, CONTEXT_TOKENS),
        ("context", ContextMode, typer.Option(
            llama.context, "--context",
            help="llama: what the local model reads: quotes (the passages extract would quote and the next best, "
            "under their note titles and headings: a few hundred tokens) or notes (the whole retrieved notes).")),
    )  # fmt: skip

    def spec(values: dict[str, Any]) -> AnswerSpec:
        if values["llm"] is None:  # the default answerer: a configured local model, else extract
            from retriever.answer.default import RECOMMENDED, configured, default_answerer, hub_cache
            from retriever.embed import downloads_allowed

            download = downloads_allowed() and configured(values["model"]) is None
            if download:
                typer.echo(f"note: downloading {RECOMMENDED.named} into {hub_cache()} (--download)", err=True)
            choice = default_answerer(values["model"], download=download)  # an AnswerError: one line
            values = {**values, "llm": choice.llm, "model": choice.model}
        return AnswerSpec.of(**values)

    return with_options(command, "answer", options, spec)


def agent_options(command: Callable[..., None] | None = None, *, steps_help: str = "", agent_help: str = "") -> Any:
    """Give ``command`` the agent options (``ask``, ``eval``): ``--agent``, ``--steps``, ``--prefetch``; they reach it
    as one ``agent: AgentSpec | None`` (None without ``--agent``), listed after the command's own options; the
    command checks the pair with ``check_agent`` (the agent needs a backend with a model)."""
    if command is None:
        return functools.partial(agent_options, steps_help=steps_help, agent_help=agent_help)
    from retriever.agent.spec import DEFAULT_STEPS, AgentSpec

    options: Sequence[Option] = (
        ("agent", bool, typer.Option(False, "--agent", help=agent_help or
            "Let the model call the bundle's tools (search, read_note, neighbours, sql, schema).")),
        ("steps", int, typer.Option(DEFAULT_STEPS, "--steps", min=0,
            help=steps_help or "With --agent: most tool calls before it must answer.")),
        ("prefetch", bool, typer.Option(False, "--prefetch",
            help="With --agent: start from the search of the question, as if the model called it.")),
    )  # fmt: skip

    def spec(values: dict[str, Any]) -> AgentSpec | None:
        if values["prefetch"] and not values["agent"]:
            raise typer.BadParameter("--prefetch is for the agent loop: add --agent", param_hint="'--prefetch'")
        return AgentSpec(values["steps"], values["prefetch"]) if values["agent"] else None

    return with_options(command, "agent", options, spec, at_end=True)


def check_agent(agent: Any, answer: Any) -> None:
    """A usage error for ``--agent`` with a backend that has no model to call the tools (extract)."""
    from retriever.answer.backends import Backend
    from retriever.answer.extract import NO_AGENT

    if agent is not None and answer.llm == Backend.EXTRACT:
        raise typer.BadParameter(NO_AGENT, param_hint="'--agent'")


def with_options(
    command: Callable[..., None],
    name: str,
    options: Sequence[Option],
    build: Callable[[dict[str, Any]], Any],
    *,
    at_end: bool = False,
) -> Callable[..., None]:
    """``command`` with ``options`` after its arguments (``at_end``: after its own options too); their values reach
    it built into one keyword ``name``."""
    own = [p for p in inspect.signature(command, eval_str=True).parameters.values() if p.name != name]
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [inspect.Parameter(option, keyword, default=opt, annotation=t) for option, t, opt in options]
    arguments = [p for p in own if isinstance(p.default, typer.models.ArgumentInfo)]
    rest = [p for p in own if p not in arguments]
    params = [*arguments, *rest, *added] if at_end else [*arguments, *added, *rest]

    @functools.wraps(command)
    def with_spec(**values: Any) -> None:
        built = build({option: values.pop(option) for option, _, _ in options})
        command(**values, **{name: built})

    with_spec.__signature__ = inspect.Signature([p.replace(kind=keyword) for p in params])  # type: ignore[attr-defined]
    with_spec.__annotations__ = {p.name: p.annotation for p in params}
    return with_spec


def open_retriever(bundle: Path, chroma_url: str | None, spec: Any) -> Any:
    """``Retriever.open``, saying on stderr what the index's state means for the results (an ``index`` rewriting it
    now, or an interrupted one), with the in-memory indexes ``spec`` needs built (``search``, ``ask``, ``chat``)."""
    from retriever.retrieve import Retriever
    from vault2okf.cli.render import notes

    retriever = Retriever.open(bundle, chroma_url=chroma_url)
    notes(retriever.notices)
    retriever.prepare(spec)
    return retriever


def check_question(question: str) -> None:
    from retriever.errors import check_decodable

    if not question.strip():
        raise typer.BadParameter("the question is empty: ask something", param_hint="'QUESTION'")
    check_decodable(question)  # bytes that are not UTF-8: one Error line, exit 1, before any model loads
