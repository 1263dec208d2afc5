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


MARKERS = "osD^vP*Xhp<>"


def pareto(points: Mapping[str, tuple[float, float]]) -> list[str]:
    """Methods on the cost/quality frontier: no other method has fewer-or-equal tokens and higher recall (or
    equal recall for fewer tokens). ``points`` is ``{method: (tokens, recall)}``; returned by tokens."""
    front = [
        m
        for m, (t, r) in points.items()
        if not any((t2 <= t and r2 > r) or (t2 < t and r2 >= r) for m2, (t2, r2) in points.items() if m2 != m)
    ]
    return sorted(front, key=lambda m: points[m])


def plot_frontier(
    methods: Mapping[str, Mapping[str, Any]], path: str | Path, *, default: str | None = None, title: str = ""
) -> Path:
    """Recall against mean context tokens, one panel per tier (and overall), one marker per method.

    Methods are told apart by colour and marker in one shared legend (no text next to the points, so no
    labels overlap); the frontier is a dashed line; ``default`` is drawn larger with a black edge and marked
    in the legend."""
    panels = groups(methods)
    fig = Figure(figsize=(3.6 * len(panels), 4.6), dpi=100)
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    colours = _colours(len(methods))
    for ax, group in zip(axes, panels, strict=True):
        points = {}
        for i, (method, summary) in enumerate(methods.items()):
            scores = summary["overall"] if group == "overall" else summary["tiers"].get(group)
            if not scores or scores.get("recall") is None:
                continue
            tokens = (scores.get("budget") or summary["budget"])["tokens"]
            points[method] = (tokens, scores["recall"])
            is_default = method == default
            ax.scatter(
                [tokens], [scores["recall"]], s=150 if is_default else 45, marker=MARKERS[i % len(MARKERS)],
                color=colours[i], edgecolors="black" if is_default else "none", linewidths=1.6, zorder=3,
                label=f"{method} (default)" if is_default else method,
            )  # fmt: skip
        front = pareto(points)
        if len(front) > 1:
            ax.plot(*zip(*(points[m] for m in front), strict=True), "--", color="grey", lw=1, zorder=2)
        ax.set_title(group, fontsize=10)
        ax.set_xlabel("mean context tokens")
        ax.set_ylim(0, 1.05)
        ax.grid(alpha=0.3)
        ax.set_axisbelow(True)
    axes[0].set_ylabel("recall")
    handles, labels = axes[-1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncols=min(4, max(len(labels), 1)), fontsize=8, frameon=False)
    fig.suptitle(title or "Recall against context tokens (dashed: the frontier)", fontsize=11)
    fig.tight_layout(rect=(0, 0.06 + 0.035 * ((len(labels) + 3) // 4), 1, 0.95))
    path = Path(path)
    fig.savefig(path, format="png", metadata={"Software": None})
    return path


def _colours(n: int) -> list[Any]:
    from matplotlib import colormaps

    cmap = colormaps["tab20" if n > 10 else "tab10"]
    return [cmap(i % cmap.N) for i in range(n)]
