"""Retrieval metrics as pure functions, and their aggregation per method and tier.

A run is `{method: {question_id: [vault_path ranked...]}}` and budgets are
`{method: {question_id: {"notes": n, "tokens": t}}}` (docs/ARCHITECTURE.md, Eval contracts).
Recall is None for a question with empty gold (unanswerable) and such questions are left out of every
mean except the budget: they cost context like any other question.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from eval.errors import EvalError
from eval.golden import Question, Tier


@dataclass(frozen=True)
class Spent:
    """Context spent on one question (or the mean over many): notes and tokens handed to the generator."""

    notes: float
    tokens: float


Run = Mapping[str, Mapping[str, Sequence[str]]]
Budgets = Mapping[str, Mapping[str, Spent | Mapping[str, float]]]  # what each method spent per question


def recall(found: Sequence[str], gold: Iterable[str]) -> float | None:
    """Fraction of gold notes found; None when there is no gold."""
    gold_set = set(gold)
    if not gold_set:
        return None
    return len(gold_set & set(found)) / len(gold_set)


def hit_all(found: Sequence[str], gold: Iterable[str]) -> bool:
    """Every gold note was found (vacuously true for empty gold)."""
    return set(gold) <= set(found)


def reciprocal_rank(found: Sequence[str], gold: Iterable[str]) -> float:
    """1/rank of the first gold note in the ranked list, 0.0 when none is there."""
    gold_set = set(gold)
    for rank, path in enumerate(found, start=1):
        if path in gold_set:
            return 1.0 / rank
    return 0.0


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not None; None when there are none."""
    kept = [v for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None


def summarise(questions: Sequence[Question], run: Run, budgets: Budgets) -> dict[str, dict[str, Any]]:
    """`{method: {"budget": {...}, "tiers": {tier: scores}, "overall": scores}}`, methods in run order."""
    return {method: _summarise_method(questions, method, run, budgets) for method in run}


def _summarise_method(questions: Sequence[Question], method: str, run: Run, budgets: Budgets) -> dict:
    found = {q.id: found_for(run, method, q.id) for q in questions}
    answerable = [q for q in questions if q.answerable]
    return {
        "budget": asdict(mean_budget(questions, method, budgets)),
        "tiers": {
            tier.value: {**_scores(group, found), "budget": asdict(mean_budget(group, method, budgets))}
            for tier, group in by_tier(answerable).items()
        },
        "overall": _scores(answerable, found),
    }


def _scores(questions: Sequence[Question], found: Mapping[str, Sequence[str]]) -> dict[str, Any]:
    return {
        "n": len(questions),
        "recall": mean(recall(found[q.id], q.gold) for q in questions),
        "hit_all": mean(float(hit_all(found[q.id], q.gold)) for q in questions),
        "mrr": mean(reciprocal_rank(found[q.id], q.gold) for q in questions),
    }


def by_tier(questions: Iterable[Question]) -> dict[Tier, list[Question]]:
    """Questions grouped by tier, tiers in declaration order (lookup, synthesis, temporal, unanswerable)."""
    groups: dict[Tier, list[Question]] = {tier: [] for tier in Tier}
    for question in questions:
        groups[question.tier].append(question)
    return {tier: group for tier, group in groups.items() if group}


def found_for(run: Run, method: str, qid: str) -> Sequence[str]:
    """The ranked paths a method returned for a question; a missing entry is an error, not a miss."""
    if method not in run:
        raise EvalError(f"run has no method {method!r} (methods: {', '.join(run)})")
    if qid not in run[method]:
        raise EvalError(f"run for method {method!r} has no result for question {qid!r}; rerun that method")
    return run[method][qid]


def mean_budget(questions: Sequence[Question], method: str, budgets: Budgets) -> Spent:
    """Mean notes and tokens a method spent over all questions, unanswerable ones included."""
    spent = [_budget(budgets, method, q.id) for q in questions]
    return Spent(notes=mean(b.notes for b in spent) or 0.0, tokens=mean(b.tokens for b in spent) or 0.0)


def _budget(budgets: Budgets, method: str, qid: str) -> Spent:
    value = budgets.get(method, {}).get(qid)
    if value is None:
        raise EvalError(f"budgets have no entry for method {method!r}, question {qid!r}")
    if isinstance(value, Spent):
        return value
    try:
        return Spent(notes=value["notes"], tokens=value["tokens"])
    except KeyError as e:
        missing = e.args[0]
        raise EvalError(f"budget for {method!r}, {qid!r} lacks {missing!r} (need notes and tokens)") from None


def per_question(questions: Sequence[Question], run: Run) -> list[dict[str, Any]]:
    """One row per question: the gold notes each method found (in gold order) and its recall."""
    return [_question_row(q, run) for q in questions]


def _question_row(question: Question, run: Run) -> dict[str, Any]:
    found = {m: set(found_for(run, m, question.id)) for m in run}
    return {
        "id": question.id,
        "tier": question.tier.value,
        "gold": list(question.gold),
        "found": {m: [g for g in question.gold if g in found[m]] for m in run},
        "recall": {m: recall(list(found[m]), question.gold) for m in run},
    }


def wins(per_q: Sequence[Mapping[str, Any]], a: str, b: str) -> list[str]:
    """Ids of questions where method a has strictly higher recall than method b."""
    return [row["id"] for row in per_q if _beats(row["recall"][a], row["recall"][b])]


def _beats(x: float | None, y: float | None) -> bool:
    return x is not None and y is not None and x > y


def compare(per_q: Sequence[Mapping[str, Any]], pairs: Sequence[tuple[str, str]]) -> list[dict[str, Any]]:
    """For each (a, b) pair: questions a won, questions a lost, and how many answerable ones tied."""
    rows = []
    for a, b in pairs:
        won, lost = wins(per_q, a, b), wins(per_q, b, a)
        scored = [r for r in per_q if r["recall"][a] is not None and r["recall"][b] is not None]
        rows.append({"a": a, "b": b, "wins": won, "losses": lost, "ties": len(scored) - len(won) - len(lost)})
    return rows


def win_matrix(per_q: Sequence[Mapping[str, Any]], methods: Sequence[str]) -> dict[str, dict[str, int]]:
    """`matrix[a][b]` = number of questions where a has higher recall than b."""
    return {a: {b: len(wins(per_q, a, b)) for b in methods if b != a} for a in methods}


def p50_p95(values: Sequence[float]) -> tuple[float, float]:
    """The median and the 95th percentile (nearest rank: the value at ``round(0.95 * (n - 1))`` in order) of a
    list of timings; ``(0.0, 0.0)`` for none."""
    if not values:
        return 0.0, 0.0
    ordered = sorted(values)
    return statistics.median(ordered), ordered[round(0.95 * (len(ordered) - 1))]
