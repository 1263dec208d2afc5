"""Grouped bar chart of recall by tier and method, written as a reproducible PNG (Agg, no metadata)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from eval.golden import Tier


def budget_label(method: str, summary: Mapping[str, Any]) -> str:
    """`vector@10 (9.3 notes, 1,840 tok)`."""
    budget = summary["budget"]
    return f"{method} ({budget['notes']:.1f} notes, {budget['tokens']:,.0f} tok)"


def groups(methods: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """X groups: the tiers any method reports, in tier order, then overall."""
    present = {tier for summary in methods.values() for tier in summary["tiers"]}
    return [tier.value for tier in Tier if tier.value in present] + ["overall"]


def _recall(summary: Mapping[str, Any], group: str) -> float | None:
    scores = summary["overall"] if group == "overall" else summary["tiers"].get(group, {})
    return scores.get("recall")


def plot_recall(methods: Mapping[str, Mapping[str, Any]], path: str | Path, *, title: str = "") -> Path:
    """Draw `summarise()` output as recall bars per tier (groups) and method (bars); returns the path."""
    labels = groups(methods)
    fig = Figure(figsize=(max(6.0, 1.6 * len(labels) + 0.4 * len(methods)), 4.5), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    width = 0.8 / max(len(methods), 1)
    for i, (method, summary) in enumerate(methods.items()):
        values = [_recall(summary, g) for g in labels]
        xs = [x + (i - (len(methods) - 1) / 2) * width for x in range(len(labels))]
        bars = ax.bar(xs, [v or 0.0 for v in values], width, label=budget_label(method, summary))
        ax.bar_label(bars, labels=["n/a" if v is None else f"{v:.2f}" for v in values], fontsize=7)
    _decorate(ax, labels, title or "Recall by tier (fraction of gold notes retrieved)")
    path = Path(path)
    fig.savefig(path, format="png", bbox_inches="tight", metadata={"Software": None})
    return path


def _decorate(ax: Any, labels: list[str], title: str) -> None:
    ax.set_xticks(range(len(labels)), labels)
    ax.set_ylim(0, 1.12)
    ax.set_ylabel("recall")
    ax.set_title(title, fontsize=11)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.1), ncols=2, fontsize=8, frameon=False)
