"""Load and validate a golden set: JSON Lines of `{id, tier, question, gold, answer, answer_entities}`."""

from __future__ import annotations

import difflib
import json
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from eval.errors import EvalError

REQUIRED_KEYS = ("id", "tier", "question", "gold", "answer", "answer_entities")


class Tier(StrEnum):
    LOOKUP = "lookup"
    SYNTHESIS = "synthesis"
    TEMPORAL = "temporal"
    UNANSWERABLE = "unanswerable"


@dataclass(frozen=True)
class Question:
    """One golden question: its tier, the vault paths of its gold notes and, when answerable, its answer and
    the entities an answer must name (golden/README.md describes the file)."""

    id: str
    tier: Tier
    question: str
    gold: tuple[str, ...]
    answer: str
    answer_entities: tuple[str, ...]

    @property
    def answerable(self) -> bool:
        return self.tier is not Tier.UNANSWERABLE


def load_golden(path: str | Path, *, known_paths: set[str] | None = None) -> list[Question]:
    """Read a golden set; every problem is reported as `file:line: message` in one EvalError."""
    path = Path(path)
    if not path.is_file():
        raise EvalError(f"golden set not found: {path}")
    known = None if known_paths is None else {_nfc(p) for p in known_paths}
    questions, problems = _parse_lines(path, known)
    if problems:
        raise EvalError(f"{len(problems)} problem(s) in golden set {path}:\n" + "\n".join(problems))
    if not questions:
        raise EvalError(f"golden set {path} has no questions (expected one JSON object per line)")
    return questions


def _parse_lines(path: Path, known: set[str] | None) -> tuple[list[Question], list[str]]:
    questions: list[Question] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    for lineno, line in enumerate(_read_text(path).splitlines(), start=1):
        if not line.strip():
            continue
        try:
            question = parse_question(line, known_paths=known)
            _check_unique(question.id, lineno, first_line)
        except EvalError as e:
            problems.append(f"{path}:{lineno}: {e}")
            continue
        questions.append(question)
    return questions, problems


def _read_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")  # a byte-order mark (Windows editors write one) is no error
    except UnicodeDecodeError as e:
        raise EvalError(f"golden set {path} is not UTF-8 text ({e}): save it as UTF-8") from e


def _check_unique(qid: str, lineno: int, first_line: dict[str, int]) -> None:
    if qid in first_line:
        raise EvalError(f"duplicate id {qid!r} (first used on line {first_line[qid]}); ids must be unique")
    first_line[qid] = lineno


def parse_question(line: str, *, known_paths: set[str] | None = None) -> Question:
    """Parse one golden-set line; raises EvalError without a location (the caller adds it)."""
    record = _json_object(line)
    missing = [key for key in REQUIRED_KEYS if key not in record]
    if missing:
        names = ", ".join(repr(k) for k in missing)
        raise EvalError(f"missing key {names} (every line needs {', '.join(REQUIRED_KEYS)})")
    tier = _tier(record["tier"])
    gold = tuple(_nfc(p) for p in _strings(record, "gold"))
    _check_gold(tier, gold, known_paths)
    return Question(
        id=_string(record, "id"),
        tier=tier,
        question=_string(record, "question"),
        gold=gold,
        answer=_string(record, "answer"),
        answer_entities=_strings(record, "answer_entities"),
    )


def _json_object(line: str) -> dict[str, Any]:
    try:
        record = json.loads(line)
    except json.JSONDecodeError as e:
        raise EvalError(f"invalid JSON: {e.msg} at column {e.colno}") from None
    except RecursionError:  # 100k nested [ ... ]: deeper than any question needs, and than Python's stack
        raise EvalError("invalid JSON: nested too deeply (a golden line is one flat object)") from None
    if not isinstance(record, dict):
        raise EvalError(f"expected a JSON object, got {type(record).__name__}")
    return record


def _tier(value: Any) -> Tier:
    try:
        return Tier(value)
    except ValueError:
        valid = ", ".join(t.value for t in Tier)
        raise EvalError(f"unknown tier {value!r} (valid tiers: {valid})") from None


def _string(record: dict[str, Any], key: str) -> str:
    value = record[key]
    if not isinstance(value, str):
        raise EvalError(f"{key!r} must be a string, got {json.dumps(value, ensure_ascii=False)}")
    return value


def _strings(record: dict[str, Any], key: str) -> tuple[str, ...]:
    value = record[key]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise EvalError(f"{key!r} must be a list of strings, got {json.dumps(value, ensure_ascii=False)}")
    return tuple(value)


def _check_gold(tier: Tier, gold: tuple[str, ...], known_paths: set[str] | None) -> None:
    if tier is Tier.UNANSWERABLE and gold:
        raise EvalError(f"tier 'unanswerable' must have empty gold, got {len(gold)} path(s): {list(gold)}")
    if tier is not Tier.UNANSWERABLE and not gold:
        raise EvalError(
            f"tier {tier.value!r} needs at least one gold path "
            "(use tier 'unanswerable' for questions the vault cannot answer)"
        )
    repeated = sorted({p for p in gold if gold.count(p) > 1})
    if repeated:
        raise EvalError(f"gold lists {repeated[0]!r} more than once")
    if known_paths is not None:
        _check_known(gold, known_paths)


def _check_known(gold: Iterable[str], known_paths: set[str]) -> None:
    for path in gold:
        if path not in known_paths:
            raise EvalError(f"gold path {path!r} is not a note in the bundle{_suggest(path, known_paths)}")


def _suggest(path: str, known_paths: set[str]) -> str:
    close = difflib.get_close_matches(path, sorted(known_paths), n=1, cutoff=0.6)
    if close:
        return f"; did you mean {close[0]!r}?"
    return " (gold uses vault paths with .md, like 'People/Ada.md')"


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)
