"""Neighbour rankers: which one-hop neighbours of the seed notes enter the context under the cap.

Each ranker scores candidate notes (higher is better) from a ``HopInput``; ``order`` sorts them. One module
each:
- ``dense``: similarity of the question to the neighbour's best chunk (repeats the embedding's view);
- ``dense-hub``: ``dense`` divided by log2(2 + degree), a penalty for hub notes;
- ``context``: similarity of the question to the sentences that link the neighbour to a seed;
- ``support``: how many seeds link it, weighted by how well those seeds matched;
- ``lexical``: BM25 of the question over the neighbour's title, aliases and text;
- ``lex-dense`` (the default search's, see reports/ranker-selection.md): reciprocal rank fusion of lexical
  and dense;
- ``lex-dense-hub``: reciprocal rank fusion of lexical and dense-hub;
- ``lex-dense-pr``, ``lex-dense-comm``, ``lex-dense-hub-comm`` (``prior``: the bundle's graph analytics): the
  same fusions with a PageRank prior on dense, or a bonus for a note in the community of a seed that reached it;
- ``rrf``: reciprocal rank fusion of context, support, lexical and dense;
- ``rrf-lex``: reciprocal rank fusion of context, support and lexical (no dense);
- ``file``: vault path order, the naive baseline.
"""

from retriever.rankers.base import HopInput, Ranker, Scores, order
from retriever.rankers.baseline import file_order
from retriever.rankers.context import context
from retriever.rankers.dense import dense, dense_hub
from retriever.rankers.fusion import RRF_K, fuse, rrf
from retriever.rankers.lexical import lexical
from retriever.rankers.prior import dense_comm, dense_hub_comm, dense_pr
from retriever.rankers.support import support
from retriever.spec import RankerName as _RankerName

RANKERS: dict[str, Ranker] = {
    "dense": dense,
    "dense-hub": dense_hub,
    "context": context,
    "support": support,
    "lexical": lexical,
    "lex-dense": fuse(lexical, dense),
    "lex-dense-hub": fuse(lexical, dense_hub),
    "lex-dense-pr": fuse(lexical, dense_pr),
    "lex-dense-comm": fuse(lexical, dense_comm),
    "lex-dense-hub-comm": fuse(lexical, dense_hub_comm),
    "rrf": fuse(context, support, lexical, dense),
    "rrf-lex": fuse(context, support, lexical),
    "file": file_order,
}
RankerName = _RankerName  # for option parsing (the names are `retriever.spec.RANKER_NAMES`, which must agree)

__all__ = [
    "RANKERS", "RRF_K", "HopInput", "Ranker", "RankerName", "Scores", "context", "dense", "dense_comm", "dense_hub",
    "dense_hub_comm", "dense_pr", "file_order", "fuse", "lexical", "order", "rrf", "support",
]  # fmt: skip
