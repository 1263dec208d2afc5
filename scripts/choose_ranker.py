"""Choose the default neighbour ranker on one golden set and confirm it on the other, in both directions.

    python scripts/choose_ranker.py      # reads reports/eval-{thellade,children-of-ash}.json, writes
                                         # reports/ranker-selection.md

Candidates are the ``union@10+hop[v15]:<ranker>`` runs of ``vault2okf eval --rankers all`` (capped, question
by question, at what vector@15 spent). The target (issue 5): beat vector@15 on synthesis and temporal recall
and not lose on lookup. On the selection set every candidate that meets the target is kept (if none does,
those tied for the best overall recall); each is then checked against the same target on the other set. With
11-12 questions a tier, one question moves a tier by ~0.09, so ties are common and are all carried over.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from retriever.rankers import RANKERS

PREFIX = "union@10+hop[v15]:"
BASELINE = "vector@15"
TIERS = ("lookup", "synthesis", "temporal")


def recall(methods: dict, name: str, tier: str) -> float:
    scores = methods[name]["overall"] if tier == "overall" else methods[name]["tiers"][tier]
    return scores["recall"]


def meets_target(methods: dict, name: str) -> bool:
    def r(n: str, t: str) -> float:
        return recall(methods, n, t)

    return (
        r(name, "synthesis") > r(BASELINE, "synthesis") + 1e-9
        and r(name, "temporal") > r(BASELINE, "temporal") + 1e-9
        and r(name, "lookup") >= r(BASELINE, "lookup") - 1e-9
    )


def selected(methods: dict) -> list[str]:
    names = [PREFIX + r for r in RANKERS if PREFIX + r in methods]
    return [n for n in names if meets_target(methods, n)] or best(methods)


def best(methods: dict) -> list[str]:
    """Every candidate tied for the best overall recall."""
    names = [PREFIX + r for r in RANKERS if PREFIX + r in methods]
    top = max(recall(methods, n, "overall") for n in names)
    return [n for n in names if recall(methods, n, "overall") >= top - 1e-9]


def verdict(methods: dict, name: str) -> str:
    parts = []
    for tier in TIERS:
        a, b = recall(methods, name, tier), recall(methods, BASELINE, tier)
        word = "beats" if a > b + 1e-9 else ("ties" if abs(a - b) <= 1e-9 else "loses to")
        parts.append(f"{tier}: {a:.3f} {word} {b:.3f}")
    return "; ".join(parts)


def table(label: str, methods: dict) -> list[str]:
    rows = [
        f"### {label}",
        "",
        "| method | lookup | synthesis | temporal | overall | notes | tokens |",
        "|---|---|---|---|---|---|---|",
    ]
    for name in [BASELINE, *[PREFIX + r for r in RANKERS if PREFIX + r in methods]]:
        m = methods[name]
        cells = [f"{recall(methods, name, t):.3f}" for t in (*TIERS, "overall")]
        rows.append(f"| {name} | {' | '.join(cells)} | {m['budget']['notes']:.1f} | {m['budget']['tokens']:,.0f} |")
    return rows + [""]


REPORTS = Path(__file__).resolve().parents[1] / "reports"


def main() -> None:
    paths = sys.argv[1:3] or [REPORTS / "eval-thellade.json", REPORTS / "eval-children-of-ash.json"]
    runs = {Path(p).stem.removeprefix("eval-"): json.loads(Path(p).read_text("utf-8"))["methods"] for p in paths}
    (a, ma), (b, mb) = runs.items()
    lines = ["# Choosing the default neighbour ranker", "", (__doc__ or "").split("\n\n", 2)[2].strip(), ""]
    kept: dict[str, set[str]] = {}
    for pick_on, picked, confirm_on, other in ((a, ma, b, mb), (b, mb, a, ma)):
        tied = selected(picked)
        lines += [f"## Selected on {pick_on}: {', '.join(f'`{n.removeprefix(PREFIX)}`' for n in tied)}", ""]
        for name in tied:
            ok = "meets the target" if meets_target(other, name) else "misses the target"
            lines += [f"- `{name.removeprefix(PREFIX)}` on {pick_on}: {verdict(picked, name)}",
                      f"  - on {confirm_on} ({ok}): {verdict(other, name)}"]  # fmt: skip
        kept[pick_on] = {n for n in tied if meets_target(other, n)}
        lines.append("")
    both = sorted(set.intersection(*kept.values()), key=lambda n: list(RANKERS).index(n.removeprefix(PREFIX)))
    lines += [f"**Selected on one set and meeting the target on the other, in both directions:** "
              f"{', '.join(f'`{n.removeprefix(PREFIX)}`' for n in both) or 'none'}", ""]  # fmt: skip
    lines += ["## Every ranker, both sets (same budget as vector@15, question by question)", ""]
    lines += table(a, ma) + table(b, mb)
    (REPORTS / "ranker-selection.md").write_text("\n".join(lines), encoding="utf-8")
    print("\n".join(lines[:12]))


if __name__ == "__main__":
    main()
