"""Leave-one-vault-out selection on made-up scores: margins, the worst-vault rule, the budget rule, folds."""

from __future__ import annotations

from pathlib import Path

import pytest

from eval.select import REFERENCE, Candidate, fold, margin, pick


def _summary(lookup: float, synthesis: float, temporal: float | None, tokens: float = 1000.0) -> dict:
    tiers = {"lookup": {"recall": lookup}, "synthesis": {"recall": synthesis}}
    if temporal is not None:
        tiers["temporal"] = {"recall": temporal}
    overall = sum(t["recall"] for t in tiers.values()) / len(tiers)
    return {"tiers": tiers, "overall": {"recall": overall}, "budget": {"notes": 10.0, "tokens": tokens}}


PLAIN = Candidate("plain", {"seeds": "dense"})
HYBRID = Candidate("hybrid", {"seeds": "hybrid"})
GREEDY = Candidate("greedy", {"seeds": "dense", "mentions": True})

SCORES = {
    "a": {REFERENCE: _summary(1.0, 0.5, 0.5), "plain": _summary(1.0, 0.6, 0.6), "hybrid": _summary(1.0, 0.9, 0.9),
          "greedy": _summary(1.0, 0.9, 0.9, tokens=1200)},
    "b": {REFERENCE: _summary(0.9, 0.5, None), "plain": _summary(0.9, 0.7, None), "hybrid": _summary(0.8, 0.8, None),
          "greedy": _summary(1.0, 1.0, None)},
    "c": {REFERENCE: _summary(1.0, 0.4, 0.4), "plain": _summary(1.0, 0.5, 0.45), "hybrid": _summary(1.0, 0.6, 0.6),
          "greedy": _summary(1.0, 0.7, 0.7)},
}  # fmt: skip


def test_margin_is_the_worst_gain_and_a_lookup_tie_is_not_a_loss():
    assert margin(SCORES, "a", "plain") == pytest.approx(0.1)
    assert margin(SCORES, "b", "plain") == pytest.approx(0.2)  # no temporal tier; lookup tied
    assert margin(SCORES, "b", "hybrid") == pytest.approx(-0.1)  # lost a lookup


def test_pick_maximises_the_worst_vault_and_refuses_bigger_budgets():
    chosen, worst = pick(SCORES, [PLAIN, HYBRID, GREEDY], ["a", "b", "c"])
    assert chosen == PLAIN and worst == pytest.approx(0.05)  # hybrid loses a lookup on b; greedy reads more on a
    chosen, worst = pick(SCORES, [PLAIN, HYBRID, GREEDY], ["a", "c"])
    assert chosen == HYBRID and worst == pytest.approx(0.2)


def test_a_fold_scores_the_pick_on_the_vault_it_never_saw():
    result = fold(SCORES, [PLAIN, HYBRID, GREEDY], "b")
    assert result.chosen == HYBRID  # chosen on a and c
    assert result.test_margin == pytest.approx(-0.1)  # and it loses a lookup on b: reported, not hidden
    assert result.test_gains["lookup"] == pytest.approx(-0.1)


def test_ties_go_to_the_simpler_candidate():
    twin = Candidate("twin", {"seeds": "dense", "dedup": True})
    scores = {v: {**s, "twin": s["plain"]} for v, s in SCORES.items()}
    assert pick(scores, [twin, PLAIN], ["a", "b", "c"])[0] == PLAIN


def test_threads_and_phrases_count_as_options_switched_on():
    plain = {"seeds": "dense", "mentions": False, "named": False, "dedup": False, "threads": False, "phrases": False}
    assert Candidate("plain", plain).extras == 0
    assert Candidate("phrased", {**plain, "seeds": "hybrid", "phrases": True, "threads": True}).extras == 3


def _frontier() -> dict:
    """Two vaults, vector@k and two candidates at k = 5, 10, 15: ``steady`` gains a little at every budget, ``late``
    gains a lot at @15 but loses synthesis at @5; ``dear`` gains most and reads more than vector@10 on vault b."""
    scores: dict = {"a": {}, "b": {}}
    for vault in scores:
        for k, base in ((5, 0.4), (10, 0.5), (15, 0.6)):
            tokens = 100.0 * k
            scores[vault][f"vector@{k}"] = _summary(0.9, base, base, tokens)
            scores[vault][f"steady@{k}"] = _summary(0.9, base + 0.05, base + 0.05, tokens)
            scores[vault][f"late@{k}"] = _summary(0.9, base + (0.3 if k == 15 else -0.1), base + 0.3, tokens)
            dear = tokens * (1.5 if vault == "b" and k == 10 else 1.0)
            scores[vault][f"dear@{k}"] = _summary(0.9, base + 0.2, base + 0.2, dear)
    return scores


def test_the_frontier_margin_is_the_worst_over_budgets_and_the_pick_keeps_within_every_budget():
    from eval.select import fold_frontier, frontier_margin, pick_frontier, within

    scores = _frontier()
    assert frontier_margin(scores, "a", "late") == pytest.approx(-0.1)  # its @5 synthesis loss
    assert frontier_margin(scores, "a", "late", (15,)) == pytest.approx(0.3)
    assert not within(scores, "b", "dear", (5, 10, 15)) and within(scores, "a", "dear", (5, 10, 15))
    chosen, worst = pick_frontier(scores, ["steady", "late", "dear"], ["a", "b"])
    assert chosen == "steady" and worst == pytest.approx(0.05)  # dear reads more at @10 on b; late loses at @5
    assert pick_frontier(scores, ["dear", "late"], ["a"])[0] == "dear"
    f = fold_frontier(scores, ["steady", "late", "dear"], "b")
    assert (f.chosen, f.held_out) == ("dear", "b") and f.test_margin == pytest.approx(0.2)  # chosen on a alone


def test_the_frontier_selection_keeps_only_candidates_whose_answers_hold() -> None:
    """``scripts/select_frontier.py --answers``: a candidate more than one question below today's default's extract
    answers (strong or any quote citing gold) on a vault it is picked on is left out; unmeasured ones too."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "select_frontier.py"
    spec = importlib.util.spec_from_file_location("select_frontier", path)
    assert spec is not None and spec.loader is not None
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)

    def counts(strong: int, any_: int) -> dict:
        return {"answers": {"overall": {"strong_gold": strong, "marked_gold": any_}}}

    answers = {"a": {"default@15": counts(10, 12), "x@15": counts(9, 11), "y@15": counts(12, 10)},
               "b": {"default@15": counts(5, 6), "x@15": counts(3, 6), "y@15": counts(5, 6)}}  # fmt: skip
    assert script.answers_hold(answers, "x", ["a"]) and not script.answers_hold(answers, "x", ["a", "b"])
    assert not script.answers_hold(answers, "y", ["a"])  # any quote: two below
    assert not script.answers_hold(answers, "z", ["a"]) and script.answers_hold(answers, "default", ["a", "b"])
    assert script.answers_hold(None, "y", ["a"])  # without --answers every candidate
