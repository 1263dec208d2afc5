"""The cost/quality chart: which methods are on the frontier, and a PNG that is the same bytes every run."""

from __future__ import annotations

from eval.chart import pareto, plot_frontier


def test_pareto_keeps_only_undominated_methods():
    points = {"cheap": (100, 0.5), "dear": (300, 0.9), "worse": (200, 0.4), "tie-dearer": (400, 0.9)}
    assert pareto(points) == ["cheap", "dear"]


def _summary(tokens: float, recalls: dict[str, float]) -> dict:
    tiers = {t: {"n": 3, "recall": r, "budget": {"notes": 5.0, "tokens": tokens + i}} for i, (t, r) in
             enumerate(recalls.items())}  # fmt: skip
    return {"budget": {"notes": 5.0, "tokens": tokens}, "tiers": tiers, "overall": {"n": 9, "recall": 0.5}}


def test_frontier_png_is_reproducible(tmp_path):
    methods = {
        "vector@15": _summary(2000, {"lookup": 0.9, "synthesis": 0.5}),
        "union@10+hop[v15]": _summary(1800, {"lookup": 0.9, "synthesis": 0.7}),
    }
    a = plot_frontier(methods, tmp_path / "a.png", default="union@10+hop[v15]")
    b = plot_frontier(methods, tmp_path / "b.png", default="union@10+hop[v15]")
    assert a.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert a.read_bytes() == b.read_bytes()
    c = plot_frontier(methods, tmp_path / "c.png", default="vector@15")
    assert c.read_bytes() != a.read_bytes()  # the default is drawn differently
