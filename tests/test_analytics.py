"""Graph analytics (issue 25 point 3): PageRank, communities, degrees and the hub and orphan flags of every note
(``vault2okf/analytics.py``)."""

from __future__ import annotations

import random
from collections import defaultdict
from functools import cache

import pytest
from growth import assert_linear

from vault2okf.analytics import analyse, centrality

A = [f"A{i}.md" for i in range(4)]
B = [f"B{i}.md" for i in range(4)]
LEAVES = [f"Leaf {i}.md" for i in range(6)]
PATHS = [*A, *B, *LEAVES, "Star.md", "Alone.md"]
EDGES = [
    *((A[i], A[j]) for i in range(4) for j in range(i + 1, 4)),  # two groups of four, linked inside...
    *((B[i], B[j]) for i in range(4) for j in range(i + 1, 4)),
    (A[0], B[0]),  # ...and to each other once
    *((leaf, "Star.md") for leaf in LEAVES),  # six notes that link only to the star
]


def _groups(found: dict) -> list[list[str]]:
    groups: dict[str, list[str]] = defaultdict(list)
    for path, a in found.items():
        groups[a.community].append(path)
    return sorted(sorted(g) for g in groups.values())


def test_a_star_an_orphan_and_two_groups() -> None:
    found = analyse(PATHS, EDGES)
    assert [p for p, a in found.items() if a.hub] == ["Star.md"]  # degree 6: the top 1%, and at least 5
    assert [p for p, a in found.items() if a.orphan] == ["Alone.md"]
    assert _groups(found) == sorted([A, B, sorted([*LEAVES, "Star.md"]), ["Alone.md"]])
    star = found["Star.md"]
    assert (star.in_degree, star.out_degree, star.rank, star.centrality) == (6, 0, 1, "top 1%")
    assert star.community == "Star.md"  # its leaves link only to it: they join its community
    assert found["A0.md"].out_degree == 4 and found["B0.md"].in_degree == 1
    assert sum(a.pagerank for a in found.values()) == pytest.approx(1.0)


def test_pagerank_by_hand() -> None:
    """a -> b, b links nowhere (its rank spreads over both): pa = 0.075 + 0.425 pb, pa + pb = 1, so pa = 0.5/1.425."""
    found = analyse(["a.md", "b.md"], [("a.md", "b.md"), ("a.md", "b.md"), ("b.md", "b.md"), ("a.md", "gone.md")])
    assert found["a.md"].pagerank == pytest.approx(0.5 / 1.425, abs=1e-9)
    assert found["b.md"].pagerank == pytest.approx(1 - 0.5 / 1.425, abs=1e-9)
    assert (found["b.md"].rank, found["a.md"].rank) == (1, 2)
    assert not found["b.md"].hub  # the most links, but fewer than 5


@pytest.mark.parametrize(
    ("place", "notes", "bucket"),
    [(1, 7, "top 1%"), (2, 7, "top 25%"), (4, 7, "top 50%"), (5, 7, "bottom 50%"), (10, 1000, "top 1%"),
     (11, 1000, "top 5%"), (500, 1000, "top 50%"), (501, 1000, "bottom 50%")],
)  # fmt: skip
def test_centrality_buckets(place: int, notes: int, bucket: str) -> None:
    assert centrality(place, notes) == bucket


def test_the_same_graph_in_any_order_gives_the_same_analytics() -> None:
    rng = random.Random(7)
    paths, edges = _vault(600)
    first = analyse(paths, edges)
    shuffled_paths, shuffled_edges = paths[:], edges[:]
    rng.shuffle(shuffled_paths)
    rng.shuffle(shuffled_edges)
    assert analyse(shuffled_paths, shuffled_edges) == first
    assert len({a.community for a in first.values()}) > 10


@cache
def _vault(n: int) -> tuple[list[str], list[tuple[str, str]]]:
    """A vault-like graph of ``n`` notes: groups of 20, most links inside the group, a few index notes."""
    rng = random.Random(n)
    paths = [f"G{i // 20}/N{i}.md" for i in range(n)]
    edges = []
    for i in range(n):
        group = i // 20 * 20
        edges += [(paths[i], paths[min(group + rng.randrange(20), n - 1)]) for _ in range(5)]
        edges.append((paths[i], paths[rng.randrange(n)]))
        if rng.random() < 0.3:
            edges.append((paths[i], paths[rng.randrange(max(n // 100, 1))]))
    return paths, edges


def test_analytics_grow_linearly() -> None:
    assert_linear(lambda n: analyse(*_vault(n)), "graph analytics", start=512)
