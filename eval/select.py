"""Blind choice of the default search: leave one vault out, pick on the others, score on it.

Every candidate is a union search whose hop is capped, question by question, at what ``vector@15`` spends on
that question (``Budget(match=15)``), so no candidate can win by reading more. A candidate's *margin* on a vault
is its worst tier gain over ``vector@15``: the smaller of its synthesis and temporal recall gains, and its lookup
gain when that is a loss (lookup is often perfect for both, and a tie there is not a failure). The choice
maximises the *worst* vault's margin; ties go to the higher mean overall gain, then to fewer tokens (relative
to the reference, to 1%), then to fewer options on.

``fold(scores, held_out)`` picks on every vault but ``held_out`` and reports how that pick does on it: the
honest estimate of how the default does on a vault nobody tuned on.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

REFERENCE = "vector@15"
GAIN_TIERS = ("synthesis", "temporal")


@dataclass(frozen=True)
class Candidate:
    name: str
    options: Mapping[str, Any]  # SearchSpec fields other than the budget

    @property
    def extras(self) -> int:
        """How many options are switched away from the plain union (for tie-breaks: simpler wins)."""
        plain = {"seeds": "dense", "mentions": False, "named": False, "dedup": False, "sessions": True,
                 "threads": False, "phrases": False}  # fmt: skip
        return sum(1 for key, value in plain.items() if self.options.get(key, value) != value)


# {vault: {method: summary}} where summary is eval.metrics.summarise() output for one method
Scores = Mapping[str, Mapping[str, Mapping[str, Any]]]


def tier_gains(scores: Scores, vault: str, method: str, reference: str = REFERENCE) -> dict[str, float]:
    """Recall gain over the reference per tier present, and ``overall``."""
    ours, ref = scores[vault][method], scores[vault][reference]
    gains = {t: ours["tiers"][t]["recall"] - ref["tiers"][t]["recall"] for t in ref["tiers"] if t in ours["tiers"]}
    gains["overall"] = ours["overall"]["recall"] - ref["overall"]["recall"]
    return gains


def margin(scores: Scores, vault: str, method: str, reference: str = REFERENCE) -> float:
    """The worst of the synthesis/temporal gains and a lookup loss; 0 when the vault has none of them."""
    gains = tier_gains(scores, vault, method, reference)
    counted = [gains[t] for t in GAIN_TIERS if t in gains]
    if gains.get("lookup", 0.0) < 0:
        counted.append(gains["lookup"])
    return min(counted, default=0.0)


def spends_no_more(scores: Scores, vault: str, method: str, slack: float = 1e-9, reference: str = REFERENCE) -> bool:
    ours, ref = scores[vault][method]["budget"], scores[vault][reference]["budget"]
    return ours["tokens"] <= ref["tokens"] + slack


def pick(scores: Scores, candidates: Sequence[Candidate], vaults: Sequence[str]) -> tuple[Candidate, float]:
    """The candidate with the best worst-vault margin on ``vaults`` (and no more tokens on any), and that margin."""
    best: tuple[tuple[float, float, float, int], Candidate] | None = None
    for c in candidates:
        if not all(spends_no_more(scores, v, c.name) for v in vaults):
            continue
        worst = min(margin(scores, v, c.name) for v in vaults)
        mean_gain = sum(tier_gains(scores, v, c.name)["overall"] for v in vaults) / len(vaults)
        spend = sum(_tokens(scores, v, c.name) / max(_tokens(scores, v, REFERENCE), 1.0) for v in vaults) / len(vaults)
        key = (round(worst, 9), round(mean_gain, 9), -round(spend, 2), -c.extras)
        if best is None or key > best[0]:
            best = (key, c)
    if best is None:
        raise ValueError("no candidate spends no more tokens than the reference on every vault")
    return best[1], best[0][0]


def _tokens(scores: Scores, vault: str, method: str) -> float:
    return float(scores[vault][method]["budget"]["tokens"])


@dataclass(frozen=True)
class Fold:
    held_out: str
    chosen: Candidate
    train_margin: float  # worst margin over the other vaults
    test_margin: float  # margin on the held-out vault
    test_gains: Mapping[str, float]


def fold(scores: Scores, candidates: Sequence[Candidate], held_out: str) -> Fold:
    train = [v for v in scores if v != held_out]
    chosen, train_margin = pick(scores, candidates, train)
    return Fold(
        held_out, chosen, train_margin, margin(scores, held_out, chosen.name), tier_gains(scores, held_out, chosen.name)
    )


# The frontier (issue 37): a candidate is scored at several budgets, each matched to vector@k (its hop capped at
# vector@k's tokens, question by question: the method ``NAME@k``), against ``vector@k``.
FRONTIER = (5, 10, 15)


def at(name: str, k: int) -> str:
    return f"{name}@{k}"


def frontier_margin(scores: Scores, vault: str, name: str, ks: Sequence[int] = FRONTIER) -> float:
    """The worst tier margin of ``name`` over vector@k, over the budgets ``ks``."""
    return min(margin(scores, vault, at(name, k), at("vector", k)) for k in ks)


def within(scores: Scores, vault: str, name: str, ks: Sequence[int]) -> bool:
    """``name`` spends no more tokens on average than vector@k at every k of ``ks``."""
    return all(spends_no_more(scores, vault, at(name, k), reference=at("vector", k)) for k in ks)


def pick_frontier(
    scores: Scores, names: Sequence[str], vaults: Sequence[str], ks: Sequence[int] = FRONTIER
) -> tuple[str, float]:
    """The candidate with the best worst margin over ``vaults`` x ``ks`` x tiers among those that spend no more
    than vector@k at every k on every vault (none: at the largest k alone), ties to the higher mean overall gain."""
    for budgets in (ks, ks[-1:]):
        fits = [n for n in names if all(within(scores, v, n, budgets) for v in vaults)]
        if fits:
            break
    else:
        raise ValueError("no candidate spends no more tokens than vector@k on every vault")

    def key(name: str) -> tuple[float, float]:
        worst = min(frontier_margin(scores, v, name, budgets) for v in vaults)
        mean = sum(tier_gains(scores, v, at(name, k), at("vector", k))["overall"] for v in vaults for k in budgets)
        return round(worst, 9), round(mean / (len(vaults) * len(budgets)), 9)

    best = max(fits, key=key)
    return best, key(best)[0]


@dataclass(frozen=True)
class FrontierFold:
    held_out: str
    chosen: str
    train_margin: float
    test_margin: float  # its worst margin on the held-out vault over the budgets it was chosen at


def fold_frontier(scores: Scores, names: Sequence[str], held_out: str, ks: Sequence[int] = FRONTIER) -> FrontierFold:
    train = [v for v in scores if v != held_out]
    chosen, train_margin = pick_frontier(scores, names, train, ks)
    budgets = ks if all(within(scores, v, chosen, ks) for v in train) else ks[-1:]
    return FrontierFold(held_out, chosen, train_margin, frontier_margin(scores, held_out, chosen, budgets))
