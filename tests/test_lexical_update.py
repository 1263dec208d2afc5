"""An edit's index costs what it touches (issue 38): the saved chunk table is patched with the edited notes' chunks
and the four BM25 indexes are updated by the documents that changed, and both must be exactly what a build from
scratch of the same bundle gives: the same rows and vectors, the same term counts, bit-equal scores.

The property tests run random edit sequences (a chunk's text changed, chunks added and removed, notes added,
deleted and renamed, titles and aliases changed) over small synthetic tables, no model; the last test edits a real
bundle (convert, then `index` with MiniLM and Chroma) and checks what a search reads after each edit."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from retriever.bm25 import Bm25
from retriever.cachefile import unblob
from retriever.memory import ChunkTable, Lexical, note_head
from retriever.store import StoredRow

WORDS = [
    *("lighthouse", "keeper", "cape", "harbour", "bell", "tower", "tide", "rope", "lamp", "oil", "crown", "iron"),
    *("river", "ferry", "warden", "grey", "north", "south", "market", "boat", "salt", "storm", "maren", "voss"),
    *("tam", "mira", "ash"),
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 14)))


def _table(notes: dict[str, list[str]], stamp: str = "s:1:1") -> ChunkTable:
    """The table `ChunkTable.from_store` reads of these notes (note -> chunk texts): note order, chunk order."""
    ids, note_ids, texts, rows_of = [], [], [], {}
    for note in sorted(notes):
        if notes[note]:
            rows_of[note] = list(range(len(ids), len(ids) + len(notes[note])))
        for i, text in enumerate(notes[note]):
            ids.append(f"{note}#{i}"), note_ids.append(note), texts.append(text)
    vectors = np.array([_vector(cid, text) for cid, text in zip(ids, texts, strict=True)]).reshape(len(ids), 4)
    vectors = vectors if ids else np.zeros((0, 1))  # as from_store reads an empty collection
    tokens = np.array([len(t.split()) for t in texts], dtype=np.int64)
    return ChunkTable(ids, note_ids, texts, tokens, vectors.astype(np.float32), rows_of, stamp)


def _vector(chunk_id: str, text: str) -> np.ndarray:
    seed = sum(map(ord, chunk_id + text))
    return np.random.default_rng(seed).random(4).astype(np.float32)


def _edit(rng: random.Random, notes: dict[str, list[str]], heads: dict[str, str]) -> None:
    """One random edit, in place."""
    kind = rng.choice(["text", "text", "grow", "shrink", "add", "delete", "rename", "head", "empty"])
    names = sorted(notes)
    note = rng.choice(names) if names else None
    if kind == "add" or note is None:
        new = f"Folder/Note {rng.randrange(10**6)}"
        notes[new] = [_text(rng) for _ in range(rng.randint(1, 3))]
        heads[new] = note_head(new.split("/")[-1], [rng.choice(WORDS)] if rng.random() < 0.5 else [])
    elif kind == "text" and notes[note]:
        notes[note][rng.randrange(len(notes[note]))] = _text(rng)
    elif kind == "grow":
        notes[note].append(_text(rng))
    elif kind == "shrink" and notes[note]:
        notes[note].pop()
    elif kind == "delete":
        del notes[note], heads[note]
    elif kind == "rename":
        new = f"Renamed/{note.split('/')[-1]} {rng.randrange(100)}"
        if new not in notes:
            notes[new], heads[new] = notes.pop(note), heads.pop(note)
    elif kind == "head":
        heads[note] = note_head(rng.choice(WORDS).title(), [rng.choice(WORDS) for _ in range(rng.randint(0, 2))])
    elif kind == "empty":
        notes[note] = []


def _counts(index: Bm25) -> tuple[dict[str, dict[int, int]], list[int]]:
    """An index's contents without its numbering of terms: term -> {document: count}, and the lengths."""
    columns = {}
    for column, term in enumerate(index.terms):
        start, end = int(index.indptr[column]), int(index.indptr[column + 1])
        if end > start:
            columns[term] = dict(zip(index.docs[start:end].tolist(), index.counts[start:end].tolist(), strict=True))
    return columns, index.lengths.tolist()


def _same_as_built(lexical: Lexical, rng: random.Random) -> None:
    built = Lexical(lexical.table, None, heads=dict(zip(lexical.note_ids, lexical.heads, strict=True)))
    for kind in ("chunks", "notes", "chunk_pairs", "note_pairs"):
        assert _counts(getattr(lexical, kind)) == _counts(getattr(built, kind)), kind
    for _ in range(12):
        question = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        for phrases in (False, True):
            got, want = lexical.chunk_scores(question, phrases=phrases), built.chunk_scores(question, phrases=phrases)
            assert np.array_equal(got, want), question
            assert lexical.note_scores(question, phrases=phrases) == built.note_scores(question, phrases=phrases)


@pytest.mark.parametrize("seed", range(3))
def test_scores_from_counts_are_bm25s_scores_bit_for_bit(seed: int) -> None:
    import bm25s

    rng = random.Random(seed)
    docs = [[rng.choice(WORDS) for _ in range(rng.choice([0, 1, 3, 8, 40]))] for _ in range(60)]
    reference = bm25s.BM25()
    reference.index(docs, show_progress=False)
    ours = Bm25.build(docs)
    for _ in range(200):
        query = [rng.choice(WORDS) for _ in range(rng.randint(1, 5))]
        known = [t for t in query if t in reference.vocab_dict]
        want = reference.get_scores(known) if known else np.zeros(len(docs), dtype=np.float32)
        assert np.array_equal(ours.get_scores(query), want), query


@pytest.mark.parametrize("seed", range(6))
def test_updated_indexes_equal_indexes_built_anew(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    notes = {f"Folder/Note {i}": [_text(rng) for _ in range(rng.randint(0, 3))] for i in range(12)}
    heads = {note: note_head(note.split("/")[-1], []) for note in notes}
    lexical = Lexical(_table(notes, "s:0"), None, heads=heads)
    for step in range(1, 25):
        for _ in range(rng.randint(1, 3)):
            _edit(rng, notes, heads)
        table = _table(notes, f"s:{step}")
        lexical = lexical.updated(table, dict(heads))
        _same_as_built(lexical, rng)
        if step % 3 == 0:  # through the saved file, as the next `index` reads it (the terms' bytes extended)
            path = tmp_path / "lexical.npz"
            lexical.save(path)
            loaded = Lexical.saved_for(table, path)
            assert loaded is not None and not loaded.stale
            assert loaded.note_scores("keeper of the lighthouse") == lexical.note_scores("keeper of the lighthouse")
            lexical = loaded


def test_terms_no_document_holds_are_dropped_and_the_scores_stay() -> None:
    first = Bm25.build([[f"old{i}" for i in range(40)], ["kept", "term"], ["kept"]])
    assert unblob(*first.encoded) == list(first.terms)  # the terms' bytes, as a file read gives them
    moved = np.array([-1, 0, 1])  # the first document is replaced by one without its 40 terms
    updated = first.updated(moved, {2: ["new", "kept"]}, 3)
    assert "old0" not in updated.terms and len(updated.terms) == 3  # numbered anew
    built = Bm25.build([["kept", "term"], ["kept"], ["new", "kept"]])
    assert _counts(updated) == _counts(built)
    assert np.array_equal(updated.get_scores(["kept", "new", "old3"]), built.get_scores(["kept", "new", "old3"]))
    assert unblob(*updated.encoded) == list(updated.terms)


@pytest.mark.parametrize("seed", range(4))
def test_a_patched_table_is_the_table_read_anew(seed: int) -> None:
    rng = random.Random(seed)
    notes = {f"Folder/Note {i}": [_text(rng) for _ in range(rng.randint(0, 3))] for i in range(10)}
    heads = {note: "" for note in notes}
    table = _table(notes)
    for _ in range(15):
        before = {n: list(t) for n, t in notes.items()}
        for _ in range(rng.randint(1, 3)):
            _edit(rng, notes, heads)
        changed = {n for n in {*before, *notes} if before.get(n) != notes.get(n)}
        want = _table(notes)
        rows = [
            StoredRow(want.ids[r], want.texts[r], {"note_id": n, "tokens": int(want.tokens[r])}, want.vectors[r])
            for n in sorted(changed)
            for r in reversed(want.rows_of.get(n, []))  # the store's order is not the table's
        ]
        table = table.patched(changed, rows)
        assert (table.ids, table.note_ids, table.texts, table.rows_of) == (
            want.ids, want.note_ids, want.texts, want.rows_of,
        )  # fmt: skip
        assert np.array_equal(table.tokens, want.tokens) and np.array_equal(table.vectors, want.vectors)


# --- a real bundle: convert, index with MiniLM, edit, index again -------------------------------------------------

NOTES = {
    "People/Maren Voss.md": "Maren Voss keeps the lighthouse on the northern cape. She trades in lamp oil.",
    "Places/Cape Lighthouse.md": "The lighthouse on the northern cape was built by [[Maren Voss]]'s grandfather.",
    "Places/Greywater.md": "Greywater is a fishing harbour. Its bell tower rings at every high tide.",
    "Sessions/Session 1.md": "We reached [[Greywater]] and bought rope from a fisherman.",
    "Sessions/Session 2.md": "The ferry crossed the grey river; Tam lost the iron crown in the storm.",
}
EDITS = [  # (what, path, new text or None to delete, path it moves to)
    ("a text edit", "Places/Greywater.md", "Greywater is a salt harbour. Its bell tower rings at low tide too.", None),
    ("a new note", "People/Tam.md", "Tam is a ferry warden who lost the iron crown.", None),
    ("an alias", "People/Tam.md", "---\naliases: [The Warden]\n---\nTam is a ferry warden who lost the crown.", None),
    ("a rename", "Sessions/Session 2.md", None, "Sessions/Session Two.md"),
    ("a deletion", "Places/Cape Lighthouse.md", None, None),
]
QUESTIONS = ["Who keeps the lighthouse?", "the warden of the ferry", "bell tower at low tide", "iron crown storm"]


@pytest.mark.slow
def test_an_edited_index_searches_as_one_built_anew(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from bundle_checks import indexed_bundle

    from retriever.graph import load_graph
    from retriever.index import index_bundle, lexical_path, open_table, read_index_info
    from retriever.retrieve import Retriever, SearchSpec
    from retriever.store import ChunkStore, open_client
    from vault2okf.convert import convert

    bundle = indexed_bundle(tmp_path, NOTES)
    vault = tmp_path / "vault"

    def full_read(self: ChunkStore) -> None:
        raise AssertionError("an edit's index read every chunk's metadata")

    monkeypatch.setattr(ChunkStore, "stored_metadata", full_read)
    specs = [SearchSpec(), SearchSpec(seeds="hybrid", phrases=True)]
    for what, path, text, moved in EDITS:
        if moved:
            (vault / path).rename(vault / moved)
        elif text is None:
            (vault / path).unlink()
        else:
            (vault / path).parent.mkdir(parents=True, exist_ok=True)
            (vault / path).write_text(text + "\n", "utf-8")
        convert(vault, bundle)
        index_bundle(bundle, embedder_name="minilm", progress=False)
        info, saved, store = open_table(bundle)
        assert store is None, what  # the saved table matches Chroma
        fresh = ChunkTable.from_store(ChunkStore(open_client(bundle), info.collection))
        assert (saved.ids, saved.texts, saved.rows_of) == (fresh.ids, fresh.texts, fresh.rows_of), what
        assert np.array_equal(saved.vectors, fresh.vectors) and np.array_equal(saved.tokens, fresh.tokens), what
        graph = load_graph(bundle)
        loaded = Lexical(saved, graph, lexical_path(bundle, read_index_info(bundle).collection))
        assert not loaded.stale, what  # every index comes from the file `index` updated
        built = Lexical(fresh, graph)
        for kind in ("chunks", "notes", "chunk_pairs", "note_pairs"):
            assert _counts(getattr(loaded, kind)) == _counts(getattr(built, kind)), (what, kind)
        opened = Retriever.open(bundle)
        anew = Retriever(bundle, None, opened.embedder, graph, fresh)  # no saved file: BM25 built here
        for question in QUESTIONS:
            qvec = opened.embed(question)
            for spec in specs:
                got = [(h.note_id, h.score) for h in opened.search(question, spec, qvec=qvec).hits]
                assert got == [(h.note_id, h.score) for h in anew.search(question, spec, qvec=qvec).hits], what
