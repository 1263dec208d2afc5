"""Run every retrieval method over every golden question in one pass, at matched budgets.

Methods (names are what the report's JSON uses):
- ``vector@5``, ``vector@10``, ``vector@15``: top-k chunks grouped into notes;
- ``graph@5+hop[v10]``, ``graph@5+hop[v15]``: 5 vector seeds + a hop capped, question by question, at the notes
  and tokens ``vector@10`` / ``vector@15`` spent on that question;
- ``union@5+hop[v10]``, ``union@10+hop[v15]``: vector at k plus the capped hop, same matched caps;
- ``union@10+hop[v15]-sessions``: the same without the previous/next session of retrieved sessions as candidates;
- ``hybrid@10``, ``hybrid@15``, ``union-hybrid@10+hop[v15]``: the vector stage as dense + BM25 fused by RRF;
- with ``rankers``: ``union@10+hop[v15]:<ranker>`` and ``union@5+hop[v10]:<ranker>`` for each neighbour ranker.
The question is embedded once; latencies exclude that embedding.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from eval.golden import Question
from retriever.retrieve import DEFAULT_RANKER, Budget, Retrieval, Retriever


@dataclass(frozen=True)
class Method:
    name: str
    mode: str
    k: int
    matched_to: str | None = None  # cap the hop at what this method spent on the same question
    ranker: str = DEFAULT_RANKER
    seeds: str = "dense"
    adjacent_sessions: bool = True


@dataclass
class RunResult:
    run: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # an eval.metrics Run
    budgets: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # eval.metrics Budgets
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    retrievals: dict[str, dict[str, Retrieval]] = field(default_factory=dict)

    def latency_summary(self) -> dict[str, dict[str, float]]:
        return {m: _percentiles(v) for m, v in self.latency_ms.items()}


def default_methods(ranker: str = DEFAULT_RANKER, rankers: Sequence[str] = (), hybrid: bool = True) -> list[Method]:
    methods = [
        Method("vector@5", "vector", 5),
        Method("vector@10", "vector", 10),
        Method("vector@15", "vector", 15),
        Method("graph@5+hop[v10]", "graph", 5, "vector@10", ranker),
        Method("graph@5+hop[v15]", "graph", 5, "vector@15", ranker),
        Method("union@5+hop[v10]", "union", 5, "vector@10", ranker),
        Method("union@10+hop[v15]", "union", 10, "vector@15", ranker),
    ]
    methods.append(Method("union@10+hop[v15]-sessions", "union", 10, "vector@15", ranker, adjacent_sessions=False))
    if hybrid:
        methods += [
            Method("hybrid@10", "vector", 10, seeds="hybrid"),
            Method("hybrid@15", "vector", 15, seeds="hybrid"),
            Method("union-hybrid@10+hop[v15]", "union", 10, "vector@15", ranker, "hybrid"),
        ]
    for name in rankers:
        methods += [
            Method(f"union@5+hop[v10]:{name}", "union", 5, "vector@10", name),
            Method(f"union@10+hop[v15]:{name}", "union", 10, "vector@15", name),
        ]
    return methods


def run_methods(
    retriever: Retriever,
    questions: Sequence[Question],
    methods: Sequence[Method],
    progress: Callable[[str], None] | None = None,
) -> RunResult:
    """Every method on every question; methods that others are matched to must come first."""
    result = RunResult()
    for m in methods:
        retriever.prepare(m.ranker, m.seeds)  # index building is not query latency
    for m in methods:
        result.run[m.name], result.budgets[m.name], result.latency_ms[m.name], result.retrievals[m.name] = (
            {},
            {},
            [],
            {},
        )
    for n, q in enumerate(questions, start=1):
        qvec = retriever.embed(q.question)
        for m in methods:
            budget = _budget(result, m, q.id)
            r = retriever.search(q.question, m.mode, m.k, budget, m.ranker, m.seeds, qvec, m.adjacent_sessions)
            result.run[m.name][q.id] = [h.vault_path for h in r.hits]
            result.budgets[m.name][q.id] = {"notes": r.notes, "tokens": r.tokens}
            result.latency_ms[m.name].append(r.timings["retrieve_ms"])
            result.retrievals[m.name][q.id] = r
        if progress:
            progress(f"{n}/{len(questions)} {q.id}")
    return result


def _budget(result: RunResult, method: Method, qid: str) -> Budget | None:
    if method.matched_to is None:
        return None
    spent = result.budgets[method.matched_to][qid]
    return Budget(notes=int(spent["notes"]), tokens=int(spent["tokens"]))


def _percentiles(values: list[float]) -> dict[str, float]:
    if not values:
        return {"p50": 0.0, "p95": 0.0}
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return {"p50": round(statistics.median(ordered), 3), "p95": round(p95, 3)}


def config_of(methods: Sequence[Method], extra: dict[str, Any]) -> dict[str, Any]:
    described = {
        m.name: {"mode": m.mode, "k": m.k, "budget": f"matched to {m.matched_to}" if m.matched_to else "none",
                 "ranker": m.ranker if m.mode != "vector" else None, "seeds": m.seeds,
                 "adjacent_sessions": m.adjacent_sessions}
        for m in methods
    }  # fmt: skip
    return {**extra, "methods": described}
