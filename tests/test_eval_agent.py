"""eval --answers --agent: the single-shot vs agent comparison, its JSON and its Markdown table."""

from __future__ import annotations

from eval.agent import compare
from eval.golden import Question, Tier
from eval.report import _agent_section
from eval.scoring import AnswerScore

QUESTIONS = [
    Question("l1", Tier.LOOKUP, "Who is Mira?", ("People/Mira.md",), "A smuggler.", ("smuggler",)),
    Question("s1", Tier.SYNTHESIS, "Who met whom?", ("People/Mira.md", "Sessions/S1.md"), "Mira met Bo.", ("Bo",)),
    Question("u1", Tier.UNANSWERABLE, "Who is the king?", (), "", ()),
]


def score(recall: float | None, not_found: bool, answerable: bool = True) -> AnswerScore:
    return AnswerScore(recall, None, recall == 1.0, not_found, None if answerable else not_found,
                       not not_found and (not answerable or recall == 0.0))  # fmt: skip


def run(notes: list[str], n_calls: int, tokens: int, seconds: float, **extra) -> dict:
    return {"notes_read": notes, "tool_calls": n_calls, "tokens": tokens, "seconds": seconds, **extra}


def test_compare_per_tier_notes_read_scores_and_cost_ratios() -> None:
    single = {"l1": score(1.0, False), "s1": score(0.0, False), "u1": score(None, False, answerable=False)}
    agent = {"l1": score(1.0, False), "s1": score(1.0, False), "u1": score(None, True, answerable=False)}
    single_runs = {"l1": run(["People/Mira.md"], 0, 1000, 2.0), "s1": run(["People/Mira.md"], 0, 1000, 2.0),
                   "u1": run([], 0, 1000, 2.0)}  # fmt: skip
    calls = [{"tool": "search", "arguments": {"query": "q"}, "chars": 10, "ms": 1.0, "error": False}]
    agent_runs = {"l1": run(["People/Mira.md"], 1, 3000, 5.0, stop="answer", calls=calls),
                  "s1": run(["People/Mira.md", "Sessions/S1.md"], 2, 5000, 7.0, stop="steps", calls=calls * 2),
                  "u1": run([], 1, 1000, 3.0, stop="repeat", calls=calls)}  # fmt: skip
    data = compare(QUESTIONS, single, single_runs, agent, agent_runs, {"single_shot": "default", "agent": "agent[5]",
                                                                       "answer_tokens": 96})  # fmt: skip
    synthesis = data["tiers"]["synthesis"]
    assert synthesis["single"]["notes_recall"] == 0.5 and synthesis["agent"]["notes_recall"] == 1.0
    assert synthesis["single"]["entity_recall"] == 0.0 and synthesis["agent"]["entity_recall"] == 1.0
    assert data["tiers"]["unanswerable"]["agent"]["refusal"] == 1.0
    assert data["tiers"]["unanswerable"]["single"]["refusal"] == 0.0
    assert data["overall"]["n"] == 2 and data["all"]["n"] == 3
    assert data["overall"]["agent"]["tool_calls"] == 1.5
    assert data["overall"]["tokens_ratio"] == 4.0 and data["all"]["tokens_ratio"] == 3.0
    md = _agent_section(data)
    assert "## Single-shot vs agent" in md
    assert "| synthesis | 1 | 0.50 / 1.00 | 0.00 / 1.00 |" in md
    assert "4.0x" in md and "agent stops: answer 1, repeat 1, steps 1" in md and "search 4" in md


def test_only_questions_both_sides_answered_are_compared() -> None:
    single = {"l1": score(1.0, False)}
    agent = {"l1": score(0.0, False), "s1": score(0.0, False)}
    runs = {"l1": run([], 0, 10, 1.0), "s1": run([], 0, 10, 1.0)}
    data = compare(QUESTIONS, single, runs, agent, runs, {})
    assert [q["id"] for q in data["questions"]] == ["l1"]
    assert list(data["tiers"]) == ["lookup"]
