"""BM25 over raw term counts: built once, then updated by the documents an edit changed, scored at query time.

A BM25 score depends on the whole collection (the average document length, each term's document frequency), so
an index of scores must be rebuilt whenever any document changes. An index of counts does not: each document's
column entries and length are its own, so an edit replaces the entries of the documents it changed and keeps the
rest as they are (`Bm25.updated`), and the global parts are worked out when a question is scored. The scores are
bm25s's (Lucene BM25, k1 1.5, b 0.75), computed with its arithmetic step for step, so they are equal bit for bit
(tests/test_coldstart.py builds bm25s's index beside ours) and an updated index scores exactly as one built anew.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from retriever.cachefile import blob, unblob

K1 = 1.5  # bm25s's defaults
B = 0.75


@dataclass(frozen=True)
class Bm25:
    """For each term a column of (document, count) pairs in CSC layout (documents ascending within a column), each
    document's length in terms, and the terms by column. A column may be empty (a term no document holds any more:
    it scores nothing, as an unknown term does)."""

    terms: tuple[str, ...] | list[str]  # column -> term
    indptr: np.ndarray  # where each column starts (one more than there are columns)
    docs: np.ndarray  # the document of each count
    counts: np.ndarray  # how often the column's term occurs in that document
    lengths: np.ndarray  # each document's number of terms

    @property
    def num_docs(self) -> int:
        return len(self.lengths)

    @cached_property
    def vocab(self) -> dict[str, int]:
        """term -> column."""
        return dict(zip(self.terms, range(len(self.terms)), strict=True))

    @cached_property
    def encoded(self) -> tuple[np.ndarray, np.ndarray]:
        """The terms as `cachefile.blob` writes them: kept from the file they were read from, and extended by
        ``updated`` with the terms it adds (a pair index holds some 10^5 terms: encoding each again costs more than
        the update)."""
        return blob(list(self.terms))

    @cached_property
    def _norm(self) -> np.ndarray:
        """Each document's ``k1 * (1 - b + b * length / average length)``, as bm25s computes it (a float64 mean)."""
        average = np.asarray(self.lengths, dtype=np.int64).mean()
        return K1 * ((1 - B) + B * np.asarray(self.lengths, dtype=np.float64) / average)

    @classmethod
    def build(cls, docs: list[list[str]]) -> Bm25:
        """The index of ``docs`` (lists of terms)."""
        return EMPTY.updated(np.zeros(0, dtype=np.int64), dict(enumerate(docs)), len(docs))

    def get_scores(self, query: list[str]) -> np.ndarray:
        """Each document's BM25 score for ``query`` (float32), its terms' columns added in query order, as bm25s
        adds its score columns."""
        scores = np.zeros(self.num_docs, dtype=np.float32)
        for term in query:
            column = self.vocab.get(term)
            if column is None:
                continue
            start, end = int(self.indptr[column]), int(self.indptr[column + 1])
            if start == end:
                continue
            docs = self.docs[start:end]
            counts = self.counts[start:end].astype(np.float64)
            idf = np.float32(bm25_idf(self.num_docs, end - start))
            # bm25s: tf / (k1 * (...) + tf) in float64, times the float32 idf, stored as float32
            column_scores = (np.float64(idf) * (counts / (self._norm[docs] + counts))).astype(np.float32)
            np.add.at(scores, docs, column_scores)
        return scores

    def df(self, term: str) -> int:
        """How many documents hold ``term``."""
        column = self.vocab.get(term)
        return 0 if column is None else int(self.indptr[column + 1] - self.indptr[column])

    def idf(self, term: str) -> float:
        """``term``'s inverse document frequency in this index (`bm25_idf`)."""
        return bm25_idf(self.num_docs, self.df(term))

    def contents(self) -> tuple[dict[str, dict[int, int]], list[int]]:
        """term -> {document: count}, and each document's length (for tests: `Parted.contents`)."""
        return Parted([Part(self, np.arange(self.num_docs, dtype=np.int64))], self.num_docs).contents()

    def updated(self, moved: np.ndarray, fresh: Mapping[int, list[str]], num_docs: int) -> Bm25:
        """This index after an edit: ``moved[i]`` is the new place of document ``i`` (-1: gone or changed; the kept
        ones in the same order as before), ``fresh`` the terms of each new or changed document by its new place,
        ``num_docs`` how many there are now. Costs what the edit touched plus a few passes of numpy over the
        counts; the result equals `build` of the new documents but for the numbering of the terms."""
        moved = np.asarray(moved, dtype=np.int64)
        columns = np.repeat(np.arange(len(self.terms), dtype=np.int64), np.diff(self.indptr))
        where = moved[self.docs] if len(self.docs) else np.zeros(0, dtype=np.int64)
        kept = where >= 0
        columns, docs, counts = columns[kept], where[kept], np.asarray(self.counts, dtype=np.int64)[kept]
        lengths = np.zeros(num_docs, dtype=np.int64)
        lengths[moved[moved >= 0]] = np.asarray(self.lengths, dtype=np.int64)[moved >= 0]
        terms: list[str] = list(self.terms)
        vocab = dict(self.vocab)
        add_columns, add_docs, add_counts = [], [], []
        for doc, found in fresh.items():
            lengths[doc] = len(found)
            for term, count in Counter(found).items():
                column = vocab.get(term)
                if column is None:
                    column = vocab[term] = len(terms)
                    terms.append(term)
                add_columns.append(column)
                add_docs.append(doc)
                add_counts.append(count)
        new_columns, new_docs = np.array(add_columns, dtype=np.int64), np.array(add_docs, dtype=np.int64)
        order = np.lexsort((new_docs, new_columns))
        new_columns, new_docs = new_columns[order], new_docs[order]
        new_counts = np.array(add_counts, dtype=np.int64)[order]
        at = np.searchsorted(columns * max(num_docs, 1) + docs, new_columns * max(num_docs, 1) + new_docs)
        columns = np.insert(columns, at, new_columns)
        docs, counts = np.insert(docs, at, new_docs), np.insert(counts, at, new_counts)
        widths = np.bincount(columns, minlength=len(terms))
        extended = "encoded" in self.__dict__
        if 4 * int(np.count_nonzero(widths == 0)) > len(terms):  # many terms no document holds any more: dropped
            alive = widths > 0
            terms, widths = [t for t, a in zip(terms, alive.tolist(), strict=True) if a], widths[alive]
            vocab, extended = {}, False  # numbered anew: built again when a question needs it
        indptr = np.zeros(len(terms) + 1, dtype=np.int64)
        np.cumsum(widths, out=indptr[1:])
        index = Bm25(terms, indptr, _smallest(docs), _smallest(counts), _smallest(lengths))
        if vocab:
            index.__dict__["vocab"] = vocab  # built here already
        if extended:
            data, ends = self.encoded
            more, more_ends = blob(terms[len(self.terms) :])
            offset = int(ends[-1]) if len(ends) else 0
            index.__dict__["encoded"] = (np.concatenate([data, more]), np.concatenate([ends, more_ends + offset]))
        return index

    def arrays(self, kind: str) -> dict[str, np.ndarray]:
        """The index as arrays for an .npz (`from_arrays` reads them back)."""
        data, ends = self.encoded
        return {
            f"{kind}_terms": data,
            f"{kind}_terms_ends": ends,
            f"{kind}_indptr": self.indptr,
            f"{kind}_docs": self.docs,
            f"{kind}_counts": self.counts,
            f"{kind}_lengths": self.lengths,
        }

    @classmethod
    def from_arrays(cls, data: Any, kind: str) -> Bm25:
        """The index `arrays` wrote; ValueError when its arrays do not fit together."""
        encoded = np.asarray(data[f"{kind}_terms"]), np.asarray(data[f"{kind}_terms_ends"])
        terms = unblob(*encoded)
        index = cls(
            terms,
            np.asarray(data[f"{kind}_indptr"]),
            np.asarray(data[f"{kind}_docs"]),
            np.asarray(data[f"{kind}_counts"]),
            np.asarray(data[f"{kind}_lengths"]),
        )
        indptr, n = index.indptr, index.num_docs
        if len(indptr) != len(terms) + 1 or indptr[0] != 0 or indptr[-1] != len(index.docs):
            raise ValueError(f"{kind}: the saved BM25 columns do not fit their counts")
        if len(index.counts) != len(index.docs) or np.any(np.diff(indptr) < 0):
            raise ValueError(f"{kind}: the saved BM25 counts do not fit their documents")
        if len(index.docs) and (int(index.docs.min()) < 0 or int(index.docs.max()) >= n):
            raise ValueError(f"{kind}: a saved BM25 count names a document that is not there")
        index.__dict__["encoded"] = encoded
        return index


@dataclass(frozen=True)
class Part:
    """Some documents' counts and the row each document scores for (-1: none, a document replaced since)."""

    index: Bm25
    rows: np.ndarray  # int64, one per document of ``index``


class Parted:
    """BM25 over documents held in parts: the index of a saved table's documents, the ones replaced since left out
    (their rows -1), beside an index of the documents that replaced them. Nothing is merged: an edit costs the
    documents it touched. Scores, document frequencies and lengths are those of the live documents alone, so every
    score equals the one `Bm25.build` of the live documents gives, bit for bit: each document is in one part, its
    columns are added in the question's order, and the sums that make the average length are exact."""

    def __init__(self, parts: Sequence[Part], num_rows: int) -> None:
        self.parts = tuple(parts)
        self.num_docs = num_rows  # every row is one live document of one part
        total = 0
        for part in self.parts:
            lengths = np.asarray(part.index.lengths, dtype=np.int64)
            total += int(lengths[part.rows >= 0].sum()) if len(lengths) else 0
        self._average = np.float64(total) / num_rows if num_rows else np.float64("nan")

    def _column(self, part: Part, term: str) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        """The live rows holding ``term`` in ``part``, with their counts and lengths."""
        column = part.index.vocab.get(term)
        if column is None:
            return None
        start, end = int(part.index.indptr[column]), int(part.index.indptr[column + 1])
        docs = np.asarray(part.index.docs[start:end], dtype=np.int64)
        rows = part.rows[docs]
        live = rows >= 0
        lengths = np.asarray(part.index.lengths, dtype=np.float64)[docs[live]]
        return rows[live], part.index.counts[start:end][live].astype(np.float64), lengths

    def get_scores(self, query: list[str]) -> np.ndarray:
        """Each row's BM25 score for ``query`` (float32), as `Bm25.get_scores` of the live documents gives it."""
        scores = np.zeros(self.num_docs, dtype=np.float32)
        for term in query:
            found = [c for part in self.parts if (c := self._column(part, term)) is not None and len(c[0])]
            df = sum(len(c[0]) for c in found)
            if not df:
                continue
            idf = np.float32(bm25_idf(self.num_docs, df))
            for rows, counts, lengths in found:
                norm = K1 * ((1 - B) + B * lengths / self._average)
                np.add.at(scores, rows, (np.float64(idf) * (counts / (norm + counts))).astype(np.float32))
        return scores

    def df(self, term: str) -> int:
        """How many live documents hold ``term``."""
        return sum(len(c[0]) for part in self.parts if (c := self._column(part, term)) is not None)

    def idf(self, term: str) -> float:
        return bm25_idf(self.num_docs, self.df(term))

    def contents(self) -> tuple[dict[str, dict[int, int]], list[int]]:
        """term -> {row: count}, and each row's length: what the index holds, whatever its parts (for tests)."""
        columns: dict[str, dict[int, int]] = {}
        lengths = [0] * self.num_docs
        for part in self.parts:
            for doc, row in enumerate(part.rows.tolist()):
                if row >= 0:
                    lengths[row] = int(part.index.lengths[doc])
            for column, term in enumerate(part.index.terms):
                start, end = int(part.index.indptr[column]), int(part.index.indptr[column + 1])
                docs, counts = part.index.docs[start:end].tolist(), part.index.counts[start:end].tolist()
                for doc, count in zip(docs, counts, strict=True):
                    if part.rows[doc] >= 0:
                        columns.setdefault(term, {})[int(part.rows[doc])] = int(count)
        return columns, lengths


def bm25_idf(num_docs: int, df: int) -> float:
    """BM25's inverse document frequency (Lucene's, never negative), as bm25s computes it."""
    return math.log(1 + (num_docs - df + 0.5) / (df + 0.5))


EMPTY = Bm25((), np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.int32), np.zeros(0))


def _smallest(values: np.ndarray) -> np.ndarray:
    """``values`` (whole numbers, none negative) in the smallest unsigned type that holds them: a saved index is
    mostly these arrays, and most counts fit a byte."""
    top = int(values.max()) if len(values) else 0
    kind = np.uint8 if top <= 0xFF else np.uint16 if top <= 0xFFFF else np.uint32 if top <= 0xFFFFFFFF else np.int64
    return values.astype(kind)
