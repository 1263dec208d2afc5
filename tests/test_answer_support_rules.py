"""The support rules chosen leaving one vault out (`support.Rules`, `scripts/select_support.py`): a question's names
must be named, a number is an amount (not an identifier, not a date's digits), a later one-word part is read with the
first part's words, coverage set apart for a question asking for no kind, a passage's section counted, the words of a
story's course ("first", "next", "change") no content words, two words covered at least. Each test shows its rule
changing a mark: with it one way, without it the other."""

from __future__ import annotations

from dataclasses import replace

from retriever.answer.contract import ContextNote
from retriever.answer.extract import candidate, sections
from retriever.answer.passages import passages, terms
from retriever.answer.support import (
    Kind,
    Mark,
    Rules,
    Strength,
    asked,
    mark,
    numbers,
    proper_words,
    question_names,
    unframed,
)

# Every rule off but section and inherit, at last stop's coverage: each test turns on the rules it shows.
BASE = Rules(coverage=0.34, coverage_any=0.5, names=False, frame=False, pair=False)


def rules(**on: object) -> Rules:
    return replace(BASE, **on)  # type: ignore[arg-type]


def note(text: str, title: str = "Notes") -> ContextNote:
    return ContextNote(f"Notes/{title}", title, f"concepts/Notes/{title}.md", f"{title}\n{text}", "vector", 1.0)


def marked(question: str, text: str, rules: Rules, title: str = "Notes", at: int = 0) -> Mark:
    """The mark of passage `at` of a note holding `text`, under `rules` (its section's words from the note)."""
    found = passages(note(text, title))
    proper = proper_words((p.text for p in found), openers=rules.openers)
    words: dict[str, set[str]] = {}
    for p in found:
        words.setdefault(p.heading, set()).update(p.terms)
    section = frozenset(words[found[at].heading])
    return mark(asked(question, terms), candidate(found[at], proper, section), rules)


def test_the_names_of_the_question_must_be_named() -> None:
    question = "What's the top speed of the Nagase Lanza?"
    assert question_names(question, terms) == ("nagase", "lanza")
    text = "Its newest fighter has a top speed of mach 2.5 at altitude."
    on, off = marked(question, text, rules(names=True), "Nagase"), marked(question, text, rules(names=False), "Nagase")
    assert on == Mark(Strength.WEAK, "does not name lanza (in the question)")
    assert off.support == Strength.STRONG  # the note is Nagase's: a near miss, about another plane
    named = marked(question, "The Lanza has a top speed of mach 2.5.", rules(names=True), "Nagase")
    assert named.support == Strength.STRONG
    assert question_names("Who leads them?", terms) == ()  # a capital opening the question is no name


def test_a_number_is_an_amount_not_an_identifier_nor_a_dates_digits() -> None:
    assert numbers("as of revision 2c0b659 on 2 August 2022") == []
    assert numbers("It cost 40 gold, 12km away, 2.5 times, to a crowd of 1500.") == ["40", "12km", "2.5", "1500"]
    question = "How much does the paid pro version of the plugin cost?"
    text = "The pro version of the plugin: 'SQL Powered' as of revision 2c0b659 on 2 August 2022."
    assert marked(question, text, rules()).reason == "covers the question but gives no number"
    priced = marked(question, "The paid pro version of the plugin costs 40 dollars a year.", rules())
    assert priced == Mark(Strength.STRONG, "covers the question and gives a number (40)")


def test_a_later_one_word_part_is_read_with_the_first_parts_words() -> None:
    question = "What is the potion shop next to the guard tower called, and who runs it?"
    text = "The antiques shop that Gaylend Billows runs is in the Maw."
    assert marked(question, text, rules(inherit=False)).support == Strength.STRONG  # "who runs it": runs, a name
    inherited = marked(question, text, rules(inherit=True))
    assert inherited.support == Strength.WEAK and inherited.reason.startswith("covers 2 of 6 question words")


def test_a_question_asking_for_no_kind_has_its_own_coverage() -> None:
    question = "What did we find when we finally got down into the Shalk Chasm?"
    text = "The Shalk Chasm mission still awaits."
    assert marked(question, text, rules(coverage_any=0.5)).support == Strength.STRONG  # shalk, chasm: 2 of 4
    assert marked(question, text, rules(coverage_any=0.75)) == Mark(
        Strength.WEAK, "covers 2 of 4 question words (missing: find, finally)"
    )
    assert marked(
        "Who awaits at the Shalk Chasm?", "Old Tam awaits at the Shalk Chasm.", rules(coverage_any=1.0)
    ).strong


def test_the_section_counts_toward_coverage_when_it_is_on() -> None:
    question = "Which rank is the highest one of ritual sumo wrestling?"
    text = "## Ranks\nRitual wrestling of the old capital.\n\nYokozuna is the highest rank."
    own = marked(question, text, rules(coverage=0.67, section=False, openers=True), "Sumo", at=1)
    assert own.support == Strength.WEAK
    assert marked(question, text, rules(coverage=0.67, section=True, openers=True), "Sumo", at=1) == Mark(
        Strength.STRONG, "covers the question and names Yokozuna"
    )
    assert sections([]) == {}


def test_a_word_only_ever_capitalised_in_the_context_is_a_name_where_it_opens_a_sentence() -> None:
    question = "Who keeps the harbour ledger?"
    text = "Mira keeps the harbour ledger. The ledger is kept in the harbour office."
    assert (
        marked(question, text, rules(openers=False)).reason
        == "covers the question but names no one not in the question"
    )
    assert marked(question, text, rules(openers=True)) == Mark(Strength.STRONG, "covers the question and names Mira")
    assert proper_words(["Mira keeps it.", "During the night it rained."], openers=True) == {"mira"}  # not During
    assert proper_words(["Ledger: kept by the harbour master.", "The ledger is old."], openers=True) == frozenset()


def test_a_questions_names_count_where_coverage_counts_them() -> None:
    """`names` asks the passage with the words coverage counts: here its section names the plane."""
    question = "What's the top speed of the Nagase Lanza?"
    text = "Nagase built the Lanza for the navy.\nIts top speed is mach 2.5 at altitude."
    assert marked(question, text, rules(names=True, section=True), "Aircraft", at=1).strong
    alone = marked(question, text, rules(names=True, section=False), "Aircraft", at=1)
    assert alone == Mark(Strength.WEAK, "does not name nagase, lanza (in the question)")


def test_the_words_of_a_storys_course_are_no_content_words_with_frame() -> None:
    question = "How did the headman's attitude change from the first time we met him to the next?"
    text = "The headman's attitude turned cold once the job was paid."
    assert marked(question, text, rules(coverage_any=0.5, frame=True)) == Mark(Strength.STRONG, "covers the question")
    framed = marked(question, text, rules(coverage_any=0.5, frame=False))
    assert framed == Mark(Strength.WEAK, "covers 2 of 7 question words (missing: change, first, time, met, next)")
    assert unframed(asked("What did we learn?", terms)).words == ("learn",)  # a part of course words alone keeps them


def test_a_strong_passage_covers_two_words_with_pair() -> None:
    question = "Who won Ustonia's 2030 presidential election?"
    text = "The countries of Destrea and Ustonia are located here."
    assert marked(question, text, rules(coverage=0.2, pair=False)) == Mark(
        Strength.STRONG, "covers the question and names Destrea"
    )
    assert marked(question, text, rules(coverage=0.2, pair=True)) == Mark(
        Strength.WEAK, "covers 1 of 4 question words (missing: 2030, presidential, election)"
    )


def test_a_part_asked_after_an_adverb_is_its_own_part() -> None:
    """A part after an adverb, "..., and roughly how many live there?", asks a number of its own words."""
    ask = asked("What seals off the mountain pass, and roughly how many live there?", terms)
    assert [p.kind for p in ask.parts] == [Kind.ANY, Kind.NUMBER]
    assert ask.parts[1].words == ("live",)
