import pytest

from eval.golden import Question, Tier
from eval.scoring import AnswerScore, mentions, score_answer, summarise_answers
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
    result = score("Eevee evolves into Vaporeon, Jolteon and Flareon.")
    assert result == AnswerScore(1.0, 1.0, True, False, None, False)


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
    assert result == AnswerScore(0.0, None, False, True, None, False)


def test_unanswerable_refusal_and_confabulation():
    assert score("Not found in the vault.", DRAGON) == AnswerScore(None, None, False, True, True, False)
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
        }
    )
