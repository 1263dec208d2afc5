"""``evaluate``: load a golden set, run every method on an indexed bundle, score answers, save the report."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval.errors import EvalError
from eval.golden import Question, load_golden
from eval.html import write_eval_html
from eval.report import EvalReport, check_out_dir
from eval.run import DEFAULT, Method, RunResult, config_of, default_methods, run_methods
from eval.scoring import AnswerScore, score_answer
from retriever.answer.backends import AnswerSpec
from retriever.graph import load_graph
from retriever.rankers import RANKERS
from retriever.retrieve import DEFAULT_RANKER, DEFAULT_SPEC, Retriever

if TYPE_CHECKING:
    from retriever.agent.spec import AgentSpec

PAIRS = (
    ("default", "vector@15"),
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
    answer: AnswerSpec | None = None,
    answer_method: str = DEFAULT,
    agent: AgentSpec | None = None,
    progress: Callable[[str], None] | None = None,
    per_tier: int | None = None,
) -> tuple[list[Path], str]:
    """Run every method (and with ``answer`` answer and score; with ``agent`` the agent loop beside it) on
    ``golden`` over ``bundle``; the report's paths and a summary table."""
    check_out_dir(out)  # every input is checked before the embedder loads
    if agent is not None and answer is None:
        raise EvalError("--agent compares answers: add --answers")
    names = list(RANKERS) if rankers == "all" else [r.strip() for r in rankers.split(",") if r.strip()]
    methods = default_methods(DEFAULT_RANKER, names)
    if answer is not None:
        _check_answers(methods, answer_method, answer)
    graph = load_graph(bundle)
    questions = load_golden(golden, known_paths={c.vault_path for c in graph.concepts.values()})
    if per_tier:  # the first N questions of each tier, in file order (a quick, declared subset)
        questions = [q for q in questions if [p.id for p in questions if p.tier is q.tier].index(q.id) < per_tier]
    retriever = Retriever.open(bundle, graph=graph)
    result = run_methods(retriever, questions, methods, progress)
    costs: dict[str, dict[str, Any]] = {}
    scores = _answers(retriever, questions, result, answer_method, answer, progress, costs) if answer else None
    agent_data = None
    if agent is not None and answer is not None and scores is not None:
        agent_data = _agent(bundle, retriever, questions, scores, costs, answer_method, answer, agent, progress)
    config = config_of(methods, {
        "bundle": bundle.name, "embedder": retriever.embedder.name, "default_method": DEFAULT,
        "default_ranker": DEFAULT_RANKER,
        "latency_ms_excluding_query_embedding": result.latency_summary(),
        **({"questions_per_tier": per_tier} if per_tier else {}),
    })  # fmt: skip
    pairs = [p for p in PAIRS if all(m in result.run for m in p)]
    report = EvalReport(str(golden), questions, result.run, result.budgets, pairs, config, scores,
                        title=f"Retrieval evaluation: {golden.stem}", agent=agent_data)  # fmt: skip
    paths = report.save(out, stem)
    paths.append(write_eval_html(report.to_json(), out, stem, report.title))
    return paths, _summary(report.to_json())


def _check_answers(methods: Sequence[Method], answer_method: str, answer: AnswerSpec) -> None:
    pass

    if answer_method not in {m.name for m in methods}:
        names = ", ".join(m.name for m in methods)
        raise EvalError(f"unknown --answer-method {answer_method!r}; choose one of {names}")
    answer.check()


def _answers(
    retriever: Retriever,
    questions: Sequence[Question],
    result: RunResult,
    method: str,
    answer_spec: AnswerSpec,
    progress: Callable[[str], None] | None,
    costs: dict[str, dict[str, Any]] | None = None,
) -> dict[str, dict[str, AnswerScore]]:
    """Answer every question from ``method``'s retrieved context, the way ``ask`` would, and score it."""
    from retriever.asker import Asker

    asker = Asker(retriever, DEFAULT_SPEC, answer_spec)  # answers from retrievals already made: the spec is unused
    vocabulary = {c.title for c in retriever.graph.concepts.values()}
    vocabulary |= {a for c in retriever.graph.concepts.values() for a in c.aliases}
    scored: dict[str, AnswerScore] = {}
    for q in questions:
        asked = asker.answer_from(q.question, result.retrievals[method][q.id])
        answer = asked.answer
        scored[q.id] = score_answer(answer, q, known_entities=vocabulary, context=asked.context)
        if costs is not None:  # for the single-shot vs agent table
            from eval.agent import single_costs

            costs[q.id] = {**single_costs(answer, result.retrievals[method][q.id]),
                           "notes_read": result.run[method][q.id]}  # fmt: skip
        if progress:
            progress(f"answered {q.id}: {answer.text[:80]!r}")
    return {f"{method} -> {answer_spec.llm}:{asker.model}": scored}


def _agent(
    bundle: Path,
    retriever: Retriever,
    questions: Sequence[Question],
    scores: dict[str, dict[str, AnswerScore]],
    costs: dict[str, dict[str, Any]],
    method: str,
    answer: AnswerSpec,
    agent: AgentSpec,
    progress: Callable[[str], None] | None,
) -> dict[str, Any]:
    """The agent loop on the same questions, next to the single-shot answers (``eval/agent.py``)."""
    from eval.agent import compare, run_agent_answers

    spec = None  # the search tool's own default: what `vault2okf search` does with no options
    agent_scores, runs = run_agent_answers(bundle, retriever, questions, answer=answer, agent=agent, spec=spec,
                                           progress=progress)  # fmt: skip
    single = next(iter(scores.values()))
    steps, prefetch = agent.steps, agent.prefetch
    config = {"single_shot": next(iter(scores)), "agent": f"agent[{steps} steps{', prefetch' if prefetch else ''}]",
              "llm": answer.llm, "model": answer.model, "answer_tokens": answer.answer_tokens, "steps": steps,
              "prefetch": prefetch, "single_shot_method": method}  # fmt: skip
    return compare(questions, single, costs, agent_scores, runs, config)


def _summary(data: dict[str, Any]) -> str:
    lines = [f"{'method':<32} {'recall':>6} {'notes':>6} {'tokens':>7}"]
    for name, m in data["methods"].items():
        recall = m["overall"]["recall"]
        lines.append(f"{name:<32} {recall if recall is not None else float('nan'):6.3f} "
                     f"{m['budget']['notes']:6.1f} {m['budget']['tokens']:7.0f}")  # fmt: skip
    return "\n".join(lines)
