"""Names in text: whole words, accents and case folded, longest name first, generic names left out."""

from __future__ import annotations

from retriever.graph import Concept, NoteGraph
from retriever.mentions import NameIndex, SessionMentions, fold_words


def _concept(cid: str, title: str, aliases: tuple[str, ...] = (), number: int | None = None) -> Concept:
    return Concept(cid, title, f"{cid}.md", f"concepts/{cid}.md", "note", aliases, number, None)


GRAPH = NoteGraph(
    {
        "p/tom": _concept("p/tom", "Tom"),  # too short to be a name on its own
        "p/old-tom": _concept("p/old-tom", "Old Tom Bell", ("Bellringer",)),
        "pl/kanda": _concept("pl/kanda", "Kanda"),
        "pl/eclat": _concept("pl/eclat", "Éclat"),
        "x/overview": _concept("x/overview", "Overview"),
        "s/1": _concept("s/1", "Session 1", number=1),
        "s/2": _concept("s/2", "Session 2", number=2),
        "s/3": _concept("s/3", "Session 3", number=3),
    },
    {"s/1": {"pl/eclat": ["went to [[Éclat]]"]}, "pl/eclat": {"s/1": ["went to [[Éclat]]"]}},
)


def test_fold_words_drops_case_and_accents():
    assert fold_words("Éclat, KANDA's") == ["eclat", "kanda", "s"]


def test_names_match_whole_words_longest_first():
    names = NameIndex.from_graph(GRAPH)
    assert names.find("Who rang for old tom bell in Kandahar?") == {"p/old-tom": 3}
    assert names.find("the bellringer went to kanda, then eclat") == {"p/old-tom": 1, "pl/kanda": 1, "pl/eclat": 1}
    assert names.find("Tom read the overview") == {}  # short and generic names name nothing


def test_sessions_naming_a_note_in_session_order():
    names = NameIndex.from_graph(GRAPH)
    texts = {"s/3": ["Back in Kanda with Old Tom Bell."], "s/2": ["We left Kanda."], "s/1": ["A quiet day."]}
    mentions = SessionMentions.build(GRAPH, names, texts)
    assert mentions.sessions_naming(["pl/kanda"]) == ["s/2", "s/3"]
    assert mentions.sessions_naming(["pl/eclat"]) == ["s/1"]  # linked, not named in the text
    assert mentions.sessions_naming(["p/old-tom", "pl/kanda"]) == ["s/2", "s/3"]
    assert mentions.sessions_naming(["x/overview"]) == []
