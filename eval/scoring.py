"""Deterministic answer scoring against a question's `answer_entities` (no LLM judge).

Entities match case- and accent-insensitively on word boundaries. Precision counts the known entities an
answer names (a vocabulary such as every note title and alias), leaving out the ones the question itself
names, so restating the subject is not a false positive. An honest "not found" (the one rule that ``ask --json``
uses too, ``retriever.answer.refusal``) is counted apart from a confident wrong answer.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from eval.golden import Question
from eval.metrics import by_tier, mean
from retriever.answer.refusal import fold as normalise
from retriever.answer.refusal import is_not_found


@dataclass(frozen=True)
class AnswerScore:
    """Scores of one answer. None where a score does not apply (no gold entities, no entities named)."""

    entity_recall: float | None
    precision: float | None
    exact: bool
    not_found: bool
    correct_refusal: bool | None
    wrong: bool


@lru_cache(maxsize=4096)
def _pattern(normalised_entity: str) -> re.Pattern[str]:
    return re.compile(r"(?<!\w)" + re.escape(normalised_entity) + r"(?!\w)")


def mentions(text: str, entity: str) -> bool:
    """The entity appears in the text as whole words, ignoring case and accents."""
    key = normalise(entity)
    return bool(key) and _pattern(key).search(normalise(text)) is not None


def mentioned_entities(text: str, vocabulary: Iterable[str]) -> set[str]:
    """Normalised entities named in text, longest first, so 'Strahd von Zarovich' hides 'Strahd' in it."""
    norm = normalise(text)
    taken = [False] * len(norm)
    found: set[str] = set()
    for key in sorted({normalise(e) for e in vocabulary} - {""}, key=lambda k: (-len(k), k)):
        for match in _pattern(key).finditer(norm):
            if not any(taken[match.start() : match.end()]):
                found.add(key)
                taken[match.start() : match.end()] = [True] * (match.end() - match.start())
    return found


def score_answer(answer_text: str, question: Question, *, known_entities: set[str]) -> AnswerScore:
    """Score one answer against the question's answer_entities (see the module docstring)."""
    gold = question.answer_entities
    entity_recall = mean(float(mentions(answer_text, e)) for e in gold) if gold else None
    not_found = is_not_found(answer_text)
    return AnswerScore(
        entity_recall=entity_recall,
        precision=_precision(answer_text, question, known_entities),
        exact=bool(gold) and entity_recall == 1.0,
        not_found=not_found,
        correct_refusal=None if question.answerable else not_found,
        wrong=not not_found and (not question.answerable or entity_recall == 0.0),
    )


def _precision(answer_text: str, question: Question, known_entities: set[str]) -> float | None:
    vocabulary = set(known_entities) | set(question.answer_entities)
    named = mentioned_entities(answer_text, vocabulary) - mentioned_entities(question.question, vocabulary)
    if not named:
        return None
    gold = {normalise(e) for e in question.answer_entities}
    return len(named & gold) / len(named)


def summarise_answers(scores: Mapping[str, AnswerScore], questions: Sequence[Question]) -> dict[str, Any]:
    """`{"tiers": {tier: rates}, "overall": rates}` over the scored questions; overall is answerable only."""
    scored = [q for q in questions if q.id in scores]
    answerable = [q for q in scored if q.answerable]
    return {
        "tiers": {tier.value: _rates(group, scores) for tier, group in by_tier(scored).items()},
        "overall": _rates(answerable, scores),
    }


def _rates(questions: Sequence[Question], scores: Mapping[str, AnswerScore]) -> dict[str, Any]:
    rows = [scores[q.id] for q in questions]
    answerable = [s for q, s in zip(questions, rows, strict=True) if q.answerable]
    refusals = [s for q, s in zip(questions, rows, strict=True) if not q.answerable]
    return {
        "n": len(rows),
        "entity_recall": mean(s.entity_recall for s in answerable),
        "precision": mean(s.precision for s in answerable),
        "exact": mean(float(s.exact) for s in answerable),
        "not_found": mean(float(s.not_found) for s in rows),
        "wrong": mean(float(s.wrong) for s in rows),
        "refusal": mean(float(bool(s.correct_refusal)) for s in refusals),
    }
