import pytest

from eval.golden import Question, Tier
from eval.scoring import AnswerScore, mentions, score_answer, summarise_answers
from retriever.answer.contract import Answer, Citation, ContextNote
from retriever.answer.refusal import is_not_found

EEVEE = Question(
    "e1",
    Tier.SYNTHESIS,
    "List all of Eevee's evolutions.",
    ("p/V.md",),
    "",
    ("Vaporeon", "Jolteon", "Flareon"),
)
KNOWN = {"Eevee", "Vaporeon", "Jolteon", "Flareon", "Espeon", "Umbreon", "Charizard"}
DRAGON = Question("u1", Tier.UNANSWERABLE, "What is the dragon's name?", (), "", ())


def score(text: str, question: Question = EEVEE, known: set[str] = KNOWN) -> AnswerScore:
    return score_answer(text, question, known_entities=known)


def test_exact_answer_restating_the_subject_keeps_precision():
    text = "Eevee evolves into Vaporeon, Jolteon and Flareon."
    assert score(text) == AnswerScore(1.0, 1.0, True, False, None, False, answer=text)


def test_padding_the_list_lowers_precision():
    result = score("Vaporeon, Jolteon, Flareon, Espeon and Umbreon.")
    assert result.entity_recall == 1.0 and result.exact
    assert result.precision == pytest.approx(3 / 5)


def test_case_and_partial_recall():
    result = score("VAPOREON and jolteon")
    assert result.entity_recall == pytest.approx(2 / 3)
    assert result.precision == 1.0 and not result.exact


def test_accents_are_ignored_both_ways():
    assert mentions("zoe brant was there", "Zoë Brant")
    assert mentions("ZOË  BRANT was there", "Zoe Brant")
    assert mentions("the Café Noir", "CAFE NOIR")


@pytest.mark.parametrize("text", ["Ashford", "the trash", "Ash_2"])
def test_word_boundaries(text):
    assert not mentions(text, "Ash")


def test_entities_with_punctuation():
    assert mentions("Ask Mr. Smith.", "Mr. Smith")
    assert mentions("It was D&D night", "D&D")


def test_longer_entity_hides_the_alias_inside_it():
    question = Question("s1", Tier.LOOKUP, "Who cursed the ward?", ("x.md",), "", ("Strahd von Zarovich",))
    result = score("Strahd von Zarovich did.", question, {"Strahd", "Strahd von Zarovich"})
    assert result.precision == 1.0 and result.exact


def test_no_entities_named_gives_no_precision():
    assert score("Nobody knows.").precision is None


def test_confident_wrong_answer():
    result = score("It evolves into Espeon.")
    assert (result.entity_recall, result.precision, result.wrong, result.not_found) == (0.0, 0.0, True, False)


@pytest.mark.parametrize(
    "text",
    [
        "Not found in the vault.",
        "not found",
        "That could not be found in the vault.",
        "I couldn't find anything about that in the notes.",
        "I could not find it.",
        "I couldn\u2019t find it.",
        "The notes don't mention the dragon.",
        "The vault does not say.",
        "There is no information about the dragon in the vault.",
        "This is not mentioned in the notes.",
        "I don\u2019t know.",
    ],
)
def test_not_found_variants(text):
    assert is_not_found(text)


@pytest.mark.parametrize("text", ["The party couldn't find the key, so they left.", "Vaporeon", "Found it."])
def test_not_not_found(text):
    assert not is_not_found(text)


def test_not_found_on_answerable_is_a_miss_not_wrong():
    result = score("I could not find that in the vault.")
    assert result == AnswerScore(0.0, None, False, True, None, False, answer="I could not find that in the vault.")


def test_unanswerable_refusal_and_confabulation():
    refusal = AnswerScore(None, None, False, True, True, False, answer="Not found in the vault.")
    assert score("Not found in the vault.", DRAGON) == refusal
    wrong = score("The dragon is Charizard.", DRAGON)
    assert (wrong.correct_refusal, wrong.wrong, wrong.precision) == (False, True, 0.0)


def test_summarise_answers_per_tier():
    lookup = Question("l1", Tier.LOOKUP, "Who is Eevee?", ("e.md",), "", ("Eevee",))
    questions = [EEVEE, lookup, DRAGON, Question("u2", Tier.UNANSWERABLE, "Q?", (), "", ())]
    scores = {
        "e1": score("Vaporeon, Jolteon, Flareon, Espeon and Umbreon."),  # recall 1, precision 0.6, exact
        "l1": score("I could not find it.", lookup),  # not found, recall 0
        "u1": score("Not found in the vault.", DRAGON),  # refusal
        "u2": score("Charizard.", questions[3]),  # confabulated
    }
    result = summarise_answers(scores, questions)
    assert list(result["tiers"]) == ["lookup", "synthesis", "unanswerable"]
    synthesis = result["tiers"]["synthesis"]
    assert synthesis == pytest.approx(
        {
            "n": 1,
            "entity_recall": 1.0,
            "precision": 0.6,
            "exact": 1.0,
            "not_found": 0.0,
            "wrong": 0.0,
            "refusal": None,
            **NO_GROUNDING,
            "claims": 1,
            "unanswerable": 0,
        }
    )
    unanswerable = result["tiers"]["unanswerable"]
    assert unanswerable == {
        "n": 2,
        "entity_recall": None,
        "precision": None,
        "exact": None,
        "not_found": 0.5,
        "wrong": 0.5,
        "refusal": 0.5,
        **NO_GROUNDING,
        "refused": 1,
        "unanswerable": 2,
        "claims": 1,
    }
    assert result["overall"] == pytest.approx(
        {
            "n": 2,
            "entity_recall": 0.5,
            "precision": 0.6,
            "exact": 0.5,
            "not_found": 0.5,
            "wrong": 0.0,
            "refusal": None,
            **NO_GROUNDING,
            "claims": 1,
            "unanswerable": 0,
        }
    )
    assert result["all"]["n"] == 4 and result["all"]["claims"] == 2
    assert (result["all"]["refused"], result["all"]["unanswerable"]) == (1, 2)


NO_GROUNDING = {"refused": 0, "cited": None, "cites_gold": None, "leaked": 0,  # plain-text answers
                "marked": 0, "strong_gold": 0, "marked_gold": 0, "answered_strong": 0}  # fmt: skip


def structured(text, notes, *citations, flag=False):
    cites = tuple(Citation(n.title, n.path, n.note_id) for n in citations)
    base = {"finish_reason": "stop", "prompt_tokens": 1, "completion_tokens": 1, "seconds": 0.1, "model": "m"}
    return Answer(text, cites, **base, not_found=flag)


V = ContextNote("p/V", "Vaporeon", "concepts/p/V.md", "Vaporeon.", "vector", 0.9)
X = ContextNote("p/X", "Other", "concepts/p/X.md", "Other.", "hop", 0.1)


def test_structured_answer_grounding():
    cited_gold = score_answer(structured("Vaporeon", [V, X], V), EEVEE, known_entities=KNOWN, context=[V, X])
    assert (cited_gold.cited, cited_gold.cites_gold, cited_gold.leaked) == (True, True, False)
    assert cited_gold.citations == ("p/V",)
    other = score_answer(structured("Vaporeon", [V, X], X), EEVEE, known_entities=KNOWN, context=[V, X])
    assert (other.cited, other.cites_gold) == (True, False)
    outside = score_answer(structured("Vaporeon", [X], V), EEVEE, known_entities=KNOWN, context=[X])
    assert outside.cited is False  # a citation to a note it was not given does not count
    leaked = score_answer(structured("Vaporeon</note>", [V], V), EEVEE, known_entities=KNOWN, context=[V])
    assert leaked.leaked


def test_structured_not_found_flag_is_what_the_scorer_counts():
    refusal = score_answer(structured("Nothing here.", [V], flag=True), DRAGON, known_entities=KNOWN, context=[V])
    assert refusal.not_found and refusal.correct_refusal and refusal.cited is None
    claim = score_answer(structured("not found in the vault", [V], V), DRAGON, known_entities=KNOWN, context=[V])
    assert not claim.not_found and claim.wrong  # Answer.not_found said no: a claim, whatever the text
