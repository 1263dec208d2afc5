"""``eval --answers --agent``: single-shot answers against the agent loop on the same questions, per tier.

For each question, both tiers of the 001 table: *notes read* (recall of the gold notes among the notes the
answer could rest on: the single-shot method's retrieved notes, or the union of the notes the agent's tool
results showed, mapped to vault paths with ``BundleTools.vault_paths``), the answer scores of
``eval.scoring`` (entity recall, exact, not found, wrong, refusal, cites gold), tool calls, tokens (prompt +
completion, every model call) and wall time. Single-shot wall time is retrieval (question embedding excluded)
plus generation; the agent's is the whole loop, searches included.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from eval.golden import Question, Tier
from eval.metrics import mean, recall
from eval.scoring import AnswerScore, score_answer
from retriever.answer.backends import AnswerSpec
from retriever.retrieve import Retriever

if TYPE_CHECKING:
    from retriever.agent.spec import AgentSpec

COST_KEYS = ("tool_calls", "tokens", "seconds")


def single_costs(answer: Any, retrieval: Any) -> dict[str, float]:
    """What one single-shot answer cost: one retrieval, the answer's tokens, retrieval + generation seconds."""
    retrieve_s = float(retrieval.timings.get("retrieve_ms", 0.0)) / 1000
    return {"tool_calls": 0, "tokens": answer.prompt_tokens + answer.completion_tokens,
            "seconds": round(retrieve_s + answer.seconds, 3)}  # fmt: skip


def run_agent_answers(
    bundle: Path,
    retriever: Retriever,
    questions: Sequence[Question],
    *,
    answer: AnswerSpec,
    agent: AgentSpec,
    spec: Any,
    progress: Callable[[str], None] | None = None,
) -> tuple[dict[str, AnswerScore], dict[str, dict[str, Any]]]:
    """Answer every question with the agent loop, the way ``ask --agent`` would: scores, and per question notes read,
    calls, cost, trace."""
    from retriever.asker import Asker
    from retriever.retrieve import DEFAULT_SPEC

    vocabulary = {c.title for c in retriever.graph.concepts.values()}
    vocabulary |= {a for c in retriever.graph.concepts.values() for a in c.aliases}
    scores: dict[str, AnswerScore] = {}
    runs: dict[str, dict[str, Any]] = {}
    with Asker(retriever, spec or DEFAULT_SPEC, answer, agent) as asker:
        for q in questions:
            result = asker.ask(q.question).agent
            if result is None:  # an agent spec always runs the loop
                raise TypeError("the asker answered without the agent loop")
            scores[q.id] = score_answer(result.answer, q, known_entities=vocabulary, context=result.context)
            trace = result.trace_json()
            runs[q.id] = {
                "notes_read": result.notes_read,
                "tool_calls": result.tool_calls,
                "tokens": result.usage.prompt + result.usage.completion,
                "seconds": round(result.seconds, 3),
                "stop": result.stop,
                "calls": [{k: c[k] for k in ("tool", "arguments", "chars", "ms", "error")} for c in trace["calls"]],
            }
            if progress:
                progress(f"agent {q.id}: {result.tool_calls} calls, stop {result.stop}: {result.answer.text[:60]!r}")
    return scores, runs


def compare(
    questions: Sequence[Question],
    single: Mapping[str, AnswerScore],
    single_runs: Mapping[str, Mapping[str, Any]],
    agent: Mapping[str, AnswerScore],
    agent_runs: Mapping[str, Mapping[str, Any]],
    config: Mapping[str, Any],
) -> dict[str, Any]:
    """``{"config", "tiers": {tier: {"single", "agent"}}, "overall", "questions": [...]}`` over the questions
    both sides answered."""
    both = [q for q in questions if q.id in single and q.id in agent]
    tiers = {t.value: [q for q in both if q.tier is t] for t in Tier}
    rows = [_question(q, single, single_runs, agent, agent_runs) for q in both]
    return {
        "config": dict(config),
        "tiers": {tier: _sides(group, rows) for tier, group in tiers.items() if group},
        "overall": _sides([q for q in both if q.answerable], rows),
        "all": _sides(both, rows),
        "questions": rows,
    }


def _question(
    q: Question,
    single: Mapping[str, AnswerScore],
    single_runs: Mapping[str, Mapping[str, Any]],
    agent: Mapping[str, AnswerScore],
    agent_runs: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    row: dict[str, Any] = {"id": q.id, "tier": q.tier.value}
    for side, scores, runs in (("single", single, single_runs), ("agent", agent, agent_runs)):
        s, run = scores[q.id], runs[q.id]
        row[side] = {
            "notes_recall": recall(run["notes_read"], q.gold),
            "entity_recall": s.entity_recall, "exact": s.exact, "not_found": s.not_found, "wrong": s.wrong,
            "correct_refusal": s.correct_refusal, "cites_gold": s.cites_gold, "answer": s.answer,
            "citations": list(s.citations), **{k: run[k] for k in COST_KEYS},
        }  # fmt: skip
        if side == "agent":
            row[side]["stop"] = run.get("stop")
            row[side]["calls"] = run.get("calls", [])
    return row


def _sides(group: Sequence[Question], rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    ids = {q.id for q in group}
    chosen = [r for r in rows if r["id"] in ids]
    out: dict[str, Any] = {"n": len(chosen)}
    for side in ("single", "agent"):
        cells = [r[side] for r in chosen]
        answerable = [c for r, c in zip(chosen, cells, strict=True) if r["tier"] != Tier.UNANSWERABLE.value]
        refusals = [c for r, c in zip(chosen, cells, strict=True) if r["tier"] == Tier.UNANSWERABLE.value]
        out[side] = {
            "notes_recall": mean(c["notes_recall"] for c in answerable),
            "entity_recall": mean(c["entity_recall"] for c in answerable),
            "exact": mean(float(c["exact"]) for c in answerable),
            "not_found": mean(float(c["not_found"]) for c in cells),
            "wrong": mean(float(c["wrong"]) for c in cells),
            "refusal": mean(float(bool(c["correct_refusal"])) for c in refusals),
            "cites_gold": mean(float(c["cites_gold"]) for c in cells if c["cites_gold"] is not None),
            **{k: mean(float(c[k]) for c in cells) for k in COST_KEYS},
        }
    for key in ("tokens", "seconds"):
        base, new = out["single"][key], out["agent"][key]
        out[f"{key}_ratio"] = round(new / base, 2) if base and new is not None else None
    return out
