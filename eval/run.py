"""Run every retrieval method over every golden question in one pass, at matched budgets.

Methods (names are what the report's JSON uses):
- ``default``: exactly what ``search`` and ``ask`` do with no options (``retrieve.DEFAULT_SPEC``);
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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from eval.golden import Question
from eval.metrics import p50_p95
from retriever.retrieve import DEFAULT_RANKER, DEFAULT_SPEC, Budget, Mode, Retrieval, Retriever, SearchSpec, Seeds

DEFAULT = "default"  # the method that is what `search` and `ask` do with no options


@dataclass(frozen=True)
class Method:
    name: str
    spec: SearchSpec  # its budget is replaced, question by question, when ``matched_to`` is set
    matched_to: str | None = None  # cap the hop at what this method spent on the same question


@dataclass
class RunResult:
    run: dict[str, dict[str, list[str]]] = field(default_factory=dict)  # an eval.metrics Run
    budgets: dict[str, dict[str, dict[str, float]]] = field(default_factory=dict)  # eval.metrics Budgets
    latency_ms: dict[str, list[float]] = field(default_factory=dict)
    retrievals: dict[str, dict[str, Retrieval]] = field(default_factory=dict)

    def latency_summary(self) -> dict[str, dict[str, float]]:
        return {m: _percentiles(v) for m, v in self.latency_ms.items()}


def default_methods(ranker: str = DEFAULT_RANKER, rankers: Sequence[str] = (), hybrid: bool = True) -> list[Method]:
    def union(
        name: str, k: int, matched: str, seeds: Seeds = Seeds.DENSE, sessions: bool = True, by: str = ranker
    ) -> Method:
        return Method(name, SearchSpec(Mode.UNION, k, seeds, by, sessions), matched)

    methods = [
        Method("vector@5", SearchSpec(Mode.VECTOR, 5)),
        Method("vector@10", SearchSpec(Mode.VECTOR, 10)),
        Method("vector@15", SearchSpec(Mode.VECTOR, 15)),
        Method(DEFAULT, DEFAULT_SPEC),
        Method("graph@5+hop[v10]", SearchSpec(Mode.GRAPH, 5, ranker=ranker), "vector@10"),
        Method("graph@5+hop[v15]", SearchSpec(Mode.GRAPH, 5, ranker=ranker), "vector@15"),
        union("union@5+hop[v10]", 5, "vector@10"),
        union("union@10+hop[v15]", 10, "vector@15"),
        union("union@10+hop[v15]-sessions", 10, "vector@15", sessions=False),
    ]
    if hybrid:
        methods += [
            Method("hybrid@10", SearchSpec(Mode.VECTOR, 10, Seeds.HYBRID)),
            Method("hybrid@15", SearchSpec(Mode.VECTOR, 15, Seeds.HYBRID)),
            union("union-hybrid@10+hop[v15]", 10, "vector@15", seeds=Seeds.HYBRID),
        ]
    for name in rankers:
        methods += [
            union(f"union@5+hop[v10]:{name}", 5, "vector@10", by=name),
            union(f"union@10+hop[v15]:{name}", 10, "vector@15", by=name),
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
        retriever.prepare(m.spec)  # index building is not query latency
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
            r = retriever.search(q.question, _spec(result, m, q.id), qvec=qvec)
            result.run[m.name][q.id] = [h.vault_path for h in r.hits]
            result.budgets[m.name][q.id] = {"notes": r.notes, "tokens": r.tokens}
            result.latency_ms[m.name].append(r.timings["retrieve_ms"])
            result.retrievals[m.name][q.id] = r
        if progress:
            progress(f"{n}/{len(questions)} {q.id}")
    return result


def _spec(result: RunResult, method: Method, qid: str) -> SearchSpec:
    if method.matched_to is None:
        return method.spec
    spent = result.budgets[method.matched_to][qid]
    return replace(method.spec, budget=Budget(notes=int(spent["notes"]), tokens=int(spent["tokens"])))


def _percentiles(values: list[float]) -> dict[str, float]:
    p50, p95 = p50_p95(values)
    return {"p50": round(p50, 3), "p95": round(p95, 3)}


def config_of(methods: Sequence[Method], extra: dict[str, Any]) -> dict[str, Any]:
    described = {
        m.name: {"mode": m.spec.mode.value, "k": m.spec.k,
                 "budget": f"matched to {m.matched_to}" if m.matched_to else "none",
                 "ranker": m.spec.ranker if m.spec.mode is not Mode.VECTOR else None, "seeds": m.spec.seeds.value,
                 "adjacent_sessions": m.spec.sessions, "mentions": m.spec.mentions, "named": m.spec.named,
                 "dedup": m.spec.dedup, "threads": m.spec.threads, "phrases": m.spec.phrases, "runs": m.spec.runs,
                 "mention_edges": m.spec.mention_edges, "entities": m.spec.entities,
                 "entity_rank": m.spec.entity_rank, "scale_seeds": m.spec.scale_seeds, "twins": m.spec.twins,
                 "passage": m.spec.passage, "seed_passage": m.spec.seed_passage,
                 "passage_sessions": m.spec.passage_sessions}
        for m in methods
    }  # fmt: skip
    return {**extra, "methods": described}
