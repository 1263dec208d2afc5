import json
from pathlib import Path

import pytest

from eval.errors import EvalError
from eval.golden import Question, Tier, load_golden

GOOD = [
    {
        "id": "q1",
        "tier": "lookup",
        "question": "Who runs the Gilded Lily?",
        "gold": ["People/Mira.md"],
        "answer": "Mira",
        "answer_entities": ["Mira"],
    },
    {
        "id": "q2",
        "tier": "unanswerable",
        "question": "What is the dragon's name?",
        "gold": [],
        "answer": "Not in the vault.",
        "answer_entities": [],
    },
]
KNOWN = {"People/Mira.md", "Places/Gilded Lily.md", "Sessions/Session 3.md"}


def write(tmp_path: Path, records: list, name: str = "golden.jsonl") -> Path:
    path = tmp_path / name
    lines = [r if isinstance(r, str) else json.dumps(r) for r in records]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def with_(index: int, **changes) -> list:
    records = [dict(r) for r in GOOD]
    records[index].update(changes)
    return records


def test_loads_questions_as_frozen_records(tmp_path):
    questions = load_golden(write(tmp_path, [GOOD[0], "", GOOD[1]]), known_paths=KNOWN)
    assert questions[0] == Question("q1", Tier.LOOKUP, GOOD[0]["question"], ("People/Mira.md",), "Mira", ("Mira",))
    assert questions[1].tier is Tier.UNANSWERABLE and not questions[1].answerable
    with pytest.raises(AttributeError):
        questions[0].id = "x"


def test_gold_paths_are_nfc(tmp_path):
    decomposed = "People/Zoe\u0308.md"
    questions = load_golden(write(tmp_path, with_(0, gold=[decomposed])), known_paths={"People/Zo\u00eb.md"})
    assert questions[0].gold == ("People/Zo\u00eb.md",)


def test_invalid_json_gives_file_and_line(tmp_path):
    path = write(tmp_path, [GOOD[0], '{"id": "q2", '])
    with pytest.raises(EvalError, match=r"golden\.jsonl:2: invalid JSON"):
        load_golden(path)


def test_missing_key_is_named(tmp_path):
    record = {k: v for k, v in GOOD[0].items() if k != "answer_entities"}
    with pytest.raises(EvalError, match=r"golden\.jsonl:1: missing key 'answer_entities'"):
        load_golden(write(tmp_path, [record]))


def test_unknown_tier_lists_valid_ones(tmp_path):
    path = write(tmp_path, with_(0, tier="lokup"))
    with pytest.raises(
        EvalError,
        match=r":1: unknown tier 'lokup' \(valid tiers: lookup, synthesis, temporal, unanswerable\)",
    ):
        load_golden(path)


def test_duplicate_id_points_at_first_use(tmp_path):
    path = write(tmp_path, [GOOD[0], GOOD[1], GOOD[0]])
    with pytest.raises(EvalError, match=r":3: duplicate id 'q1' \(first used on line 1\)"):
        load_golden(path)


def test_unknown_gold_path_suggests_closest(tmp_path):
    path = write(tmp_path, with_(0, gold=["People/Mria.md"]))
    with pytest.raises(
        EvalError, match=r":1: gold path 'People/Mria.md' is not a note.*did you mean 'People/Mira.md'\?"
    ):
        load_golden(path, known_paths=KNOWN)


def test_unknown_gold_path_is_fine_without_known_paths(tmp_path):
    assert load_golden(write(tmp_path, with_(0, gold=["People/Mria.md"])))[0].gold == ("People/Mria.md",)


def test_unanswerable_with_gold_is_rejected(tmp_path):
    path = write(tmp_path, with_(1, gold=["People/Mira.md"]))
    with pytest.raises(EvalError, match=r":2: tier 'unanswerable' must have empty gold"):
        load_golden(path)


def test_answerable_with_empty_gold_is_rejected(tmp_path):
    path = write(tmp_path, with_(0, tier="temporal", gold=[]))
    with pytest.raises(EvalError, match=r":1: tier 'temporal' needs at least one gold path"):
        load_golden(path)


def test_wrong_types_are_reported(tmp_path):
    with pytest.raises(EvalError, match=r"'gold' must be a list of strings"):
        load_golden(write(tmp_path, with_(0, gold="People/Mira.md")))


def test_all_problems_reported_together(tmp_path):
    path = write(tmp_path, [with_(0, tier="x")[0], "not json", GOOD[1]])
    with pytest.raises(EvalError) as info:
        load_golden(path)
    message = str(info.value)
    assert message.startswith("2 problem(s) in golden set")
    assert ":1: unknown tier" in message and ":2: invalid JSON" in message


def test_missing_file_and_empty_file(tmp_path):
    with pytest.raises(EvalError, match="golden set not found"):
        load_golden(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n", encoding="utf-8")
    with pytest.raises(EvalError, match="has no questions"):
        load_golden(tmp_path / "empty.jsonl")


def test_a_byte_order_mark_is_no_error(tmp_path):
    path = write(tmp_path, GOOD)
    path.write_bytes(b"\xef\xbb\xbf" + path.read_bytes())
    assert [q.id for q in load_golden(path, known_paths=KNOWN)] == ["q1", "q2"]


def test_a_deeply_nested_line_is_a_problem_line_not_a_traceback(tmp_path):
    path = write(tmp_path, [GOOD[0], "[" * 100_000])
    with pytest.raises(EvalError, match=r"golden\.jsonl:2: invalid JSON: nested too deeply"):
        load_golden(path)
