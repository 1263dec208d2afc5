import pytest

from eval.errors import EvalError
from eval.golden import Question, Tier
from eval.metrics import (
    Spent,
    compare,
    hit_all,
    per_question,
    recall,
    reciprocal_rank,
    summarise,
    win_matrix,
    wins,
)


def q(qid: str, tier: Tier, *gold: str) -> Question:
    return Question(qid, tier, f"question {qid}", gold, "", ())


QUESTIONS = [
    q("q1", Tier.LOOKUP, "A.md"),
    q("q2", Tier.SYNTHESIS, "A.md", "B.md", "C.md"),
    q("q3", Tier.SYNTHESIS, "D.md", "E.md"),
    q("q4", Tier.UNANSWERABLE),
]
RUN = {
    "vec": {"q1": ["A.md", "X.md"], "q2": ["X.md", "B.md", "A.md"], "q3": ["Y.md", "Z.md"], "q4": ["X.md"]},
    "graph": {"q1": ["X.md", "Y.md", "A.md"], "q2": ["A.md", "B.md", "C.md"], "q3": ["E.md"], "q4": []},
}
BUDGETS = {
    "vec": {
        qid: {"notes": 5, "tokens": t} for qid, t in zip(["q1", "q2", "q3", "q4"], [100, 200, 300, 400], strict=True)
    },
    "graph": {
        "q1": {"notes": 3, "tokens": 90},
        "q2": {"notes": 6, "tokens": 120},
        "q3": Spent(notes=9, tokens=30),
        "q4": {"notes": 2, "tokens": 0},
    },
}


def test_recall_hit_all_rr_hand_checked():
    found, gold = ["a", "x", "b"], {"a", "b", "c"}
    assert recall(found, gold) == pytest.approx(2 / 3)
    assert reciprocal_rank(found, gold) == 1.0
    assert reciprocal_rank(["x", "y", "b"], gold) == pytest.approx(1 / 3)
    assert reciprocal_rank(["x", "y"], gold) == 0.0
    assert not hit_all(found, gold)
    assert hit_all(["c", "b", "a", "x"], gold)


def test_empty_gold_has_no_recall():
    assert recall(["a"], []) is None
    assert recall([], ["a"]) == 0.0


def test_duplicates_in_found_count_once():
    assert recall(["a", "a"], ["a", "b"]) == 0.5


def test_summarise_shape_and_numbers():
    result = summarise(QUESTIONS, RUN, BUDGETS)
    assert list(result) == ["vec", "graph"]
    vec = result["vec"]
    assert vec["budget"] == {"notes": 5.0, "tokens": 250.0}
    assert list(vec["tiers"]) == ["lookup", "synthesis"]
    lookup, synthesis = vec["tiers"]["lookup"], vec["tiers"]["synthesis"]
    assert lookup == {"n": 1, "recall": 1.0, "hit_all": 1.0, "mrr": 1.0, "budget": {"notes": 5.0, "tokens": 100.0}}
    assert synthesis.pop("budget") == {"notes": 5.0, "tokens": 250.0}  # each tier's own mean spend
    assert synthesis == pytest.approx({"n": 2, "recall": 1 / 3, "hit_all": 0.0, "mrr": 0.25})
    assert vec["overall"] == pytest.approx({"n": 3, "recall": 5 / 9, "hit_all": 1 / 3, "mrr": 0.5})


def test_summarise_second_method():
    graph = summarise(QUESTIONS, RUN, BUDGETS)["graph"]
    assert graph["budget"] == {"notes": 5.0, "tokens": 60.0}
    assert graph["tiers"]["lookup"].pop("budget") == {"notes": 3.0, "tokens": 90.0}
    assert graph["tiers"]["synthesis"].pop("budget") == {"notes": 7.5, "tokens": 75.0}
    assert graph["tiers"]["lookup"] == pytest.approx({"n": 1, "recall": 1.0, "hit_all": 1.0, "mrr": 1 / 3})
    assert graph["tiers"]["synthesis"] == pytest.approx({"n": 2, "recall": 0.75, "hit_all": 0.5, "mrr": 1.0})
    assert graph["overall"] == pytest.approx({"n": 3, "recall": 5 / 6, "hit_all": 2 / 3, "mrr": 7 / 9})


def test_only_unanswerable_gives_none_not_nan():
    result = summarise([QUESTIONS[3]], RUN, BUDGETS)["vec"]
    assert result["tiers"] == {}
    assert result["overall"] == {"n": 0, "recall": None, "hit_all": None, "mrr": None}
    assert result["budget"] == {"notes": 5.0, "tokens": 400.0}


def test_missing_run_entry_and_budget_are_errors():
    with pytest.raises(EvalError, match="run for method 'vec' has no result for question 'q1'"):
        summarise(QUESTIONS, {"vec": {}}, BUDGETS)
    with pytest.raises(EvalError, match="budgets have no entry for method 'vec', question 'q1'"):
        summarise(QUESTIONS, RUN, {"vec": {}, "graph": BUDGETS["graph"]})
    with pytest.raises(EvalError, match="lacks 'tokens'"):
        summarise(QUESTIONS, RUN, {**BUDGETS, "vec": {k: {"notes": 1} for k in BUDGETS["vec"]}})


def test_per_question_lists_gold_found_in_gold_order():
    rows = per_question(QUESTIONS, RUN)
    assert rows[1] == {
        "id": "q2",
        "tier": "synthesis",
        "gold": ["A.md", "B.md", "C.md"],
        "found": {"vec": ["A.md", "B.md"], "graph": ["A.md", "B.md", "C.md"]},
        "recall": {"vec": pytest.approx(2 / 3), "graph": 1.0},
    }
    assert rows[3]["recall"] == {"vec": None, "graph": None}


def test_wins_compare_and_matrix():
    rows = per_question(QUESTIONS, RUN)
    assert wins(rows, "graph", "vec") == ["q2", "q3"]
    assert wins(rows, "vec", "graph") == []
    assert compare(rows, [("graph", "vec")]) == [
        {"a": "graph", "b": "vec", "wins": ["q2", "q3"], "losses": [], "ties": 1}
    ]
    assert win_matrix(rows, ["vec", "graph"]) == {"vec": {"graph": 0}, "graph": {"vec": 2}}
