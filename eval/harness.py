"""``evaluate``: load a golden set, run every method on an indexed bundle, score answers, save the report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from eval.golden import Question, load_golden
from eval.report import EvalReport
from eval.run import RunResult, config_of, default_methods, run_methods
from eval.scoring import AnswerScore, score_answer
from retriever.rankers import RANKERS
from retriever.retrieve import DEFAULT_RANKER, Retriever

PAIRS = (
    ("union@10+hop[v15]", "vector@15"),
    ("union@5+hop[v10]", "vector@10"),
    ("graph@5+hop[v15]", "vector@15"),
    ("hybrid@15", "vector@15"),
)


def evaluate(
    bundle: Path,
    golden: Path,
    out: Path,
    stem: str,
    *,
    rankers: str = "",
    answers: bool = False,
    answer_method: str = "union@10+hop[v15]",
    llm: str = "llama",
    model: str | None = None,
    answer_tokens: int = 160,
    progress: Callable[[str], None] | None = None,
) -> tuple[list[Path], str]:
    retriever = Retriever.open(bundle)
    known = {c.vault_path for c in retriever.graph.concepts.values()}
    questions = load_golden(golden, known_paths=known)
    names = list(RANKERS) if rankers == "all" else [r for r in rankers.split(",") if r]
    methods = default_methods(DEFAULT_RANKER, names)
    result = run_methods(retriever, questions, methods, progress)
    scores = (
        _answers(retriever, questions, result, answer_method, llm, model, answer_tokens, progress) if answers else None
    )
    config = config_of(methods, {
        "bundle": bundle.name, "embedder": retriever.embedder.name, "default_ranker": DEFAULT_RANKER,
        "latency_ms_excluding_query_embedding": result.latency_summary(),
    })  # fmt: skip
    pairs = [p for p in PAIRS if all(m in result.run for m in p)]
    report = EvalReport(str(golden), questions, result.run, result.budgets, pairs, config, scores,
                        title=f"Retrieval evaluation: {golden.stem}")  # fmt: skip
    paths = report.save(out, stem)
    return paths, _summary(report.to_json())


def _answers(
    retriever: Retriever,
    questions: Sequence[Question],
    result: RunResult,
    method: str,
    llm: str,
    model: str | None,
    tokens: int,
    progress: Callable[[str], None] | None,
) -> dict[str, dict[str, AnswerScore]]:
    """Answer every question from ``method``'s retrieved context and score it."""
    from retriever.answer.base import get_answerer
    from retriever.ask import context_notes

    answerer = get_answerer(llm, model=model, max_tokens=tokens)
    vocabulary = {c.title for c in retriever.graph.concepts.values()}
    vocabulary |= {a for c in retriever.graph.concepts.values() for a in c.aliases}
    scored: dict[str, AnswerScore] = {}
    for q in questions:
        answer = answerer.answer(q.question, context_notes(result.retrievals[method][q.id]))
        scored[q.id] = score_answer(answer.text, q, known_entities=vocabulary)
        if progress:
            progress(f"answered {q.id}: {answer.text[:80]!r}")
    return {f"{method} -> {llm}:{getattr(answerer, 'model', model)}": scored}


def _summary(data: dict[str, Any]) -> str:
    lines = [f"{'method':<32} {'recall':>6} {'notes':>6} {'tokens':>7}"]
    for name, m in data["methods"].items():
        recall = m["overall"]["recall"]
        lines.append(f"{name:<32} {recall if recall is not None else float('nan'):6.3f} "
                     f"{m['budget']['notes']:6.1f} {m['budget']['tokens']:7.0f}")  # fmt: skip
    return "\n".join(lines)
