"""An edit's index costs what it touches (issue 38): the saved chunk table is patched with the edited notes' chunks
(and the edit appended to its log), the four BM25 indexes of its base are scored beside an index of the documents
that changed since (or, when those are many, made into new ones), and all must be exactly what a build from scratch
of the same bundle gives: the same rows and vectors, the same term counts, bit-equal scores.

The property tests run random edit sequences (a chunk's text changed, chunks added and removed, notes added,
deleted and renamed, titles and aliases changed) over small synthetic tables, no model; the last test edits a real
bundle (convert, then `index` with MiniLM and Chroma) and checks what a search reads after each edit."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest

from retriever.bm25 import Bm25, Parted
from retriever.cachefile import unblob
from retriever.memory import Base, ChunkTable, Lexical, note_head
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


def _counts(index: Bm25 | Parted) -> tuple[dict[str, dict[int, int]], list[int]]:
    """An index's contents without its numbering of terms or its parts: term -> {document: count}, the lengths."""
    return index.contents()


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


def _based(notes: dict[str, list[str]], base: ChunkTable, stamp: str) -> ChunkTable:
    """The table of ``notes`` as `index` patches it from ``base``: its base names the notes changed since."""
    table = _table(notes, stamp)
    assert base.base is not None
    before = {note: [base.texts[r] for r in rows] for note, rows in base.rows_of.items()}
    now = {note: [table.texts[r] for r in rows] for note, rows in table.rows_of.items()}
    table.base = base.base.since({n for n in {*before, *now} if before.get(n) != now.get(n)})
    return table


@pytest.mark.parametrize("seed", range(6))
def test_indexes_of_a_base_and_its_changes_equal_indexes_built_anew(seed: int, tmp_path: Path) -> None:
    rng = random.Random(seed)
    notes = {f"Folder/Note {i}": [_text(rng) for _ in range(rng.randint(0, 3))] for i in range(12)}
    heads = {note: note_head(note.split("/")[-1], []) for note in notes}
    path = tmp_path / "lexical.npz"
    base = _table(notes, "s:0")
    base.base = Base("g0", base.note_ids)
    Lexical(base, None, heads=heads).save(path)
    for step in range(1, 25):
        for _ in range(rng.randint(1, 3)):
            _edit(rng, notes, heads)
        table = _based(notes, base, f"s:{step}")
        lexical = Lexical(table, None, path, heads=dict(heads))
        assert lexical.base is not None and not lexical.stale  # read from the base's file, not built
        _same_as_built(lexical, rng)
        if step % 4 == 0:  # many changes: a new base, its indexes made from the old one's
            kinds = lexical.compacted()
            assert kinds is not None and all(isinstance(index, Bm25) for index in kinds.values())
            base = _table(notes, f"s:{step}")
            base.base = Base(f"g{step}", base.note_ids)
            fresh = Lexical(base, None, heads=dict(heads))
            fresh.__dict__.update(kinds)
            _same_as_built(fresh, rng)
            assert fresh.save(path) is not None


def test_a_parted_index_leaves_out_what_changed_and_counts_only_live_documents() -> None:
    base = Bm25.build([["iron", "crown"], ["iron"], ["salt"]])
    table = _table({"a": ["iron crown"], "b": ["iron"], "c": ["salt"]})
    table.base = Base("g", table.note_ids, frozenset({"b"}))
    lexical = Lexical(table, None, heads={n: "" for n in "abc"}, base=None)
    assert lexical.base is None  # no file: built
    from retriever.bm25 import Part

    parted = Parted([Part(base, np.array([0, -1, 2])), Part(Bm25.build([["salt", "salt"]]), np.array([1]))], 3)
    built = Bm25.build([["iron", "crown"], ["salt", "salt"], ["salt"]])
    assert parted.df("iron") == 1 == built.df("iron") and parted.df("salt") == 2
    for query in (["iron"], ["salt"], ["crown", "salt", "iron"], ["nowhere"]):
        assert np.array_equal(parted.get_scores(query), built.get_scores(query)), query
    assert parted.contents() == built.contents()


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


def _save_base(path: Path, table: ChunkTable, generation: str) -> None:
    table.base = Base(generation, table.note_ids)
    table.save(path, {"fingerprint": table.stamp, "generation": generation, "note_hashes": {}})


def _same_table(got: ChunkTable, want: ChunkTable) -> None:
    assert (got.ids, got.note_ids, got.texts, got.rows_of) == (want.ids, want.note_ids, want.texts, want.rows_of)
    assert np.array_equal(got.tokens, want.tokens) and np.array_equal(got.vectors, want.vectors)


def test_a_saved_table_and_its_log_read_as_the_last_edit_left_it_and_a_cut_record_is_left_out(tmp_path: Path) -> None:
    from retriever.memory import TableLog, log_path

    rng = random.Random(7)
    notes = {f"Folder/Note {i}": [_text(rng) for _ in range(rng.randint(1, 3))] for i in range(8)}
    heads: dict[str, str] = {note: "" for note in notes}
    path = tmp_path / "table-c.npz"
    _save_base(path, _table(notes, "f:0"), "g0")
    log = TableLog(log_path(path), "g0")
    states = [_table(notes, "f:0")]
    for step in range(1, 6):
        before = {n: list(t) for n, t in notes.items()}
        _edit(rng, notes, heads)
        states.append(_table(notes, f"f:{step}"))
        changed = {n for n in {*before, *notes} if before.get(n) != notes.get(n)}
        log.append({"fingerprint": f"f:{step}", "note_hashes": {n: f"h{step}" for n in changed if n in notes}},
                   states[-1], changed, step)  # fmt: skip
        loaded = ChunkTable.load(path)
        assert loaded is not None
        table, meta = loaded
        _same_table(table, states[-1])
        assert table.stamp == meta["fingerprint"] == f"f:{step}" and meta["log_records"] == step
        assert table.base is not None and table.base.generation == "g0"
    whole = log_path(path).read_bytes()
    log_path(path).write_bytes(whole[:-10])  # killed while the last record was written
    loaded = ChunkTable.load(path)
    assert loaded is not None and loaded[0].stamp == "f:4"  # the edit before: older than Chroma, and said so
    _same_table(loaded[0], states[4])
    again = TableLog(log_path(path), "g0")
    again.read(1 << 30)
    again.append({"fingerprint": "f:5"}, states[5], list(states[5].rows_of), 5)  # a rerun: the cut record cut off
    loaded = ChunkTable.load(path)
    assert loaded is not None and loaded[0].stamp == "f:5"
    _same_table(loaded[0], states[5])
    _save_base(path, _table(notes, "f:9"), "g1")  # a new base: the old log is another generation's, not read
    loaded = ChunkTable.load(path)
    assert loaded is not None and loaded[0].stamp == "f:9" and loaded[1]["log_records"] == 0


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

    from retriever import index as index_module
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
    for n, (what, path, text, moved) in enumerate(EDITS):
        whole = n in (1, 3)  # these edits write the table and its BM25 indexes whole, the others append to its log
        monkeypatch.setattr(index_module, "COMPACT_MIN", 0 if whole else 10**6)
        monkeypatch.setattr(index_module, "COMPACT_LOG", 10**6 if whole else 0)
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
        assert saved.base is not None and bool(saved.base.changed) != whole, what
        fresh = ChunkTable.from_store(ChunkStore(open_client(bundle), info.collection))
        assert (saved.ids, saved.texts, saved.rows_of) == (fresh.ids, fresh.texts, fresh.rows_of), what
        assert np.array_equal(saved.vectors, fresh.vectors) and np.array_equal(saved.tokens, fresh.tokens), what
        graph = load_graph(bundle)
        loaded = Lexical(saved, graph, lexical_path(bundle, read_index_info(bundle).collection))
        assert loaded.base is not None and len(loaded.base.kinds) == 4, what  # from the file `index` wrote
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

    # killed while the last edit's record was written: the table reads as the edit before, older than Chroma, so a
    # search reads Chroma (and says an index was interrupted); the rerun completes the index
    from retriever.memory import log_path

    monkeypatch.undo()
    table = index_module.table_path(bundle, read_index_info(bundle).collection)
    log = log_path(table)
    assert log.is_file()
    log.write_bytes(log.read_bytes()[:-7])
    _, read, store = open_table(bundle)
    assert store is not None and read.ids == fresh.ids
    assert Retriever.open(bundle).search(QUESTIONS[0], specs[0]).hits
    index_bundle(bundle, embedder_name="minilm", progress=False)
    _, saved, store = open_table(bundle)
    assert store is None and saved.ids == fresh.ids and np.array_equal(saved.vectors, fresh.vectors)
