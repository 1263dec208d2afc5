"""How well a quoted passage answers a question: `strong` or `weak`, with a one-line reason. Pure.

A passage is strong when both hold:

- **coverage**: its words, with its note's title, aliases and its heading (`Candidate.context`) and the words of the
  other passages of its section (`Candidate.section`: the same note, under the same heading), cover at least
  `COVERAGE` of the question's content words (`COVERAGE_ANY` for a question asking for no kind: coverage is all it
  has) (`Asked.words`: the question's scoring terms, less the words that only ask, "how many", "the name of",
  "called", and the words of a story's course, "first", "next", "change", "learn"; a later part of one word, "and
  who runs it?", is read with the first part's words), and they name every name the question holds (`Asked.names`).
  A word counts when the passage has it, a stem-light variant of it (one shares its first `PREFIX` letters with it,
  `ledger`/`ledgers`, `commune`/`communal`) or a spelling one letter away (`ledger`/`leger`, both of at least
  `FUZZY` letters);
- **kind**: it holds the kind of thing the question asks for (`Kind`, from its English question words): a proper
  name that is not already in the question for who / whom / whose / which / "the name of" / "called", a number
  or amount for how much / how many / how long / how old, a date or session for when / what year / which session
  (a passage of a session note holds its session), a place for where, a reason clause for why (because, so that,
  since, due to, in order to, ...). Another English question (what, how, yes or no) asks for no kind.

A question in another language (no English function word in it) is judged on coverage alone and is never strong:
its reason says "question kind not recognised". `shares` is the not-found rule: the answer is "not found" only
when no passage shares one content word (or a variant of one) with the question.

`Rules` holds these settings, chosen leaving one vault out (`scripts/select_support.py`,
`reports/extract-support.md`); two more rules were measured there and not chosen, and stay off: *pair* (a strong
passage covers two content words at least) and *openers* (a word the context only ever writes capitalised is a name
where it opens a sentence). Counting the words of the passage's whole note, not only its section's, was measured and
dropped: it marked "Maren Voss keeps the lighthouse" strong for "who built the lighthouse in the year of the great
storm?" on the words of the note's other passage, which names no one. A number is an amount (`50`, `2.5`, `12km`),
never an identifier (`2c0b659`) or a date's digits.

The caller turns text into scoring terms (`retriever.answer.extract.terms`: folded, stop words out, lightly
stemmed) and passes that function in, so that this module depends on nothing of the answer stage.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

COVERAGE = 0.34  # the share of the question's content words a strong passage covers (chosen: select_support.py)
COVERAGE_ANY = 0.25  # the same for a question that asks for no kind (what / how / yes or no): coverage is all it has
PAIR = 2  # with `Rules.pair`, a strong passage covers at least this many of a part's content words (when it has
# as many): a quarter of "who won Ustonia's 2030 presidential election" is its one name
PREFIX = 6  # two words sharing this many first letters are variants of one another (`commune`, `communal`)
WINDOW = 4  # a name answers "the name of the <head>" when it stands this many words or fewer from the head
_SUFFIXES = frozenset(("er", "ers", "or", "ors", "ion", "ions", "ment", "ments", "al", "ly", "ness", "ity", "ive"))
FUZZY = 5  # two words of at least this many letters one edit apart are variants (`ledger`, `leger`)

Terms = Callable[[str], list[str]]


class Strength(StrEnum):
    STRONG = "strong"
    WEAK = "weak"


class Kind(StrEnum):
    """What a question asks for."""

    NAME = "name"  # who / whom / whose / which / "the name of" / "called"
    NUMBER = "number"  # how much / how many / how long / how old / how far / how often / which version
    DATE = "date"  # when / what year / what date / which session
    PLACE = "place"  # where
    REASON = "reason"  # why
    ANY = "any"  # another English question (what / how / yes or no): coverage alone
    UNKNOWN = "unknown"  # not an English question: coverage alone, never strong


# What a question asks for is read from its first question word (in its last sentence that ends with "?", so that a
# preamble, "The show opened with a dragon that comes back when ...", is not read), and the words after it; the
# matched phrase is no content word ("how many", "what year", "the name of").
_WH = re.compile(r"\b(?:who|whom|whose|which|when|where|why|what|how)\b", re.IGNORECASE)
_AFTER: dict[str, tuple[tuple[Kind, re.Pattern[str]], ...]] = {
    word: tuple((kind, re.compile(pattern, re.IGNORECASE)) for kind, pattern in rules)
    for word, rules in {
        "what": (
            (Kind.NAME, r"what(?:'s|\s+is|\s+was|\s+are|\s+were)?\s+(?:\w+\s+)?names?(?:\s+of)?\b"),
            (Kind.DATE, r"what\s+(?:year|date|day|month|century|era|session|time)\b"),
            (Kind.NUMBER, r"what\s+(?:number|percentage|amount|price|version|release)\b"),
            (Kind.PLACE, r"what\s+(?:city|town|village|place|country|region|kingdom|realm|district|island)\b"),
            (Kind.REASON, r"what\s+(?:for|reason)\b"),
            (Kind.NAME, r"what(?=\b.*\bcalled\b)"),
            (Kind.ANY, r"what\b"),
        ),
        "which": (
            (Kind.DATE, r"which\s+(?:year|date|day|month|century|era|session|time)\b"),
            (Kind.NUMBER, r"which\s+(?:number|percentage|amount|version|release)\b"),
            (Kind.PLACE, r"which\s+(?:city|town|village|place|country|region|kingdom|realm|district|island)\b"),
            (Kind.NAME, r"which\b"),
        ),
        "how": (
            (Kind.DATE, r"how\s+long\s+ago\b"),
            (Kind.NUMBER, r"how\s+(?:much|many|long|old|far|often|big|tall|large|fast|deep|high)\b"),
            (Kind.ANY, r"how\b"),
        ),
        "who": ((Kind.NAME, r"who\b"),),
        "whom": ((Kind.NAME, r"whom\b"),),
        "whose": ((Kind.NAME, r"whose\b"),),
        "when": ((Kind.DATE, r"when\b"),),
        "where": ((Kind.PLACE, r"where\b"),),
        "why": ((Kind.REASON, r"why\b"),),
    }.items()
}
_PART = re.compile(
    r"(?:,\s*(?:and|or|but|then)?|;|\s[-\u2013\u2014]|\s(?:and|or|but))\s+(?:(?:in|on|at|from|by|for|with|to|of|since)\s+)?"
    r"(?:(?:roughly|about|approximately|exactly|just|also|then|so)\s+)?"
    r"(?=(?:who|whom|whose|which|when|where|why|what|how)\b)",
    re.IGNORECASE,
)  # the end of one part of a question, just before the next part's question word
_BOUNDARY = (
    r"(?=\s+(?:that|who|whom|which|whose|at|in|of|on|from|for|with|behind|near|leading|making|running)\b"
    r"|\s*[?,.;])"
)
_A_WORD = r"[^\W\d_][\w'\u2019]*"
_HEAD = re.compile(
    rf"\s*(?:the|a|an|his|her|their|its|that|this|our|my)?\s*(?P<head>(?:{_A_WORD}\s+){{0,2}}?{_A_WORD}){_BOUNDARY}"
)  # "the name of the <head>": what follows the asking phrase, up to a word that starts a clause
_CALLED = re.compile(rf"(?P<head>{_A_WORD})\s+(?:called|named)\b", re.IGNORECASE)  # "is its anthem called"
_WHAT_HEAD = re.compile(
    rf"what\s+(?P<head>{_A_WORD})\s+(?:did|does|do|is|was|are|were|has|have|had|will|would|can|could|should)\b",
    re.IGNORECASE,
)  # "what prize did they win": a passage answers it only when it names a prize
_WHO_HEAD = re.compile(
    rf"who(?:'s|\s+is|\s+was|\s+are|\s+were)\s+(?:the|a|an|their|his|her|our|that)\s+(?P<head>[^\W\d_]+){_BOUNDARY}",
    re.IGNORECASE,
)  # "who is the bartender at ...": the name asked for is the bartender's
_SENTENCES = re.compile(r"[^.!?]*(?:[.!?]+|$)")
_NAMING = frozenset(("name", "call", "called", "cal"))  # the words that ask for a name, as `terms` gives them
# Words of how a question is put, not of what it is about ("what did we actually get"), as `terms` gives them.
_FRAME_WORDS = "get got happen actually really exactly else besides besid just ever still"
_FRAME = frozenset(_FRAME_WORDS.split())
# With `Rules.frame`, also the words that tell a story's course rather than name what it is about ("how did it
# change from the first time we met her to the next?", "what did we learn about ..."), as `terms` gives them.
_COURSE_WORDS = """afterward along began begin came chang change come compar compare comparison course differ
    difference end eventually finally find first found go going happen kind knew know known last later learn learnt
    meet mention met moment next one order said say sort start tell thing tim time told turn twice us way went
    whole back many much"""
_COURSE = frozenset(_COURSE_WORDS.split())
_ENGLISH_TEXT = """the what who whom whose which when where why how did does do is are were of and to for with
    that this i we you my our your they their he she his her it its can could should would will has have had
    been"""
_ENGLISH = frozenset(_ENGLISH_TEXT.split())
_WORDS = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
_TOKEN = re.compile(r"[^\W_][\w'\u2019.\-]*[^\W_]|[^\W_]")  # a word as written, inner dots/dashes kept (`6.0.0`)
_LABEL = re.compile(r"\s*(?:\[[ xX]?\]\s*)?[^.:!?\n]{1,60}?:\s")  # a label opening a list item: `Hub: ...`
_OPENERS = frozenset(".!?:;\"'\u201c\u2018([]>-+*\u2022|#")  # after one of these a capital opens a sentence or item
_NUMBER_WORDS_TEXT = """one two three four five six seven eight nine ten eleven twelve thirteen fourteen
    fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety hundred
    hundreds thousand thousands million millions billion billions dozen dozens half twice thrice once"""
_NUMBER_WORDS = frozenset(_NUMBER_WORDS_TEXT.split())
_MONTHS = (
    r"jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?|sep(?:t(?:ember)?)?|oct(?:ober)?"
    r"|nov(?:ember)?|dec(?:ember)?"
)
_DATE = re.compile(
    rf"\b(?:{_MONTHS})\.?\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s+\d{{4}})?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:{_MONTHS})(?:,?\s+\d{{4}})?\b"
    r"|\b(?:january|february|march|april|june|july|august|september|october|november|december)(?:\s+\d{4})?\b"
    r"|\b(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)\b"
    r"|\b\d{4}-\d{1,2}-\d{1,2}\b|\b\d{1,2}[/.]\d{1,2}[/.]\d{2,4}\b|\b\d{8}\b"
    r"|\b(?:1\d{3}|20\d{2})s?\b|\b\d{1,4}\s*(?:BC|BCE|AD|CE|AC|DR|PR|AR|ED|BE|AE)\b|\bQ[1-4]\s+\d{4}\b"
    r"|\b(?:session|sessions|day|week|chapter|episode|act)\s+#?\d+\b|\b\d+(?:st|nd|rd|th)\s+(?:century|age|era|day)\b"
    r"|\b(?:yesterday|tonight|today|tomorrow|last\s+night|that\s+night|next\s+(?:day|morning|session|week))\b"
    r"|\b(?:years?|months?|weeks?|days?|decades?|centuries)\s+(?:ago|later|before|after|earlier)\b"
    r"|\b(?:in|since|until|by|from)\s+(?:the\s+)?(?:year\s+)?\d{2,4}\b",
    re.IGNORECASE,
)
_FANTASY_DATE = re.compile(r"\b\d{1,2}(?:st|nd|rd|th)?\s+[A-Z][a-z]{3,}\b")  # `09 Dawnmarch`: a day of a month
_REASON = re.compile(
    r"\b(?:because|since|so\s+that|so\s+as\s+to|due\s+to|owing\s+to|in\s+order\s+to|as\s+a\s+result|thanks\s+to"
    r"|caused\s+by|the\s+reason|reasons?\s+(?:is|was|being)|therefore|hence|thus|which\s+is\s+why|that'?s\s+why"
    r"|for\s+fear|lest|led\s+to|leads\s+to|result(?:s|ed)?\s+in|motivated\s+by|in\s+exchange\s+for|to\s+avoid"
    r"|to\s+prevent|to\s+protect|to\s+ensure|to\s+keep|as\s+(?:they|he|she|it|we)\s+(?:was|were|had|could|did))\b",
    re.IGNORECASE,
)
_PLACE_NOUNS_TEXT = """city town village hamlet settlement capital tavern inn bar pub shop store market temple
    church chapel shrine castle keep fort fortress tower citadel palace manor estate house home farmhouse farm
    hut cabin camp district quarter street road path bridge gate harbor harbour port dock docks pier coast shore
    beach cliff cliffs cave caves cavern tunnel mine crypt tomb vault ruin ruins dungeon sewer sewers forest
    woods jungle swamp marsh bog desert mountain mountains hill hills valley canyon chasm river lake sea ocean
    island isle bay continent region kingdom realm empire country province border north south east west northern
    southern eastern western room hall chamber cellar basement floor library academy school arena garden grove
    field fields plains headquarters base station outpost ship boat wagon building office folder directory file
    vault"""
_PLACE_NOUNS = frozenset(_PLACE_NOUNS_TEXT.split())
_PLACE = re.compile(
    r"\b(?:in|at|to|from|near|inside|into|within|outside|under|beneath|below|above|behind|beyond|across|on"
    r"|through|toward|towards|around|by|via|past)\s+(?:the\s+|a\s+|an\s+|their\s+|his\s+|her\s+|its\s+|our\s+)?"
    r"([^\W\d_][\w'\u2019\-]*)",
)
# Capitalised words that are no name: pronouns, articles and the like at any place, and the words that open
# a sentence or a list item as often as they start a name.
_NOT_NAMES_TEXT = """i i'm i've i'd i'll the a an he she it they we you his her its their our my your this that
    these those there here then when where what who which why how and but or if so yes no not mr mrs ms dr
    session sessions note notes see also day days january february march april may june july august september
    october november december monday tuesday wednesday thursday friday saturday sunday"""
_NOT_NAMES = frozenset(_NOT_NAMES_TEXT.split())


# Irregular English past forms (as `terms` gives them: stop words are gone) -> the present, so that "met" covers
# "meet" and "fought" covers "fight" (the light stemmer handles the regular ones).
_IRREGULAR_TEXT = """met:meet found:find went:go gone:go took:take taken:take fought:fight fled:flee gave:give
    given:give got:get gotten:get came:come saw:see seen:see knew:know known:know told:tell said:say made:make
    left:leave lost:lose brought:bring bought:buy caught:catch thought:think sought:seek taught:teach held:hold
    kept:keep led:lead lent:lend paid:pay sold:sell sent:send spent:spend stood:stand struck:strike stole:steal
    stolen:steal swore:swear sworn:swear threw:throw thrown:throw wore:wear worn:wear won:win wrote:write
    written:write rode:ride ridden:ride rose:rise risen:rise ran:run sang:sing slew:slay slain:slay spoke:speak
    spoken:speak broke:break broken:break chose:choose chosen:choose drew:draw drawn:draw drove:drive
    driven:drive ate:eat eaten:eat fell:fall fallen:fall flew:fly flown:fly forgot:forget forgotten:forget
    froze:freeze frozen:freeze grew:grow grown:grow hid:hide hidden:hide bitten:bite began:begin begun:begin
    dug:dig fed:feed felt:feel fled:flee heard:hear hung:hang built:build burnt:burn dealt:deal meant:mean
    slept:sleep swept:sweep woke:wake woken:wake wept:weep became:become shot:shoot shook:shake shaken:shake
    sank:sink sunk:sink"""
_IRREGULAR = dict(pair.split(":") for pair in _IRREGULAR_TEXT.split())


@dataclass(frozen=True)
class Rules:
    """The settings of `mark`, chosen leaving one vault out (`scripts/select_support.py`)."""

    coverage: float = COVERAGE  # a question asking for a kind (a name, a number, a date, a place, a reason)
    coverage_any: float = COVERAGE_ANY  # a question asking for none
    section: bool = True  # coverage counts the words of the passage's whole section, not the passage's alone
    names: bool = True  # a strong passage names every name the question holds, counting the words coverage counts
    inherit: bool = True  # a later part of one content word ("and who runs it?") is read with the first part's
    openers: bool = False  # a word only ever written capitalised in the context is a name where it opens a
    # sentence (measured, not chosen)
    frame: bool = True  # the words of a story's course ("first", "next", "change", "learn") are no content words
    pair: bool = False  # a strong passage covers at least `PAIR` content words of a part that has as many


RULES = Rules()


@dataclass(frozen=True)
class Part:
    """One question of a question: "who leads them, and where do they camp?" asks two."""

    kind: Kind
    words: tuple[str, ...]  # its content terms (scoring terms less the asking words), distinct, in order
    head: str = ""  # "the name of the <head>", "who is the <head> at ...": a name answers it only beside its head


@dataclass(frozen=True)
class Asked:
    """A question, read once: its parts (what each asks for, and its content words) and the words it names."""

    text: str
    parts: tuple[Part, ...]
    named: frozenset[str]  # every word of the question, folded (a name the question holds is no answer)
    names: tuple[str, ...] = ()  # the names it holds (`question_names`), as scoring terms

    @property
    def kind(self) -> Kind:
        return self.parts[0].kind

    @property
    def words(self) -> tuple[str, ...]:
        """The content words of all its parts."""
        return tuple(dict.fromkeys(w for p in self.parts for w in p.words))


@dataclass(frozen=True)
class Mark:
    """How well one passage answers: `strong` or `weak`, and why, in one line."""

    support: Strength
    reason: str

    @property
    def strong(self) -> bool:
        return self.support == Strength.STRONG


@dataclass(frozen=True)
class Candidate:
    """What `mark` reads of a passage: its text as quoted, its scoring terms, those of its note's title, aliases
    and heading, and whether its note is a session note (a passage of one is dated by its session)."""

    text: str
    terms: frozenset[str]
    context: frozenset[str]
    session: str = ""  # "Session 12", "2025-08-08": the note's session or date; "" for another note
    proper: frozenset[str] = frozenset()  # the context's names (`proper_words`): a capital opening a sentence
    section: frozenset[str] = frozenset()  # the terms of every passage of its note under the same heading


def kind_of(question: str) -> tuple[Kind, tuple[int, int]]:
    """What the question asks for first, and where the phrase that asks it is (`(0, 0)`: none)."""
    if not english(question):
        return Kind.UNKNOWN, (0, 0)
    wh = _first_wh(question)
    return (Kind.ANY, (0, 0)) if wh is None else _kind_at(question, wh)


def _first_wh(question: str) -> re.Match[str] | None:
    """The first question word of the last sentence that asks (ends with "?"), or of the question."""
    asking = [m for m in _SENTENCES.finditer(question) if m.group(0).rstrip().endswith("?")]
    start = asking[-1].start() if asking else 0
    return _WH.search(question, start) or _WH.search(question)


def _kind_at(question: str, wh: re.Match[str]) -> tuple[Kind, tuple[int, int]]:
    for kind, pattern in _AFTER[wh.group(0).casefold()]:
        match = pattern.match(question, wh.start())
        if match:
            return kind, match.span()
    return Kind.ANY, wh.span()


def english(question: str) -> bool:
    """The question has an English function word (`the`, `what`, `did`, ...): its question words can be read."""
    return any(w in _ENGLISH for w in _WORDS.findall(question.casefold()))


def asked(question: str, terms: Terms) -> Asked:
    """The question read once: its parts, cut where a question word follows `and`, a comma or a dash ("who leads
    them, and where do they camp"), each with its kind and content words (`terms` of it, and of what comes before
    its first question word, less the phrase that asks); another language's question is one part."""
    named = frozenset(_folded(w) for w in _WORDS.findall(question)) | frozenset(terms(question))
    wh = _first_wh(question) if english(question) else None
    if wh is None:
        kind = Kind.ANY if english(question) else Kind.UNKNOWN
        words = tuple(dict.fromkeys(w for w in terms(question) if w not in _FRAME))
        return Asked(question, (Part(kind, words or tuple(terms(question))),), named, question_names(question, terms))
    preamble = question[: wh.start()]
    cuts = [wh.start()] + [m.end() for m in _PART.finditer(question, wh.start())] + [len(question)]
    parts = []
    for begin, end in zip(cuts, cuts[1:], strict=False):
        match = _WH.match(question, begin)
        kind, (ask_start, ask_end) = _kind_at(question, match) if match else (Kind.ANY, (begin, begin))
        text = preamble + " " + question[begin:ask_start] + " " + question[ask_end:end]
        rest = [w for w in terms(text) if w not in _FRAME and not (kind == Kind.NAME and w in _NAMING)]
        naming = kind == Kind.NAME and "name" in question[ask_start:ask_end].casefold()
        head = _HEAD.match(question, ask_end) if naming else None
        if head is None and kind == Kind.NAME:
            head = _CALLED.search(question, ask_end, end)
        if head is None and kind == Kind.NAME and match is not None:
            head = _WHO_HEAD.match(question, match.start())
        if kind == Kind.ANY and match is not None:
            head = _WHAT_HEAD.match(question, match.start())
        head_terms = terms(head.group("head")) if head else []
        parts.append(Part(kind, tuple(dict.fromkeys(rest)), head_terms[-1] if head_terms else ""))
    kept = tuple(p for p in parts if p.words) or (Part(parts[0].kind, tuple(terms(question))),)
    return Asked(question, kept, named, question_names(question, terms))


def question_names(question: str, terms: Terms) -> tuple[str, ...]:
    """The names a question holds, as scoring terms: its words with a capital that opens no sentence (`Shalk
    Chasm`, `Nagase Lanza`, `Kael`), pronouns, question words and months aside."""
    found = []
    for match in _TOKEN.finditer(question):
        word = match.group(0)
        if word[0].isupper() and word.casefold() not in _NOT_NAMES and not _opens(question, match.start()):
            found += terms(word)
    return tuple(dict.fromkeys(found))


def inherited(ask: Asked) -> Asked:
    """The question with each later part of one content word ("..., and who runs it?") read with the first part's
    words too: its one word says what it asks of, not what it is about."""
    first = ask.parts[0]
    parts = [first] + [p if len(p.words) > 1 else replace(p, words=tuple(dict.fromkeys(first.words + p.words)))
                       for p in ask.parts[1:]]  # fmt: skip
    return replace(ask, parts=tuple(parts))


def unframed(ask: Asked) -> Asked:
    """The question without the words of a story's course (`_COURSE`: "first", "next", "change", "learn"), in each
    part that keeps a content word without them."""
    parts = []
    for p in ask.parts:
        rest = tuple(w for w in p.words if w not in _COURSE)
        parts.append(replace(p, words=rest) if rest else p)
    return replace(ask, parts=tuple(parts))


@functools.lru_cache(maxsize=1 << 17)
def variant(word: str, other: str) -> bool:
    """Two scoring terms that are variants of one word: the same, an irregular past and its verb (`met`, `meet`),
    one the other and a derivational ending (`keep`, `keeper`), the same first `PREFIX` letters, or (both of
    `FUZZY` letters or more) one letter added, dropped or changed."""
    if word == other or _base(word) == _base(other):
        return True
    short, long = sorted((word, other), key=len)
    if len(short) >= 4 and long.startswith(short) and long[len(short) :] in _SUFFIXES:
        return True
    if len(word) >= PREFIX and len(other) >= PREFIX and word[:PREFIX] == other[:PREFIX]:
        return True
    return min(len(word), len(other)) >= FUZZY and _one_edit(word, other)


def _base(word: str) -> str:
    """The verb of an irregular past, less a final `e` (the light stemmer makes `making` `mak`, keeps `make`)."""
    word = _IRREGULAR.get(word, word)
    return word[:-1] if len(word) > 3 and word.endswith("e") else word


def _one_edit(a: str, b: str) -> bool:
    if abs(len(a) - len(b)) > 1:
        return False
    if len(a) > len(b):
        a, b = b, a
    i = 0
    while i < len(a) and a[i] == b[i]:
        i += 1
    return a[i + (len(a) == len(b)) :] == b[i + 1 :]


def covered(words: Iterable[str], have: Collection[str]) -> list[str]:
    """The words of `words` that `have` holds, or a variant of (`variant`)."""
    return [w for w in words if w in have or any(variant(w, h) for h in have)]


def shares(ask: Asked, candidate: Candidate) -> bool:
    """The passage (with its title, aliases and heading) shares at least one content word with the question."""
    return bool(covered(ask.words, candidate.terms | candidate.context))


def mark(ask: Asked, candidate: Candidate, rules: Rules = RULES) -> Mark:
    """Strong when, for one part of the question, the passage covers `rules.coverage` of its content words
    (`coverage_any` for a part asking for no kind) and holds what it asks for, and names every name the question
    holds; else weak, with the reason of the part it covers best."""
    have = candidate.terms | candidate.context
    have = have | candidate.section if rules.section else have
    unnamed = [n for n in ask.names if not covered([n], have)] if rules.names else []
    if rules.frame:
        ask = unframed(ask)
    if rules.inherit:
        ask = inherited(ask)
    best: Mark | None = None
    parts = [(part, covered(part.words, have)) for part in ask.parts]
    for part, found in sorted(parts, key=lambda p: -len(p[1]) / max(1, len(p[0].words))):
        coverage = rules.coverage_any if part.kind in (Kind.ANY, Kind.UNKNOWN) else rules.coverage
        least = min(PAIR, len(part.words)) if rules.pair else 0
        if part.words and len(found) < max(coverage * len(part.words) - 1e-9, least):
            missing = ", ".join(w for w in part.words if w not in found)
            best = best or Mark(Strength.WEAK, f"covers {len(found)} of {len(part.words)} question words "
                                               f"(missing: {missing})")  # fmt: skip
            continue
        if part.kind == Kind.UNKNOWN:
            return Mark(Strength.WEAK, "question kind not recognised")
        held = holds(Asked(ask.text, (part,), ask.named), candidate)
        if held is not None and unnamed:  # it would answer, but of something else the question does not name
            return Mark(Strength.WEAK, f"does not name {', '.join(unnamed)} (in the question)")
        if held is not None:
            return Mark(Strength.STRONG, f"covers the question and {held}" if held else "covers the question")
        if best is None or not best.reason.startswith("covers the question"):
            lacks = f"does not mention the {part.head} asked for" if part.kind == Kind.ANY else _LACKS[part.kind]
            best = Mark(Strength.WEAK, f"covers the question but {lacks}")
    return best or Mark(Strength.WEAK, "shares no word with the question")


_LACKS = {
    Kind.NAME: "names no one not in the question",
    Kind.NUMBER: "gives no number",
    Kind.DATE: "gives no date or session",
    Kind.PLACE: "names no place",
    Kind.REASON: "gives no reason",
}


def holds(ask: Asked, candidate: Candidate) -> str | None:
    """What the passage holds of the kind the question asks for, as the end of a reason ("names Tam"); `""` when
    the question asks for no kind; None when the passage holds none."""
    text = candidate.text
    if ask.kind == Kind.ANY and ask.parts[0].head:  # "what prize did ...": the passage names a prize
        head = ask.parts[0].head
        return "" if covered([head], candidate.terms | candidate.context) else None
    if ask.kind in (Kind.ANY, Kind.UNKNOWN):
        return ""
    found: list[str] = []
    if ask.kind == Kind.NAME:
        found = names(text, ask.named, candidate.proper)
        head = ask.parts[0].head
        found = _beside(text, found, head) if head else found
        return f"names {found[0]}" if found else None
    if ask.kind == Kind.NUMBER:
        found = numbers(text, ask.named)
        return f"gives a number ({found[0]})" if found else None
    if ask.kind == Kind.DATE:
        date = dates(text)
        if date:
            return f"gives a date ({date})"
        return f"is in {candidate.session}" if candidate.session else None
    if ask.kind == Kind.PLACE:
        found = places(text, ask.named)
        return f"names a place ({found[0]})" if found else None
    match = _REASON.search(text)
    return f'gives a reason ("{match.group(0)}")' if match else None


def names(text: str, known: Collection[str] = (), proper: Collection[str] = ()) -> list[str]:
    """The proper names of a passage not in `known` (folded words): a capitalised word that does not open a
    sentence, or opens one before another capitalised word or is one of `proper` (folded: a name elsewhere in the
    context, `proper_words`), and a word with a capital inside it (`YugabyteDB`, `ON_HOLD`, `McAllister`);
    pronouns, articles, months and days are none."""
    plain = _plain(text)
    label = len(plain) if _title_case(plain) else _label_end(plain)
    tokens = [(m.start(), m.group(0)) for m in _TOKEN.finditer(plain)]
    found = []
    for i, (at, word) in enumerate(tokens):
        if not word[0].isupper() or word.casefold() in _NOT_NAMES or _asked_for(_folded(word), known):
            continue
        inner = any(c.isupper() for c in word[1:]) or "_" in word
        if at < label:  # a `Title Case Label:` opening an item, or a title-case line, names nothing by capitals alone
            found += [word] if inner or _folded(word) in proper else []
            continue
        opens = _opens(plain, at)
        follows = i + 1 < len(tokens) and tokens[i + 1][1][0].isupper() and tokens[i + 1][0] - at <= len(word) + 2
        if inner or not opens or follows or _folded(word) in proper:
            found.append(word)
    return found


def _title_case(plain: str) -> bool:
    """A line in title case ("Investigation and Information Gathering"): most of its longer words capitalised, and
    no sentence's end."""
    if plain.rstrip().endswith((".", "!", "?")):
        return False
    long = [w for w in _WORDS.findall(plain) if len(w) > 3 and w.isalpha()]
    return len(long) >= 2 and sum(w[0].isupper() for w in long) >= 0.7 * len(long)


def _asked_for(word: str, known: Collection[str]) -> bool:
    """The question holds the word, or a variant of it (`Ustonian` in a question about `Ustonia`)."""
    return word in known or any(variant(word, k) for k in known if len(k) >= FUZZY)


def _beside(text: str, found: Sequence[str], head: str) -> list[str]:
    """The names of `found` that stand within `WINDOW` words of the head word (or a variant of it) in `text`."""
    words = _WORDS.findall(_plain(text))
    heads = [i for i, w in enumerate(words) if variant(head, w.casefold())]
    at = {w: i for i, w in reversed(list(enumerate(words)))}
    return [n for n in found if any(abs(at.get(n.split("'")[0], -99) - h) <= WINDOW for h in heads)]


def _label_end(plain: str) -> int:
    """Where a short label that opens the passage ends (`Information Hub: ...`, `[ ] Next step: ...`), or 0."""
    match = _LABEL.match(plain)
    return match.end() if match else 0


def proper_words(texts: Iterable[str], *, openers: bool = False) -> frozenset[str]:
    """The words, folded, that some text of `texts` writes capitalised where no sentence or item opens (or writes
    as a title): the context's names, by which a name opening a sentence ("Tam runs the ferry.") is known. With
    `openers`, also a word of three letters or more that only ever opens a sentence or item there and is never
    written in lower case ("Yokozuna is the highest rank."), English function words and openers aside."""
    found: set[str] = set()
    opening: set[str] = set()
    lower: set[str] = set()
    for text in texts:
        names, openings, lowers = _text_words(text, openers)
        found |= names
        opening |= openings
        lower |= lowers
    return frozenset(found | {_folded(w) for w in opening if w.casefold() not in lower})


@functools.lru_cache(maxsize=65536)
def _text_words(text: str, openers: bool) -> tuple[frozenset[str], frozenset[str], frozenset[str]]:
    """One text's part of ``proper_words``: its names (folded), its opening words and its lower-case words (kept:
    the same passages come back question after question)."""
    found: set[str] = set()
    opening: set[str] = set()
    lower: set[str] = set()
    plain = _plain(text)
    label = len(plain) if _title_case(plain) else _label_end(plain)
    for m in _TOKEN.finditer(plain):
        word, at = m.group(0), m.start()
        if not word[0].isupper():
            lower.add(word.casefold())
        elif at >= label and word.casefold() not in _NOT_NAMES and not _opens(plain, at):
            found.add(_folded(word))
        elif openers and word.isalpha() and len(word) >= 3 and word.casefold() not in _COMMON:
            opening.add(word)
    return frozenset(found), frozenset(opening), frozenset(lower)


# Words that open a sentence as often as a name does, never names (with `_NOT_NAMES` and `_ENGLISH`).
_OPENING_TEXT = """after afterwards also although as at before but during each every finally first for from however
    in instead it later meanwhile most next now on once one only other our over since some soon still suddenly
    then there these they this those though to today tomorrow under until upon we what when where while with yet
    all any both few many more much no none not nothing several such two three four five six seven eight nine ten
    note notes see"""
_COMMON = frozenset(_OPENING_TEXT.split()) | _NOT_NAMES | _ENGLISH


def _opens(plain: str, at: int) -> bool:
    """The word at `at` opens the text, a sentence or an item (only spaces after an `_OPENERS` mark)."""
    i = at - 1
    while i >= 0 and plain[i].isspace():
        i -= 1
    return i < 0 or plain[i] in _OPENERS


def numbers(text: str, known: Collection[str] = ()) -> list[str]:
    """The numbers of a passage (digits, with a unit of a few letters after them: `50`, `2.5`, `12km`, `3rd`; or
    number words) that the question does not hold already; an identifier (`2c0b659`, `v2`) and a date's digits
    (`2 August 2022`) are none."""
    plain = _plain(text)
    in_dates = [m.span() for m in _DATE.finditer(plain) if not m.group(0).isdigit()]  # a bare 1500 stays a number
    found = []
    for match in _TOKEN.finditer(plain):
        word, folded = match.group(0), match.group(0).casefold()
        if folded in known or any(a <= match.start() < b for a, b in in_dates):
            continue
        if _AMOUNT.fullmatch(word) or folded in _NUMBER_WORDS:
            found.append(word)
    return found


_AMOUNT = re.compile(r"[$£€]?\d[\d,.]*(?:[a-zA-Z%]{1,3})?")  # 50, 2.5, 1,200, 12km, 3rd, 50gp, $5, 40%


def dates(text: str) -> str:
    """The first date or session the passage names (`July 25`, `1942`, `Session 12`, `09 Dawnmarch`), or ""."""
    plain = _plain(text)
    match = _DATE.search(plain) or _FANTASY_DATE.search(plain)
    return match.group(0) if match else ""


def places(text: str, known: Collection[str] = ()) -> list[str]:
    """The places a passage names and the question does not: a place word or a capitalised name after a place
    preposition (`in Boba`, `at the tavern`), or a place word anywhere (`the farmhouse`)."""
    plain = _plain(text)
    found = [m.group(1) for m in _PLACE.finditer(plain)
             if (m.group(1)[0].isupper() and m.group(1).casefold() not in _NOT_NAMES or
                 m.group(1).casefold() in _PLACE_NOUNS) and _folded(m.group(1)) not in known]  # fmt: skip
    found += [w for w in _WORDS.findall(plain) if w.casefold() in _PLACE_NOUNS and w.casefold() not in known]
    return list(dict.fromkeys(found))


def _plain(text: str) -> str:
    """The passage without emphasis marks and link brackets (the chunker reduced links to their labels)."""
    return re.sub(r"[*_`~]{1,3}(?=\w)|(?<=\w)[*_`~]{1,3}|\[\[|\]\]", "", text)


def _folded(word: str) -> str:
    """A word as the question's words are kept: folded, a possessive `'s` and edge punctuation off."""
    folded = word.casefold().replace("\u2019", "'").strip("'.-")
    return folded[:-2] if folded.endswith("'s") else folded


def overall(marks: Iterable[Mark]) -> Strength | None:
    """The answer's support: strong when one of its quotes is, weak when none is; None when it quotes nothing."""
    marks = list(marks)
    if not marks:
        return None
    return Strength.STRONG if any(m.strong for m in marks) else Strength.WEAK
