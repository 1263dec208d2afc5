"""Deterministic answer scoring against a question's `answer_entities` (no LLM judge).

Entities match case- and accent-insensitively on word boundaries. Precision counts the known entities an
answer names (a vocabulary such as every note title and alias), leaving out the ones the question itself
names, so restating the subject is not a false positive. An honest "not found" (the one rule that ``ask --json``
uses too, ``retriever.answer.refusal``, read from ``Answer.not_found`` when the answer is a structured one) is
counted apart from a confident wrong answer. A structured answer is also checked for grounding: whether it
cites at least one note of its context (`cited`), whether it cites a gold note (`cites_gold`; a gold path is
a note ID plus `.md`), and whether any of the prompt's own structure leaked into it (`leaked`). An answer whose
quotes are marked strong or weak (`--llm extract`) is also scored on its marks: an answerable question whose
strong quotes cite a gold note (`strong_gold`), whose strong or weak ones do (`marked_gold`), and an unanswerable
question answered with strong support (`support == "strong"`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from eval.golden import Question
from eval.metrics import by_tier, mean
from retriever.answer.contract import Answer, ContextNote
from retriever.answer.refusal import fold as normalise
from retriever.answer.refusal import is_not_found
from retriever.answer.structured import leaks_template


@dataclass(frozen=True)
class AnswerScore:
    """Scores of one answer. None where a score does not apply (no gold entities, no entities named)."""

    entity_recall: float | None
    precision: float | None
    exact: bool
    not_found: bool
    correct_refusal: bool | None
    wrong: bool
    cited: bool | None = None  # a claim citing >= 1 note of its context; None for "not found" or plain text
    cites_gold: bool | None = None  # a claim citing a gold note (answerable questions)
    leaked: bool = False  # prompt structure (turn markers, note tags, "Question:" lines) in the answer
    answer: str = ""  # the answer text scored, and its citations as `note_id#heading` (structured answers)
    citations: tuple[str, ...] = ()
    support: str = ""  # the answer's support mark (extract): strong, weak or none; "" for an answer with no marks
    strong_gold: bool | None = None  # a strong quote cites a gold note (answerable questions, marked answers)
    marked_gold: bool | None = None  # a strong or a weak quote cites a gold note (the same)


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


def score_answer(
    answer: str | Answer,
    question: Question,
    *,
    known_entities: set[str],
    context: Sequence[ContextNote] = (),
) -> AnswerScore:
    """Score one answer (plain text, or a structured `Answer` and the notes it was given; see the module docstring)."""
    answer_text = answer if isinstance(answer, str) else answer.text
    gold = question.answer_entities
    entity_recall = mean(float(mentions(answer_text, e)) for e in gold) if gold else None
    not_found = is_not_found(answer) if isinstance(answer, str) else answer.not_found
    cited = cites_gold = None
    marks = _marks(answer, question) if isinstance(answer, Answer) else {}
    if isinstance(answer, Answer) and not not_found:
        context_ids = {n.note_id for n in context}
        cited_ids = {c.note_id for c in answer.citations if c.note_id in context_ids}
        cited = bool(cited_ids)
        gold_ids = {path.removesuffix(".md") for path in question.gold}
        cites_gold = bool(cited_ids & gold_ids) if question.answerable else None
    return AnswerScore(
        entity_recall=entity_recall,
        precision=_precision(answer_text, question, known_entities),
        exact=bool(gold) and entity_recall == 1.0,
        not_found=not_found,
        correct_refusal=None if question.answerable else not_found,
        wrong=not not_found and (not question.answerable or entity_recall == 0.0),
        cited=cited,
        cites_gold=cites_gold,
        leaked=leaks_template(answer_text),
        answer=answer_text,
        citations=() if isinstance(answer, str) else tuple(c.ref for c in answer.citations),
        **marks,
    )


def _marks(answer: Answer, question: Question) -> dict[str, Any]:
    """The support fields of a marked answer (extract's quotes, each strong or weak); none for another answer."""
    if not answer.support:
        return {}
    if not question.answerable:
        return {"support": answer.support}
    gold = {path.removesuffix(".md") for path in question.gold}
    strong = {c.note_id for c in answer.citations if c.support == "strong"}
    marked = {c.note_id for c in answer.citations if c.support in ("strong", "weak")}
    return {"support": answer.support, "strong_gold": bool(strong & gold), "marked_gold": bool(marked & gold)}


def _precision(answer_text: str, question: Question, known_entities: set[str]) -> float | None:
    vocabulary = set(known_entities) | set(question.answer_entities)
    named = mentioned_entities(answer_text, vocabulary) - mentioned_entities(question.question, vocabulary)
    if not named:
        return None
    gold = {normalise(e) for e in question.answer_entities}
    return len(named & gold) / len(named)


def summarise_answers(scores: Mapping[str, AnswerScore], questions: Sequence[Question]) -> dict[str, Any]:
    """`{"tiers": {tier: rates}, "overall": rates, "all": rates}`; overall is answerable only, all is every question."""
    scored = [q for q in questions if q.id in scores]
    answerable = [q for q in scored if q.answerable]
    return {
        "tiers": {tier.value: _rates(group, scores) for tier, group in by_tier(scored).items()},
        "overall": _rates(answerable, scores),
        "all": _rates(scored, scores),
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
        "refused": sum(bool(s.correct_refusal) for s in refusals),
        "unanswerable": len(refusals),
        "claims": sum(not s.not_found for s in rows),
        "cited": mean(float(s.cited) for s in rows if s.cited is not None),
        "cites_gold": mean(float(s.cites_gold) for s in rows if s.cites_gold is not None),
        "leaked": sum(s.leaked for s in rows),
        # support marks (extract): answerable questions a strong quote answers from a gold note, those a strong or
        # weak one does, and unanswerable questions answered with strong support (the error that matters)
        "marked": sum(bool(s.support) for s in rows),
        "strong_gold": sum(bool(s.strong_gold) for s in answerable),
        "marked_gold": sum(bool(s.marked_gold) for s in answerable),
        "answered_strong": sum(s.support == "strong" for s in refusals),
    }
