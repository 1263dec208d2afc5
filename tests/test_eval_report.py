import json

import pytest

from eval.errors import EvalError
from eval.golden import Question, Tier
from eval.report import EvalReport
from eval.scoring import score_answer


def q(qid: str, tier: Tier, *gold: str, entities: tuple[str, ...] = ()) -> Question:
    return Question(qid, tier, f"question {qid}", gold, "", entities)


QUESTIONS = [
    q("q1", Tier.LOOKUP, "A.md", entities=("Ada",)),
    q("q2", Tier.SYNTHESIS, "A.md", "B.md", "C.md"),
    q("q3", Tier.SYNTHESIS, "D.md", "E.md"),
    q("q4", Tier.UNANSWERABLE),
]
RUN = {
    "vector@5": {"q1": ["A.md", "X.md"], "q2": ["X.md", "B.md", "A.md"], "q3": ["Y.md"], "q4": ["X.md"]},
    "graph@5+hop": {"q1": ["X.md", "A.md"], "q2": ["A.md", "B.md", "C.md"], "q3": ["E.md"], "q4": []},
}
BUDGETS = {
    "vector@5": {qid: {"notes": 5, "tokens": 1000} for qid in ("q1", "q2", "q3", "q4")},
    "graph@5+hop": {qid: {"notes": 9.5, "tokens": 1840} for qid in ("q1", "q2", "q3", "q4")},
}


def report(**extra) -> EvalReport:
    pairs = [("graph@5+hop", "vector@5")]
    return EvalReport("golden/toy.jsonl", QUESTIONS, RUN, BUDGETS, pairs=pairs, config={"k": 5}, **extra)


def answers() -> dict:
    texts = {"q1": "It was Ada.", "q2": "No idea, Bob.", "q4": "Not found in the vault."}
    by_id = {x.id: x for x in QUESTIONS}
    scored = {qid: score_answer(t, by_id[qid], known_entities={"Ada", "Bob"}) for qid, t in texts.items()}
    return {"gemma": scored}


def test_json_has_the_contract_keys():
    data = report().to_json()
    assert list(data) == ["golden", "config", "methods", "questions", "wins"]
    assert data["golden"] == {
        "path": "golden/toy.jsonl",
        "questions": 4,
        "tiers": {"lookup": 1, "synthesis": 2, "unanswerable": 1},
    }
    assert data["config"] == {"k": 5}
    assert list(data["methods"]["vector@5"]) == ["budget", "tiers", "overall"]
    assert data["questions"][1]["found"] == {
        "vector@5": ["A.md", "B.md"],
        "graph@5+hop": ["A.md", "B.md", "C.md"],
    }
    [pair] = data["wins"]["pairs"]
    tests = pair.pop("paired")
    assert pair == {"a": "graph@5+hop", "b": "vector@5", "wins": ["q2", "q3"], "losses": [], "ties": 1}
    assert list(tests) == ["lookup", "synthesis", "overall"]
    assert (tests["synthesis"]["wins"], tests["synthesis"]["losses"]) == (2, 0)
    assert tests["synthesis"]["verdict"] == "not significant"  # two wins are not evidence


def test_markdown_tier_table_rows():
    md = report().to_markdown()
    assert md.startswith("# Retrieval evaluation\n")
    assert "How to read this" in md and "similar budgets" in md
    assert "| Tier | n | vector@5 | graph@5+hop |" in md
    assert "| lookup | 1 | 1.00 | 1.00 |" in md
    assert "| synthesis | 2 | 0.33 | 0.75 |" in md
    assert "| **overall** | 3 | 0.56 | 0.83 |" in md
    assert "| budget: notes (mean) |  | 5.0 | 9.5 |" in md
    assert "| budget: tokens (mean) |  | 1,000 | 1,840 |" in md


def test_markdown_hit_mrr_questions_and_wins():
    md = report().to_markdown()
    assert "| lookup | 1 | 1.00 / 1.00 | 1.00 / 0.50 |" in md
    assert "| q2 | synthesis | 2/3 | 3/3 |" in md
    assert "| q4 | unanswerable | — | — |" in md
    assert "### graph@5+hop vs vector@5" in md
    assert "- graph@5+hop wins (2): `q2`, `q3`" in md
    assert "- graph@5+hop loses (0): none" in md
    assert "| graph@5+hop | 2 | — |" in md
    assert "## Answers" not in md
    assert "- k: 5" in md


def test_answers_section_and_json():
    rep = report(answers=answers())
    data = rep.to_json()
    assert data["answers"]["gemma"]["tiers"]["unanswerable"]["refusal"] == 1.0
    assert data["questions"][0]["answers"]["gemma"]["exact"] is True
    assert data["questions"][2]["answers"] == {}
    md = rep.to_markdown()
    assert "## Answers" in md
    assert "| gemma | lookup | 1 | 1.00 | 1.00 | 1.00 | 0.00 | 0.00 | — |" in md
    assert "| gemma | unanswerable | 1 | — | — | — | 1.00 | 0.00 | 1.00 |" in md


def test_unknown_pair_method_is_an_error():
    with pytest.raises(EvalError, match="names unknown method 'bm25'"):
        EvalReport("g.jsonl", QUESTIONS, RUN, BUDGETS, pairs=[("bm25", "vector@5")])


def test_save_writes_three_files_with_identical_bytes(tmp_path):
    rep = report(answers=answers())
    first = rep.save(tmp_path / "a", "toy")
    second = rep.save(tmp_path / "b", "toy")
    assert [p.name for p in first] == ["toy.md", "toy.json", "toy.png", "toy-frontier.png"]
    for one, two in zip(first, second, strict=True):
        assert one.read_bytes() == two.read_bytes()
    text = first[1].read_text(encoding="utf-8")
    assert text.endswith("}\n") and json.loads(text) == json.loads(json.dumps(rep.to_json()))
    assert first[2].read_bytes()[:8] == first[3].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"Software" not in first[2].read_bytes()
    assert first[0].read_text(encoding="utf-8") == rep.to_markdown()


def test_json_keeps_non_ascii(tmp_path):
    rep = EvalReport("g.jsonl", QUESTIONS, RUN, BUDGETS, config={"vault": "Zoë's vault"})
    path = rep.save(tmp_path, "r")[1]
    assert "Zoë's vault" in path.read_text(encoding="utf-8")


def test_variants_get_rows_of_their_own_and_config_tables_render():
    run = {**RUN, "graph@5+hop:lexical": RUN["vector@5"]}
    budgets = {**BUDGETS, "graph@5+hop:lexical": BUDGETS["vector@5"]}
    config = {"latency_ms": {"vector@5": {"p50": 1.5, "p95": 2.0}}}
    md = EvalReport("golden/toy.jsonl", QUESTIONS, run, budgets, config=config).to_markdown()
    recall_header = md.split("## Recall by tier")[1].split("\n")[2]
    assert "graph@5+hop:lexical" not in recall_header and "vector@5" in recall_header
    assert "| graph@5+hop:lexical | 1.00 | 0.33 | 0.56 | 5.0 | 1,000 |" in md
    assert "| vector@5 | 1.5 | 2 |" in md


def test_markdown_says_when_a_win_is_not_significant_and_marks_the_default():
    pairs = [("graph@5+hop", "vector@5")]
    config = {"default_method": "graph@5+hop"}
    md = EvalReport("golden/toy.jsonl", QUESTIONS, RUN, BUDGETS, pairs=pairs, config=config).to_markdown()
    # synthesis: q2 1 against 2/3, q3 1/2 against 0: +0.417 on two questions
    assert "- synthesis: mean recall gain +0.417" in md and "**not significant**" in md
    assert "**graph@5+hop** (default)" in md.split("## Recall by tier")[1].split("\n")[2]


def test_support_marks_are_counted_per_tier_from_real_extract_answers():
    """`--llm extract`'s marks in the report: a strong quote citing gold, any quote citing gold, and an
    unanswerable question answered strong, per tier and for all."""
    from retriever.answer.contract import ContextNote
    from retriever.answer.extract import ExtractAnswerer

    def note(note_id: str, text: str) -> ContextNote:
        return ContextNote(note_id, note_id, f"concepts/{note_id}.md", text, "vector", 1.0)

    notes = [note("A", "The harbour ledger is kept by Mira. She signed it in Greywater."),
             note("B", "The harbour bell rings at dawn."),
             note("C", "The lighthouse is kept by old Tam.")]  # fmt: skip
    asked = {
        "q1": "Who keeps the harbour ledger?",  # strong: names Mira, beside the words asked
        "q2": "What colour is the harbour bell?",  # weak: B (gold) covers it, but names no colour
        "q3": "Which bell rings at dawn?",  # from B: not gold (D, E)
        "q4": "Who keeps the lighthouse?",
    }  # unanswerable by the set, answered strong from C
    extract = ExtractAnswerer()
    by_id = {x.id: x for x in QUESTIONS}
    scored = {qid: score_answer(extract.answer(text, notes), by_id[qid], known_entities=set(), context=notes)
              for qid, text in asked.items()}  # fmt: skip
    assert [scored[k].support for k in ("q1", "q2", "q4")] == ["strong", "weak", "strong"]
    assert (scored["q1"].strong_gold, scored["q1"].marked_gold) == (True, True)
    assert (scored["q2"].strong_gold, scored["q2"].marked_gold) == (False, True)
    assert (scored["q3"].strong_gold, scored["q3"].marked_gold) == (False, False)
    assert scored["q4"].strong_gold is None
    data = report(answers={"extract": scored}).to_json()["answers"]["extract"]
    assert {k: data["all"][k] for k in ("marked", "strong_gold", "marked_gold", "answered_strong")} == {
        "marked": 4, "strong_gold": 1, "marked_gold": 2, "answered_strong": 1}  # fmt: skip
    md = report(answers={"extract": scored}).to_markdown()
    assert "### Support" in md
    assert "| extract | lookup | 1 | 1 of 1 (100%) | 1 of 1 (100%) | 0 of 0 |" in md
    assert "| extract | synthesis | 2 | 0 of 2 (0%) | 1 of 2 (50%) | 0 of 0 |" in md
    assert "| extract | unanswerable | 0 | 0 of 0 | 0 of 0 | 1 of 1 |" in md
    assert "| extract | **all** | 3 | 1 of 3 (33%) | 2 of 3 (67%) | 1 of 1 |" in md
    plain = report(answers=answers()).to_markdown()
    assert "### Support" not in plain  # answers with no marks: no table
