"""Graph analytics written back (issue 25 point 3): PageRank, communities, degrees and the hub and orphan flags of
every note (``vault2okf/analytics.py``), in ``okf.duckdb`` (``analytics``, beside the ``sessions`` view) and in each
concept doc's ``graph`` key; an incremental convert gives what a full one does."""

from __future__ import annotations

import math
import random
import shutil
from collections import defaultdict
from functools import cache
from pathlib import Path

import duckdb
import pytest
import yaml
from growth import assert_linear

from vault2okf import analytics, db
from vault2okf.analytics import analyse, centrality
from vault2okf.convert import convert

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


def _fsum_pagerank(out: list[list[int]], into: list[list[int]]) -> list[float]:
    """PageRank as the module's rules say it, each node's in-links summed with math.fsum, unrounded."""
    n = len(out)
    ranks = [1.0 / n] * n
    dangling = [i for i in range(n) if not out[i]]
    for _ in range(analytics.MAX_ROUNDS):
        share = [analytics.DAMPING * r / len(o) if o else 0.0 for r, o in zip(ranks, out, strict=True)]
        base = (1.0 - analytics.DAMPING) / n + analytics.DAMPING * math.fsum(ranks[i] for i in dangling) / n
        new = [base + math.fsum(share[j] for j in ins) for ins in into]
        moved = sum(abs(a - b) for a, b in zip(new, ranks, strict=True))
        ranks = new
        if moved < analytics.TOLERANCE:
            break
    return ranks


def test_pagerank_sums_each_nodes_in_links_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    """``pagerank`` adds one or two in-links with a plain addition and three or more with fsum: the very floats
    of fsum over every node, round by round (so the same rounds, the same 12 digits)."""
    monkeypatch.setattr(analytics, "_rank_key", lambda r: r)
    for seed in range(30):
        rng = random.Random(seed)
        n = rng.choice([1, 2, 3, 10, 300])
        edges = {(rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, n * rng.choice([1, 2, 5])))}
        out: list[list[int]] = [[] for _ in range(n)]
        into: list[list[int]] = [[] for _ in range(n)]
        for s, t in sorted(edges):
            if s != t:
                out[s].append(t)
                into[t].append(s)
        assert analytics.pagerank(out, into) == _fsum_pagerank(out, into), seed


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


# -- written back: okf.duckdb and the docs -----------------------------------------------------------------------

NOTES = {
    **{p: " ".join(f"[[{t[:-3]}]]" for s, t in EDGES if s == p) + "\n" for p in PATHS},
    "Sessions/Session 10.md": "The last one.\n",
    "Sessions/Session 2.md": "The second.\n",
    "Sessions/Session 1.md": "The first.\n",
    "Other/Session 1.md": "Another table's first.\n",
    "Own.md": "---\ngraph: its own\n---\nA note with a property of that name.\n",
}


def _write(vault: Path, notes: dict[str, str]) -> None:
    for path, text in notes.items():
        (vault / path).parent.mkdir(parents=True, exist_ok=True)
        (vault / path).write_text(text, "utf-8")


def _front(bundle: Path, doc: str) -> dict:
    text = (bundle / "concepts" / doc).read_text("utf-8")
    return yaml.safe_load(text.split("---\n")[1])


def _rows(bundle: Path, sql: str) -> list[tuple]:
    with duckdb.connect(str(bundle / "okf.duckdb"), read_only=True) as con:
        return con.execute(sql).fetchall()


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("analytics")
    _write(root / "vault", NOTES)
    convert(root / "vault", root / "bundle")
    return root / "bundle"


def test_the_analytics_table_and_the_graph_key(bundle: Path) -> None:
    assert _rows(bundle, "SELECT value FROM meta WHERE key = 'schema_version'") == [(str(db.SCHEMA_VERSION),)]
    assert db.SCHEMA_VERSION == 3
    rows = _rows(bundle, "SELECT id, rank, community, in_degree, out_degree, hub, orphan FROM analytics")
    assert len(rows) == len(NOTES) and [r[0] for r in rows] == sorted(r[0] for r in rows)  # concepts' order
    assert _rows(bundle, "SELECT id FROM analytics WHERE hub") == [("Star",)]
    orphans = {r[0] for r in _rows(bundle, "SELECT id FROM analytics WHERE orphan")}
    sessions = {"Sessions/Session 10", "Sessions/Session 2", "Sessions/Session 1", "Other/Session 1"}
    assert orphans == {"Alone", "Own", *sessions}
    assert _rows(bundle, "SELECT count(*) FROM analytics WHERE community = 'Star'") == [(7,)]
    assert _front(bundle, "Star.md")["graph"] == {
        "centrality": "top 1%", "links_in": 6, "links_out": 0, "hub": True, "orphan": False,
    }  # fmt: skip
    assert _rows(bundle, "SELECT community FROM analytics WHERE id = 'Leaf 0'") == [("Star",)]
    assert list(_front(bundle, "Alone.md"))[:7] == ["type", "title", "description", "resource", "timestamp", "tags",
                                                     "graph"]  # fmt: skip
    assert _front(bundle, "Own.md")["graph"] == "its own"  # the note's own property wins


def test_the_sessions_view_orders_each_folder(bundle: Path) -> None:
    rows = _rows(bundle, "SELECT series, position, id, previous_id, next_id FROM sessions ORDER BY series, position")
    assert rows == [
        ("Other", 1, "Other/Session 1", None, None),
        ("Sessions", 1, "Sessions/Session 1", None, "Sessions/Session 2"),
        ("Sessions", 2, "Sessions/Session 2", "Sessions/Session 1", "Sessions/Session 10"),  # by number, not name
        ("Sessions", 3, "Sessions/Session 10", "Sessions/Session 2", None),
    ]


def test_an_incremental_convert_rewrites_the_docs_whose_graph_moved(tmp_path: Path, bundle: Path) -> None:
    vault = tmp_path / "vault"
    shutil.copytree(bundle.parent / "vault", vault)
    convert(vault, tmp_path / "inc")
    _write(vault, {"Alone.md": "Now linked: [[B3]] and [[Sessions/Session 2]].\n"})
    result = convert(vault, tmp_path / "inc")
    full = convert(vault, tmp_path / "full", full=True)
    assert 0 < result.reused < full.notes  # the edited note, and the notes it now links to
    assert _front(tmp_path / "inc", "B3.md")["graph"]["links_in"] == 4
    assert not _front(tmp_path / "inc", "Sessions/Session 2.md")["graph"]["orphan"]
    docs = sorted((tmp_path / "full" / "concepts").rglob("*.md"))
    for doc in docs:
        assert (tmp_path / "inc" / doc.relative_to(tmp_path / "full")).read_bytes() == doc.read_bytes(), doc
    sql = "SELECT * FROM analytics"
    assert _rows(tmp_path / "inc", sql) == _rows(tmp_path / "full", sql)
