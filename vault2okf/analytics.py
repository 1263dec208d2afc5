"""Graph analytics of the resolved link graph, per note: PageRank, a community, in- and out-degree, and the hub
and orphan flags (issue 25 point 3). Pure: paths and edges in, one ``NoteAnalytics`` per note out.

The graph: one node per note, one directed edge per (source, target) pair of notes linked at least once, the
edges ``okf.duckdb``'s ``links`` gives with ``target_id IS NOT NULL AND target_id <> source_id`` (resolved,
alias, overridden, ambiguous and missing-block links; a note's links to itself, broken links and attachments
are not edges). The rules:

- **PageRank**: directed, damping 0.85, a note with no out-links spreads its rank over every note; power
  iteration until the ranks move less than 1e-10 in total (at most 200 rounds). The ranks sum to 1.
- **rank** and **centrality**: a note's place by PageRank (1 = most central; PageRank is kept to 12 significant
  digits, and equal ones share the better place) and its bucket: ``top 1%``, ``top 5%``, ``top 10%``, ``top 25%``,
  ``top 50%`` or ``bottom 50%`` (top p% = a place at most ceil(p% of the notes)).
- **community**: Louvain (modularity, resolution 1) on the undirected graph without the hubs, each pair of
  notes linked either way one edge of weight 1; nodes visited in vault-path order, a node moves only to a
  community that gains more than 1e-12 (candidates in the order of its neighbours, the first best wins), levels
  aggregated until nothing moves. A community is named by its most central member (highest PageRank, then
  vault path). Then each hub joins the community most of its neighbours are in (the first name on a tie; a
  community of its own when they are all hubs or satellites), and each satellite (a note linked with hubs
  only) the community of its most central hub. A note with no links is a community of its own.
  Why without the hubs: an index note linked with a fifth of the vault glues unrelated notes together. On
  thellade, with the hubs in, the two largest communities are named after cosmology index notes (287 and 280
  notes); without them, after factions (268, 157, 152). Both move with small changes (Louvain does): over 60
  random one-link additions and removals, 37 moved no note without the hubs (90th percentile 112, worst 276),
  41 with them (90th percentile 9 to 32, worst 540).
- **hub**: in-degree + out-degree at least ``HUB_MIN_DEGREE`` and at least that of the note in place
  ceil(1% of the notes) when notes are sorted by it: about the top 1% by degree, ties included, never a note
  with few links in a small vault.
- **orphan**: no edge in or out.

Everything is a function of the set of notes and the set of edges, in sorted order, so the same vault gives
the same analytics whichever convert (full or incremental) computes them.
"""

from __future__ import annotations

import hashlib
import math
import operator
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

DAMPING = 0.85
TOLERANCE = 1e-10  # L1 change of the whole rank vector between two rounds
MAX_ROUNDS = 200
BUCKETS = (1, 5, 10, 25, 50)  # top p% of notes by PageRank
HUB_SHARE = 0.01
HUB_MIN_DEGREE = 5
_GAIN = 1e-12  # a move must gain more modularity than this (a float's noise), so Louvain ends


@dataclass(frozen=True)
class NoteAnalytics:
    """One note's place in the link graph (the module's docstring has the rules)."""

    path: str
    pagerank: float
    rank: int
    centrality: str
    community: str  # vault path of the community's most central member
    in_degree: int
    out_degree: int
    hub: bool
    orphan: bool


def analyse(paths: Sequence[str], edges: Iterable[tuple[str, str]]) -> dict[str, NoteAnalytics]:
    """Each note's analytics, by vault path; an edge whose ends are not both in ``paths`` is left out."""
    nodes = sorted(set(paths))
    index = {p: i for i, p in enumerate(nodes)}
    pairs = sorted({(index[s], index[t]) for s, t in edges if s != t and s in index and t in index})
    n = len(nodes)
    out: list[list[int]] = [[] for _ in range(n)]
    into: list[list[int]] = [[] for _ in range(n)]
    for s, t in pairs:
        out[s].append(t)
        into[t].append(s)
    ranks = pagerank(out, into)
    place = _places(ranks)
    degree = [len(out[i]) + len(into[i]) for i in range(n)]
    hub_at = hub_threshold(degree)
    hub = [d >= hub_at for d in degree]
    named = _communities_named(nodes, ranks, pairs, [{*out[i], *into[i]} for i in range(n)], hub)
    return {p: _note(p, i, ranks, place, named, out, into, hub) for i, p in enumerate(nodes)}


def graph_key(paths: Iterable[str], edges: Iterable[tuple[str, str]]) -> str:
    """What ``analyse`` reads, as a digest: the notes and the edges between two of them, in sorted order. The
    last convert's analytics are reused while it is the same (an edit of text alone, a link added beside one
    to the same note): they are a function of it alone."""
    nodes = sorted(set(paths))
    known = set(nodes)
    pairs = sorted({(s, t) for s, t in edges if s != t and s in known and t in known})
    sha = hashlib.sha256()
    for part in (nodes, pairs):
        sha.update(repr(part).encode("utf-8", "surrogatepass"))
        sha.update(b"\0")
    return sha.hexdigest()


def as_tuple(a: NoteAnalytics) -> tuple[Any, ...]:
    """A note's analytics as the convert cache keeps them (``from_tuple`` reads them back)."""
    return (a.pagerank, a.rank, a.centrality, a.community, a.in_degree, a.out_degree, a.hub, a.orphan)


def from_tuple(path: str, t: tuple[Any, ...]) -> NoteAnalytics:
    return NoteAnalytics(path, *t)


def _note(p: str, i: int, ranks: list[float], place: list[int], named: list[str], out: list[list[int]],
          into: list[list[int]], hub: list[bool]) -> NoteAnalytics:  # fmt: skip
    return NoteAnalytics(
        path=p, pagerank=ranks[i], rank=place[i], centrality=centrality(place[i], len(ranks)), community=named[i],
        in_degree=len(into[i]), out_degree=len(out[i]), hub=hub[i], orphan=not (out[i] or into[i]),
    )  # fmt: skip


def _communities_named(nodes: Sequence[str], keys: Sequence[float], pairs: Sequence[tuple[int, int]],
                       neighbours: Sequence[set[int]], hub: Sequence[bool]) -> list[str]:  # fmt: skip
    """Each node's community, by name: Louvain without the hubs, each community named by its most central
    member; then each hub joins the community most of its other neighbours are in (the first name on a tie; its
    own if none), and each satellite (a note linked with hubs only) the community of its most central hub."""
    satellite = [not hub[i] and bool(ns) and all(hub[j] for j in ns) for i, ns in enumerate(neighbours)]
    members = communities(len(nodes), [(s, t) for s, t in pairs if not (hub[s] or hub[t])])
    head: dict[int, int] = {}
    for i, c in enumerate(members):
        if not (hub[i] or satellite[i]) and (c not in head or keys[i] > keys[head[c]]):
            head[c] = i
    named = [nodes[head[c]] if c in head else nodes[i] for i, c in enumerate(members)]
    for i in (i for i, h in enumerate(hub) if h):  # from the others' names only: the order does not matter
        counts = Counter(named[j] for j in neighbours[i] if not (hub[j] or satellite[j]))
        named[i] = min(counts, key=lambda c: (-counts[c], c), default=nodes[i])
    for i in (i for i, s in enumerate(satellite) if s):
        named[i] = named[min(neighbours[i], key=lambda j: (-keys[j], nodes[j]))]
    return named


def pagerank(out: Sequence[Sequence[int]], into: Sequence[Sequence[int]]) -> list[float]:
    """PageRank by power iteration, to 12 significant digits: ``out[i]`` the nodes ``i`` links to, ``into[i]``
    those linking to it."""
    n = len(out)
    if n == 0:
        return []
    ranks = [1.0 / n] * n
    dangling = [i for i in range(n) if not out[i]]
    # a node's in-links summed exactly (math.fsum), in any order; a sum of one or two terms is one correctly rounded
    # addition (or none) already, the same float as fsum's: the nodes with three or more alone go through fsum
    many = [(i, operator.itemgetter(*ins)) for i, ins in enumerate(into) if len(ins) > 2]  # a tuple of the shares
    two = [(i, ins[0], ins[1]) for i, ins in enumerate(into) if len(ins) == 2]
    one = [(i, ins[0]) for i, ins in enumerate(into) if len(ins) == 1]
    lengths = [len(o) for o in out]
    for _ in range(MAX_ROUNDS):
        share = [DAMPING * r / k if k else 0.0 for r, k in zip(ranks, lengths, strict=True)]
        base = (1.0 - DAMPING) / n + DAMPING * math.fsum(ranks[i] for i in dangling) / n
        new = [base + 0.0] * n  # no in-link: base + fsum([]) (0.0)
        for i, shares in many:
            new[i] = base + math.fsum(shares(share))
        for i, j, k in two:
            new[i] = base + (share[j] + share[k])
        for i, j in one:
            new[i] = base + share[j]
        moved = sum(map(abs, map(operator.sub, new, ranks)))  # the same terms in the same order as a loop's
        ranks = new
        if moved < TOLERANCE:
            break
    return [_rank_key(r) for r in ranks]


def communities(n: int, pairs: Iterable[tuple[int, int]]) -> list[int]:
    """Louvain communities of ``n`` nodes joined by ``pairs`` (directed; read as undirected edges of weight 1):
    each node's community, numbered from 0 in the order of their first member."""
    adjacency: list[dict[int, float]] = [{} for _ in range(n)]
    for s, t in pairs:
        adjacency[s][t] = adjacency[t][s] = 1.0
    member = list(range(n))  # original node -> node of the current level
    while True:
        moved, level = _one_level(adjacency)
        member = [level[m] for m in member]
        if not moved:
            return member
        adjacency = _aggregate(adjacency, level)


def _one_level(adjacency: list[dict[int, float]]) -> tuple[bool, list[int]]:
    """Louvain's local moving over one level's graph (self-loops hold weight inside a node): whether any node
    moved, and each node's community, renumbered from 0 in node order."""
    n = len(adjacency)
    degree = [sum(a.values()) + a.get(i, 0.0) for i, a in enumerate(adjacency)]  # a self-loop counts twice
    m2 = sum(degree)
    community = list(range(n))
    total = degree[:]  # sum of the degrees of each community's nodes
    moved_any = False
    while m2 > 0:
        moved = False
        for i in range(n):
            own, k = community[i], degree[i]
            weights: dict[int, float] = {}
            for j, w in adjacency[i].items():
                if j != i:
                    weights[community[j]] = weights.get(community[j], 0.0) + w
            total[own] -= k
            best, best_gain = own, weights.get(own, 0.0) - total[own] * k / m2
            for c in weights:  # in the order of i's neighbours: the first best wins
                gain = weights[c] - total[c] * k / m2
                if gain > best_gain + _GAIN:
                    best, best_gain = c, gain
            total[best] += k
            if best != own:
                community[i], moved = best, True
        if not moved:
            break
        moved_any = True
    numbers: dict[int, int] = {}
    return moved_any, [numbers.setdefault(c, len(numbers)) for c in community]


def _aggregate(adjacency: list[dict[int, float]], level: list[int]) -> list[dict[int, float]]:
    """The next level's graph: one node per community, the weights between them summed, inside ones as a
    self-loop (each edge inside counted once)."""
    merged: list[dict[int, float]] = [{} for _ in range(max(level, default=-1) + 1)]
    for i, neighbours in enumerate(adjacency):
        a = merged[level[i]]
        for j, w in neighbours.items():
            c = level[j]
            if c == level[i] and j != i:
                w /= 2  # an edge inside a community is seen from both ends
            a[c] = a.get(c, 0.0) + w
    return merged


def _rank_key(rank: float) -> float:
    """A rank to 12 significant digits: what is written, and what places compare (a last-bit difference in the
    arithmetic never shows; equal ranks reached in another order compare equal)."""
    return float(f"{rank:.12g}")


def _places(keys: Sequence[float]) -> list[int]:
    """1 + how many notes rank strictly higher, for each note."""
    order = sorted(keys, reverse=True)
    first: dict[float, int] = {}
    for i, key in enumerate(order):
        first.setdefault(key, i + 1)
    return [first[key] for key in keys]


def centrality(place: int, notes: int) -> str:
    """The PageRank bucket of a note in ``place`` among ``notes``."""
    for share in BUCKETS:
        if place <= max(1, math.ceil(notes * share / 100)):
            return f"top {share}%"
    return "bottom 50%"


def hub_threshold(degrees: Sequence[int]) -> int:
    """The least in+out degree of a hub: that of the note at place ceil(1%) by degree, and ``HUB_MIN_DEGREE``."""
    if not degrees:
        return HUB_MIN_DEGREE
    ranked = sorted(degrees, reverse=True)
    return max(HUB_MIN_DEGREE, ranked[math.ceil(len(ranked) * HUB_SHARE) - 1])


def frontmatter(a: NoteAnalytics) -> dict[str, Any]:
    """What a concept doc's ``graph`` key holds: the fields that move only when the note's own neighbourhood
    does, or its PageRank bucket. PageRank itself moves a little with every link anywhere, and the community
    with many (Louvain regroups: one link added to a random graph of 1,000 notes, 3,000 links, changed the
    community of 83-94% of the notes in four tries, the other fields of 2-13): both stay in okf.duckdb, so one
    edit rewrites the docs it touches, not the vault."""
    return {
        "centrality": a.centrality,
        "links_in": a.in_degree,
        "links_out": a.out_degree,
        "hub": a.hub,
        "orphan": a.orphan,
    }
